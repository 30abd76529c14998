#![no_main]
//! See `ocicni_fuzz::sysctl`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::sysctl::check(data));

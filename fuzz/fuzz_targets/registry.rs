#![no_main]
//! See `ocicni_fuzz::registry`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::registry::check(data));

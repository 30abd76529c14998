#![no_main]
//! See `ocicni_fuzz::h2_front`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::h2_front::check(data));

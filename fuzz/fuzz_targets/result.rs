#![no_main]
//! See `ocicni_fuzz::result`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::result::check(data));

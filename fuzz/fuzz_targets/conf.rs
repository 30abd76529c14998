#![no_main]
//! See `ocicni_fuzz::conf`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::conf::check(data));

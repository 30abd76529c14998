#![no_main]
//! See `ocicni_fuzz::cri_request`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::cri_request::check(data));

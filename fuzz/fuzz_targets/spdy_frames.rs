#![no_main]
//! See `ocicni_fuzz::spdy_frames`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::spdy_frames::check(data));

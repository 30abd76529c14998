#![no_main]
//! See `ocicni_fuzz::unpack_layer`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::unpack_layer::check(data));

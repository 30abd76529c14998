#![no_main]
//! See `ocicni_fuzz::cni_args`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::cni_args::check(data));

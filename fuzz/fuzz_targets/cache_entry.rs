#![no_main]
//! See `ocicni_fuzz::cache_entry`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| ocicni_fuzz::cache_entry::check(data));

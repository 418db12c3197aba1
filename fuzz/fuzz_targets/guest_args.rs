#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| wasmsand_fuzz::guest::run(data));

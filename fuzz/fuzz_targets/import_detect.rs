//! Format detection on any file's beginning, then the detected format's parser, as
//! `ctxgate import` without `--format` does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(format) = ctxgate::import::detect(Path::new("fuzz-input"), text) {
        assert_ne!(format, ctxgate::Format::Auto);
        ctxgate_fuzz::check_import(format, data);
    }
});

//! The ShareGpt importer's parser on any file (strict and skipping bad records).
#![no_main]

use ctxgate::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ctxgate_fuzz::check_import(Format::ShareGpt, data));

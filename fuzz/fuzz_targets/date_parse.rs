//! Timestamps as `forget --before` and imported session times are read (RFC 3339, dates,
//! Unix seconds): any text parses or is refused without a panic, never to NaN.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some(seconds) = ctxgate::fuzzing::parse_time(text) {
        assert!(!seconds.is_nan(), "{text:?} parsed as NaN");
    }
});

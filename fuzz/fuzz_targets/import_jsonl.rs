//! The canonical JSONL importer: the whole-file parser (strict and skipping bad lines), and
//! each line as the streaming import checks it, which must take exactly what the parser takes.
#![no_main]

use ctxgate::Format;
use ctxgate::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ctxgate_fuzz::check_import(Format::Jsonl, data);
    let Ok(text) = std::str::from_utf8(data) else { return };
    for raw in text.lines().filter(|l| !l.trim().is_empty()) {
        let checked = fuzzing::jsonl_check_line(raw);
        let parsed = fuzzing::jsonl_parse_line(raw);
        match (&checked, &parsed) {
            (Ok((session, turn, user, assistant)), Ok(line)) => {
                assert_eq!(
                    (session, turn, user, assistant),
                    (&line.session, &line.turn, &line.user, &line.assistant),
                    "line {raw:?}"
                );
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "line {raw:?}"),
            _ => panic!("the streaming check and the parser disagree on {raw:?}: {checked:?} / {parsed:?}"),
        }
    }
});

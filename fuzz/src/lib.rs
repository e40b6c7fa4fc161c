//! Checks shared by the fuzz targets in `fuzz_targets/`.

use ctxgate::Format;
use ctxgate::evidence::EvidenceRef;
use ctxgate::fuzzing;
use ctxgate::import::TOOL_OUTPUT_DIR;
use ctxgate::import::turns::ParsedFile;

/// Parses `data` as `format` as `ctxgate import` would, strictly and skipping bad records, and
/// checks what the import does with the result.
pub fn check_import(format: Format, data: &[u8]) {
    // The import refuses a file that is not UTF-8 before any parser sees it.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let strict = fuzzing::import_parse(format, text, false);
    let lenient = fuzzing::import_parse(format, text, true);
    if let Ok(strict) = &strict {
        // Skipping bad records changes nothing in a file that has none.
        match &lenient {
            Ok(lenient) => {
                assert!(
                    lenient.skipped.is_empty(),
                    "skipped records of a file the strict parse took: {lenient:?}"
                );
                assert_eq!(strict.conversations, lenient.conversations);
            }
            Err(e) => panic!("the strict parse took the file, the lenient one refused it: {e}"),
        }
    }
    if let Ok(parsed) = &lenient {
        check_parsed(parsed);
    }
}

/// What import derives from a parsed file: tool-output refs, which must be valid refs under
/// the tool-output directory.
pub fn check_parsed(parsed: &ParsedFile) {
    for conversation in &parsed.conversations {
        for output in fuzzing::tool_outputs(&conversation.key, 0, &conversation.turns) {
            let text = output.reference.as_str();
            assert!(text.starts_with(TOOL_OUTPUT_DIR), "tool output ref {text:?} outside {TOOL_OUTPUT_DIR}/");
            assert_eq!(EvidenceRef::parse(text).map(|r| r.as_str().to_string()).ok().as_deref(), Some(text));
        }
    }
}

/// The input of a target that takes two texts: split at the first NUL byte.
pub fn split_two(data: &[u8]) -> Option<(&str, &str)> {
    let at = data.iter().position(|&b| b == 0)?;
    Some((std::str::from_utf8(&data[..at]).ok()?, std::str::from_utf8(&data[at + 1..]).ok()?))
}

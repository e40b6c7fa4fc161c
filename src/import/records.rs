//! What the format parsers share: a file's records with the line each starts on (the elements
//! of a JSON array, JSON objects one after another, or the lines of JSONL), skipping bad
//! records with `skip_invalid`, field checks whose messages name the field, and session names
//! (checked where a log gives them, made from the file's name and path where it does not).
//!
//! Field checks return the message alone (`Result<_, String>`); the parser adds the file and
//! the record's line with [`Error::shape`].

use super::error::Error;
use super::jsonl::reason;
use super::turns::{Conversation, Skipped};
use serde_json::Value;
use serde_json::value::RawValue;
use std::path::Path;

/// One record of a file: an element of a JSON array, or a line of JSONL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'a> {
    /// 1-based line the record starts on.
    pub line: u64,
    /// 1-based position among the file's records.
    pub position: usize,
    /// Its JSON text.
    pub text: &'a str,
}

/// The text without a leading byte-order mark.
fn body(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Whether the text is a JSON array: its first non-blank character is `[`.
pub(crate) fn is_array(text: &str) -> bool {
    body(text).trim_start().starts_with('[')
}

/// The elements of a JSON array, each with the line it starts on. A syntax error anywhere
/// fails the whole document (nothing after it can be trusted); a document that is not an array
/// is `what`'s shape error.
pub(crate) fn elements<'a>(path: &Path, text: &'a str, what: &str) -> Result<Vec<Record<'a>>, Error> {
    if !is_array(text) {
        let start = text.len() - body(text).trim_start().len();
        return Err(Error::shape(path, line_at(text.as_bytes(), 0, start, 1), format!("expected {what}")));
    }
    let items: Vec<&RawValue> =
        serde_json::from_str(body(text)).map_err(|e| Error::json(path, e.line() as u64, e))?;
    let bytes = text.as_bytes();
    let base = text.as_ptr() as usize;
    let (mut line, mut counted) = (1, 0);
    let mut records = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        // The element's text is a slice of `text`: its offset is the distance between the two.
        let offset = (item.get().as_ptr() as usize).saturating_sub(base);
        line = line_at(bytes, counted, offset, line);
        counted = offset.max(counted);
        records.push(Record { line, position: i + 1, text: item.get() });
    }
    Ok(records)
}

/// The conversations of an export document: the elements of a JSON array, or the JSON objects
/// of a text that is not an array (an export of one conversation, or several written one after
/// another). A syntax error fails the whole document, as in [`elements`].
pub(crate) fn documents<'a>(path: &Path, text: &'a str, what: &str) -> Result<Vec<Record<'a>>, Error> {
    if is_array(text) {
        return elements(path, text, what);
    }
    let body = body(text);
    if body.trim().is_empty() {
        return Err(Error::shape(path, 1, format!("expected {what}")));
    }
    let bytes = text.as_bytes();
    let skipped = text.len() - body.len();
    let (mut line, mut counted) = (1, 0);
    let mut records = Vec::new();
    let stream = serde_json::Deserializer::from_str(body).into_iter::<&RawValue>();
    for (i, item) in stream.enumerate() {
        let item = item.map_err(|e| Error::json(path, e.line() as u64, e))?;
        let offset = (item.get().as_ptr() as usize).saturating_sub(body.as_ptr() as usize) + skipped;
        line = line_at(bytes, counted, offset, line);
        counted = offset.max(counted);
        records.push(Record { line, position: i + 1, text: item.get() });
    }
    Ok(records)
}

/// The line at byte `to`, given that byte `from` is on line `line`.
fn line_at(bytes: &[u8], from: usize, to: usize, line: u64) -> u64 {
    line + bytes.get(from..to).unwrap_or_default().iter().filter(|&&b| b == b'\n').count() as u64
}

/// The non-blank lines of a JSONL text.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = Record<'_>> {
    body(text)
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .enumerate()
        .map(|(position, (number, text))| Record { line: number as u64 + 1, position: position + 1, text })
}

/// The records of a file that is either a JSON array or JSONL.
pub(crate) fn array_or_lines<'a>(path: &Path, text: &'a str, what: &str) -> Result<Vec<Record<'a>>, Error> {
    if is_array(text) { elements(path, text, what) } else { Ok(lines(text).collect()) }
}

/// A record's JSON (array elements are valid already; a JSONL line may not be).
pub(crate) fn value(path: &Path, record: &Record<'_>) -> Result<Value, Error> {
    serde_json::from_str(record.text).map_err(|e| Error::json(path, record.line, e))
}

/// A record's outcome: kept; skipped and reported (with `skip_invalid`); or the file's error.
fn keep<T>(
    result: Result<T, Error>,
    line: u64,
    skip_invalid: bool,
    skipped: &mut Vec<Skipped>,
) -> Result<Option<T>, Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if skip_invalid => {
            skipped.push(Skipped { line, reason: reason(&e) });
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Converts each record with `convert`, which returns the message of what is wrong; a bad
/// record fails the file with its line, or with `skip_invalid` is skipped and reported.
pub(crate) fn convert<'a, T>(
    path: &Path,
    records: impl IntoIterator<Item = Record<'a>>,
    skip_invalid: bool,
    skipped: &mut Vec<Skipped>,
    mut convert: impl FnMut(&Value, &Record<'a>) -> Result<T, String>,
) -> Result<Vec<T>, Error> {
    let mut out = Vec::new();
    for record in records {
        let result = value(path, &record)
            .and_then(|v| convert(&v, &record).map_err(|what| Error::shape(path, record.line, what)));
        if let Some(item) = keep(result, record.line, skip_invalid, skipped)? {
            out.push(item);
        }
    }
    Ok(out)
}

/// Parses a file that is a JSON array or JSONL of one conversation per record, for formats
/// whose records may lack an id: `conversation` gets the default key `FILE@HASH#N` (see
/// [`file_session_name`]; N the element's position in an array, the line number in JSONL).
pub(crate) fn conversations_per_record(
    path: &Path,
    text: &str,
    skip_invalid: bool,
    what: &str,
    mut conversation: impl FnMut(&Value, String) -> Result<Conversation, String>,
) -> Result<super::turns::ParsedFile, Error> {
    let name = file_session_name(path);
    let array = is_array(text);
    let mut parsed = super::turns::ParsedFile::default();
    let items = array_or_lines(path, text, what)?;
    let converted = convert(path, items, skip_invalid, &mut parsed.skipped, |v, record| {
        let n = if array { record.position as u64 } else { record.line };
        conversation(v, format!("{name}#{n}"))
    })?;
    for c in converted {
        push(&mut parsed.conversations, c);
    }
    Ok(parsed)
}

/// Adds a conversation unless it has no turns.
pub(crate) fn push(conversations: &mut Vec<Conversation>, conversation: Conversation) {
    if !conversation.turns.is_empty() {
        conversations.push(conversation);
    }
}

/// The file's name, extension included, for session keys of conversations without an id
/// (`chat.jsonl#3`): with the extension, `chat.json` and `chat.jsonl` side by side do not
/// collide.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| "import".to_string(), |s| s.to_string_lossy().into_owned())
}

/// Longest file name kept in a session name made from it, in bytes: room is left for the
/// digest and `#N` under the session name limit.
const FILE_NAME_BYTES: usize = 200;

/// A file name made fit for a session name: control characters replaced, cut at
/// [`FILE_NAME_BYTES`], trimmed.
pub(crate) fn name_from_file(name: &str) -> String {
    let mut out: String = name.chars().map(|c| if c.is_control() { '_' } else { c }).collect();
    out.truncate(out.floor_char_boundary(FILE_NAME_BYTES));
    let out = out.trim();
    if out.is_empty() { "import".to_string() } else { out.to_string() }
}

/// The session name of conversations named after their file (DESIGN §8.7): the file's name
/// (extension included, so `chat.json` and `chat.jsonl` side by side differ), `@` and the first
/// 8 hex digits of the XXH3 digest of the file's canonical path, so that two `train.jsonl` in
/// different directories are different sessions, and one file keeps its names however it is
/// reached (`./a/train.jsonl`, an absolute path, a symlink).
pub(crate) fn file_session_name(path: &Path) -> String {
    let canonical = std::fs::canonicalize(path).or_else(|_| std::path::absolute(path));
    let canonical = canonical.as_deref().unwrap_or(path);
    let digest = xxhash_rust::xxh3::xxh3_64(canonical.as_os_str().as_encoded_bytes());
    format!("{}@{:08x}", name_from_file(&file_name(canonical)), digest >> 32)
}

/// A session name read from field `key` of a record: trimmed, and one the index accepts, else
/// what is wrong with it (reported at the record's line).
pub(crate) fn session_name(name: &str, key: &str) -> Result<String, String> {
    let name = name.trim();
    match crate::names::session_name_problem(name) {
        None => Ok(name.to_string()),
        Some(problem) => Err(format!("`{key}` cannot be a session name: {problem}")),
    }
}

/// The name of field `key` of the value at `at`, for messages: `at.key`.
pub(crate) fn field(at: &str, key: &str) -> String {
    if at.is_empty() { key.to_string() } else { format!("{at}.{key}") }
}

/// An optional string field: absent and null are `None`.
pub(crate) fn opt_str<'v>(v: &'v Value, at: &str, key: &str) -> Result<Option<&'v str>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("`{}` must be a string", field(at, key))),
    }
}

/// A string field that must be there.
pub(crate) fn req_str<'v>(v: &'v Value, at: &str, key: &str) -> Result<&'v str, String> {
    opt_str(v, at, key)?.ok_or_else(|| format!("missing `{}`", field(at, key)))
}

/// An optional array field: absent and null are `None`.
pub(crate) fn opt_array<'v>(v: &'v Value, at: &str, key: &str) -> Result<Option<&'v [Value]>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(_) => Err(format!("`{}` must be an array", field(at, key))),
    }
}

/// An array field that must be there.
pub(crate) fn req_array<'v>(v: &'v Value, at: &str, key: &str) -> Result<&'v [Value], String> {
    opt_array(v, at, key)?.ok_or_else(|| format!("missing `{}`", field(at, key)))
}

/// An object field that must be there.
pub(crate) fn req_object<'v>(v: &'v Value, at: &str, key: &str) -> Result<&'v Value, String> {
    match v.get(key) {
        None | Some(Value::Null) => Err(format!("missing `{}`", field(at, key))),
        Some(o @ Value::Object(_)) => Ok(o),
        Some(_) => Err(format!("`{}` must be an object", field(at, key))),
    }
}

/// A session id the source may write as a string or a number; absent, null and empty are
/// `None`; one that cannot be a session name is an error.
pub(crate) fn opt_session_id(v: &Value, at: &str, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => session_name(s, &field(at, key)).map(Some),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(format!("`{}` must be a string or a number", field(at, key))),
    }
}

/// Checks that `v` (the value at `at`) is an object.
pub(crate) fn object(v: &Value, at: &str, expected: &str) -> Result<(), String> {
    if v.is_object() {
        Ok(())
    } else if at.is_empty() {
        Err(format!("expected {expected}"))
    } else {
        Err(format!("`{at}` must be {expected}"))
    }
}

/// A value as text: a string as written, null as nothing, other JSON compactly (tool
/// arguments and results).
pub(crate) fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The text of a tool result or message content written as a string or as blocks: the
/// strings and the blocks' `text` joined by blank lines; anything else as compact JSON.
pub(crate) fn block_text(v: &Value) -> String {
    match v {
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.as_str().or_else(|| b.get("text").and_then(Value::as_str)))
                .collect();
            if texts.is_empty() && !blocks.is_empty() { v.to_string() } else { texts.join("\n\n") }
        }
        other => json_text(other),
    }
}

/// Fixtures for the parsers' tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::super::turns::{ParsedFile, ParsedTurn};
    use std::path::PathBuf;

    /// A fixture's path relative to the repository (as errors name it) and its text.
    pub(crate) fn read(relative: &str) -> (PathBuf, String) {
        let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
        let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
        (PathBuf::from(relative), text)
    }

    /// The error message a malformed fixture must produce: its `.expected` sibling.
    pub(crate) fn expected(relative: &str) -> String {
        let (_, text) =
            read(&format!("{}.expected", relative.rsplit_once('.').map_or(relative, |(stem, _)| stem)));
        text.trim_end().to_string()
    }

    /// The session name of conversation `n` of a file without ids (DESIGN §8.7), computed
    /// here from the rule: the file name, `@`, the top 32 bits of the XXH3 of the canonical
    /// path in hex, `#n`.
    pub(crate) fn file_key(path: &str, n: u64) -> String {
        let path = std::path::Path::new(path);
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| std::path::absolute(path).unwrap());
        let digest = xxhash_rust::xxh3::xxh3_64(canonical.as_os_str().as_encoded_bytes()) >> 32;
        format!("{}@{digest:08x}#{n}", canonical.file_name().unwrap().to_string_lossy())
    }

    /// The session keys of a parsed file.
    pub(crate) fn keys(parsed: &ParsedFile) -> Vec<&str> {
        parsed.conversations.iter().map(|c| c.key.as_str()).collect()
    }

    /// The number of turns of each conversation.
    pub(crate) fn counts(parsed: &ParsedFile) -> Vec<usize> {
        parsed.conversations.iter().map(|c| c.turns.len()).collect()
    }

    /// Name, call id and result size of a turn's tool calls.
    pub(crate) fn tools(turn: &ParsedTurn) -> Vec<(&str, Option<&str>, u64)> {
        turn.tools.iter().map(|t| (t.name.as_str(), t.call_id.as_deref(), t.result_bytes)).collect()
    }

    /// Everything a parsed file keeps: turn text, tool arguments and results.
    pub(crate) fn everything(parsed: &ParsedFile) -> String {
        let mut all = String::new();
        for turn in parsed.conversations.iter().flat_map(|c| &c.turns) {
            all.extend([turn.user.as_str(), "\n", turn.assistant.as_str(), "\n"]);
            for tool in &turn.tools {
                all.extend([tool.arguments.as_str(), "\n", tool.result.as_deref().unwrap_or_default(), "\n"]);
            }
        }
        all
    }

    /// Fails if any of `dropped` was kept.
    pub(crate) fn assert_absent(parsed: &ParsedFile, dropped: &[&str]) {
        let all = everything(parsed);
        for text in dropped {
            assert!(!all.contains(text), "{text:?} must not be imported");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_start_on_their_lines() {
        let text = "\u{feff}[\n  {\"a\": 1},\n\n  {\"b\":\n 2}, {\"c\": \"x\\ny\"}\n, 7]";
        let records = elements(Path::new("f.json"), text, "an array").unwrap();
        let got: Vec<(u64, usize, &str)> = records.iter().map(|r| (r.line, r.position, r.text)).collect();
        assert_eq!(
            got,
            [(2, 1, "{\"a\": 1}"), (4, 2, "{\"b\":\n 2}"), (5, 3, "{\"c\": \"x\\ny\"}"), (6, 4, "7")]
        );
    }

    #[test]
    fn a_document_error_names_its_line() {
        let err = elements(Path::new("f.json"), "[\n{\"a\": 1},\n{\"b\" 2}\n]", "an array").unwrap_err();
        assert_eq!(err.line(), Some(3), "{err}");
        let err =
            elements(Path::new("f.json"), "\n\n{\"a\": 1}", "a JSON array of conversations").unwrap_err();
        assert_eq!(err.to_string(), "f.json:3: expected a JSON array of conversations");
    }

    /// Issue 22, finding 9: names made from a file name are unique per file, and one file
    /// keeps its name however its path is written.
    #[test]
    fn r22_file_names_are_unique_per_path() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        for d in [&a, &b] {
            std::fs::write(d.join("training_set.jsonl"), "{}").unwrap();
        }
        let name_a = file_session_name(&a.join("training_set.jsonl"));
        let name_b = file_session_name(&b.join("training_set.jsonl"));
        assert_ne!(name_a, name_b);
        assert!(name_a.starts_with("training_set.jsonl@") && name_a.len() == "training_set.jsonl@".len() + 8);
        assert_eq!(file_session_name(&a.join("../a/./training_set.jsonl")), name_a);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(a.join("training_set.jsonl"), dir.path().join("link.jsonl")).unwrap();
            assert_eq!(file_session_name(&dir.path().join("link.jsonl")), name_a);
        }
        // A file name that cannot be a session name as it is.
        let odd = name_from_file(&format!(" x\ny{} ", "é".repeat(150)));
        assert!(odd.starts_with("x_yé") && odd.len() <= FILE_NAME_BYTES, "{odd}");
        assert_eq!(crate::names::session_name_problem(&odd), None);
    }

    #[test]
    fn lines_skip_blanks_and_a_byte_order_mark() {
        let got: Vec<(u64, usize, &str)> =
            lines("\u{feff}{}\n\n  \r\n{\"x\":1}\r\n").map(|r| (r.line, r.position, r.text)).collect();
        assert_eq!(got, [(1, 1, "{}"), (4, 2, "{\"x\":1}")]);
    }
}

//! Reading the conversation logs people already have: log bytes in, conversations of turns out.
//! This module knows nothing of the index; `crate::write` plans and writes what it reads.
//!
//! A file's format is detected from its first record ([`detect_file`]) or given; each format has
//! its parser (one module each, field notes in `docs/DESIGN.md` §8), all built on the pairing
//! rules every format shares ([`turns`]). The canonical JSONL format is also read a block of
//! lines at a time (`lines`), for imports whose memory is bounded by a batch. Tool results
//! found in a log get their evidence refs here (`tool_evidence`); storing them is the
//! index's job.

mod chatgpt;
mod claude;
mod claude_code;
mod codex;
pub mod error;
pub(crate) mod formats;
pub(crate) mod jsonl;
pub(crate) mod lines;
mod openai;
mod records;
mod sharegpt;
pub(crate) mod tool_evidence;
pub mod turns;

pub use error::Error;
pub use jsonl::{Line as CanonicalLine, LineTool as CanonicalTool};
pub use tool_evidence::{FailedToolOutput, StoredToolOutputs, TOOL_OUTPUT_DIR, ToolOutput, tool_output_ref};

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use turns::ParsedFile;

/// A conversation-log format. (De)serialized as the name `--format` takes ([`Format::name`]);
/// the server takes it as a tool argument, with this enum's JSON Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Detect per file.
    Auto,
    /// Canonical JSONL: `{"session", "user", "assistant"}` per line.
    Jsonl,
    /// OpenAI chat messages JSONL: `{"messages": [...]}` per line.
    #[serde(rename = "openai")]
    OpenAi,
    /// ChatGPT data export `conversations.json`.
    #[serde(rename = "chatgpt")]
    ChatGpt,
    /// Claude.ai data export `conversations.json`.
    Claude,
    /// Claude Code session JSONL.
    ClaudeCode,
    /// Codex CLI rollout JSONL.
    Codex,
    /// ShareGPT `conversations` with `from`/`value`, JSON array or JSONL.
    #[serde(rename = "sharegpt")]
    ShareGpt,
}

impl Format {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        // Keep in step with the serde names above (tested).
        match self {
            Format::Auto => "auto",
            Format::Jsonl => "jsonl",
            Format::OpenAi => "openai",
            Format::ChatGpt => "chatgpt",
            Format::Claude => "claude",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::ShareGpt => "sharegpt",
        }
    }

    /// Logs an agent appends to while it runs: a last turn without a reply is held back.
    pub(crate) fn is_live_log(self) -> bool {
        matches!(self, Format::ClaudeCode | Format::Codex)
    }
}

/// A file an import reads, or passes over with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// The file, as named on the command line or found under a directory.
    pub path: PathBuf,
    /// Named on the command line rather than found by walking a directory: a file named so
    /// that cannot be read as a log is a failure, one found in a directory is skipped.
    pub given: bool,
    /// Why it is not read, for an entry of a directory that is passed over (a symbolic link
    /// out of the directory, a broken one, the same file as another).
    pub skip: Option<String>,
}

/// The files to import: each path itself, or every `.json`/`.jsonl` file under a directory
/// (recursively, in name order). Symbolic links inside a directory are followed only to
/// targets inside it (the walk never reads outside what it was given); the links it does
/// not follow are listed with their reason. Links to directories are never walked through,
/// so a walk cannot loop, and the files they reach inside the directory are read under their
/// own paths.
///
/// A path given that cannot be looked at (it does not exist, it cannot be reached) is kept as a
/// file: reading it fails, as a file of a directory that cannot be read fails, and the import
/// reports it with the others (alone, it is the import's error).
///
/// # Errors
/// A directory that cannot be listed: nothing is imported.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<FoundFile>, Error> {
    let mut files = Vec::new();
    for path in paths {
        let io = |source| Error::Io { path: path.clone(), source };
        let is_dir = std::fs::metadata(path).is_ok_and(|meta| meta.is_dir());
        if is_dir {
            let root = std::fs::canonicalize(path).map_err(io)?;
            let mut walk = Walk { root, entries: Vec::new(), real_files: HashSet::new() };
            walk.dir(path, &walk.root.clone())?;
            files.extend(walk.resolve(path));
        } else {
            files.push(FoundFile { path: path.clone(), given: true, skip: None });
        }
    }
    Ok(files)
}

/// An entry found walking a directory, in name order.
enum Entry {
    File(PathBuf),
    /// A symbolic link, resolved once the whole directory is listed.
    Link(PathBuf),
}

/// One directory walked: its entries and the real paths of its regular files.
struct Walk {
    /// The directory's real path.
    root: PathBuf,
    entries: Vec<Entry>,
    real_files: HashSet<PathBuf>,
}

fn has_log_extension(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("json"))
}

impl Walk {
    /// Lists `dir`, whose real path is `real` (no link is followed on the way down).
    fn dir(&mut self, dir: &Path, real: &Path) -> Result<(), Error> {
        let io = |source| Error::Io { path: dir.to_path_buf(), source };
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(io)?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let file_type = std::fs::symlink_metadata(&path)
                .map_err(|source| Error::Io { path: path.clone(), source })?
                .file_type();
            if file_type.is_dir() {
                self.dir(&path, &real.join(&name))?;
            } else if file_type.is_symlink() {
                self.entries.push(Entry::Link(path));
            } else if file_type.is_file() && has_log_extension(&path) {
                self.real_files.insert(real.join(&name));
                self.entries.push(Entry::File(path));
            }
        }
        Ok(())
    }

    /// The files to read and the links passed over, in walk order; `shown` is the directory
    /// as given.
    fn resolve(self, shown: &Path) -> Vec<FoundFile> {
        let mut followed: HashMap<PathBuf, PathBuf> = HashMap::new();
        let mut out = Vec::new();
        for entry in self.entries {
            let link = match entry {
                Entry::File(path) => {
                    out.push(FoundFile { path, given: false, skip: None });
                    continue;
                }
                Entry::Link(link) => link,
            };
            let skip = |reason: String| FoundFile { path: link.clone(), given: false, skip: Some(reason) };
            let target = match std::fs::canonicalize(&link) {
                Ok(target) => target,
                Err(e) if has_log_extension(&link) => {
                    out.push(skip(format!("a symbolic link that cannot be followed ({e})")));
                    continue;
                }
                Err(_) => continue,
            };
            let is_dir = target.is_dir();
            if !is_dir && !has_log_extension(&link) {
                continue; // not a log by its name, as a regular file of that name would not be
            }
            let Ok(inside) = target.strip_prefix(&self.root) else {
                out.push(skip(format!(
                    "a symbolic link to {}, outside {}: not followed (import the target itself to read it)",
                    target.display(),
                    shown.display()
                )));
                continue;
            };
            let own_path = shown.join(inside);
            if is_dir {
                out.push(skip(format!(
                    "a symbolic link to the directory {}, whose files are imported under their own paths",
                    own_path.display()
                )));
            } else if self.real_files.contains(&target) {
                out.push(skip(format!(
                    "a symbolic link to {}, which is imported under its own path",
                    own_path.display()
                )));
            } else if let Some(first) = followed.get(&target) {
                out.push(skip(format!(
                    "a symbolic link to {}, already imported as {}",
                    own_path.display(),
                    first.display()
                )));
            } else if target.is_file() {
                followed.insert(target, link.clone());
                out.push(FoundFile { path: link, given: false, skip: None });
            }
        }
        out
    }
}

/// Detects the format of a file from its first record: the first line of a JSON-lines file,
/// the first element of a JSON array, or a JSON document of one object.
pub fn detect(path: &Path, text: &str) -> Result<Format, Error> {
    first_record(text).flatten().ok_or_else(|| Error::UnknownFormat { path: path.to_path_buf() })
}

/// Most bytes read to detect a file's format: a first record longer than this (a line of
/// base64 images, a huge first conversation) is not detected, and `--format` is needed.
pub(crate) const DETECT_MAX_BYTES: usize = 64 << 20;

/// Detects a file's format, reading as much of it as its first record needs (up to
/// 64 MiB): a first line of several MiB is read whole, a small file once.
pub fn detect_file(path: &Path) -> Result<Format, Error> {
    detect_file_past(path, false)
}

/// Lines that are not JSON looked past, with `skip_invalid`, to find a file's first record.
pub const DETECT_SKIP_LINES: usize = 100;

/// [`detect_file`]; with `skip_invalid`, up to [`DETECT_SKIP_LINES`] leading lines that are not
/// JSON (a line of garbage, a cut record) are looked past, as the parse will skip them.
pub fn detect_file_past(path: &Path, skip_invalid: bool) -> Result<Format, Error> {
    use std::io::Read;
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let unknown = || Error::UnknownFormat { path: path.to_path_buf() };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = file.take(DETECT_MAX_BYTES as u64);
    let mut head = Vec::new();
    let mut want = 64 * 1024;
    loop {
        let before = head.len();
        (&mut reader).take((want - before) as u64).read_to_end(&mut head).map_err(io)?;
        let at_end = head.len() < want;
        // Bytes that are not UTF-8 do not hide the format (the parse reports them, or skips
        // their lines); a character cut by the end of the window is read again whole.
        let text = String::from_utf8_lossy(&head);
        let invalid = std::str::from_utf8(&head).err().filter(|e| e.error_len().is_some());
        let skip_lines = if skip_invalid { DETECT_SKIP_LINES } else { 0 };
        let found = first_record_past(&text, skip_lines);
        if let Some(Some(format)) = found {
            return Ok(format);
        }
        if found.is_some() || at_end || head.len() >= DETECT_MAX_BYTES {
            // No format: where the bytes are not UTF-8 says more than "unknown".
            return Err(match invalid {
                Some(e) => not_utf8(path, &head, e.valid_up_to()),
                None => unknown(),
            });
        }
        want = (want * 4).min(DETECT_MAX_BYTES);
    }
}

/// [`first_record`], looking past at most `skip_lines` leading lines that are not JSON (each
/// ended by a newline) when the first record is not one ctxgate reads. A line that is JSON
/// stops the search: it is a record of a format ctxgate does not read.
fn first_record_past(text: &str, skip_lines: usize) -> Option<Option<Format>> {
    let mut rest = text;
    for _ in 0..skip_lines {
        match first_record(rest) {
            Some(None) => {}
            other => return other,
        }
        let body = rest.trim_start_matches('\u{feff}').trim_start();
        let line = body.split_once('\n')?.0;
        if serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok() {
            return Some(None);
        }
        rest = &body[line.len() + 1..];
    }
    first_record(rest)
}

/// The format of the first record of `text`: `Some(None)` if it is not one ctxgate reads,
/// `None` if `text` ends before the record does.
fn first_record(text: &str) -> Option<Option<Format>> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.starts_with('[') {
        return match first_array_element(trimmed) {
            Ok(Some(value)) => Some(sniff_document_item(&value)),
            Err(e) if e.is_eof() => None,
            _ => Some(None),
        };
    }
    match serde_json::Deserializer::from_str(trimmed).into_iter::<serde_json::Value>().next() {
        // A JSON-lines record, or an export holding one conversation object.
        Some(Ok(value)) => Some(sniff_line(&value).or_else(|| sniff_document_item(&value))),
        Some(Err(e)) if e.is_eof() => None,
        _ => Some(None),
    }
}

/// The first element of a JSON array, read without parsing the rest: detection of a large
/// export costs one element, and a syntax error further on is left for the parser, which
/// reports it with its line. An error is an end of text before the first element ends
/// ([`serde_json::Error::is_eof`]) or text that is not an array of JSON values.
fn first_array_element(text: &str) -> Result<Option<serde_json::Value>, serde_json::Error> {
    use serde::de::{Deserializer, SeqAccess, Visitor};
    struct First<'a>(&'a mut Option<serde_json::Value>);
    impl<'de> Visitor<'de> for First<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            *self.0 = seq.next_element()?;
            Ok(())
        }
    }
    let mut first = None;
    // Returning before the end of the array makes serde_json report unread elements; the
    // first element is what was asked for, so that error is expected and ignored.
    match serde_json::Deserializer::from_str(text).deserialize_seq(First(&mut first)) {
        Err(e) if first.is_none() => Err(e),
        _ => Ok(first),
    }
}

/// The format of a JSON-lines file from its first line.
fn sniff_line(v: &serde_json::Value) -> Option<Format> {
    let kind = v.get("type").and_then(|t| t.as_str());
    if v.get("payload").is_some_and(|p| p.is_object())
        && kind.is_some_and(|k| {
            matches!(k, "session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
        })
    {
        return Some(Format::Codex);
    }
    // A session file may start with a `file-history-snapshot` row, which has no `sessionId`.
    if kind.is_some()
        && (v.get("sessionId").is_some()
            || v.get("leafUuid").is_some()
            || v.get("parentUuid").is_some()
            || (kind == Some("file-history-snapshot") && v.get("snapshot").is_some()))
    {
        return Some(Format::ClaudeCode);
    }
    // OpenAI chat messages, or a Batch API request line carrying them in its `body`.
    if v.get("messages").is_some_and(is_chat_messages)
        || v.get("body").and_then(|b| b.get("messages")).is_some_and(is_chat_messages)
    {
        return Some(Format::OpenAi);
    }
    if v.get("conversations").is_some_and(|c| c.is_array()) {
        return Some(Format::ShareGpt);
    }
    if v.get("session").is_some() && v.get("user").is_some() && v.get("assistant").is_some() {
        return Some(Format::Jsonl);
    }
    None
}

/// An array of OpenAI chat messages: its first message has a `role` (other logs also keep a
/// `messages` array: Gemini CLI's session files, with `type` instead).
fn is_chat_messages(messages: &serde_json::Value) -> bool {
    messages.as_array().is_some_and(|m| m.first().is_none_or(|first| first.get("role").is_some()))
}

/// The format of a JSON-array file from its first element.
fn sniff_document_item(v: &serde_json::Value) -> Option<Format> {
    if v.get("mapping").is_some() {
        Some(Format::ChatGpt)
    } else if v.get("chat_messages").is_some() {
        Some(Format::Claude)
    } else if v.get("conversations").is_some_and(|c| c.is_array()) {
        Some(Format::ShareGpt)
    } else if v.get("messages").is_some_and(is_chat_messages) {
        Some(Format::OpenAi)
    } else {
        None
    }
}

/// 1-based line of a byte offset.
fn line_of_offset(bytes: &[u8], offset: usize) -> u64 {
    bytes.iter().take(offset).filter(|&&b| b == b'\n').count() as u64 + 1
}

/// What is wrong with bytes that are not UTF-8 at byte `offset` of the file: the byte and
/// where, and how to make the file readable.
pub(crate) fn not_utf8_reason(byte: Option<u8>, offset: u64) -> String {
    let byte = byte.map(|b| format!("byte 0x{b:02X}")).unwrap_or_else(|| "a cut character".into());
    format!(
        "not valid UTF-8: {byte} at byte offset {offset}; convert the file to UTF-8 (text in Latin-1: iconv -f latin1 -t utf-8)"
    )
}

/// The error for `bytes` (a file's, from its start) that stop being UTF-8 at `valid_up_to`.
fn not_utf8(path: &Path, bytes: &[u8], valid_up_to: usize) -> Error {
    Error::Shape {
        path: path.to_path_buf(),
        at: error::Location::Line(line_of_offset(bytes, valid_up_to)),
        what: not_utf8_reason(bytes.get(valid_up_to).copied(), valid_up_to as u64),
    }
}

/// Reads and parses a whole file as `format` (not [`Format::Auto`]: detect it first).
pub fn read_file(path: &Path, format: Format, skip_invalid: bool) -> Result<ParsedFile, Error> {
    formats::parse(format, path, &read_text(path)?, skip_invalid)
}

/// A log file's text.
///
/// # Errors
/// [`Error::Io`] for a file that cannot be read, [`Error::Shape`] for one that is not UTF-8.
pub fn read_text(path: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    String::from_utf8(bytes).map_err(|e| not_utf8(path, e.as_bytes(), e.utf8_error().valid_up_to()))
}

/// A log file's text for a read that skips what it cannot read (`skip_invalid`): in a file of
/// JSON lines read as `format`, each line that is not UTF-8 is left blank (so lines keep their
/// numbers) and returned as skipped. A JSON document (an array, or an object over several
/// lines) cannot lose a line: one that is not UTF-8 is [`read_text`]'s error.
///
/// # Errors
/// As [`read_text`].
pub fn read_text_skipping(path: &Path, format: Format) -> Result<(String, Vec<turns::Skipped>), Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return Ok((text, Vec::new())),
        Err(e) => e.into_bytes(),
    };
    let lines_of_json = match format {
        Format::ClaudeCode | Format::Codex | Format::Jsonl => true,
        Format::OpenAi | Format::ShareGpt => !String::from_utf8_lossy(&bytes[..bytes.len().min(4096)])
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('['),
        Format::ChatGpt | Format::Claude | Format::Auto => false,
    };
    if !lines_of_json {
        let valid_up_to = std::str::from_utf8(&bytes).err().map_or(0, |e| e.valid_up_to());
        return Err(not_utf8(path, &bytes, valid_up_to));
    }
    let mut text = String::with_capacity(bytes.len());
    let mut skipped = Vec::new();
    let mut offset = 0;
    for (number, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        match std::str::from_utf8(line) {
            Ok(line) => text.push_str(line),
            Err(e) => {
                let at = e.valid_up_to();
                let reason = not_utf8_reason(line.get(at).copied(), (offset + at) as u64);
                skipped.push(turns::Skipped { line: number as u64 + 1, reason });
                if line.ends_with(b"\n") {
                    text.push('\n');
                }
            }
        }
        offset += line.len();
    }
    Ok((text, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record cut by the end of the text read is "read more"; a complete one is judged, and
    /// text that is no record ctxgate reads is "not a format", without reading more.
    #[test]
    fn the_first_record_is_judged_only_once_complete() {
        let line = r#"{"session":"s","user":"u","assistant":"a"}"#;
        assert_eq!(first_record(line), Some(Some(Format::Jsonl)));
        assert_eq!(first_record(&format!("\u{feff}\n\n{line}\n{{broken")), Some(Some(Format::Jsonl)));
        for cut in [1, 10, line.len() - 1] {
            assert_eq!(first_record(&line[..cut]), None, "{}", &line[..cut]);
        }
        assert_eq!(first_record("[{\"mapping\": {}, \"title\": \"t\""), None);
        assert_eq!(first_record("[{\"mapping\": {}}, {\"mapp"), Some(Some(Format::ChatGpt)));
        // One exported conversation, pretty-printed over lines.
        assert_eq!(first_record("{\n  \"chat_messages\": []\n}\n"), Some(Some(Format::Claude)));
        assert_eq!(first_record("{\"display\": \"a prompt\"}\n"), Some(None));
        // A Gemini CLI session: `messages` without `role`.
        let gemini = r#"{"sessionId": "g", "messages": [{"id": "1", "type": "user", "content": "hi"}]}"#;
        assert_eq!(first_record(gemini), Some(None));
        let openai = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
        assert_eq!(first_record(openai), Some(Some(Format::OpenAi)));
        assert_eq!(first_record("not json"), Some(None));
        assert_eq!(first_record("[]"), Some(None));
        assert_eq!(first_record("  \n"), None);
    }

    #[test]
    fn detect_file_reads_past_its_first_window_for_a_long_first_line()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("long.jsonl");
        let user = "y".repeat(1 << 20);
        std::fs::write(&path, format!("{{\"session\":\"s\",\"user\":\"{user}\",\"assistant\":\"a\"}}\n"))?;
        assert_eq!(detect_file(&path)?, Format::Jsonl);
        // Cut in its middle, the record is not a format: nothing is guessed.
        std::fs::write(&path, format!("{{\"session\":\"s\",\"user\":\"{user}"))?;
        assert!(matches!(detect_file(&path), Err(Error::UnknownFormat { .. })));
        Ok(())
    }

    #[test]
    fn json_names_are_the_command_line_names() {
        let all = [
            Format::Auto,
            Format::Jsonl,
            Format::OpenAi,
            Format::ChatGpt,
            Format::Claude,
            Format::ClaudeCode,
            Format::Codex,
            Format::ShareGpt,
        ];
        for format in all {
            let json = serde_json::to_value(format).unwrap();
            assert_eq!(json, serde_json::Value::from(format.name()), "{format:?}");
            assert_eq!(serde_json::from_value::<Format>(json).unwrap(), format);
        }
    }
}

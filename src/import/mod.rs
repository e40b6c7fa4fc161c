//! Reading the conversation logs people already have: log bytes in, conversations of turns out.
//! This module knows nothing of the index; `crate::write` plans and writes what it reads.
//!
//! A file's format is detected from its beginning ([`detect_file`]) or given; each format has
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

/// The files to import: each path itself, or every `.json`/`.jsonl` file under a directory
/// (recursively, in name order).
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|source| Error::Io { path: path.clone(), source })?;
        if meta.is_dir() {
            walk(path, &mut files)?;
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let io = |source| Error::Io { path: dir.to_path_buf(), source };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for path in entries {
        let file_type =
            std::fs::symlink_metadata(&path).map_err(|source| Error::Io { path: path.clone(), source })?;
        if file_type.is_dir() {
            walk(&path, out)?;
        } else if file_type.is_file()
            && path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("json"))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Detects the format of a file from its first record.
pub fn detect(path: &Path, text: &str) -> Result<Format, Error> {
    let unknown = || Error::UnknownFormat { path: path.to_path_buf() };
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    let first: serde_json::Value = if trimmed.starts_with('[') {
        let value = first_array_element(trimmed).ok_or_else(unknown)?;
        return sniff_document_item(&value).ok_or_else(unknown);
    } else {
        let line = trimmed.lines().next().ok_or_else(unknown)?;
        match serde_json::from_str(line) {
            Ok(first) => first,
            Err(_) => return sniff_single_document(trimmed).ok_or_else(unknown),
        }
    };
    sniff_line(&first).or_else(|| sniff_single_document(trimmed)).ok_or_else(unknown)
}

/// The format of a file that is one JSON document object (an export of one conversation,
/// possibly spread over many lines): judged as the first element of an array would be.
fn sniff_single_document(text: &str) -> Option<Format> {
    if !text.starts_with('{') {
        return None;
    }
    let first = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>().next()?.ok()?;
    sniff_document_item(&first)
}

/// Detects a file's format from its beginning; a JSON document whose first element, or a
/// document object, is longer than the beginning read is read whole.
pub fn detect_file(path: &Path) -> Result<Format, Error> {
    use std::io::Read;
    const HEAD_BYTES: u64 = 256 * 1024;
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let mut head = Vec::new();
    std::fs::File::open(path).map_err(io)?.take(HEAD_BYTES).read_to_end(&mut head).map_err(io)?;
    // Cut at the last newline so a multi-byte character or a line is not split.
    let complete = head.len() < HEAD_BYTES as usize;
    let end = if complete { head.len() } else { head.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) };
    let text = std::str::from_utf8(&head[..end]).map_err(|e| Error::Shape {
        path: path.to_path_buf(),
        at: error::Location::Line(line_of_offset(&head, e.valid_up_to())),
        what: "not valid UTF-8".into(),
    })?;
    match detect(path, text) {
        Err(Error::UnknownFormat { .. })
            if !complete && text.trim_start_matches('\u{feff}').trim_start().starts_with(['[', '{']) =>
        {
            let whole = std::fs::read(path).map_err(io)?;
            detect(path, &String::from_utf8_lossy(&whole))
        }
        other => other,
    }
}

/// The first element of a JSON array, read without parsing the rest: detection of a large
/// export costs one element, and a syntax error further on is left for the parser, which
/// reports it with its line.
fn first_array_element(text: &str) -> Option<serde_json::Value> {
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
    let _ = serde_json::Deserializer::from_str(text).deserialize_seq(First(&mut first));
    first
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
    if v.get("messages").is_some_and(|m| m.is_array())
        || v.get("body").and_then(|b| b.get("messages")).is_some_and(|m| m.is_array())
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

/// The format of a JSON-array file from its first element.
fn sniff_document_item(v: &serde_json::Value) -> Option<Format> {
    if v.get("mapping").is_some() {
        Some(Format::ChatGpt)
    } else if v.get("chat_messages").is_some() {
        Some(Format::Claude)
    } else if v.get("conversations").is_some_and(|c| c.is_array()) {
        Some(Format::ShareGpt)
    } else if v.get("messages").is_some_and(|m| m.is_array()) {
        Some(Format::OpenAi)
    } else {
        None
    }
}

/// 1-based line of a byte offset.
fn line_of_offset(bytes: &[u8], offset: usize) -> u64 {
    bytes.iter().take(offset).filter(|&&b| b == b'\n').count() as u64 + 1
}

/// Reads and parses a whole file as `format` (not [`Format::Auto`]: detect it first).
pub fn read_file(path: &Path, format: Format, skip_invalid: bool) -> Result<ParsedFile, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let text = String::from_utf8(bytes).map_err(|e| Error::Shape {
        path: path.to_path_buf(),
        at: error::Location::Line(line_of_offset(e.as_bytes(), e.utf8_error().valid_up_to())),
        what: "not valid UTF-8".into(),
    })?;
    formats::parse(format, path, &text, skip_invalid)
}

#[cfg(test)]
mod tests {
    use super::Format;

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

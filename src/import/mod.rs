//! Import of the conversation logs people already have (LOG_FORMATS.md).
//!
//! A file is read, its format detected (or given), parsed into conversations of turns
//! ([`turns`]: the pairing rules every format shares), checked against the index, and the new
//! turns written in batched transactions. Rules for every format:
//! - **Sessions** are named from the source (conversation or session id) unless a name is given.
//! - **Idempotent and incremental**: a session's stored turns must be the start of the file's
//!   turns for that session (checked by the session digest); only the turns after them are
//!   added. Importing the same file again adds nothing; a log that grew adds its new turns. A
//!   file whose history differs is refused (`Conflict`). Live agent logs (Claude Code, Codex)
//!   hold back a last turn still waiting for its reply.
//! - **Tool results** become evidence after the turns (`tool_evidence`). Those of every turn
//!   of the file are looked at on each import, turns already there included: a result missing
//!   from the index (an import interrupted while storing them, a write that failed) is stored
//!   by the next import of the file. Each one that cannot be stored is listed in
//!   [`FileReport::failed_tool_outputs`] with its ref and why; its turn stays imported.
//! - **All or nothing on bad input**: the whole file is parsed and checked before anything is
//!   written, so a malformed record leaves the index as it was. `skip_invalid` skips bad
//!   records instead, each reported with its line and reason.
//! - **Fast**: anchors are extracted in parallel; turns are written [`BATCH_TURNS`] per
//!   transaction; a file of one batch folds it into the posting lists, a longer one writes
//!   each batch's postings as a run and merges the runs at its end (`store::runs`).

mod chatgpt;
mod claude;
mod claude_code;
mod codex;
pub mod error;
pub(crate) mod formats;
pub(crate) mod jsonl;
mod openai;
mod records;
mod sharegpt;
mod stream;
pub(crate) mod tool_evidence;
pub mod turns;
mod writer;

pub use error::Error;
pub use jsonl::{Line as CanonicalLine, LineTool as CanonicalTool};
pub use tool_evidence::{FailedToolOutput, StoredToolOutputs, TOOL_OUTPUT_DIR, ToolOutput, tool_output_ref};
pub use writer::BATCH_TURNS;

use crate::gatekeeper::Gatekeeper;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use turns::{Conversation, ParsedTurn, Skipped};
use writer::Writer;

/// A conversation-log format. (De)serialized as the name `--format` takes ([`Format::name`]);
/// the server takes it as a tool argument, with this enum's JSON Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    fn is_live_log(self) -> bool {
        matches!(self, Format::ClaudeCode | Format::Codex)
    }
}

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The format, or [`Format::Auto`] to detect it per file.
    pub format: Format,
    /// Put every conversation into this session instead of naming sessions from the source.
    pub session: Option<String>,
    /// Skip malformed records (reporting each) instead of refusing the file.
    pub skip_invalid: bool,
    /// Store tool results as evidence of their session (default true).
    pub evidence: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { format: Format::Auto, session: None, skip_invalid: false, evidence: true }
    }
}

/// What happened to one session of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionReport {
    /// The session name.
    pub session: String,
    /// Turns added.
    pub new_turns: u64,
    /// Turns of the file that the index already had.
    pub existing_turns: u64,
    /// A last turn held back until its reply is logged (live agent logs).
    pub held_back: u64,
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file (in JSON, a name that is not UTF-8 has U+FFFD for its invalid bytes).
    #[serde(serialize_with = "serialize_lossy_path")]
    pub path: PathBuf,
    /// Its format (detected or given).
    pub format: Format,
    /// Per session.
    pub sessions: Vec<SessionReport>,
    /// Turns added.
    pub new_turns: u64,
    /// Turns already in the index.
    pub existing_turns: u64,
    /// Records skipped with their reasons.
    pub skipped: Vec<Skipped>,
    /// Tool results stored as evidence (new, or missing since an earlier import).
    pub tool_outputs: u64,
    /// Tool results that could not be stored (their turns are imported).
    pub tool_outputs_failed: u64,
    /// Each of them, with its ref and why; importing the file again once the cause is
    /// fixed stores them.
    pub failed_tool_outputs: Vec<FailedToolOutput>,
}

fn serialize_lossy_path<S: serde::Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportReport {
    /// Per file, in the order read.
    pub files: Vec<FileReport>,
    /// Turns added.
    pub new_turns: u64,
    /// Turns already in the index.
    pub existing_turns: u64,
    /// Records skipped.
    pub skipped: u64,
    /// Tool results stored as evidence.
    pub tool_outputs: u64,
    /// Tool results that could not be stored (listed per file).
    pub tool_outputs_failed: u64,
    /// Wall time in seconds.
    pub seconds: f64,
}

impl Serialize for Skipped {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Skipped", 2)?;
        s.serialize_field("line", &self.line)?;
        s.serialize_field("reason", &self.reason)?;
        s.end()
    }
}

/// Progress of an import, for a progress display.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Files finished.
    pub files_done: usize,
    /// Files to read.
    pub files_total: usize,
    /// Turns added so far.
    pub turns: u64,
    /// Seconds since the start.
    pub seconds: f64,
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
        serde_json::from_str(line).map_err(|_| unknown())?
    };
    sniff_line(&first).ok_or_else(unknown)
}

/// Detects a file's format from its beginning; a JSON document whose first element is longer
/// than the beginning read is read whole.
fn detect_from_head(path: &Path) -> Result<Format, Error> {
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
            if !complete && text.trim_start_matches('\u{feff}').trim_start().starts_with('[') =>
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

/// One session's turns from one file, and what is new in it.
struct Plan {
    session: String,
    title: Option<String>,
    turns: Vec<ParsedTurn>,
    existing: u64,
    held_back: u64,
    /// Tool results of every turn of the file for this session, existing ones included.
    tool_outputs: Vec<ToolOutput>,
}

/// Imports `files` into the index, one file at a time. Stops at the first file that fails.
pub(crate) fn import_files(
    gatekeeper: &Gatekeeper,
    files: &[PathBuf],
    options: &ImportOptions,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<ImportReport, crate::Error> {
    let started = Instant::now();
    let mut report = ImportReport {
        files: Vec::new(),
        new_turns: 0,
        existing_turns: 0,
        skipped: 0,
        tool_outputs: 0,
        tool_outputs_failed: 0,
        seconds: 0.0,
    };
    // Turns of each session accounted for by earlier files of this import: a session fed by
    // several files (`--session`, or an agent session resumed in a second log) continues
    // where the previous file ended.
    let mut offsets: HashMap<String, usize> = HashMap::new();
    for (done, path) in files.iter().enumerate() {
        let file = import_file(gatekeeper, path, options, &mut offsets)?;
        report.new_turns += file.new_turns;
        report.existing_turns += file.existing_turns;
        report.skipped += file.skipped.len() as u64;
        report.tool_outputs += file.tool_outputs;
        report.tool_outputs_failed += file.tool_outputs_failed;
        report.files.push(file);
        progress(Progress {
            files_done: done + 1,
            files_total: files.len(),
            turns: report.new_turns,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn import_file(
    gatekeeper: &Gatekeeper,
    path: &Path,
    options: &ImportOptions,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport, crate::Error> {
    let format = match options.format {
        Format::Auto => detect_from_head(path)?,
        given => given,
    };
    if format == Format::Jsonl {
        // The canonical format is streamed: memory stays bounded by one batch.
        return stream::import(gatekeeper, path, options.session.as_deref(), options.skip_invalid, offsets);
    }
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let text = String::from_utf8(bytes).map_err(|e| Error::Shape {
        path: path.to_path_buf(),
        at: error::Location::Line(line_of_offset(e.as_bytes(), e.utf8_error().valid_up_to())),
        what: "not valid UTF-8".into(),
    })?;
    let parsed = formats::parse(format, path, &text, options.skip_invalid)?;
    drop(text);
    let plans = plan(gatekeeper, path, format, parsed.conversations, options.session.as_deref(), offsets)?;
    let source = path.display().to_string();
    let mut sessions = Vec::new();
    let mut new_turns = 0;
    let mut existing_turns = 0;
    let mut destinations = Vec::new();
    let mut turns: Vec<(usize, ParsedTurn)> = Vec::new();
    let mut tool_outputs = Vec::new();
    for (i, mut plan) in plans.into_iter().enumerate() {
        if options.evidence {
            tool_outputs.append(&mut plan.tool_outputs);
        }
        sessions.push(SessionReport {
            session: plan.session.clone(),
            new_turns: plan.turns.len() as u64,
            existing_turns: plan.existing,
            held_back: plan.held_back,
        });
        new_turns += plan.turns.len() as u64;
        existing_turns += plan.existing;
        destinations.push((plan.session, plan.title));
        turns.extend(plan.turns.into_iter().map(|t| (i, t)));
    }
    let mut turns = turns.into_iter();
    let batches = std::iter::from_fn(move || {
        let batch: Vec<_> = turns.by_ref().take(BATCH_TURNS).collect();
        (!batch.is_empty()).then_some(Ok(batch))
    });
    Writer::new(gatekeeper, source, destinations).write_all(batches)?;
    // After the turns, in transactions of their own: a crash in between leaves the turns, and
    // importing the file again stores the outputs (those of turns already there included).
    let outputs = gatekeeper.store_tool_outputs(&tool_outputs)?;
    Ok(FileReport {
        path: path.to_path_buf(),
        format,
        sessions,
        new_turns,
        existing_turns,
        skipped: parsed.skipped,
        tool_outputs: outputs.stored,
        tool_outputs_failed: outputs.failed.len() as u64,
        failed_tool_outputs: outputs.failed,
    })
}

/// Groups conversations into sessions and finds, for each, the turns the index lacks.
fn plan(
    gatekeeper: &Gatekeeper,
    path: &Path,
    format: Format,
    conversations: Vec<Conversation>,
    session: Option<&str>,
    offsets: &mut HashMap<String, usize>,
) -> Result<Vec<Plan>, crate::Error> {
    let mut plans: Vec<Plan> = Vec::new();
    for conversation in conversations {
        let name = session.map_or(conversation.key, str::to_string);
        gatekeeper.session(&name)?; // validates the name
        match plans.iter_mut().find(|p| p.session == name) {
            Some(p) => p.turns.extend(conversation.turns),
            None => plans.push(Plan {
                session: name,
                title: conversation.title,
                turns: conversation.turns,
                existing: 0,
                held_back: 0,
                tool_outputs: Vec::new(),
            }),
        }
    }
    let view = gatekeeper.store().read()?;
    for plan in &mut plans {
        if format.is_live_log() && plan.turns.last().is_some_and(is_unanswered) {
            plan.turns.pop();
            plan.held_back = 1;
        }
        let offset = offsets.get(&plan.session).copied().unwrap_or(0);
        let (id, record) = match view.session_by_name(&plan.session)? {
            Some(found) => found,
            None => (0, crate::store::records::SessionRecord::new(&plan.session)),
        };
        let stored = (record.turn_count as usize).saturating_sub(offset);
        let overlap = plan.turns.len().min(stored);
        let conflict = |turn: usize| Error::Conflict {
            path: path.to_path_buf(),
            session: plan.session.clone(),
            turn: (offset + turn) as u32,
        };
        // The stored turns after `offset` must be the file's first turns. From the start of a
        // session the digest tells it without reading them; otherwise compare turn by turn.
        let digest_matches = offset == 0
            && plan.turns.len() >= stored
            && plan.turns[..stored]
                .iter()
                .fold(0, |d, t| crate::store::records::next_digest(d, &t.user, &t.assistant))
                == record.digest;
        if !digest_matches {
            for (i, t) in plan.turns.iter().enumerate().take(overlap) {
                let stored_turn = view.turn_record(id, (offset + i) as u32)?;
                if stored_turn.is_none_or(|s| s.user != t.user || s.assistant != t.assistant) {
                    return Err(conflict(i).into());
                }
            }
        }
        plan.existing = overlap as u64;
        plan.tool_outputs = tool_evidence::outputs_of(&plan.session, offset as u32, &plan.turns);
        *offsets.entry(plan.session.clone()).or_default() += plan.turns.len();
        plan.turns.drain(..overlap);
    }
    Ok(plans)
}

/// True if a turn has no reply text yet: empty, or only the `[tool: NAME]` mentions of calls
/// made so far (an agent still working).
fn is_unanswered(turn: &ParsedTurn) -> bool {
    turn.assistant.split("\n\n").all(|part| {
        let part = part.trim();
        part.is_empty() || (part.starts_with("[tool: ") && part.ends_with(']'))
    })
}

/// 1-based line of a byte offset.
fn line_of_offset(bytes: &[u8], offset: usize) -> u64 {
    bytes.iter().take(offset).filter(|&&b| b == b'\n').count() as u64 + 1
}

#[cfg(test)]
mod tests {
    use super::Format;
    use super::tool_evidence::{ToolOutput, outputs_of, tool_output_ref};
    use super::turns::{ParsedTurn, ToolCall};
    use crate::{Gatekeeper, Options};

    fn turn_with(calls: &[(&str, &str)]) -> ParsedTurn {
        let tools = calls
            .iter()
            .map(|(id, result)| ToolCall {
                name: "Bash".into(),
                call_id: Some((*id).into()),
                result: Some((*result).into()),
                ..Default::default()
            })
            .collect();
        ParsedTurn { user: "u".into(), assistant: "a".into(), tools, ..Default::default() }
    }

    /// An index written before refs were unique has `a/b`'s output under `tool-output/a_b/`:
    /// importing the log again finds it there and stores no second copy.
    #[test]
    fn outputs_stored_under_their_legacy_ref_are_not_stored_again() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        gk.session("a/b")?.add_turn("u", "a")?;
        gk.session("a_b")?.add_turn("u", "a")?;
        let turns = [turn_with(&[("call_1", "same output")])];
        // What an older version stored: the session's output under the shared ref.
        let outputs = outputs_of("a/b", 0, &turns);
        let legacy = outputs[0].legacy_reference.clone().ok_or("a/b's ref changed")?;
        assert_eq!(legacy.as_str(), "tool-output/a_b/call_1.txt");
        let old = ToolOutput { reference: legacy.clone(), legacy_reference: None, ..outputs[0].clone() };
        assert_eq!(gk.store_tool_outputs(&[old])?.stored, 1);

        let again = gk.store_tool_outputs(&outputs)?;
        assert_eq!((again.stored, again.failed.len()), (0, 0), "{again:?}");
        // `a_b`'s own output has the ref it had before (`a_b` needs no digest), where the old
        // version put `a/b`'s: reported, as evidence is never overwritten.
        let other = outputs_of("a_b", 0, &[turn_with(&[("call_1", "a_b's own output")])]);
        assert_eq!(other[0].reference, legacy);
        let other_stored = gk.store_tool_outputs(&other)?;
        assert_eq!((other_stored.stored, other_stored.failed.len()), (0, 1), "{other_stored:?}");
        assert!(other_stored.failed[0].reason.contains("other content"), "{other_stored:?}");
        assert_eq!(gk.list_evidence()?.len(), 1);
        Ok(())
    }

    #[test]
    fn a_call_id_used_twice_in_a_session_is_reported_not_raced() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        gk.session("s")?.add_turn("u", "a")?;
        let turns = [
            turn_with(&[("dup", "first"), ("dup", "second"), ("ok", "third")]),
            turn_with(&[("dup", "first")]),
        ];
        let outputs = outputs_of("s", 0, &turns);
        let result = gk.store_tool_outputs(&outputs)?;
        assert_eq!(result.stored, 2, "{result:?}");
        assert_eq!(result.failed.len(), 1, "the same bytes again are no failure: {result:?}");
        let failed = &result.failed[0];
        assert_eq!(failed.evidence_ref, tool_output_ref("s", 0, 1, Some("dup"), "second").as_str());
        assert!(failed.reason.contains("same ref"), "{failed:?}");
        assert_eq!(gk.read_evidence(&failed.evidence_ref, None)?, b"first", "the first one is kept");
        // An output of a session the index does not have is a failure too.
        let missing = gk.store_tool_outputs(&outputs_of("nobody", 0, &turns[1..]))?;
        assert!(missing.failed[0].reason.contains("session is not in the index"), "{missing:?}");
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

//! The canonical format: one turn per line, `{"session", "user", "assistant"}` with optional
//! `turn` (which must then be the line's position in its session), `time`, `tools` and `meta`.
//! Unknown fields are ignored. `ctxgate export` writes it, so export → import loses nothing.

use super::error::Error;
use super::turns::{Conversation, ParsedFile, ParsedTurn, Skipped, ToolCall};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// One line of the canonical format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Session name.
    pub session: String,
    /// Position of the turn in its session, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// The user's text.
    pub user: String,
    /// The assistant's text.
    pub assistant: String,
    /// Timestamp, as the source wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Tool calls made during the turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<LineTool>,
}

/// A tool call in the canonical format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineTool {
    /// Tool name.
    pub name: String,
    /// Call id from the source log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Arguments as the source wrote them.
    #[serde(default)]
    pub arguments: String,
    /// Size of the tool's result in bytes.
    #[serde(default)]
    pub result_bytes: u64,
}

/// Parses a whole canonical JSONL text.
pub fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    let mut parsed = ParsedFile::default();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (number, raw) in text.lines().enumerate() {
        let line_no = number as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let position = |session: &str| index.get(session).map_or(0, |&i| parsed.conversations[i].turns.len());
        let result = parse_line(path, line_no, raw).and_then(|line| match line.turn {
            Some(turn) if turn != position(&line.session) as u64 => Err(Error::shape(
                path,
                line_no,
                format!(
                    "`turn` is {turn} but this is turn {} of session {:?} in this file",
                    position(&line.session),
                    line.session
                ),
            )),
            _ => Ok(line),
        });
        let line = match result {
            Ok(line) => line,
            Err(e) if skip_invalid => {
                parsed.skipped.push(Skipped { line: line_no, reason: reason(&e) });
                continue;
            }
            Err(e) => return Err(e),
        };
        let i = *index.entry(line.session.clone()).or_insert_with(|| {
            parsed.conversations.push(Conversation { key: line.session.clone(), ..Conversation::default() });
            parsed.conversations.len() - 1
        });
        parsed.conversations[i].turns.push(into_turn(line));
    }
    Ok(parsed)
}

/// Parses and checks one line.
pub fn parse_line(path: &Path, line_no: u64, raw: &str) -> Result<Line, Error> {
    // Fast path: a well-formed line deserializes directly; only a bad one is examined field by
    // field for a precise message.
    if let Ok(line) = serde_json::from_str::<Line>(raw)
        && !line.session.trim().is_empty()
    {
        return Ok(line);
    }
    let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| Error::json(path, line_no, e))?;
    if !value.is_object() {
        return Err(Error::shape(
            path,
            line_no,
            "expected a JSON object with `session`, `user` and `assistant`",
        ));
    }
    for field in ["session", "user", "assistant"] {
        match value.get(field) {
            Some(v) if v.is_string() => {}
            Some(_) => return Err(Error::shape(path, line_no, format!("`{field}` must be a string"))),
            None => return Err(Error::shape(path, line_no, format!("missing `{field}`"))),
        }
    }
    let line: Line = serde_json::from_value(value)
        .map_err(|e| Error::shape(path, line_no, format!("unexpected field type: {e}")))?;
    if line.session.trim().is_empty() {
        return Err(Error::shape(path, line_no, "`session` is empty"));
    }
    Ok(line)
}

/// A turn of the canonical format.
pub fn into_turn(line: Line) -> ParsedTurn {
    ParsedTurn {
        user: line.user,
        assistant: line.assistant,
        time: line.time,
        tools: line
            .tools
            .into_iter()
            .map(|t| ToolCall {
                name: t.name,
                call_id: t.call_id,
                arguments: t.arguments,
                result: None,
                result_bytes: t.result_bytes,
            })
            .collect(),
    }
}

/// The message of an error without its `FILE:LINE: ` prefix.
pub fn reason(error: &Error) -> String {
    match error {
        Error::Json { source, .. } => format!("invalid JSON: {source}"),
        Error::Shape { what, .. } => what.clone(),
        other => other.to_string(),
    }
}

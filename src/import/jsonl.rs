//! The canonical format: one turn per line, `{"session", "user", "assistant"}` with optional
//! `turn` (which must then be the line's position in its session), `time`, `tools` and `meta`.
//! A tool may carry its `result` (the tool output the index stored as evidence), which an
//! import stores as evidence again. Unknown fields are ignored. `ctxgate export` writes it, so
//! export → import loses nothing, evidence of tool outputs included.

use super::error::Error;
use super::turns::{Conversation, ParsedFile, ParsedTurn, Skipped, ToolCall};
use crate::limits;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
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
    /// The tool's result, stored as evidence of the session on import (`export` writes the
    /// stored tool output here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// A line of the canonical format with its strings borrowed from the text where they need no
/// unescaping: what checking a file needs, without copying every turn's text. It accepts
/// exactly what [`Line`] accepts (the same fields, with the same types).
#[derive(Debug, Deserialize)]
pub struct LineRef<'a> {
    /// Session name.
    #[serde(borrow)]
    pub session: Cow<'a, str>,
    /// Position of the turn in its session, from 0.
    #[serde(default)]
    pub turn: Option<u64>,
    /// The user's text.
    #[serde(borrow)]
    pub user: Cow<'a, str>,
    /// The assistant's text.
    #[serde(borrow)]
    pub assistant: Cow<'a, str>,
    #[serde(default, borrow, rename = "time")]
    _time: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "tools")]
    _tools: Vec<LineToolRef<'a>>,
}

/// A [`LineTool`], checked and not kept.
#[derive(Debug, Deserialize)]
struct LineToolRef<'a> {
    #[serde(borrow, rename = "name")]
    _name: Cow<'a, str>,
    #[serde(default, borrow, rename = "call_id")]
    _call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "arguments")]
    _arguments: Cow<'a, str>,
    #[serde(default, rename = "result_bytes")]
    _result_bytes: u64,
    #[serde(default, borrow)]
    result: Option<Cow<'a, str>>,
}

impl LineRef<'_> {
    /// The turn's size as [`limits::MAX_TURN_BYTES`] counts it.
    fn turn_bytes(&self) -> usize {
        let tools = self._tools.iter().map(|t| (&*t._name, t._call_id.as_deref(), &*t._arguments));
        limits::turn_bytes(&self.user, &self.assistant, self._time.as_deref(), tools)
    }

    /// True if a tool of the line carries its result (to be stored as evidence).
    pub fn has_results(&self) -> bool {
        self._tools.iter().any(|t| t.result.as_deref().is_some_and(|r| !r.trim().is_empty()))
    }
}

/// Checks one line as [`parse_line`] does (the same errors), borrowing its strings.
pub fn check_line<'a>(path: &Path, line_no: u64, raw: &'a str) -> Result<LineRef<'a>, Error> {
    if let Ok(line) = serde_json::from_str::<LineRef<'a>>(raw)
        && crate::names::session_name_problem(&line.session).is_none()
        && limits::turn_too_large(line.turn_bytes()).is_none()
    {
        return Ok(line);
    }
    // The precise message; a line `Line` takes that `LineRef` does not would be taken too.
    let line = parse_line(path, line_no, raw)?;
    Ok(LineRef {
        session: Cow::Owned(line.session),
        turn: line.turn,
        user: Cow::Owned(line.user),
        assistant: Cow::Owned(line.assistant),
        _time: None,
        _tools: line
            .tools
            .into_iter()
            .map(|t| LineToolRef {
                _name: Cow::Owned(t.name),
                _call_id: None,
                _arguments: Cow::Borrowed(""),
                _result_bytes: 0,
                result: t.result.map(Cow::Owned),
            })
            .collect(),
    })
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
        && crate::names::session_name_problem(&line.session).is_none()
        && limits::turn_too_large(line.turn_bytes()).is_none()
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
    if let Some(problem) = crate::names::session_name_problem(&line.session) {
        return Err(Error::shape(path, line_no, format!("`session` cannot be a session name: {problem}")));
    }
    if let Some(why) = limits::turn_too_large(line.turn_bytes()) {
        return Err(Error::shape(path, line_no, why));
    }
    Ok(line)
}

impl Line {
    /// The turn's size as [`limits::MAX_TURN_BYTES`] counts it.
    fn turn_bytes(&self) -> usize {
        let tools = self.tools.iter().map(|t| (&*t.name, t.call_id.as_deref(), &*t.arguments));
        limits::turn_bytes(&self.user, &self.assistant, self.time.as_deref(), tools)
    }
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
                result: t.result,
                result_bytes: t.result_bytes,
            })
            .collect(),
    }
}

/// The message of an error without its `FILE:LINE: ` prefix.
pub fn reason(error: &Error) -> String {
    match error {
        Error::Json { cause, .. } => format!("invalid JSON: {cause}"),
        Error::Shape { what, .. } => what.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_name_the_index_refuses_is_an_error_at_its_line() {
        let long = "x".repeat(300);
        for (name, why) in
            [(long.as_str(), "over the limit"), (" padded", "whitespace"), ("a\u{7}b", "control")]
        {
            let text = format!(
                "{{\"session\": \"ok\", \"user\": \"a\", \"assistant\": \"b\"}}\n{}\n",
                serde_json::json!({"session": name, "user": "a", "assistant": "b"})
            );
            let err = parse(Path::new("c.jsonl"), &text, false).expect_err(name);
            let message = err.to_string();
            assert!(message.starts_with("c.jsonl:2:") && message.contains(why), "{message}");
            let checked = check_line(Path::new("c.jsonl"), 2, text.lines().nth(1).unwrap_or_default());
            assert_eq!(checked.err().map(|e| e.to_string()), Some(message));
        }
    }

    /// Checking a line borrowed takes and refuses exactly what parsing it takes and refuses,
    /// with the same message, and reads the same session, turn and texts.
    #[test]
    fn check_line_agrees_with_parse_line() {
        let path = Path::new("log.jsonl");
        let lines = [
            r#"{"session":"s","user":"u","assistant":"a"}"#,
            r#"{"session":"s","turn":3,"user":"line\nbreak \"quoted\" \u00e9","assistant":"表情 😀","time":"t"}"#,
            r#"{"session":"s","user":"u","assistant":"a","tools":[{"name":"Bash","arguments":"ls"}],"meta":{"x":1}}"#,
            r#"{"session":"s","user":"u","assistant":"a","turn":null,"time":null}"#,
            r#"{"session":"s","user":"u","assistant":"a","tools":[{"arguments":"ls"}]}"#,
            r#"{"session":"s","user":"u","assistant":"a","tools":[{"name":"B","result_bytes":-1}]}"#,
            r#"{"session":"s","user":"u","assistant":"a","tools":[{"name":"B","result":"ok \"quoted\""}]}"#,
            r#"{"session":"s","user":"u","assistant":"a","tools":[{"name":"B","result":7}]}"#,
            r#"{"session":"s","user":"u","assistant":"a","time":5}"#,
            r#"{"session":"s","user":"u","assistant":"a","turn":"1"}"#,
            r#"{"session":"s","user":"u","assistant":"a","tools":{}}"#,
            r#"{"session":"s","user":"u","assistant":"a","session":"t"}"#,
            r#"{"session":" ","user":"u","assistant":"a"}"#,
            r#"{"session":"s","user":"u"}"#,
            r#"{"session":"s","user":1,"assistant":"a"}"#,
            r#"["s","u","a"]"#,
            r#"{"session":"s","user":"u","assistant":"a""#,
        ];
        for raw in lines {
            match (parse_line(path, 7, raw), check_line(path, 7, raw)) {
                (Ok(line), Ok(checked)) => {
                    assert_eq!(
                        (line.session.as_str(), line.turn, line.user.as_str(), line.assistant.as_str()),
                        (&*checked.session, checked.turn, &*checked.user, &*checked.assistant),
                        "{raw}"
                    );
                    let results =
                        line.tools.iter().any(|t| t.result.as_deref().is_some_and(|r| !r.trim().is_empty()));
                    assert_eq!(results, checked.has_results(), "{raw}");
                }
                (Err(parsed), Err(checked)) => assert_eq!(parsed.to_string(), checked.to_string(), "{raw}"),
                (parsed, checked) => panic!("{raw}: parse_line {parsed:?}, check_line {checked:?}"),
            }
        }
    }
}

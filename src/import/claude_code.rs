//! Claude Code session JSONL (DESIGN §8.3): one record per line, `{type, uuid,
//! parentUuid, sessionId, timestamp, isSidechain, message: {role, content}}`.
//!
//! Only `user` and `assistant` records carry turns; `system`, `summary`, `progress`,
//! `file-history-snapshot`, `queue-operation` and the other bookkeeping types are dropped.
//! `message.content` is a string or blocks: `text` is turn text, `thinking` is not, `tool_use`
//! is a tool call and a user record's `tool_result` blocks are its result (not user text).
//! Dropped as well: sidechain records (`isSidechain: true`, subagent traffic), harness noise
//! (`isMeta: true`, or user text holding `<command-name>`, `<command-message>`,
//! `<local-command-stdout>` or `<local-command-stderr>`) and the summary that follows a
//! compaction (`isCompactSummary: true` after a `compact_boundary`). A file may hold several
//! sessions: one conversation per `sessionId`, in order of first appearance. A turn's time is
//! its first record's `timestamp`.

use super::error::Error;
use super::records::{self, json_text, opt_str, req_object, req_str};
use super::turns::{Conversation, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// User text that is the harness talking, not the person.
const NOISE: [&str; 4] =
    ["<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>"];

/// Parses a whole session file.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    let mut parsed = ParsedFile::default();
    let mut sessions: Vec<(String, TurnBuilder)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let rows =
        records::convert(path, records::lines(text), skip_invalid, &mut parsed.skipped, |v, _| row(v))?;
    for row in rows.into_iter().flatten() {
        let i = *index.entry(row.session.clone()).or_insert_with(|| {
            sessions.push((row.session.clone(), TurnBuilder::new()));
            sessions.len() - 1
        });
        let b = &mut sessions[i].1;
        let time = row.time.as_deref();
        for item in row.items {
            match item {
                Item::Text(text) => b.message(row.role, &text, time),
                Item::Call { name, id, arguments } => b.tool_call(&name, id.as_deref(), &arguments, time),
                Item::Result { id, text } => b.tool_result(id.as_deref(), &text),
            }
        }
    }
    for (key, b) in sessions {
        records::push(&mut parsed.conversations, Conversation { key, title: None, turns: b.finish() });
    }
    Ok(parsed)
}

/// A user or assistant record that carries turn content, checked before anything is applied.
struct Row {
    session: String,
    role: Role,
    time: Option<String>,
    items: Vec<Item>,
}

/// What a record contributes.
enum Item {
    Text(String),
    Call { name: String, id: Option<String>, arguments: String },
    Result { id: Option<String>, text: String },
}

/// The record's content, or `None` for a record that carries none.
fn row(v: &Value) -> Result<Option<Row>, String> {
    records::object(v, "", "a JSON object with `type`")?;
    let role = match req_str(v, "", "type")? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return Ok(None),
    };
    let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(false);
    if flag("isSidechain") || (role == Role::User && (flag("isMeta") || flag("isCompactSummary"))) {
        return Ok(None);
    }
    let session = req_str(v, "", "sessionId")?.trim();
    if session.is_empty() {
        return Err("`sessionId` is empty".into());
    }
    let time = opt_str(v, "", "timestamp")?.map(str::to_string);
    let message = req_object(v, "", "message")?;
    let mut items = Vec::new();
    match message.get("content") {
        Some(Value::String(text)) => items.push(Item::Text(text.clone())),
        Some(Value::Array(blocks)) => {
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("message.content[{j}]");
                records::object(block, &at, "an object with `type`")?;
                match req_str(block, &at, "type")? {
                    "text" => {
                        items.push(Item::Text(opt_str(block, &at, "text")?.unwrap_or_default().to_string()))
                    }
                    "tool_use" => items.push(Item::Call {
                        name: req_str(block, &at, "name")?.to_string(),
                        id: opt_str(block, &at, "id")?.map(str::to_string),
                        arguments: block.get("input").map(json_text).unwrap_or_default(),
                    }),
                    "tool_result" => items.push(Item::Result {
                        id: opt_str(block, &at, "tool_use_id")?.map(str::to_string),
                        text: block.get("content").map(records::block_text).unwrap_or_default(),
                    }),
                    _ => {} // thinking, redacted_thinking, image, document
                }
            }
        }
        None | Some(Value::Null) => return Err("missing `message.content`".into()),
        Some(_) => return Err("`message.content` must be a string or an array of blocks".into()),
    }
    if role == Role::User {
        items.retain(|item| !matches!(item, Item::Text(text) if NOISE.iter().any(|n| text.contains(n))));
    }
    Ok(Some(Row { session: session.to_string(), role, time, items }))
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    const S1: &str = "3f6a2b1c-8d4e-4f5a-9b6c-7d8e9f0a1b2c";
    const S2: &str = "b7c8d9e0-1f2a-4b3c-8d4e-5f6a7b8c9d0e";

    #[test]
    fn turns_tools_and_what_is_dropped() {
        let (path, text) = read("fixtures/import/claude-code/session.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), [S1, S2], "one conversation per sessionId, in order of appearance");
        assert_eq!(counts(&parsed), [5, 2]);
        let main = &parsed.conversations[0].turns;
        assert_eq!(main[0].user, "The `parse_duration` tests fail on CI but pass locally. Can you look? 🤔");
        assert_eq!(main[0].time.as_deref(), Some("2025-06-14T09:00:05.185Z"));
        assert!(
            main[0].assistant.starts_with(
                "I'll run the failing test first.\n\n[tool: Bash]\n\n[tool: Read]\n\n`split_units(s).rev()`"
            ),
            "{}",
            main[0].assistant
        );
        let bash = &main[0].tools[0];
        assert_eq!((bash.name.as_str(), bash.call_id.as_deref()), ("Bash", Some("toolu_01AbCdEf")));
        assert!(bash.arguments.contains("cargo test parse_duration"));
        assert!(bash.result.as_deref().unwrap().starts_with("running 3 tests\n"));
        assert_eq!(tools(&main[0])[1], ("Read", Some("toolu_01GhIjKl"), 156));
        // The subagent's own traffic stays out; its answer is the Task call's result.
        assert_eq!(main[1].user, "Fix it, and add a test for \"1h30m\".");
        let found = "Found 2 callers: src/config.rs:88 and src/cli.rs:142.";
        assert_eq!(
            tools(&main[1]),
            [("Task", Some("toolu_01MnOpQr"), found.len() as u64), ("Edit", Some("toolu_01StUvWx"), 189)]
        );
        // After the compaction: the summary is no user turn.
        assert_eq!(main[2].user, "Now run clippy and commit. コミットメッセージは日本語でお願いします。");
        assert_eq!(main[2].assistant.matches("[tool: Bash]").count(), 2);
        let last = main.last().unwrap();
        assert_eq!(
            (last.user.as_str(), last.assistant.as_str()),
            (
                "Push it to a fix/duration branch.",
                "Pushing.\n\n[tool: Bash]\n\nPushed to origin/fix/duration. 🚀"
            )
        );
        let resumed = &parsed.conversations[1].turns;
        assert_eq!(resumed[0].user, "Does `parse_duration` handle negative values?");
        assert_eq!(resumed[1].user, "Should it accept \"0\" without a unit?");
        assert!(resumed[1].assistant.starts_with("Yes: \"0\" is unambiguous"));
        assert_absent(
            &parsed,
            &[
                "HIDDEN-THINKING",
                "SIDECHAIN-ONLY",
                "let ttl = parse_duration",
                "output_mode",
                "COMPACT-SUMMARY",
                "being continued from a previous conversation",
                "<command-name>",
                "<local-command-stdout>",
                "cost is unavailable",
                "Caveat: The messages below",
                "Conversation compacted",
                "Fix parse_duration unit order on CI",
                "Compiling ctxgate-demo",
                "Auto-update failed",
            ],
        );
    }

    #[test]
    fn bad_content_fails_the_file_or_is_skipped() {
        let name = "fixtures/import/claude-code/bad_content.jsonl";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(keys(&parsed), [S1]);
        let reason = "`message.content` must be a string or an array of blocks";
        assert_eq!(parsed.skipped, [Skipped { line: 4, reason: reason.into() }]);
        assert_eq!(
            parsed.conversations[0].turns[0].assistant,
            "I'll run the failing test first.\n\nI could not read that message."
        );
    }

    #[test]
    fn bad_records_name_the_field() {
        let rows = [
            (r#"{"type":"user","message":{"content":"hi"}}"#, "missing `sessionId`"),
            (r#"{"type":"user","sessionId":"s"}"#, "missing `message`"),
            (
                r#"{"type":"assistant","sessionId":"s","message":{"content":[{"type":"tool_use","id":"t"}]}}"#,
                "missing `message.content[0].name`",
            ),
            (
                r#"{"type":"assistant","sessionId":"s","message":{"content":["hi"]}}"#,
                "`message.content[0]` must be an object with `type`",
            ),
            (r#"{"sessionId":"s"}"#, "missing `type`"),
        ];
        for (row, what) in rows {
            let err = parse(Path::new("s.jsonl"), &format!("\n{row}\n"), false).unwrap_err();
            assert_eq!(err.to_string(), format!("s.jsonl:2: {what}"), "for {row}");
        }
        // Rows that carry no turn are not checked.
        let quiet = r#"{"type":"user","isSidechain":true}
{"type":"progress"}
{"type":"user","isMeta":true,"sessionId":"s"}"#;
        assert_eq!(parse(Path::new("s.jsonl"), quiet, false).unwrap(), ParsedFile::default());
    }
}

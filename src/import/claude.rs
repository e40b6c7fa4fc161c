//! Claude.ai data export `conversations.json` (DESIGN §8.2): a JSON array of
//! `{uuid, name, created_at, chat_messages[]}`, each message `{sender: "human"|"assistant",
//! text, content[], created_at, attachments[], files[]}`.
//!
//! A message's `content[]` blocks are preferred over its `text` (which flattens tool use into
//! placeholders); `text` is read only when there are no blocks. `text` blocks are turn text;
//! `tool_use` blocks are tool calls and `tool_result` blocks their results (by `tool_use_id`
//! when the call had an id, else in order); `thinking` and other blocks are not text. Pasted
//! attachments (`attachments[].extracted_content`) and files are not turn text. The session is
//! the conversation's `uuid`, the title its `name`, and a turn's time its first message's
//! `created_at`.

use super::error::Error;
use super::records::{self, json_text, opt_array, opt_str, req_str};
use super::turns::{Conversation, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// Parses a whole `conversations.json`.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    let mut parsed = ParsedFile::default();
    let elements = records::elements(path, text, "a JSON array of conversations")?;
    for c in records::convert(path, elements, skip_invalid, &mut parsed.skipped, |v, _| conversation(v))? {
        records::push(&mut parsed.conversations, c);
    }
    Ok(parsed)
}

fn conversation(v: &Value) -> Result<Conversation, String> {
    records::object(v, "", "a conversation object with `uuid` and `chat_messages`")?;
    let key = req_str(v, "", "uuid")?.trim();
    if key.is_empty() {
        return Err("`uuid` is empty".into());
    }
    let title = opt_str(v, "", "name")?.filter(|t| !t.trim().is_empty()).map(str::to_string);
    let messages = match v.get("chat_messages") {
        Some(Value::Array(messages)) => messages,
        None | Some(Value::Null) => return Err("missing `chat_messages`".into()),
        Some(_) => return Err("`chat_messages` must be an array".into()),
    };
    let mut b = TurnBuilder::new();
    let mut call_ids = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("chat_messages[{i}]");
        records::object(m, &at, "an object with `sender`")?;
        let role = match req_str(m, &at, "sender")? {
            "human" => Role::User,
            "assistant" => Role::Assistant,
            other => return Err(format!("`{at}.sender` is {other:?}: expected \"human\" or \"assistant\"")),
        };
        let time = opt_str(m, &at, "created_at")?;
        let blocks = opt_array(m, &at, "content")?.unwrap_or_default();
        if blocks.is_empty() {
            b.message(role, opt_str(m, &at, "text")?.unwrap_or_default(), time);
            continue;
        }
        for (j, block) in blocks.iter().enumerate() {
            let at = format!("{at}.content[{j}]");
            records::object(block, &at, "an object with `type`")?;
            match req_str(block, &at, "type")? {
                "text" => b.message(role, opt_str(block, &at, "text")?.unwrap_or_default(), time),
                "tool_use" => {
                    let name = req_str(block, &at, "name")?;
                    let id = opt_str(block, &at, "id")?;
                    call_ids.extend(id);
                    b.tool_call(name, id, &block.get("input").map(json_text).unwrap_or_default(), time);
                }
                "tool_result" => {
                    let id = opt_str(block, &at, "tool_use_id")?.filter(|id| call_ids.contains(id));
                    b.tool_result(id, &block.get("content").map(records::block_text).unwrap_or_default());
                }
                _ => {}
            }
        }
    }
    Ok(Conversation { key: key.to_string(), title, turns: b.finish() })
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    #[test]
    fn blocks_tools_and_the_text_fallback() {
        let (path, text) = read("fixtures/import/claude/conversations.json");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(
            keys(&parsed),
            ["5f1c9e7a-3b2d-4e8f-a1c0-6d9b8e7f6a51", "9a7b3c1d-2e4f-4a6b-8c0d-1e2f3a4b5c6d"],
            "the conversation without messages is left out"
        );
        let titles: Vec<Option<&str>> = parsed.conversations.iter().map(|c| c.title.as_deref()).collect();
        assert_eq!(titles, [Some("Debugging a flaky pytest fixture"), None]);
        assert_eq!(counts(&parsed), [5, 2]);
        let pytest = &parsed.conversations[0].turns;
        assert_eq!(
            pytest[0].user,
            "My integration tests fail about one run in ten with `psycopg.OperationalError: server closed the \
             connection`. Log attached."
        );
        assert_eq!(pytest[0].time.as_deref(), Some("2025-02-11T14:03:22.420917Z"));
        assert!(
            pytest[0]
                .assistant
                .ends_with("\n\nCreate the pool inside the fixture, per worker, and close it at teardown.")
        );
        // A call without an id gets its result in order; one with an id by id.
        assert_eq!(tools(&pytest[1]), [("repl", None, r#"{"status":"success","logs":["80"]}"#.len() as u64)]);
        assert!(
            pytest[1].assistant.contains("\n\n[tool: repl]\n\n8 workers × 10 connections"),
            "{}",
            pytest[1].assistant
        );
        assert_eq!(tools(&pytest[3])[0].0, "web_search");
        assert_eq!(tools(&pytest[3])[0].1, Some("toolu_01WebSrch"));
        assert!(pytest[3].tools[0].result.as_deref().unwrap().contains("docs.pytest.org"));
        // The empty human message between two turns is no turn.
        assert_eq!(pytest[2].user, "That fixed it! 🎉 Should I also set `pool_timeout`?");
        assert_eq!(pytest[4].user, "Will `pytest --lf` help reproduce the flaky one?");
        let haiku = &parsed.conversations[1].turns;
        assert_eq!(haiku[0].user, "「古池や」の句の季語は何ですか？🐸");
        assert_eq!(haiku[1].assistant, "「木枯らし」「雪催い」「寒椿」「鍋焼」などがあります。❄️");
        assert_absent(
            &parsed,
            &["ATTACHMENT-ONLY", "HIDDEN-THINKING", "not supported on your current device"],
        );
    }

    #[test]
    fn messages_that_are_not_an_array_fail_the_file_or_are_skipped() {
        let name = "fixtures/import/claude/bad_messages.json";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(keys(&parsed), ["9a7b3c1d-2e4f-4a6b-8c0d-1e2f3a4b5c6d"]);
        assert_eq!(parsed.skipped, [Skipped { line: 53, reason: "`chat_messages` must be an array".into() }]);
    }

    #[test]
    fn bad_messages_name_the_field() {
        let rows = [
            (r#"{"name":"x","chat_messages":[]}"#, "missing `uuid`"),
            (
                r#"{"uuid":"u","chat_messages":[{"sender":"bot","text":"hi"}]}"#,
                "`chat_messages[0].sender` is \"bot\": expected \"human\" or \"assistant\"",
            ),
            (
                r#"{"uuid":"u","chat_messages":[{"sender":"human","content":[{"text":"hi"}]}]}"#,
                "missing `chat_messages[0].content[0].type`",
            ),
            (
                r#"{"uuid":"u","chat_messages":[{"sender":"assistant","content":[{"type":"tool_use","input":{}}]}]}"#,
                "missing `chat_messages[0].content[0].name`",
            ),
            (
                r#"{"uuid":"u","chat_messages":[{"sender":"human","text":5}]}"#,
                "`chat_messages[0].text` must be a string",
            ),
        ];
        for (conversation, what) in rows {
            let err = parse(Path::new("c.json"), &format!("[\n{conversation}]"), false).unwrap_err();
            assert_eq!(err.to_string(), format!("c.json:2: {what}"), "for {conversation}");
        }
    }
}

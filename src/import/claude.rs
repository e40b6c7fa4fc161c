//! Claude.ai data export `conversations.json` (DESIGN §8.2): a JSON array of
//! `{uuid, name, created_at, chat_messages[]}` (or one such object: an export of one
//! conversation), each message `{uuid, sender: "human"|"assistant", text, content[], created_at,
//! attachments[], files[]}`.
//!
//! Where messages carry `parent_message_uuid` (exports that keep the tree of edits and
//! regenerations), only the branch from `current_leaf_message_uuid` (else the last message)
//! back to the root is read, as for ChatGPT. A message's `content[]` blocks are preferred over its `text` (which flattens tool use into
//! placeholders); `text` is read when no block is of a known type. `text` blocks are turn text,
//! and so is a `voice_note` block's `transcript` (else its `text`): what was said aloud (one
//! without either is no known block: the message's `text` holds it);
//! `tool_use` blocks are tool calls and `tool_result` blocks their results (by `tool_use_id`
//! when the call had an id, else in order; `is_error` marks the call failed); `thinking` and
//! other blocks are not text. Pasted attachments of human messages (`attachments[].extracted_content`) are
//! evidence of the turn, each named in the user text by a line `[attachment: FILE NAME,
//! evidence REF]`; `files` (uploads without extracted text) are not read. The session is the
//! conversation's `uuid`, the title its `name`, and a turn's time its first message's
//! `created_at`.

use super::error::Error;
use super::records::{self, json_text, opt_array, opt_str, req_str};
use super::tool_evidence::tool_output_ref;
use super::turns::{Conversation, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// Parses a whole `conversations.json`.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    let mut parsed = ParsedFile::default();
    let elements =
        records::documents(path, text, "a JSON array of conversations, or one conversation object")?;
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
    let key = records::session_name(key, "uuid")?;
    let title = opt_str(v, "", "name")?.filter(|t| !t.trim().is_empty()).map(str::to_string);
    let messages = match v.get("chat_messages") {
        Some(Value::Array(messages)) => messages,
        None | Some(Value::Null) => return Err("missing `chat_messages`".into()),
        Some(_) => return Err("`chat_messages` must be an array".into()),
    };
    let mut b = TurnBuilder::new();
    let mut call_ids = HashSet::new();
    let active = active_branch(v, messages);
    for (i, m) in messages.iter().enumerate() {
        let at = format!("chat_messages[{i}]");
        records::object(m, &at, "an object with `sender`")?;
        if !active.get(i).copied().unwrap_or(true) {
            continue;
        }
        let role = match req_str(m, &at, "sender")? {
            "human" => Role::User,
            "assistant" => Role::Assistant,
            other => return Err(format!("`{at}.sender` is {other:?}: expected \"human\" or \"assistant\"")),
        };
        let time = opt_str(m, &at, "created_at")?;
        let attachments = if role == Role::User { attachments(m, &at, &key, i)? } else { Vec::new() };
        let blocks = opt_array(m, &at, "content")?.unwrap_or_default();
        let known = |block: &Value| match block.get("type").and_then(Value::as_str) {
            Some("text" | "tool_use" | "tool_result") => true,
            // Without a transcript of its own, the message's `text` holds what was said.
            Some("voice_note") => spoken(block).is_some(),
            _ => false,
        };
        if !blocks.iter().any(known) {
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("{at}.content[{j}]");
                records::object(block, &at, "an object with `type`")?;
                req_str(block, &at, "type")?;
            }
            b.message(role, opt_str(m, &at, "text")?.unwrap_or_default(), time);
        }
        for (j, block) in blocks.iter().enumerate().filter(|(_, block)| known(block)) {
            let at = format!("{at}.content[{j}]");
            records::object(block, &at, "an object with `type`")?;
            match req_str(block, &at, "type")? {
                "text" => b.message(role, opt_str(block, &at, "text")?.unwrap_or_default(), time),
                // A message spoken in the app: its transcript is what was said.
                "voice_note" => b.message(role, spoken(block).unwrap_or_default(), time),
                "tool_use" => {
                    let name = req_str(block, &at, "name")?;
                    let id = opt_str(block, &at, "id")?;
                    call_ids.extend(id);
                    b.tool_call(name, id, &block.get("input").map(json_text).unwrap_or_default(), time);
                }
                "tool_result" => {
                    let id = opt_str(block, &at, "tool_use_id")?.filter(|id| call_ids.contains(id));
                    let result = block.get("content").map(records::block_text).unwrap_or_default();
                    if block.get("is_error").and_then(Value::as_bool).unwrap_or(false) {
                        b.tool_error(id, &result);
                    } else {
                        b.tool_result(id, &result);
                    }
                }
                _ => {}
            }
        }
        if !attachments.is_empty() {
            // Named on the user's side of this message's turn, after its text (the lines open
            // the turn when the message has no text of its own).
            let lines: Vec<&str> = attachments.iter().map(|a| a.line.as_str()).collect();
            b.message(Role::User, &lines.join("\n"), time);
        }
        for a in attachments {
            b.user_document(ATTACHMENT, &a.id, &a.arguments, &a.content);
        }
    }
    Ok(Conversation { key, title, turns: b.finish() })
}

/// What a `voice_note` block says: its `transcript`, else its `text`, if either has words.
fn spoken(block: &Value) -> Option<&str> {
    ["transcript", "text"]
        .iter()
        .filter_map(|key| block.get(*key).and_then(Value::as_str))
        .find(|text| !text.trim().is_empty())
}

/// The parent Claude.ai gives a conversation's first message.
const ROOT_PARENT: &str = "00000000-0000-4000-8000-000000000000";

/// For each message, whether it is on the conversation's active branch: from
/// `current_leaf_message_uuid` (else the last message) back through `parent_message_uuid` to the
/// root. Where messages name no parents, or the chain cannot be followed (a parent that is not
/// a message nor the root, a cycle), every message is.
fn active_branch(v: &Value, messages: &[Value]) -> Vec<bool> {
    fn uuid(m: &Value) -> Option<&str> {
        m.get("uuid").and_then(Value::as_str).filter(|u| !u.is_empty())
    }
    fn parent(m: &Value) -> Option<&str> {
        m.get("parent_message_uuid").and_then(Value::as_str).filter(|u| !u.is_empty())
    }
    let all = vec![true; messages.len()];
    if !messages.iter().any(|m| parent(m).is_some()) {
        return all;
    }
    let by_uuid: std::collections::HashMap<&str, usize> =
        messages.iter().enumerate().filter_map(|(i, m)| Some((uuid(m)?, i))).collect();
    let leaf = v
        .get("current_leaf_message_uuid")
        .and_then(Value::as_str)
        .and_then(|leaf| by_uuid.get(leaf).copied())
        .or_else(|| messages.iter().rposition(|m| uuid(m).is_some()));
    let Some(mut at) = leaf else { return all };
    let mut on = vec![false; messages.len()];
    loop {
        if on[at] {
            return all; // a cycle
        }
        on[at] = true;
        match parent(&messages[at]) {
            None | Some(ROOT_PARENT) => break,
            Some(p) => match by_uuid.get(p) {
                Some(&next) => at = next,
                None => return all,
            },
        }
    }
    // Messages without a uuid cannot be placed: they are kept.
    for (i, m) in messages.iter().enumerate() {
        on[i] |= uuid(m).is_none();
    }
    on
}

/// The tool name attachments are recorded under (DESIGN §8.2).
const ATTACHMENT: &str = "attachment";

/// A pasted attachment of a message, as evidence of its turn.
struct Attachment {
    /// Its name among the session's evidence: `attachment-<message>-<n>`.
    id: String,
    /// `{file_name, file_type, file_size}` as the export wrote them.
    arguments: String,
    content: String,
    /// The user-text line that names it and its evidence ref.
    line: String,
}

/// The attachments of message `index` that carry extracted text, each with the ref its
/// content will be stored under as evidence of session `key` (DESIGN §4.4).
fn attachments(m: &Value, at: &str, key: &str, index: usize) -> Result<Vec<Attachment>, String> {
    let mut out = Vec::new();
    let message = match opt_str(m, at, "uuid")?.map(str::trim).filter(|u| !u.is_empty()) {
        Some(uuid) => uuid.to_string(),
        None => index.to_string(),
    };
    for (j, a) in opt_array(m, at, "attachments")?.unwrap_or_default().iter().enumerate() {
        let at = format!("{at}.attachments[{j}]");
        records::object(a, &at, "an object with `file_name` and `extracted_content`")?;
        let Some(content) = opt_str(a, &at, "extracted_content")?.filter(|c| !c.trim().is_empty()) else {
            continue;
        };
        let file_name = opt_str(a, &at, "file_name")?.map(str::trim).filter(|n| !n.is_empty());
        let file_name = file_name.unwrap_or("pasted text");
        let mut arguments = serde_json::Map::new();
        for field in ["file_name", "file_type", "file_size"] {
            if let Some(value) = a.get(field).filter(|v| !v.is_null()) {
                arguments.insert(field.to_string(), value.clone());
            }
        }
        let id = format!("{ATTACHMENT}-{message}-{j}");
        let reference = tool_output_ref(key, 0, 0, Some(&id), content);
        out.push(Attachment {
            line: format!("[{ATTACHMENT}: {file_name}, evidence {reference}]"),
            id,
            arguments: Value::Object(arguments).to_string(),
            content: content.to_string(),
        });
    }
    Ok(out)
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
             connection`. Log attached.\n\n[attachment: pytest.log, evidence \
             tool-output/5f1c9e7a-3b2d-4e8f-a1c0-6d9b8e7f6a51/attachment-c1-m1-0.txt]"
        );
        // The attachment is evidence of the turn, not turn text.
        assert_eq!(tools(&pytest[0]), [("attachment", Some("attachment-c1-m1-0"), 195)]);
        assert!(pytest[0].tools[0].result.as_deref().unwrap().starts_with("ATTACHMENT-ONLY: ====="));
        assert_eq!(
            pytest[0].tools[0].arguments,
            r#"{"file_name":"pytest.log","file_type":"text/plain","file_size":2841}"#
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
        assert_absent(&parsed, &["HIDDEN-THINKING", "not supported on your current device"]);
    }

    /// Issue 22, findings 2 and 4: an export of one conversation (an object, not an array);
    /// attachments as evidence named in the user text; a message whose blocks are all of
    /// unknown types read from its `text`; a failed tool result.
    #[test]
    fn r22_one_conversation_attachments_and_unknown_blocks() {
        let (path, text) = read("fixtures/import/claude/single_conversation.json");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["e3b7a9d1-4c2f-4a8e-b6d5-0f1e2d3c4b5a"]);
        assert_eq!(parsed.conversations[0].title.as_deref(), Some("Slow order queries"));
        let turns = &parsed.conversations[0].turns;
        let texts: Vec<(&str, &str)> =
            turns.iter().map(|t| (t.user.as_str(), t.assistant.as_str())).collect();
        let at = "tool-output/e3b7a9d1-4c2f-4a8e-b6d5-0f1e2d3c4b5a";
        assert_eq!(
            texts,
            [
                (
                    format!("[attachment: slow-query.log, evidence {at}/attachment-m-0001-0.txt]").as_str(),
                    "The query scans 1.8 M rows: there is no index on `customer_email`. Add `CREATE INDEX \
                     orders_email_created ON orders (customer_email, created_at DESC);`"
                ),
                (
                    format!(
                        "Would a partial index help? Most rows are archived. Here is the table definition.\n\n\
                         [attachment: orders.sql, evidence {at}/attachment-m-0003-0.txt]"
                    )
                    .as_str(),
                    "[tool: run_sql (failed)]\n\nI could not run EXPLAIN, but yes: `CREATE INDEX ... WHERE NOT \
                     archived` keeps the index small."
                ),
            ]
        );
        assert_eq!(turns[0].time.as_deref(), Some("2025-05-20T08:12:03.900000Z"));
        assert_eq!(tools(&turns[0]), [("attachment", Some("attachment-m-0001-0"), 172)]);
        assert!(turns[0].tools[0].result.as_deref().unwrap().starts_with("# Query_time: 4.812"));
        // The empty attachment is not evidence; the call's failed result is.
        assert_eq!(
            tools(&turns[1]),
            [
                ("attachment", Some("attachment-m-0003-0"), 161),
                ("run_sql", Some("toolu_01Explain"), "permission denied for table orders".len() as u64)
            ]
        );
        // The ref named in the text is the one the write path stores the content under.
        let outputs =
            crate::import::tool_evidence::outputs_of("e3b7a9d1-4c2f-4a8e-b6d5-0f1e2d3c4b5a", 0, turns);
        let refs: Vec<&str> = outputs.iter().map(|o| o.reference.as_str()).collect();
        assert_eq!(
            refs,
            [
                format!("{at}/attachment-m-0001-0.txt"),
                format!("{at}/attachment-m-0003-0.txt"),
                format!("{at}/toolu_01Explain.txt")
            ]
        );
        assert_absent(&parsed, &["schema-diagram"]);
    }

    /// Editing a prompt or regenerating a reply branches a conversation (`parent_message_uuid`);
    /// only the branch to `current_leaf_message_uuid` is read.
    #[test]
    fn the_active_branch_of_an_edited_conversation() {
        let m = |uuid: &str, parent: &str, sender: &str, text: &str| serde_json::json!({"uuid": uuid, "parent_message_uuid": parent, "sender": sender, "text": text});
        let root = ROOT_PARENT;
        let messages = [
            m("h1", root, "human", "Name a prime."),
            m("a1", "h1", "assistant", "ABANDONED-REGENERATED 9"),
            m("a1b", "h1", "assistant", "7"),
            m("h2", "a1b", "human", "ABANDONED-EDITED a larger one?"),
            m("a2", "h2", "assistant", "ABANDONED-REPLY 11"),
            m("h2b", "a1b", "human", "An even one?"),
            m("a2b", "h2b", "assistant", "2"),
        ];
        let texts = |conversation: serde_json::Value| {
            let parsed = parse(Path::new("c.json"), &format!("[{conversation}]"), false).unwrap();
            let turns = &parsed.conversations[0].turns;
            turns.iter().map(|t| format!("{} / {}", t.user, t.assistant)).collect::<Vec<_>>()
        };
        let with_leaf =
            serde_json::json!({"uuid": "c", "current_leaf_message_uuid": "a2b", "chat_messages": messages});
        assert_eq!(texts(with_leaf), ["Name a prime. / 7", "An even one? / 2"]);
        // Without a leaf: the last message's branch.
        let without = serde_json::json!({"uuid": "c", "chat_messages": messages});
        assert_eq!(texts(without), ["Name a prime. / 7", "An even one? / 2"]);
        // A leaf on another branch.
        let other =
            serde_json::json!({"uuid": "c", "current_leaf_message_uuid": "a2", "chat_messages": messages});
        assert_eq!(
            texts(other),
            ["Name a prime. / 7", "ABANDONED-EDITED a larger one? / ABANDONED-REPLY 11"]
        );
        // A parent that is no message: every message, in order.
        let broken = [
            m("h1", "gone", "human", "one"),
            m("a1", "h1", "assistant", "two"),
            m("h2", "a1", "human", "three"),
        ];
        let broken = serde_json::json!({"uuid": "c", "chat_messages": broken});
        assert_eq!(texts(broken), ["one / two", "three / "]);
    }

    #[test]
    fn objects_one_after_another_and_what_is_not_a_conversation() {
        let one = r#"{"uuid":"c-1","chat_messages":[{"sender":"human","text":"hi"}]}"#;
        let two = r#"{"uuid":"c-2","chat_messages":[{"sender":"human","text":"ho"}]}"#;
        let parsed = parse(Path::new("c.json"), &format!("\u{feff}{one}\n\n{two}\n"), false).unwrap();
        assert_eq!(keys(&parsed), ["c-1", "c-2"]);
        let rows = [
            ("", "c.json:1: expected a JSON array of conversations, or one conversation object"),
            ("\n\n7", "c.json:3: expected a conversation object with `uuid` and `chat_messages`"),
            (
                "\n{\"uuid\": \"c\",\n \"chat_messages\": [}",
                "c.json:3: invalid JSON: expected value at line 3 column 20",
            ),
        ];
        for (text, expected) in rows {
            assert_eq!(
                parse(Path::new("c.json"), text, false).unwrap_err().to_string(),
                expected,
                "for {text:?}"
            );
        }
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

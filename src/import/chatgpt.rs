//! ChatGPT data export `conversations.json` (DESIGN §8.1): a JSON array of conversations (or
//! one conversation object, as tools that export a single chat write it), each a `mapping`
//! tree of nodes `{id, message|null, parent, children}`.
//!
//! Only the active branch is read: `current_node` walked back through `parent` (regenerated
//! replies and edited prompts on other branches are not part of the transcript). Without a
//! `current_node` (or with `null`), the branch of the newest leaf is taken. Root placeholders
//! (`message: null`) are skipped. `text` and `multimodal_text` contents (their string parts)
//! are turn text; `thoughts`, `reasoning_recap`, other content types, system messages and
//! custom instructions (`metadata.is_user_system_message`) are not. Tool traffic: an assistant
//! message to a `recipient` other than `"all"`, or of type `code`, is a call named by the
//! recipient; the `role: "tool"` messages after it (`execution_output`, browsing results…) are
//! its result, consecutive messages of one tool joined. Tool output nothing called (a plugin's
//! own message) is recorded as a call of that tool.
//! The session is the conversation's `id` (or `conversation_id`), the title its `title`, and a
//! turn's time its first message's `create_time` (epoch seconds, written as in the file).

use super::error::Error;
use super::records::{self, opt_str, req_object, req_str};
use super::turns::{Conversation, ParsedFile, ParsedTurn, Role, TurnBuilder};
use serde_json::{Map, Value};
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
    records::object(v, "", "a conversation object with `mapping` and `current_node`")?;
    let key = match opt_str(v, "", "id")?.filter(|s| !s.trim().is_empty()) {
        Some(id) => records::session_name(id, "id")?,
        None => records::session_name(
            opt_str(v, "", "conversation_id")?
                .filter(|s| !s.trim().is_empty())
                .ok_or("missing `id` (or `conversation_id`)")?,
            "conversation_id",
        )?,
    };
    let title = opt_str(v, "", "title")?.filter(|t| !t.trim().is_empty()).map(str::to_string);
    let mapping = match v.get("mapping") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => return Err("missing `mapping`".into()),
        Some(_) => return Err("`mapping` must be an object of nodes".into()),
    };
    let leaf = match opt_str(v, "", "current_node")? {
        Some(id) if !mapping.contains_key(id) => {
            return Err(format!("`current_node` {id:?} is not in `mapping`"));
        }
        Some(id) => Some(id),
        None => latest_leaf(mapping)?,
    };
    let mut turns = Turns::default();
    for (id, node) in active_branch(mapping, leaf)? {
        let message = match node.get("message") {
            None => return Err(format!("`mapping` node {id:?} has no `message`")),
            Some(Value::Null) => continue,
            Some(m) => m,
        };
        turns.add(message).map_err(|what| format!("`mapping` node {id:?}: {what}"))?;
    }
    Ok(Conversation { key, title, turns: turns.finish() })
}

/// The nodes from the root to `leaf`, through `parent`.
fn active_branch<'v>(
    mapping: &'v Map<String, Value>,
    leaf: Option<&'v str>,
) -> Result<Vec<(&'v str, &'v Value)>, String> {
    let mut chain: Vec<(&str, &Value)> = Vec::new();
    let mut next = leaf;
    while let Some(id) = next {
        let node = mapping.get(id).ok_or_else(|| match chain.last() {
            Some((child, _)) => {
                format!("`mapping` node {child:?} has `parent` {id:?}, which is not in `mapping`")
            }
            None => format!("`current_node` {id:?} is not in `mapping`"),
        })?;
        if !node.is_object() {
            return Err(format!("`mapping` node {id:?} must be an object"));
        }
        if chain.len() >= mapping.len() {
            return Err(format!("`mapping` has a cycle through node {id:?}"));
        }
        chain.push((id, node));
        next = opt_str(node, "", "parent").map_err(|e| format!("`mapping` node {id:?}: {e}"))?;
    }
    chain.reverse();
    Ok(chain)
}

/// Without `current_node` (absent, or `null` as some exports write it): the newest leaf, a node
/// no other node names as its `parent`, by its message's `create_time`, then the deepest. Found
/// through `parent` links, which every node has, not `children`, which exports written by
/// other tools leave out: following `children` from the root stopped at the root.
fn latest_leaf(mapping: &Map<String, Value>) -> Result<Option<&str>, String> {
    let parents: std::collections::HashSet<&str> =
        mapping.values().filter_map(|node| node.get("parent").and_then(Value::as_str)).collect();
    let mut best: Option<(f64, usize, &str)> = None;
    for (id, node) in mapping.iter().filter(|(id, _)| !parents.contains(id.as_str())) {
        let time = node
            .get("message")
            .and_then(|m| m.get("create_time"))
            .and_then(Value::as_f64)
            .unwrap_or(f64::NEG_INFINITY);
        let mut depth = 0;
        let mut next = node.get("parent").and_then(Value::as_str);
        while let Some(parent) = next.and_then(|p| mapping.get(p)) {
            depth += 1;
            if depth > mapping.len() {
                return Err(format!("`mapping` has a cycle above node {id:?}"));
            }
            next = parent.get("parent").and_then(Value::as_str);
        }
        if best.is_none_or(|(t, d, _)| (time, depth) > (t, d)) {
            best = Some((time, depth, id));
        }
    }
    Ok(best.map(|(_, _, id)| id))
}

/// The turns of the active branch, fed one message at a time.
#[derive(Default)]
struct Turns {
    b: TurnBuilder,
    /// Calls still waiting for their result.
    open_calls: usize,
    /// Consecutive messages of one tool: one call's output (`(tool, texts, time)`).
    output: Option<(String, Vec<String>, Option<String>)>,
}

impl Turns {
    fn add(&mut self, message: &Value) -> Result<(), String> {
        records::object(message, "message", "an object or null")?;
        let author = req_object(message, "message", "author")?;
        let role = req_str(author, "message.author", "role")?;
        let content = req_object(message, "message", "content")?;
        let kind = opt_str(content, "message.content", "content_type")?.unwrap_or("text");
        let recipient = opt_str(message, "message", "recipient")?.unwrap_or("all");
        let name = opt_str(author, "message.author", "name")?;
        let time = match message.get("create_time") {
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let custom_instructions = message
            .get("metadata")
            .and_then(|m| m.get("is_user_system_message"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if role == "tool" {
            let tool = name.unwrap_or("tool");
            if self.output.as_ref().is_some_and(|(t, _, _)| t != tool) {
                self.flush();
            }
            let text = body(content)?;
            let (_, texts, _) = self.output.get_or_insert_with(|| (tool.to_string(), Vec::new(), time));
            if !text.trim().is_empty() {
                texts.push(text);
            }
            return Ok(());
        }
        self.flush();
        let time = time.as_deref();
        match role {
            "system" => {}
            "user" if custom_instructions => {}
            "user" => {
                if matches!(kind, "text" | "multimodal_text") {
                    self.b.message(Role::User, &parts(content)?, time);
                }
            }
            "assistant" => {
                if recipient != "all" || kind == "code" {
                    let tool = if recipient == "all" { name.unwrap_or("python") } else { recipient };
                    self.b.tool_call(tool, None, &body(content)?, time);
                    self.open_calls += 1;
                } else if matches!(kind, "text" | "multimodal_text") {
                    self.b.message(Role::Assistant, &parts(content)?, time);
                }
            }
            other => {
                return Err(format!(
                    "`message.author.role` is {other:?}: expected user, assistant, system or tool"
                ));
            }
        }
        Ok(())
    }

    /// Attaches the pending tool output to its call; output nothing called (a plugin's or the
    /// browser's own) gets a call of its own, named by the tool.
    fn flush(&mut self) {
        let Some((tool, texts, time)) = self.output.take() else { return };
        if self.open_calls == 0 {
            self.b.tool_call(&tool, None, "", time.as_deref());
        } else {
            self.open_calls -= 1;
        }
        self.b.tool_result(None, &texts.join("\n\n"));
    }

    fn finish(mut self) -> Vec<ParsedTurn> {
        self.flush();
        self.b.finish()
    }
}

/// The string parts of a `text` or `multimodal_text` content, joined by blank lines (image
/// pointers and other objects are not text).
fn parts(content: &Value) -> Result<String, String> {
    let parts = records::opt_array(content, "message.content", "parts")?.unwrap_or_default();
    let texts: Vec<&str> = parts.iter().filter_map(Value::as_str).filter(|s| !s.trim().is_empty()).collect();
    Ok(texts.join("\n\n"))
}

/// The body of tool traffic: `text` (code, execution output), else the string parts, else
/// `result` (browsing), else the content as JSON.
fn body(content: &Value) -> Result<String, String> {
    if let Some(text) = opt_str(content, "message.content", "text")? {
        return Ok(text.to_string());
    }
    if content.get("parts").is_some() {
        return parts(content);
    }
    if let Some(result) = content.get("result").and_then(Value::as_str) {
        return Ok(result.to_string());
    }
    Ok(content.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    #[test]
    fn the_active_branch_of_each_conversation() {
        let (path, text) = read("fixtures/import/chatgpt/conversations.json");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(
            keys(&parsed),
            [
                "66a1f2c0-0b1e-4c55-9d1e-1f2a3b4c5d6e",
                "7c9e4d12-5f3a-4b8e-a1d0-93c2e6b7f801",
                "c3d8a7e2-4410-4b6b-8f0e-2d6c1a9b7e55"
            ],
            "the empty conversation is left out"
        );
        let titles: Vec<Option<&str>> = parsed.conversations.iter().map(|c| c.title.as_deref()).collect();
        assert_eq!(titles, [Some("Redis lock TTL"), Some("東京旅行の計画"), Some("Lighthouse watercolor")]);
        assert_eq!(counts(&parsed), [6, 2, 2]);
        let redis = &parsed.conversations[0].turns;
        assert_eq!(redis[0].user, "How do I make a Redis lock expire safely if the worker dies?");
        assert!(
            redis[0].assistant.starts_with("Acquire it with `SET lock:job <token> NX PX 30000`"),
            "{}",
            redis[0].assistant
        );
        assert_eq!(redis[0].time.as_deref(), Some("1712131200.512"));
        // The regenerated reply and the edited prompt are the ones on the active branch.
        assert!(
            redis[1].assistant.starts_with("Renew the lease from a watchdog thread"),
            "{}",
            redis[1].assistant
        );
        assert_eq!(redis[2].user, "Can you measure how long a Lua EVAL takes on 10k keys?");
        assert_eq!(
            redis[2].assistant,
            "[tool: python]\n\nThe loop itself costs about 0.4 ms, so a real EVAL over 10k keys is dominated by \
             Redis round trips; batch keys into one script call."
        );
        assert_eq!(tools(&redis[2]), [("python", None, "0.41 ms".len() as u64)]);
        assert!(redis[2].tools[0].arguments.starts_with("import time\n"));
        // Multimodal: the string part is the text, the image pointer is not.
        assert_eq!(redis[3].user, "Here is my Grafana panel — why does lock contention spike at 02:00?");
        assert_eq!(redis[5].user, "What's a fencing token?");
        assert_absent(
            &parsed,
            &[
                "DISCARDED",
                "SECRET-THOUGHT",
                "Considering lease renewal",
                "Thought for 7 seconds",
                "backend engineer",
                "Prefer Python examples",
                "file-service://",
            ],
        );
        // Browsing: a call to the browser and its display as the result; null times tolerated.
        let tokyo = &parsed.conversations[1].turns;
        assert_eq!(tokyo[0].user, "来週、東京で三日間過ごします。雨の日でも楽しめる場所は？☔");
        assert_eq!(tokyo[0].time, None);
        assert_eq!(tokyo[0].tools[0].name, "browser");
        assert!(tokyo[0].tools[0].result.as_deref().unwrap().starts_with("【0†東京の雨の日スポット20選"));
        assert_eq!(tokyo[1].time.as_deref(), Some("1712300000"));
        assert_eq!(
            tokyo[1].assistant,
            "浅草なら朝早く浅草寺に行き、仲見世通りで食べ歩き、午後は隅田川クルーズで浜離宮へ向かうのが定番です。"
        );
        // No `current_node`: the latest branch. Two tool messages are one call's output.
        let lighthouse = &parsed.conversations[2].turns;
        let note = "DALL·E displayed 1 images. The images are already plainly visible, so don't repeat the descriptions in detail.";
        assert_eq!(tools(&lighthouse[0]), [("dalle.text2im", None, note.len() as u64)]);
        assert_eq!(lighthouse[1].assistant, "Done: same scene with a deep violet storm sky.");
    }

    #[test]
    fn a_node_without_message_fails_the_file_or_is_skipped() {
        let name = "fixtures/import/chatgpt/bad_node.json";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(keys(&parsed), ["7c9e4d12-5f3a-4b8e-a1d0-93c2e6b7f801"]);
        let reason = "`mapping` node \"c4\" has no `message`";
        assert_eq!(parsed.skipped, [Skipped { line: 298, reason: reason.into() }]);
    }

    #[test]
    fn a_syntax_error_fails_the_file_even_when_skipping() {
        let name = "fixtures/import/chatgpt/bad_syntax.json";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        assert_eq!(parse(&path, &text, true).unwrap_err().to_string(), expected(name));
    }

    #[test]
    fn broken_trees() {
        let path = Path::new("c.json");
        let node = |id: &str, parent: &str| {
            format!(
                r#""{id}":{{"id":"{id}","parent":{parent},"message":{{"author":{{"role":"user"}},"content":{{"content_type":"text","parts":["{id}"]}}}}}}"#
            )
        };
        let rows = [
            (format!(r#"{{"id":"a","current_node":"x","mapping":{{{}}}}}"#, node("n1", "null")), "`current_node` \"x\" is not in `mapping`"),
            (
                format!(r#"{{"id":"b","current_node":"n1","mapping":{{{},{}}}}}"#, node("n1", r#""n2""#), node("n2", r#""n1""#)),
                "`mapping` has a cycle through node \"n1\"",
            ),
            (format!(r#"{{"id":"c","current_node":"n1","mapping":{{{}}}}}"#, node("n1", r#""gone""#)), "`mapping` node \"n1\" has `parent` \"gone\", which is not in `mapping`"),
            (r#"{"id":"d","mapping":[]}"#.to_string(), "`mapping` must be an object of nodes"),
            (r#"{"title":"no id","mapping":{}}"#.to_string(), "missing `id` (or `conversation_id`)"),
            (
                r#"{"id":"e","current_node":"n","mapping":{"n":{"message":{"author":{"role":"critic"},"content":{}}}}}"#.to_string(),
                "`mapping` node \"n\": `message.author.role` is \"critic\": expected user, assistant, system or tool",
            ),
        ];
        for (conversation, expected) in rows {
            let err = parse(path, &format!("[{conversation}]"), false).unwrap_err();
            assert_eq!(err.to_string(), format!("c.json:1: {expected}"), "for {conversation}");
        }
        let err = parse(path, "{\"mapping\": {}}", false).unwrap_err();
        assert_eq!(err.to_string(), "c.json:1: missing `id` (or `conversation_id`)");
        let err = parse(path, "[{\"id\": \"a\\u0000b\", \"mapping\": {}}]", false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.json:1: `id` cannot be a session name: it contains control characters"
        );
    }

    /// Issue 22, finding 2: an export of one conversation is an object, not an array, and is
    /// read like an array of one.
    #[test]
    fn r22_one_conversation_object() {
        let (path, text) = read("fixtures/import/chatgpt/conversations.json");
        let all: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        let one = serde_json::to_string_pretty(&all[1]).unwrap();
        let parsed = parse(&path, &format!("\n{one}\n"), false).unwrap();
        let whole = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["7c9e4d12-5f3a-4b8e-a1d0-93c2e6b7f801"]);
        assert_eq!(parsed.conversations[0], whole.conversations[1]);
    }
}

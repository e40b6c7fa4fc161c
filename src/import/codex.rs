//! Codex CLI rollout JSONL (DESIGN §8.4): one `{"timestamp", "type", "payload"}` per line.
//!
//! The session is `session_meta.payload.id`; in a file without one, the UUID the rollout file
//! is named by (`rollout-<time>-<uuid>.jsonl`, the same id), else the file's name made unique by
//! its path. `response_item` messages (`user`/`assistant`, parts `input_text`/`output_text`) are
//! the turn text; user parts that are context the harness injects (`<environment_context>`,
//! `<user_instructions>`, `<permissions instructions>`, `<turn_context>`, AGENTS.md
//! instructions, and other whole `<snake_case>…</snake_case>` blocks) are dropped, as are
//! developer and system messages and `reasoning`. `function_call` / `custom_tool_call` (and
//! `local_shell_call`, `web_search_call`) are tool calls; `function_call_output` /
//! `custom_tool_call_output` their results, joined by `call_id`. `event_msg` `user_message` /
//! `agent_message` repeat the response items: they are read only from a file without any
//! `response_item` message (older rollouts). A response item marked `"metadata":
//! {"compaction_output": true}` (a compaction's summary, on the line or in its payload) is not
//! conversation and is dropped. A turn's time is its first line's `timestamp`.

use super::error::Error;
use super::records::{self, json_text, opt_array, opt_str, req_str};
use super::turns::{Carry, Conversation, LiveLog, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::path::Path;

/// Prefixes of user text the harness injects.
const INJECTED: [&str; 7] = [
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<turn_context>",
    "<user_shell_command>",
    "<turn_aborted>",
    "# AGENTS.md instructions for ",
];

/// Parses a whole rollout file.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    parse_from(path, text, skip_invalid, None)
}

/// Parses a rollout file, or with `resumed` the part of one that starts at the line that began
/// one of its turns (`text` is that part; `resumed`, what the parse of the whole file said of
/// the lines before it: the session id, whether response items are read).
pub(crate) fn parse_from(
    path: &Path,
    text: &str,
    skip_invalid: bool,
    resumed: Option<&Carry>,
) -> Result<ParsedFile, Error> {
    let mut parsed = ParsedFile::default();
    let base = text.as_ptr() as usize;
    let lines = records::convert(path, records::lines(text), skip_invalid, &mut parsed.skipped, |v, r| {
        line(v).map(|(time, item)| (r.text.as_ptr() as usize - base, time, item))
    })?;
    let here = lines.iter().any(|(_, _, item)| matches!(item, Item::Message { event: false, .. }));
    let has_items = here || resumed.is_some_and(|carry| carry.flag);
    let mut unsure = resumed.is_some_and(|carry| !carry.flag && here);
    let mut key = resumed.map(|carry| carry.key.clone());
    let mut b = TurnBuilder::new();
    for (offset, time, item) in lines {
        b.at(offset);
        let time = time.as_deref();
        match item {
            Item::Meta(id) => {
                unsure |= resumed.is_some_and(|carry| carry.key != id);
                key.get_or_insert(id);
            }
            Item::Message { event, role, texts } => {
                if event == has_items {
                    continue; // the event repeats a response item
                }
                for text in texts.iter().filter(|t| role == Role::Assistant || !is_injected(t)) {
                    b.message(role, text, time);
                }
            }
            Item::Call { name, id, arguments } => b.tool_call(&name, id.as_deref(), &arguments, time),
            Item::Result { id, text } => b.tool_result(id.as_deref(), &text),
            Item::Other => {}
        }
    }
    let key = key.unwrap_or_else(|| fallback_key(path));
    let built = b.finish_with_starts();
    let unsure = unsure || (resumed.is_some() && built.loose > 0);
    let carry = Carry { key: key.clone(), flag: has_items };
    parsed.live = Some(LiveLog { starts: built.starts, carry, unsure });
    records::push(&mut parsed.conversations, Conversation { key, title: None, turns: built.turns });
    Ok(parsed)
}

/// The session of a file without `session_meta`: the id Codex names its rollout files by
/// (`rollout-<time>-<uuid>.jsonl`), else the file's name made unique by its path (DESIGN §8.7).
fn fallback_key(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
    match stem.len().checked_sub(36).and_then(|at| stem.get(at..)) {
        Some(id) if is_uuid(id) => id.to_string(),
        _ => records::file_session_name(path),
    }
}

/// Whether `text` is a UUID written 8-4-4-4-12 in hex.
fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What a line contributes, checked before anything is applied.
enum Item {
    Meta(String),
    Message { event: bool, role: Role, texts: Vec<String> },
    Call { name: String, id: Option<String>, arguments: String },
    Result { id: Option<String>, text: String },
    Other,
}

/// A line's timestamp and item.
fn line(v: &Value) -> Result<(Option<String>, Item), String> {
    records::object(v, "", "a JSON object with `timestamp`, `type` and `payload`")?;
    let kind = req_str(v, "", "type")?;
    let time = opt_str(v, "", "timestamp")?.map(str::to_string);
    if !matches!(kind, "session_meta" | "response_item" | "event_msg") {
        return Ok((time, Item::Other)); // turn_context, compacted, and types to come
    }
    let p = records::req_object(v, "", "payload")?;
    // The summary Codex writes at a compaction is no reply of the conversation.
    let compaction = |m: Option<&Value>| {
        m.and_then(|m| m.get("compaction_output")).and_then(Value::as_bool).unwrap_or(false)
    };
    if kind == "response_item" && (compaction(v.get("metadata")) || compaction(p.get("metadata"))) {
        return Ok((time, Item::Other));
    }
    let item = match kind {
        "session_meta" => {
            let id = req_str(p, "payload", "id")?.trim();
            if id.is_empty() {
                return Err("`payload.id` is empty".into());
            }
            Item::Meta(records::session_name(id, "payload.id")?)
        }
        "response_item" => response_item(p)?,
        _ => match req_str(p, "payload", "type")? {
            "user_message" => Item::Message {
                event: true,
                role: Role::User,
                texts: vec![opt_str(p, "payload", "message")?.unwrap_or_default().to_string()],
            },
            "agent_message" => Item::Message {
                event: true,
                role: Role::Assistant,
                texts: vec![opt_str(p, "payload", "message")?.unwrap_or_default().to_string()],
            },
            _ => Item::Other,
        },
    };
    Ok((time, item))
}

fn response_item(p: &Value) -> Result<Item, String> {
    let id = || opt_str(p, "payload", "call_id").map(|id| id.map(str::to_string));
    Ok(match req_str(p, "payload", "type")? {
        "message" => {
            let role = match req_str(p, "payload", "role")? {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "developer" | "system" => return Ok(Item::Other),
                other => {
                    return Err(format!(
                        "`payload.role` is {other:?}: expected user, assistant, developer or system"
                    ));
                }
            };
            let mut texts = Vec::new();
            for (j, part) in opt_array(p, "payload", "content")?.unwrap_or_default().iter().enumerate() {
                let at = format!("payload.content[{j}]");
                records::object(part, &at, "an object with `type`")?;
                if matches!(req_str(part, &at, "type")?, "input_text" | "output_text" | "text") {
                    texts.push(opt_str(part, &at, "text")?.unwrap_or_default().to_string());
                }
            }
            Item::Message { event: false, role, texts }
        }
        "function_call" => Item::Call {
            name: req_str(p, "payload", "name")?.to_string(),
            id: id()?,
            arguments: p.get("arguments").map(json_text).unwrap_or_default(),
        },
        "custom_tool_call" => Item::Call {
            name: req_str(p, "payload", "name")?.to_string(),
            id: id()?,
            arguments: p.get("input").map(json_text).unwrap_or_default(),
        },
        "local_shell_call" => Item::Call {
            name: "local_shell".into(),
            id: id()?,
            arguments: p.get("action").map(json_text).unwrap_or_default(),
        },
        "web_search_call" => Item::Call {
            name: "web_search".into(),
            id: None,
            arguments: p.get("action").map(json_text).unwrap_or_default(),
        },
        "function_call_output" | "custom_tool_call_output" => {
            Item::Result { id: id()?, text: p.get("output").map(output).unwrap_or_default() }
        }
        _ => Item::Other, // reasoning, compaction, tool search and types to come
    })
}

/// A tool output: a string as written, `{content}` as its content, parts as their text.
fn output(v: &Value) -> String {
    match v.get("content") {
        Some(content) if v.is_object() => records::block_text(content),
        _ => records::block_text(v),
    }
}

/// Whether user text is context the harness injected rather than what the person typed.
fn is_injected(text: &str) -> bool {
    let text = text.trim();
    if INJECTED.iter().any(|prefix| text.starts_with(prefix)) {
        return true;
    }
    // Any other whole `<name>...</name>` block whose name reads like a harness tag.
    let Some(rest) = text.strip_prefix('<') else { return false };
    let Some(name) = rest.split_once('>').map(|(name, _)| name) else { return false };
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == ' ' || c == '-')
        && (name.contains('_') || name.contains(' '))
        && text.ends_with(&format!("</{name}>"))
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    const ROLLOUT: &str =
        "fixtures/import/codex/rollout-2025-10-02T07-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl";

    #[test]
    fn response_items_without_injected_context_or_duplicates() {
        let (path, text) = read(ROLLOUT);
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d"]);
        assert_eq!(counts(&parsed), [4]);
        let turns = &parsed.conversations[0].turns;
        assert_eq!(
            turns[0].user,
            "The invoice PDF totals are off by one cent for some orders. Find out why."
        );
        assert_eq!(turns[0].time.as_deref(), Some("2025-10-02T07:00:18.358Z"));
        assert!(turns[0].assistant.starts_with("[tool: shell]\n\nEach line is rounded with `round()`"));
        assert_eq!(
            turns[0].assistant.matches("Each line is rounded").count(),
            1,
            "the event_msg copy is not added"
        );
        assert_eq!(turns[0].tools[0].call_id.as_deref(), Some("call_Kx1"));
        assert!(turns[0].tools[0].arguments.starts_with(r#"{"command": ["bash", "-lc", "rg -n"#));
        assert!(turns[0].tools[0].result.as_deref().unwrap().contains("src/totals.py:31:"));
        let patched = tools(&turns[1]);
        assert_eq!(
            patched.iter().map(|t| (t.0, t.1)).collect::<Vec<_>>(),
            [("apply_patch", Some("call_Pt2")), ("shell", Some("call_Ts3"))]
        );
        assert!(turns[1].tools[0].arguments.starts_with("*** Begin Patch\n"));
        assert!(patched.iter().all(|t| t.2 > 0), "both outputs joined by call_id: {patched:?}");
        // After the compaction the environment is injected again; it is still no user text.
        assert_eq!(turns[2].user, "顺便把 README 里的“四舍五入”说明也更新一下。");
        assert_eq!(tools(&turns[2])[1], ("web_search", None, 0));
        let last = turns.last().unwrap();
        assert_eq!(
            (last.user.as_str(), last.assistant.as_str()),
            (
                "Thanks! Anything else I should check?",
                "Check the CSV export: `export.py` still formats totals with `float`, so the same drift can reappear there."
            )
        );
        assert_absent(
            &parsed,
            &[
                "<environment_context>",
                "INJECTED-INSTRUCTIONS",
                "permissions instructions",
                "Searching for rounding",
                "COMPACTED-SUMMARY",
                "gAAAA",
                "Each line is rounded...",
            ],
        );
    }

    /// Issue 50, item 8: a compaction's summary is no part of the answer before it.
    #[test]
    fn r50_compaction_summaries_are_not_turns() {
        let (path, text) = read("fixtures/import/codex/compaction-output.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        let turns: Vec<(&str, &str)> =
            parsed.conversations[0].turns.iter().map(|t| (t.user.as_str(), t.assistant.as_str())).collect();
        assert_eq!(
            turns,
            [
                (
                    "How should the worker take the Redis lock for the nightly ledger job?",
                    "Take it with SET ledger-lock <token> NX PX 45000."
                ),
                ("And who renews it?", "A heartbeat task renews it every 15 seconds."),
            ]
        );
        assert_absent(&parsed, &["COMPACTION-SUMMARY"]);
    }

    #[test]
    fn event_messages_when_there_are_no_response_messages() {
        let (path, text) = read("fixtures/import/codex/events-only.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["0198f1e2-d3c4-7b5a-8e9f-0a1b2c3d4e5f"]);
        assert_eq!(counts(&parsed), [2]);
        let turns = &parsed.conversations[0].turns;
        assert_eq!(turns[0].user, "Why does `hugo server` ignore my new post?");
        assert_eq!(
            turns[0].assistant,
            "[tool: shell]\n\nThe post has `draft: true`; run `hugo server -D` or set `draft: false`."
        );
        assert_eq!(
            (turns[1].user.as_str(), turns[1].assistant.as_str()),
            ("Fixed, thanks 🙏", "Glad it works.")
        );
        assert_absent(&parsed, &["Keep answers short", "Checking front matter"]);
    }

    #[test]
    fn a_call_without_name_fails_the_file_or_is_skipped() {
        let name = "fixtures/import/codex/bad_payload.jsonl";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(parsed.skipped, [Skipped { line: 7, reason: "missing `payload.name`".into() }]);
        assert_eq!(counts(&parsed), [1]);
        assert!(parsed.conversations[0].turns[0].tools.is_empty());
    }

    #[test]
    fn without_session_meta_the_file_names_the_session() {
        let text = concat!(
            r#"{"timestamp":"t1","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
            "\n",
            r#"{"timestamp":"t2","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}}"#,
        );
        let parsed = parse(Path::new("logs/rollout-x.jsonl"), text, false).unwrap();
        assert_eq!(keys(&parsed), [records::file_session_name(Path::new("logs/rollout-x.jsonl"))]);
        assert!(keys(&parsed)[0].starts_with("rollout-x.jsonl@"), "{:?}", keys(&parsed));
        let named =
            "sessions/2025/10/02/rollout-2025-10-02T07-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl";
        let parsed = parse(Path::new(named), text, false).unwrap();
        assert_eq!(keys(&parsed), ["0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d"], "the id the file is named by");
        let err =
            parse(Path::new("r.jsonl"), r#"{"type":"response_item","payload":"x"}"#, false).unwrap_err();
        assert_eq!(err.to_string(), "r.jsonl:1: `payload` must be an object");
        let err = parse(
            Path::new("r.jsonl"),
            r#"{"type":"response_item","payload":{"type":"message","role":"critic"}}"#,
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "r.jsonl:1: `payload.role` is \"critic\": expected user, assistant, developer or system"
        );
    }

    #[test]
    fn harness_blocks_are_injected_and_typed_text_is_not() {
        let rows = [
            ("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>", true),
            ("<user_instructions>\nBe terse.\n</user_instructions>", true),
            ("<permissions instructions>\nNo network.\n</permissions instructions>", true),
            ("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>x</INSTRUCTIONS>", true),
            ("<subagent_notification>done</subagent_notification>", true),
            ("<div>hello</div>", false),
            ("Why does <environment_context> appear in my prompt?", false),
            ("<user_note> unclosed", false),
            ("修复 <b>登录</b> 页面", false),
        ];
        for (text, expected) in rows {
            assert_eq!(is_injected(text), expected, "is_injected({text:?})");
        }
    }
}

//! ShareGPT (DESIGN §8.6): `{"id"?, "conversations": [{"from", "value"}], "system"?,
//! "tools"?}`, as a JSON array or one object per line.
//!
//! `from`: `human`/`user` is the user; `gpt`/`assistant`/`chatgpt`/`bing`/`bard`/`model` the
//! assistant; `system` (and the top-level `system`) is dropped; `function_call` is a tool call
//! whose `value` is the call's JSON (`{name, arguments}`, or an array of them); `observation`
//! (or `tool`) is its result. The session is the record's `id`, else `<file name>#<n>` (`n`: the
//! line in JSONL, the element's position in an array).

use super::error::Error;
use super::records::{self, json_text, opt_session_id, opt_str, req_array, req_str};
use super::turns::{Conversation, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::path::Path;

/// Parses a whole ShareGPT file.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    records::conversations_per_record(
        path,
        text,
        skip_invalid,
        "a JSON array of `{\"conversations\": [...]}` objects",
        conversation,
    )
}

fn conversation(v: &Value, default_key: String) -> Result<Conversation, String> {
    records::object(v, "", "a JSON object with `conversations`")?;
    let key = opt_session_id(v, "", "id")?.unwrap_or(default_key);
    let mut b = TurnBuilder::new();
    let mut observations: Vec<&str> = Vec::new();
    for (i, m) in req_array(v, "", "conversations")?.iter().enumerate() {
        let at = format!("conversations[{i}]");
        records::object(m, &at, "an object with `from` and `value`")?;
        let from = req_str(m, &at, "from")?;
        let value = opt_str(m, &at, "value")?.unwrap_or_default();
        if matches!(from, "observation" | "tool") {
            observations.push(value);
            continue;
        }
        attach(&mut b, &mut observations);
        match from {
            "human" | "user" => b.message(Role::User, value, None),
            "gpt" | "assistant" | "chatgpt" | "bing" | "bard" | "model" => {
                b.message(Role::Assistant, value, None)
            }
            "system" => {}
            "function_call" => calls(&mut b, value),
            other => {
                return Err(format!(
                    "`{at}.from` is {other:?}: expected human, gpt, system, function_call or observation"
                ));
            }
        }
    }
    attach(&mut b, &mut observations);
    Ok(Conversation { key, title: None, turns: b.finish() })
}

/// Attaches consecutive observations to the calls before them, in order (the builder gives an
/// id-less result to the earliest call still waiting for one).
fn attach(b: &mut TurnBuilder, observations: &mut Vec<&str>) {
    for result in observations.drain(..) {
        b.tool_result(None, result);
    }
}

/// The tool calls of a `function_call` value: `{name, arguments}` or an array of them; a value
/// that is not such JSON is one call named `function_call` with the value as its arguments.
fn calls(b: &mut TurnBuilder, value: &str) {
    fn call(v: &Value) -> Option<(&str, Option<&Value>)> {
        v.get("name").and_then(Value::as_str).map(|name| (name, v.get("arguments")))
    }
    let parsed: Option<Value> = serde_json::from_str(value).ok();
    let found: Vec<(&str, Option<&Value>)> = match &parsed {
        Some(Value::Array(items)) => items.iter().filter_map(call).collect(),
        Some(v) => call(v).into_iter().collect(),
        None => Vec::new(),
    };
    if found.is_empty() {
        b.tool_call("function_call", None, value, None);
    }
    for (name, arguments) in found {
        b.tool_call(name, None, &arguments.map(json_text).unwrap_or_default(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, file_key, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    #[test]
    fn json_array() {
        let (path, text) = read("fixtures/import/sharegpt/conversations.json");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(
            keys(&parsed),
            ["sg-8841", &*file_key("fixtures/import/sharegpt/conversations.json", 2), "1024"]
        );
        assert_eq!(counts(&parsed), [3, 2, 2]);
        let first = &parsed.conversations[0].turns[0];
        assert_eq!(first.user, "I have a 6-hour layover in Istanbul. Is it worth leaving the airport?");
        assert!(first.assistant.starts_with("Yes, if you have an e-Visa"));
        let weather = &parsed.conversations[1].turns;
        assert_eq!(tools(&weather[0]), [("get_current_weather", None, 57)]);
        assert_eq!(weather[0].tools[0].arguments, r#"{"location":"Lisbon, PT","unit":"celsius"}"#);
        assert_eq!(
            weather[1].assistant,
            "[tool: get_current_weather]\n\n[tool: get_current_weather]\n\nPorto: 17 °C and cloudy. Faro: 24 °C and sunny."
        );
        assert_eq!(
            tools(&weather[1]),
            [
                ("get_current_weather", None, r#"{"temperature": 17, "condition": "cloudy"}"#.len() as u64),
                ("get_current_weather", None, r#"{"temperature": 24, "condition": "sunny"}"#.len() as u64)
            ]
        );
        let last = parsed.conversations[2].turns.last().unwrap();
        assert_eq!(last.user, "举个 JavaScript 的例子？");
        assert!(last.assistant.ends_with("每次调用都加一。"));
        assert_absent(&parsed, &["helpful travel assistant"]);
    }

    #[test]
    fn json_lines() {
        let (path, text) = read("fixtures/import/sharegpt/vicuna.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["vicuna-0001", &*file_key("fixtures/import/sharegpt/vicuna.jsonl", 2)]);
        assert_eq!(counts(&parsed), [2, 1]);
        assert_eq!(
            parsed.conversations[0].turns[1].assistant,
            "Green bar, finally / the build server hums softly / I can sleep tonight 🌙"
        );
        assert_eq!(parsed.conversations[1].turns[0].user, "Is 0.1 + 0.2 == 0.3 in Python?");
    }

    #[test]
    fn an_unknown_speaker_fails_the_file_or_is_skipped() {
        let name = "fixtures/import/sharegpt/bad_from.json";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(keys(&parsed), ["1024"]);
        let reason = "`conversations[1].from` is \"narrator\": expected human, gpt, system, function_call or observation";
        assert_eq!(parsed.skipped, [Skipped { line: 23, reason: reason.into() }]);
    }

    #[test]
    fn a_call_that_is_not_json_is_kept_as_written() {
        let line = r#"{"conversations":[{"from":"human","value":"ls"},{"from":"function_call","value":"shell(ls)"},{"from":"observation","value":"a b"},{"from":"gpt","value":"Two files."}]}"#;
        let parsed = parse(Path::new("x.jsonl"), line, false).unwrap();
        let turn = &parsed.conversations[0].turns[0];
        assert_eq!(tools(turn), [("function_call", None, 3)]);
        assert_eq!(turn.tools[0].arguments, "shell(ls)");
        let err = parse(Path::new("x.jsonl"), r#"{"conversations":{}}"#, false).unwrap_err();
        assert_eq!(err.to_string(), "x.jsonl:1: `conversations` must be an array");
    }
}

//! OpenAI chat "messages" (DESIGN §8.5): one conversation per line,
//! `{"messages": [{role, content, name?}], "tools"?}`, or a Batch API request line
//! `{custom_id, method, url, body: {model, messages}}`. A JSON array of the same objects is read
//! too.
//!
//! `content` is a string, null, or an array of parts (`{type: "text", text}`; image and audio
//! parts are not text). System and developer messages are dropped. An assistant's `tool_calls`
//! (and the legacy `function_call`) are tool calls; `role: "tool"` replies are their results,
//! joined by `tool_call_id` (legacy `role: "function"` replies by order). The session is the
//! record's `id` or `custom_id`, else `<file name>#<n>` (`n`: the line in JSONL, the element's
//! position in an array).

use super::error::Error;
use super::records::{self, field, json_text, opt_array, opt_session_id, opt_str, req_array, req_str};
use super::turns::{Conversation, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::path::Path;

/// Parses a whole file of OpenAI chat messages.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    records::conversations_per_record(
        path,
        text,
        skip_invalid,
        "a JSON array of `{\"messages\": [...]}` objects",
        conversation,
    )
}

fn conversation(v: &Value, default_key: String) -> Result<Conversation, String> {
    records::object(v, "", "a JSON object with `messages`")?;
    // A Batch API line carries the messages in its request `body`.
    let (holder, at) = match v.get("body") {
        Some(body) if v.get("messages").is_none() && body.is_object() => (body, "body"),
        _ => (v, ""),
    };
    let messages = req_array(holder, at, "messages")?;
    let key = match opt_session_id(v, "", "id")? {
        Some(id) => id,
        None => opt_session_id(v, "", "custom_id")?.unwrap_or(default_key),
    };
    let mut b = TurnBuilder::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("{}[{i}]", field(at, "messages"));
        records::object(m, &at, "an object with `role` and `content`")?;
        match req_str(m, &at, "role")? {
            "system" | "developer" => {}
            "user" => b.message(Role::User, &content(m, &at)?, None),
            "assistant" => {
                b.message(Role::Assistant, &content(m, &at)?, None);
                for (j, call) in opt_array(m, &at, "tool_calls")?.unwrap_or_default().iter().enumerate() {
                    let at = format!("{at}.tool_calls[{j}]");
                    records::object(call, &at, "an object with `id` and `function`")?;
                    let id = opt_str(call, &at, "id")?;
                    let function = records::req_object(call, &at, "function")?;
                    let (name, arguments) = function_call(function, &format!("{at}.function"))?;
                    b.tool_call(name, id, &arguments, None);
                }
                if let Some(call) = m.get("function_call").filter(|c| !c.is_null()) {
                    let at = format!("{at}.function_call");
                    records::object(call, &at, "an object with `name` and `arguments`")?;
                    let (name, arguments) = function_call(call, &at)?;
                    b.tool_call(name, None, &arguments, None);
                }
            }
            "tool" => b.tool_result(opt_str(m, &at, "tool_call_id")?, &content(m, &at)?),
            "function" => b.tool_result(None, &content(m, &at)?),
            other => {
                return Err(format!(
                    "`{at}.role` is {other:?}: expected system, developer, user, assistant, tool or function"
                ));
            }
        }
    }
    Ok(Conversation { key, title: None, turns: b.finish() })
}

/// The name and arguments of `{name, arguments}` (arguments: a JSON string, kept as written).
fn function_call<'v>(function: &'v Value, at: &str) -> Result<(&'v str, String), String> {
    let name = req_str(function, at, "name")?;
    Ok((name, function.get("arguments").map(json_text).unwrap_or_default()))
}

/// A message's text: `content` as a string, or the text of its parts.
fn content(m: &Value, at: &str) -> Result<String, String> {
    match m.get("content") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match part {
                    Value::String(s) => texts.push(s.as_str()),
                    Value::Object(_) => {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            texts.push(text);
                        }
                    }
                    _ => {
                        return Err(format!(
                            "`{at}.content` parts must be objects like {{\"type\": \"text\", \"text\": ...}}"
                        ));
                    }
                }
            }
            Ok(texts.join("\n\n"))
        }
        Some(_) => Err(format!("`{at}.content` must be a string, an array of parts or null")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, file_key, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    #[test]
    fn chat_jsonl() {
        let (path, text) = read("fixtures/import/openai/chat.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(
            keys(&parsed),
            [
                "support-4471",
                &*file_key("fixtures/import/openai/chat.jsonl", 2),
                "request-7",
                "zh-weather-02"
            ]
        );
        assert_eq!(counts(&parsed), [4, 2, 1, 2]);
        let first = &parsed.conversations[0].turns[0];
        assert_eq!(first.user, "Hi! My order hasn't arrived yet. Order number AC-20931.");
        assert_eq!(
            first.assistant,
            "[tool: get_order_status]\n\nYour order AC-20931 is in transit with DHL (tracking JD014600006281) \
             and should arrive by April 18."
        );
        assert_eq!(tools(first), [("get_order_status", Some("call_q1Xb7"), 86)]);
        assert_eq!(first.tools[0].arguments, r#"{"order_id":"AC-20931"}"#);
        // Parts: text parts joined, the image part left out.
        assert_eq!(
            parsed.conversations[1].turns[0].user,
            "Why is this pod stuck in CrashLoopBackOff?\n\nThe last state says OOMKilled, exit code 137."
        );
        // A Batch API request: the prompt without a reply.
        let batch = &parsed.conversations[2].turns[0];
        assert_eq!(
            (batch.user.as_str(), batch.assistant.as_str()),
            ("The battery lasts two days, but the camera is disappointing in low light.", "")
        );
        // Two calls answered out of order are joined by id.
        let weather = &parsed.conversations[3].turns[0];
        assert_eq!(
            tools(weather),
            [
                ("get_weather", Some("call_w88"), "小雨转阴，18–23°C，降水概率 70%".len() as u64),
                ("get_air_quality", Some("call_w89"), "AQI 42（优）".len() as u64)
            ]
        );
        let last = parsed.conversations[3].turns.last().unwrap();
        assert_eq!(
            (last.user.as_str(), last.assistant.as_str()),
            ("那后天呢？", "后天预计多云，20–26°C，适合出门。")
        );
        assert_absent(
            &parsed,
            &[
                "Acme Outfitters' support assistant",
                "senior Kubernetes SRE",
                "你是一个天气助手",
                "Classify the sentiment",
                "kubectl-describe.png",
            ],
        );
        assert!(parsed.skipped.is_empty());
    }

    #[test]
    fn batch_api_lines_are_detected_and_read() {
        let text = r#"{"custom_id":"req-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Summarise RFC 9110 in one line."}]}}"#;
        let path = Path::new("batch.jsonl");
        assert_eq!(super::super::detect(path, text).unwrap(), super::super::Format::OpenAi);
        let parsed = parse(path, text, false).unwrap();
        assert_eq!(keys(&parsed), ["req-1"]);
        assert_eq!(parsed.conversations[0].turns[0].user, "Summarise RFC 9110 in one line.");
    }

    #[test]
    fn json_array_of_conversations() {
        let (path, text) = read("fixtures/import/openai/messages.json");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(
            keys(&parsed),
            ["qa-1", &*file_key("fixtures/import/openai/messages.json", 2)],
            "without an id: the element's position"
        );
        assert_eq!(counts(&parsed), [1, 1]);
        assert_eq!(parsed.conversations[1].turns[0].user, "And 422?");
    }

    #[test]
    fn bad_role_fails_the_file_or_is_skipped() {
        let name = "fixtures/import/openai/bad_role.jsonl";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(keys(&parsed), ["support-4471", &*file_key("fixtures/import/openai/bad_role.jsonl", 3)]);
        let reason =
            "`messages[3].role` is \"robot\": expected system, developer, user, assistant, tool or function";
        assert_eq!(parsed.skipped, [Skipped { line: 2, reason: reason.into() }]);
    }

    #[test]
    fn legacy_function_calls_and_bad_shapes() {
        let path = Path::new("f.jsonl");
        let text = concat!(
            r#"{"messages":[{"role":"user","content":"Weather in Oslo?"},"#,
            r#"{"role":"assistant","content":null,"function_call":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}},"#,
            r#"{"role":"function","name":"weather","content":"-3 C, snow"},{"role":"assistant","content":"-3 °C and snowing."}]}"#,
            "\n\n",
            r#"{"messages":[{"role":"user","content":7}]}"#,
            "\n",
            r#"["messages"]"#,
            "\n",
            r#"{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","function":{"arguments":"{}"}}]}]}"#,
            "\n",
            r#"{"messages":[{"role":"user","content":"hi"}"#,
        );
        let parsed = parse(path, text, true).unwrap();
        assert_eq!(keys(&parsed), [&*file_key("f.jsonl", 1)]);
        let turn = &parsed.conversations[0].turns[0];
        assert_eq!(turn.assistant, "[tool: weather]\n\n-3 °C and snowing.");
        assert_eq!(tools(turn), [("weather", None, 10)]);
        let skipped: Vec<(u64, &str)> = parsed.skipped.iter().map(|s| (s.line, s.reason.as_str())).collect();
        assert_eq!(
            skipped,
            [
                (3, "`messages[0].content` must be a string, an array of parts or null"),
                (4, "expected a JSON object with `messages`"),
                (5, "missing `messages[0].tool_calls[0].function.name`"),
                (6, "invalid JSON: EOF while parsing a list at line 1 column 43"),
            ]
        );
    }
}

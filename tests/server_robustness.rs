//! `ctxgate serve` under bad input and hard stops: every bad request gets an error response and
//! the server answers the next request; inputs over the limits are refused with a clear error;
//! messages the SDK cannot send (lone surrogates, invalid JSON) are answered over raw stdio;
//! file names that are not UTF-8 are imported and reported; a server killed with SIGKILL in the
//! middle of `record_turn` calls leaves an index that verifies and holds every acknowledged turn.
//! Also: every tool declares an output schema, and its results conform to it.

mod common;

use common::mcp::{Client, McpResult, RawServer, call, check_schema, ok, start, tool_error};
use common::{TestEnv, add_topics};
use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::time::Duration;

/// How long any one call may take before it counts as a hang.
const PATIENCE: Duration = Duration::from_secs(120);

/// An index with the three [`common::TOPICS`] turns in session "work".
fn seeded() -> McpResult<TestEnv> {
    let env = TestEnv::new().map_err(|e| e.to_string())?;
    add_topics(&env, "work").map_err(|e| e.to_string())?;
    Ok(env)
}

/// Proves the server still serves: a read that must succeed, and the session still has `turns`.
async fn still_serving(client: &Client, turns: u64, after: &str) -> McpResult {
    let sessions = tokio::time::timeout(PATIENCE, ok(client, "list_sessions", json!({})))
        .await
        .map_err(|_| format!("list_sessions hung after {after}"))?
        .map_err(|e| format!("list_sessions failed after {after}: {e}"))?;
    let work = sessions["sessions"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "work"));
    assert_eq!(work.map(|s| s["turns"].clone()), Some(json!(turns)), "after {after}: {sessions}");
    let gate = ok(client, "gate", json!({"session": "work", "query": "redis lock ttl"})).await?;
    assert!(gate["decision"]["topic"].is_string(), "after {after}: {gate}");
    Ok(())
}

/// The JSON-RPC error of a call that must fail at the protocol level, within [`PATIENCE`].
async fn protocol_error(client: &Client, params: CallToolRequestParams) -> McpResult<(i32, String)> {
    match tokio::time::timeout(PATIENCE, client.call_tool(params)).await {
        Err(_) => Err("no response: the request hung".into()),
        Ok(Err(ServiceError::McpError(e))) => Ok((e.code.0, e.message.to_string())),
        Ok(other) => Err(format!("expected a JSON-RPC error, got {other:?}").into()),
    }
}

fn params(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(common::mcp::args(arguments))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_tools_missing_and_mistyped_arguments_are_errors_and_the_server_keeps_serving() -> McpResult {
    let env = seeded()?;
    let client = start(&env.db).await?;

    // Unknown tools: a JSON-RPC invalid-params error naming the tools.
    for name in ["no_such_tool", "", "SELECT_CONTEXT", "select_context\u{0}"] {
        let (code, message) = protocol_error(&client, params(name, json!({}))).await?;
        assert_eq!(code, -32602, "{name:?}: {message}");
        assert!(message.contains("select_context"), "{name:?}: {message}");
        still_serving(&client, 3, &format!("unknown tool {name:?}")).await?;
    }

    // Missing arguments: every tool with required arguments, called with none.
    for (tool, missing) in [
        ("select_context", "session"),
        ("build_prompt", "session"),
        ("record_turn", "session"),
        ("gate", "session"),
        ("import_logs", "paths"),
    ] {
        let (kind, message) = tool_error(&client, tool, json!({})).await?;
        assert_eq!(kind, "bad_input", "{tool}: {message}");
        assert!(message.contains(missing), "{tool}: {message}");
        // No `arguments` member at all.
        let bare = CallToolRequestParams::new(tool.to_string());
        let result = client.call_tool(bare).await?;
        assert_eq!(result.is_error, Some(true), "{tool} without arguments: {result:?}");
        still_serving(&client, 3, &format!("{tool} without {missing}")).await?;
    }
    let (kind, _) = tool_error(&client, "record_turn", json!({"session": "work", "user": "u"})).await?;
    assert_eq!(kind, "bad_input");

    // Wrong types, one argument at a time.
    let wrong: [(&str, Value); 14] = [
        ("select_context", json!({"session": 5, "query": "x"})),
        ("select_context", json!({"session": "work", "query": ["x"]})),
        ("select_context", json!({"session": "work", "query": null})),
        ("select_context", json!({"session": "work", "query": "x", "budget": -1})),
        ("select_context", json!({"session": "work", "query": "x", "budget": 1.5})),
        ("select_context", json!({"session": "work", "query": "x", "budget": 1u64 << 40})),
        ("select_context", json!({"session": "work", "query": "x", "as_of": "two"})),
        ("build_prompt", json!({"session": "work", "query": {"text": "x"}})),
        ("record_turn", json!({"session": "work", "user": true, "assistant": "b"})),
        ("gate", json!({"session": ["work"], "query": "x"})),
        ("import_logs", json!({"paths": "/tmp/log.jsonl"})),
        ("import_logs", json!({"paths": [1, 2]})),
        ("import_logs", json!({"paths": ["a.jsonl"], "format": "yaml"})),
        ("import_logs", json!({"paths": ["a.jsonl"], "skip_invalid": "yes"})),
    ];
    for (tool, arguments) in wrong {
        let (kind, message) = tool_error(&client, tool, arguments.clone()).await?;
        assert_eq!(kind, "bad_input", "{tool} {arguments}: {message}");
        assert!(message.contains(tool), "the message names the tool: {message}");
        still_serving(&client, 3, &format!("{tool} {arguments}")).await?;
    }
    client.cancel().await?;
    Ok(())
}

/// The MCP Inspector's CLI sends every argument as a string: whole numbers written as strings
/// are taken as the numbers (issue 54, finding 20); other text is still refused, naming what is
/// accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_numbers_sent_as_strings_are_taken() -> McpResult {
    let env = seeded()?;
    let client = start(&env.db).await?;
    let selected = ok(
        &client,
        "select_context",
        json!({"session": "work", "query": "redis lock", "budget": "2000", "as_of": "3"}),
    )
    .await?;
    assert_eq!(selected["budget"]["limit"], json!(2000), "{selected}");
    let prompt =
        ok(&client, "build_prompt", json!({"session": "work", "query": "redis lock", "budget": "900"}))
            .await?;
    assert!(prompt["prompt"].is_string(), "{prompt}");
    let found = ok(&client, "search_history", json!({"query": "redis lock", "limit": " 1 "})).await?;
    assert_eq!(found["hits"].as_array().map(Vec::len), Some(1), "{found}");
    ok(&client, "gate", json!({"session": "work", "query": "redis lock", "as_of": "2"})).await?;
    for bad in ["two", "-1", "1.5", "", "99999999999", "0x10"] {
        let arguments = json!({"session": "work", "query": "redis lock", "budget": bad});
        let (kind, message) = tool_error(&client, "select_context", arguments).await?;
        assert_eq!(kind, "bad_input", "{bad:?}: {message}");
        assert!(message.contains("a whole number from 0 to 4294967295"), "{bad:?}: {message}");
    }
    client.cancel().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn huge_inputs_are_refused_with_a_clear_error_or_handled_within_the_limits() -> McpResult {
    let env = seeded()?;
    let client = start(&env.db).await?;
    let limit = ctxgate::server::MAX_MESSAGE_BYTES;

    // A 20 MB query: over the message limit, answered with a JSON-RPC error (not dropped).
    let query = "redis lock ".repeat(20_000_000 / 11);
    let (code, message) =
        protocol_error(&client, params("select_context", json!({"session": "work", "query": query}))).await?;
    assert_eq!(code, -32600, "{message}");
    assert!(message.contains(&limit.to_string()) && message.contains("limit"), "{message}");
    still_serving(&client, 3, "a 20 MB query").await?;

    // A 9 MiB query fits in a message but is over the library's 8 MiB per text: a tool error.
    let query = "x".repeat(9 * 1024 * 1024);
    let (kind, message) =
        tool_error(&client, "select_context", json!({"session": "work", "query": query})).await?;
    assert_eq!(kind, "bad_input", "{message}");
    assert!(message.contains("limit"), "{message}");
    still_serving(&client, 3, "a 9 MiB query").await?;

    // A 5 MB user text is within the limits: recorded, and selections still work.
    let user = "The nightly export job writes parquet files to the archive bucket. ".repeat(5_000_000 / 68);
    let added = tokio::time::timeout(
        PATIENCE,
        ok(&client, "record_turn", json!({"session": "work", "user": user, "assistant": "Noted."})),
    )
    .await
    .map_err(|_| "record_turn of 5 MB hung")??;
    assert_eq!(added["turn_id"], json!(3), "{added}");
    let selected =
        ok(&client, "select_context", json!({"session": "work", "query": "parquet archive export"})).await?;
    assert!(selected["blocks"].as_array().is_some_and(|b| b.iter().any(|b| b["turn_id"] == 3)), "{selected}");
    still_serving(&client, 4, "a 5 MB turn").await?;

    // Two texts of 8 MiB each: each within its limit, together over the message limit.
    let text = "y".repeat(8 * 1024 * 1024);
    let (code, message) = protocol_error(
        &client,
        params("record_turn", json!({"session": "work", "user": text, "assistant": text})),
    )
    .await?;
    assert_eq!(code, -32600, "{message}");
    still_serving(&client, 4, "a 16 MiB turn").await?;

    // A session name over its 256-byte limit, and many paths to import, all missing.
    let (kind, _) =
        tool_error(&client, "gate", json!({"session": "s".repeat(300), "query": "redis"})).await?;
    assert_eq!(kind, "bad_input");
    let missing: Vec<String> = (0..10_000).map(|i| format!("/nonexistent/ctxgate/{i}.jsonl")).collect();
    // Each is reported failed with its reason, as the CLI lists a list of paths (issue 54,
    // finding 12).
    let report = ok(&client, "import_logs", json!({"paths": missing})).await?;
    assert_eq!(report["files_failed"], json!(10_000), "{:.300}", report.to_string());
    let reason = report["files"][9_999]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("No such file or directory"), "{reason}");
    still_serving(&client, 4, "10,000 missing paths").await?;
    client.cancel().await?;
    Ok(())
}

/// Threads of a running process, from `/proc` (Linux).
#[cfg(target_os = "linux")]
fn threads_of(pid: u32) -> McpResult<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("Threads:")).ok_or("no Threads line")?;
    Ok(line.trim_start_matches("Threads:").trim().parse()?)
}

/// A client that writes many requests before reading any answer gets every answer, and the
/// server does not start a thread per waiting request: it answers one call at a time anyway, and
/// 300 pipelined calls once left 300 blocking threads.
#[cfg(target_os = "linux")]
#[test]
fn pipelined_calls_are_all_answered_without_a_thread_each() -> McpResult {
    let env = seeded()?;
    let mut server = RawServer::start(&env.db)?;
    let before = threads_of(server.child.id())?;
    let calls = 200u64;
    for id in 1..=calls {
        server.call_raw(id, "select_context", r#"{"session": "work", "query": "redis lock ttl"}"#)?;
    }
    // Answers may come in any order: collect them by id.
    let mut answered = std::collections::BTreeSet::new();
    let mut most_threads = before;
    while answered.len() < calls as usize {
        let response = server
            .next_message(Duration::from_secs(120))?
            .ok_or_else(|| format!("{} of {calls} calls answered, then nothing", answered.len()))?;
        let Some(id) = response["id"].as_u64() else { continue };
        assert!(response["result"]["structuredContent"]["blocks"].is_array(), "call {id}: {response}");
        assert!(answered.insert(id), "call {id} answered twice");
        most_threads = most_threads.max(threads_of(server.child.id())?);
    }
    assert_eq!(answered.into_iter().collect::<Vec<_>>(), (1..=calls).collect::<Vec<_>>());
    // Selection starts its scoring pool (one thread per core) and one blocking thread serves
    // the calls; a thread per waiting call would be ~200.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    assert!(
        most_threads <= before + cores + 8,
        "{most_threads} threads while answering {calls} pipelined calls ({before} before, {cores} cores)"
    );
    Ok(())
}

/// Reads share the index: two `select_context` calls sent together run side by side in one
/// server (each call's begin and end are logged at debug level), where they once ran one after
/// the other. Repeated until the calls overlap, bounded.
#[test]
fn queries_sent_together_run_side_by_side() -> McpResult {
    let env = TestEnv::new().map_err(|e| e.to_string())?;
    // Enough turns that a selection takes a while (debug build).
    let log = env.dir.path().join("long.jsonl");
    let mut lines = String::new();
    for i in 0..3000 {
        lines.push_str(&format!(
            "{{\"session\": \"work\", \"user\": \"redis lock ttl {i} renew the lease\", \"assistant\": \"PX {i} and renew every {} s\"}}\n",
            i % 17
        ));
    }
    std::fs::write(&log, lines)?;
    common::run_at(&env.db, [std::ffi::OsStr::new("import"), log.as_os_str()]).map_err(|e| e.to_string())?;
    let stderr_path = env.dir.path().join("serve.log");
    let stderr = std::fs::File::create(&stderr_path)?;
    let mut server = RawServer::start_with(&env.db, &["-vv"], stderr.into())?;
    let query = r#"{"session": "work", "query": "redis lock ttl renew lease"}"#;
    let mut overlapped = false;
    for attempt in 0..20u64 {
        let (a, b) = (attempt * 2 + 1, attempt * 2 + 2);
        server.call_raw(a, "select_context", query)?;
        server.call_raw(b, "select_context", query)?;
        // The answers may come in either order (that is the point): collect both by id.
        let mut answered = Vec::new();
        while answered.len() < 2 {
            let response = server.next_message(PATIENCE)?.ok_or("no answer to a selection")?;
            let Some(id) = response["id"].as_u64().filter(|id| [a, b].contains(id)) else { continue };
            assert!(response["result"]["structuredContent"]["blocks"].is_array(), "{response}");
            answered.push(id);
        }
        answered.sort_unstable();
        assert_eq!(answered, [a, b]);
        let log = std::fs::read_to_string(&stderr_path)?;
        let events: Vec<bool> = log
            .lines()
            .filter_map(|l| {
                if l.contains("read call begins") {
                    Some(true)
                } else if l.contains("read call ends") {
                    Some(false)
                } else {
                    None
                }
            })
            .collect();
        // Two begins in a row: the second call began before the first ended.
        if events.windows(2).any(|w| w[0] && w[1]) {
            overlapped = true;
            break;
        }
    }
    assert!(overlapped, "40 selections sent in pairs never ran at the same time");
    Ok(())
}

/// Messages the SDK cannot produce, sent as raw lines: each is answered with a JSON-RPC error
/// carrying its id, and the next request is served.
#[test]
fn lone_surrogates_and_invalid_json_over_raw_stdio_get_error_responses() -> McpResult {
    let env = seeded()?;
    let mut server = RawServer::start(&env.db)?;
    let wait = Duration::from_secs(60);
    let mut id = 1;
    let serves = |server: &mut RawServer, id: &mut u64, after: &str| -> McpResult {
        *id += 1;
        server.call_raw(*id, "list_sessions", "{}")?;
        let response = server.response(*id, wait).map_err(|e| format!("after {after}: {e}"))?;
        assert_eq!(
            response["result"]["structuredContent"]["sessions"][0]["turns"],
            json!(3),
            "after {after}: {response}"
        );
        *id += 1;
        Ok(())
    };

    let cases: [(&str, &str); 6] = [
        ("import_logs", r#"{"paths": ["/tmp/\ud800.jsonl"]}"#),
        ("import_logs", r#"{"paths": ["/tmp/ok.jsonl", "\udc00\ud800"]}"#),
        ("select_context", r#"{"session": "work", "query": "redis \ud83d lock"}"#),
        ("record_turn", r#"{"session": "\ud800", "user": "u", "assistant": "a"}"#),
        ("select_context", r#"{"session": "work", "query": "unterminated}"#),
        (
            "select_context",
            &format!(r#"{{"session": "work", "query": {}"x"{}}}"#, "[".repeat(300), "]".repeat(300)),
        ),
    ];
    for (tool, arguments) in cases {
        server.call_raw(id, tool, arguments)?;
        let response = server.response(id, wait).map_err(|e| format!("{tool} {arguments:.80}: {e}"))?;
        assert_eq!(response["error"]["code"], json!(-32700), "{response}");
        let message = response["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("not valid JSON"), "{message}");
        serves(&mut server, &mut id, &format!("{tool} {arguments:.80}"))?;
    }
    // A string id is answered too; a notification with bad JSON has no one to answer and is
    // dropped silently.
    server.send_raw(br#"{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"gate","arguments":{"session":"\udfff","query":"q"}}}"#)?;
    let response = server.next_message(wait)?.ok_or("no response to a string id")?;
    assert_eq!(
        (response["id"].clone(), response["error"]["code"].clone()),
        (json!("s-1"), json!(-32700)),
        "{response}"
    );
    server
        .send_raw(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"\ud800"}}"#)?;
    server.send_raw(b"this is not JSON at all")?;
    serves(&mut server, &mut id, "a notification and garbage")?;
    assert!(server.child.try_wait()?.is_none(), "the server exited");
    Ok(())
}

/// A request of another JSON-RPC version, or of none, is answered with an error that carries
/// its id, so the client can match it (issue 54, finding 21); the server then serves on.
#[test]
fn a_request_that_is_not_json_rpc_2_0_is_answered_with_its_id() -> McpResult {
    let env = seeded()?;
    let mut server = RawServer::start(&env.db)?;
    let wait = Duration::from_secs(60);
    let requests = [
        (41, r#"{"jsonrpc":"1.0","id":41,"method":"tools/list"}"#, r#""jsonrpc": "1.0""#),
        (
            42,
            r#"{"id":42,"method":"tools/call","params":{"name":"list_sessions","arguments":{}}}"#,
            "no \"jsonrpc\"",
        ),
        (43, r#"{"jsonrpc":2,"id":43,"method":"ping"}"#, r#""jsonrpc": 2"#),
    ];
    for (id, line, found) in requests {
        server.send_raw(line.as_bytes())?;
        let response = server.response(id, wait).map_err(|e| format!("{line}: {e}"))?;
        assert_eq!(response["error"]["code"], json!(-32600), "{response}");
        let message = response["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("JSON-RPC 2.0") && message.contains(found), "{message}");
    }
    server.call_raw(44, "list_sessions", "{}")?;
    let response = server.response(44, wait)?;
    assert_eq!(response["result"]["structuredContent"]["sessions"][0]["turns"], json!(3), "{response}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn file_names_that_are_not_utf8_are_imported_and_reported_lossily() -> McpResult {
    use std::os::unix::ffi::OsStrExt;
    let env = seeded()?;
    let logs = env.dir.path().join("logs");
    std::fs::create_dir(&logs)?;
    let line = |n: u32| {
        format!(
            "{{\"session\": \"imported\", \"user\": \"question {n} about kafka\", \"assistant\": \"answer {n}\"}}\n"
        )
    };
    std::fs::write(logs.join("a-good.jsonl"), line(0))?;
    let bad = logs.join(std::ffi::OsStr::from_bytes(b"b-bad-\xff\xfe.jsonl"));
    std::fs::write(&bad, line(1))?;

    let client = start(&env.db).await?;
    let report = ok(&client, "import_logs", json!({"paths": [logs]})).await?;
    assert_eq!(report["new_turns"], json!(2), "{report}");
    let files = report["files"].as_array().ok_or("no files")?;
    assert_eq!(files.len(), 2, "{report}");
    let bad_name = files[1]["path"].as_str().ok_or("no path")?;
    assert!(bad_name.ends_with("b-bad-\u{fffd}\u{fffd}.jsonl"), "{bad_name}");
    // The lossy name is not the file: importing it is a clear `io` error, not a crash.
    let (kind, message) = tool_error(&client, "import_logs", json!({"paths": [bad_name]})).await?;
    assert_eq!(kind, "io", "{message}");
    // Again: everything is already there.
    let again = ok(&client, "import_logs", json!({"paths": [logs]})).await?;
    assert_eq!(
        (again["new_turns"].clone(), again["existing_turns"].clone()),
        (json!(0), json!(2)),
        "{again}"
    );
    still_serving(&client, 3, "non-UTF-8 file names").await?;
    client.cancel().await?;
    let verify = common::run_at(&env.db, ["verify"]).map_err(|e| e.to_string())?;
    assert_eq!(verify.code, Some(0), "{verify:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_tool_declares_an_output_schema_and_its_results_conform() -> McpResult {
    let env = seeded()?;
    let log = env.dir.path().join("log.jsonl");
    std::fs::write(
        &log,
        "{\"session\": \"imported\", \"user\": \"How do I rotate TLS certificates?\", \"assistant\": \"Use cert-manager.\"}\n",
    )?;
    let client = start(&env.db).await?;
    let tools = client.list_all_tools().await?;
    assert_eq!(tools.len(), ctxgate::server::TOOL_NAMES.len());
    let calls = [
        ("select_context", json!({"session": "work", "query": "redis lock ttl", "policy": "fill"})),
        ("build_prompt", json!({"session": "work", "query": "redis lock ttl"})),
        (
            "record_turn",
            json!({"session": "work", "user": "Why is the ingress 502?", "assistant": "The TLS secret."}),
        ),
        ("search_history", json!({"query": "redis lock ttl", "limit": 5})),
        ("gate", json!({"session": "work", "query": "and then?"})),
        ("list_sessions", json!({})),
        ("import_logs", json!({"paths": [log], "format": "jsonl"})),
        ("store_evidence", json!({"ref": "logs/build.txt", "content": "error: linking failed\nsee above\n"})),
        ("read_evidence", json!({"ref": "logs/build.txt"})),
    ];
    for tool in &tools {
        let schema =
            tool.output_schema.as_ref().ok_or_else(|| format!("{} has no output schema", tool.name))?;
        let schema = Value::Object(schema.as_ref().clone());
        assert_eq!(schema["type"], json!("object"), "{}: {schema}", tool.name);
        let required: Vec<&str> =
            schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        assert!(required.contains(&"schema_version"), "{}: {schema}", tool.name);
        for schema in [&schema, &Value::Object(tool.input_schema.as_ref().clone())] {
            common::mcp::assert_portable(schema, &tool.name)?;
        }
        let (_, arguments) = calls.iter().find(|(name, _)| *name == tool.name).ok_or("no call for a tool")?;
        let result = call(&client, &tool.name, arguments.clone()).await?;
        assert_ne!(result.is_error, Some(true), "{}: {result:?}", tool.name);
        let content = result.structured_content.ok_or("no structured content")?;
        check_schema(&content, &schema, &schema, &tool.name).map_err(|e| format!("{e}\nschema: {schema}"))?;
    }
    // The obvious fields, by name.
    let required = |name: &str| -> Vec<String> {
        let tool = tools.iter().find(|t| t.name == name);
        let schema = tool.and_then(|t| t.output_schema.as_ref()).and_then(|s| s.get("required")).cloned();
        serde_json::from_value(schema.unwrap_or(json!([]))).unwrap_or_default()
    };
    for (tool, fields) in [
        ("select_context", &["session", "query", "decision", "blocks", "budget", "coverage"][..]),
        ("build_prompt", &["prompt"][..]),
        ("record_turn", &["session", "turn_id"][..]),
        ("search_history", &["query", "hits"][..]),
        ("gate", &["decision"][..]),
        ("list_sessions", &["sessions"][..]),
        ("import_logs", &["files", "new_turns", "existing_turns", "skipped"][..]),
        ("store_evidence", &["projection"][..]),
        ("read_evidence", &["evidence_ref", "content", "bytes", "truncated"][..]),
    ] {
        let declared = required(tool);
        for field in fields {
            assert!(declared.iter().any(|d| d == field), "{tool} does not require {field}: {declared:?}");
        }
    }
    client.cancel().await?;
    Ok(())
}

/// SIGKILL in the middle of a stream of `record_turn` calls: the index opens and verifies, and
/// every turn whose call was acknowledged is there with its text.
#[test]
fn a_server_killed_mid_stream_loses_no_acknowledged_turn() -> McpResult {
    const SENT: u64 = 400;
    const KILL_AFTER: usize = 40;
    let env = seeded()?;
    let mut server = RawServer::start(&env.db)?;
    let user = |i: u64| format!("streamed question {i} about shard{i} rebalancing");
    for i in 0..SENT {
        let arguments = json!({"session": "stream", "user": user(i), "assistant": format!("answer {i}")});
        server.send(&json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
            "params": {"name": "record_turn", "arguments": arguments}}))?;
    }
    // Read acknowledgements, then kill -9 while the rest are in flight.
    let mut acknowledged: Vec<(u64, u64)> = Vec::new(); // (request, turn id)
    while acknowledged.len() < KILL_AFTER {
        let message = server.next_message(Duration::from_secs(60))?.ok_or("the server stopped answering")?;
        let request = message["id"].as_u64().ok_or("a response without a numeric id")? - 1000;
        let content = &message["result"]["structuredContent"];
        assert_ne!(message["result"]["isError"], json!(true), "{message}");
        acknowledged.push((request, content["turn_id"].as_u64().ok_or("no turn id")?));
    }
    server.child.kill()?; // SIGKILL on Unix
    server.child.wait()?;
    // Responses written before the kill and not read yet were acknowledged too.
    while let Some(message) = server.next_message(Duration::from_millis(500))? {
        if let (Some(request), Some(turn)) =
            (message["id"].as_u64(), message["result"]["structuredContent"]["turn_id"].as_u64())
        {
            acknowledged.push((request - 1000, turn));
        }
    }
    assert!((acknowledged.len() as u64) < SENT, "the kill came after every call; nothing was in flight");

    let verify = common::run_at(&env.db, ["--json", "verify"]).map_err(|e| e.to_string())?;
    assert_eq!(verify.code, Some(0), "{verify:?}");
    let gk = ctxgate::Gatekeeper::open(&env.db, ctxgate::Options::default())?;
    let session = gk.session("stream")?;
    let info = gk.sessions()?.into_iter().find(|s| s.name == "stream").ok_or("no session")?;
    assert!(
        info.turns as usize >= acknowledged.len(),
        "{} turns, {} acknowledged",
        info.turns,
        acknowledged.len()
    );
    for (request, turn) in &acknowledged {
        let stored = session.turn(*turn as u32)?.ok_or_else(|| format!("acknowledged turn {turn} lost"))?;
        assert_eq!(stored.user, user(*request), "turn {turn}");
    }
    // The index is usable: a selection and a new turn.
    assert!(!session.select("shard7 rebalancing")?.blocks.is_empty());
    assert_eq!(session.add_turn("after the crash", "still here")?, info.turns);
    Ok(())
}

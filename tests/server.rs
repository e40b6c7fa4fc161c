//! `ctxgate serve` as a real process, driven by rmcp's client over the child's stdio: the tools
//! and their schemas, each tool's result against the library on the same index, bad requests,
//! and two servers plus a CLI import sharing one index.

mod common;

use ctxgate::{Gatekeeper, Options, Policy, SelectOptions};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
type Client = RunningService<RoleClient, ()>;

const BIN: &str = env!("CARGO_BIN_EXE_ctxgate");

async fn start(db: &Path) -> TestResult<Client> {
    let mut command = tokio::process::Command::new(BIN);
    command.arg("serve").arg("--db").arg(db).arg("--busy-timeout").arg("20").arg("-q");
    Ok(().serve(TokioChildProcess::new(command)?).await?)
}

fn args(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

async fn call(client: &Client, tool: &str, arguments: Value) -> TestResult<CallToolResult> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args(arguments));
    Ok(client.call_tool(params).await?)
}

/// The structured result of a successful call.
async fn ok(client: &Client, tool: &str, arguments: Value) -> TestResult<Value> {
    let result = call(client, tool, arguments).await?;
    if result.is_error == Some(true) {
        return Err(format!("{tool} failed: {:?}", result.structured_content).into());
    }
    result.structured_content.ok_or_else(|| format!("{tool}: no structured content").into())
}

/// The error kind of a failed call.
async fn error_kind(client: &Client, tool: &str, arguments: Value) -> TestResult<String> {
    let result = call(client, tool, arguments).await?;
    if result.is_error != Some(true) {
        return Err(format!("{tool} should have failed: {:?}", result.structured_content).into());
    }
    // An error result carries the CLI's JSON error document as text, and no structured content
    // (clients validate that against the output schema, which describes results).
    assert_eq!(result.structured_content, None, "{tool}: an error result has no structured content");
    let text = result.content.first().and_then(|c| c.as_text()).ok_or("no error text")?;
    let content: Value = serde_json::from_str(&text.text)?;
    let message = content["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "an error needs a message: {content}");
    Ok(content["error"]["kind"].as_str().ok_or("no error kind")?.to_string())
}

/// `value` as the CLI's (and the server's) JSON document, read back from JSON text as the client
/// reads it (serde_json's default float parsing can differ from the value by one ulp).
fn document(value: impl serde::Serialize) -> TestResult<Value> {
    let mut value = serde_json::to_value(value)?;
    value.as_object_mut().ok_or("not an object")?.insert("schema_version".into(), json!(1));
    Ok(serde_json::from_str(&value.to_string())?)
}

fn open(db: &Path) -> TestResult<Gatekeeper> {
    Ok(Gatekeeper::open(db, Options { busy_timeout: Duration::from_secs(20), ..Options::default() })?)
}

fn seeded() -> TestResult<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    let s = gk.session("work")?;
    s.add_turn("How do I expire a Redis lock?", "Set a TTL with SET key value NX PX 30000.")?;
    s.add_turn("Our Postgres orders query got slow.", "Run EXPLAIN ANALYZE and add an index on created_at.")?;
    s.add_turn("What about asyncio timeouts?", "Wrap the call in asyncio.wait_for with a timeout.")?;
    Ok((dir, db))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_the_tools_with_input_schemas() -> TestResult {
    let (_dir, db) = seeded()?;
    let client = start(&db).await?;
    let tools = client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "select_context",
            "build_prompt",
            "record_turn",
            "search_history",
            "gate",
            "list_sessions",
            "import_logs",
            "store_evidence",
            "read_evidence"
        ]
    );
    for tool in &tools {
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 40), "{}", tool.name);
    }
    let required = |name: &str| -> Vec<String> {
        let tool = tools.iter().find(|t| t.name == name);
        let required = tool.and_then(|t| t.input_schema.get("required")).cloned().unwrap_or(json!([]));
        serde_json::from_value(required).unwrap_or_default()
    };
    assert_eq!(required("select_context"), ["session", "query"]);
    assert_eq!(required("build_prompt"), ["session", "query"]);
    assert_eq!(required("record_turn"), ["session", "user", "assistant"]);
    assert_eq!(required("search_history"), ["query"]);
    assert_eq!(required("gate"), ["session", "query"]);
    assert_eq!(required("import_logs"), ["paths"]);
    let select = tools.iter().find(|t| t.name == "select_context").ok_or("no select_context")?;
    assert!(select.description.as_deref().unwrap_or_default().contains("BEFORE answering"));
    client.cancel().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_tool_answers_as_the_library_does() -> TestResult {
    let (dir, db) = seeded()?;
    let client = start(&db).await?;

    let query = "the redis lock expired too early";
    let selected =
        ok(&client, "select_context", json!({"session": "work", "query": query, "budget": 2000})).await?;
    let fill = ok(
        &client,
        "select_context",
        json!({"session": "work", "query": query, "policy": "fill", "as_of": 2}),
    )
    .await?;
    let prompt =
        ok(&client, "build_prompt", json!({"session": "work", "query": query, "budget": 1000})).await?;
    let gated = ok(&client, "gate", json!({"session": "work", "query": "what else?", "as_of": 1})).await?;
    let sessions = ok(&client, "list_sessions", json!({})).await?;
    let searched = ok(&client, "search_history", json!({"query": "postgres orders", "limit": 2})).await?;
    {
        let gk = open(&db)?;
        let s = gk.session("work")?;
        let options = SelectOptions { budget: Some(2000), ..SelectOptions::default() };
        assert_eq!(selected, document(s.select_with(query, &options)?)?);
        assert_eq!(selected["blocks"][0]["turn_id"], json!(0));
        let options =
            SelectOptions { policy: Some(Policy::Fill), as_of: Some(2), ..SelectOptions::default() };
        assert_eq!(fill, document(s.select_with(query, &options)?)?);
        let options = SelectOptions { budget: Some(1000), ..SelectOptions::default() };
        let text = s.build_prompt_with(query, &options)?;
        assert_eq!(prompt, json!({"session": "work", "query": query, "prompt": text, "schema_version": 1}));
        let decision = s.gate("what else?", Some(1))?;
        assert_eq!(gated, document(json!({"session": "work", "query": "what else?", "decision": decision}))?);
        assert_eq!(sessions, document(json!({"sessions": gk.sessions()?}))?);
        let hits = gk.search("postgres orders", 2)?;
        assert_eq!((hits[0].session.as_str(), hits[0].turn_id), ("work", 1));
        assert_eq!(searched, document(json!({"query": "postgres orders", "hits": hits}))?);
    }

    // record_turn, then a selection sees the new turn.
    let added = ok(
        &client,
        "record_turn",
        json!({"session": "work", "user": "Kafka consumer lag keeps growing", "assistant": "Add partitions and consumers."}),
    )
    .await?;
    assert_eq!(added, json!({"session": "work", "turn_id": 3, "schema_version": 1}));
    let selected =
        ok(&client, "select_context", json!({"session": "work", "query": "kafka consumer lag"})).await?;
    assert_eq!(selected["blocks"][0]["turn_id"], json!(3), "{selected}");

    // import_logs: canonical JSONL, then the library sees the session.
    let log = dir.path().join("log.jsonl");
    std::fs::write(
        &log,
        "{\"session\": \"imported\", \"user\": \"How do I rotate TLS certificates?\", \"assistant\": \"Use cert-manager.\"}\n\
         {\"session\": \"imported\", \"user\": \"And renew them?\", \"assistant\": \"It renews 30 days before expiry.\"}\n",
    )?;
    let report = ok(&client, "import_logs", json!({"paths": [log], "format": "jsonl"})).await?;
    assert_eq!(report["new_turns"], json!(2), "{report}");
    let again = ok(&client, "import_logs", json!({"paths": [log]})).await?;
    assert_eq!(again["new_turns"], json!(0), "{again}");
    assert_eq!(again["existing_turns"], json!(2), "{again}");
    {
        let gk = open(&db)?;
        let turn = gk.session("imported")?.turn(1)?.ok_or("turn 1 missing")?;
        assert_eq!(turn.user, "And renew them?");
        assert_eq!(
            gk.session("work")?.turn(3)?.ok_or("turn 3 missing")?.assistant,
            "Add partitions and consumers."
        );
    }

    // store_evidence: the dual write; read_evidence: by ref and pointer; both as the library does.
    let rows: Vec<Value> = (0..500).map(|i| json!({"order_id": i, "status": "paid"})).collect();
    let content = json!({"execution_time": 1843.7, "row_count": 500, "rows": rows}).to_string();
    let stored =
        ok(&client, "store_evidence", json!({"ref": "round_1/baseline.json", "content": content})).await?;
    let projection = &stored["projection"];
    assert_eq!(projection["facts"]["/execution_time"], json!(1843.7), "{stored}");
    assert_eq!(projection["omitted_from_context"][0]["pointer"], json!("/rows"), "{stored}");
    let part =
        ok(&client, "read_evidence", json!({"ref": "round_1/baseline.json", "pointer": "/rows/7"})).await?;
    let whole =
        ok(&client, "read_evidence", json!({"ref": "round_1/baseline.json", "max_bytes": 100})).await?;
    {
        let gk = open(&db)?;
        let root = gk.evidence_root()?;
        assert_eq!(
            std::fs::read_to_string(root.join("round_1/baseline.json"))?,
            content,
            "the whole document on disk"
        );
        let again = gk.project_evidence("round_1/baseline.json", &ctxgate::EvidenceOptions::default())?;
        assert_eq!(*projection, serde_json::to_value(&again)?);
        let bytes = gk.read_evidence("round_1/baseline.json", Some("/rows/7"))?;
        assert_eq!(part["content"], json!(String::from_utf8(bytes)?));
        assert_eq!(part["truncated"], json!(false));
        assert_eq!(
            (whole["bytes"].as_u64(), whole["truncated"].as_bool()),
            (Some(content.len() as u64), Some(true))
        );
        assert_eq!(whole["content"].as_str().map(str::len), Some(100));
    }
    let selected = ok(
        &client,
        "select_context",
        json!({"session": "work", "query": "execution_time row_count of the baseline", "budget": 8000}),
    )
    .await?;
    assert_eq!(selected["evidence"][0]["evidence_ref"], json!("round_1/baseline.json"), "{selected}");
    let escape = error_kind(&client, "store_evidence", json!({"ref": "../x.json", "content": "{}"})).await?;
    assert_eq!(escape, "bad_ref");
    client.cancel().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_are_errors_and_the_server_keeps_serving() -> TestResult {
    let (dir, db) = seeded()?;
    let client = start(&db).await?;

    // An unknown tool is a protocol error (MCP), with the list of tools.
    let params = CallToolRequestParams::new("no_such_tool").with_arguments(args(json!({})));
    match client.call_tool(params).await {
        Err(ServiceError::McpError(e)) => assert!(e.message.contains("select_context"), "{}", e.message),
        other => return Err(format!("expected a protocol error, got {other:?}").into()),
    }
    // Arguments that do not match the schema, and library refusals, are tool errors.
    assert_eq!(error_kind(&client, "select_context", json!({"session": "work"})).await?, "bad_input");
    assert_eq!(
        error_kind(&client, "select_context", json!({"session": "work", "query": 7})).await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "select_context", json!({"session": "work", "query": "x", "budget": "lots"}))
            .await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "select_context", json!({"session": "work", "query": "x", "policy": "max"}))
            .await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "gate", json!({"session": "work", "query": "x", "typo": 1})).await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "record_turn", json!({"session": " padded", "user": "a", "assistant": "b"}))
            .await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "record_turn", json!({"session": "", "user": "a", "assistant": "b"})).await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "record_turn", json!({"session": "work", "user": " ", "assistant": ""})).await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "select_context", json!({"session": "nobody", "query": "x"})).await?,
        "unknown_session"
    );
    assert_eq!(
        error_kind(&client, "select_context", json!({"session": "work", "query": "x", "as_of": 99})).await?,
        "bad_input"
    );
    assert_eq!(
        error_kind(&client, "build_prompt", json!({"session": "work", "query": "x", "budget": 0})).await?,
        "bad_input"
    );
    assert_eq!(error_kind(&client, "import_logs", json!({"paths": []})).await?, "bad_input");
    let missing = dir.path().join("missing.jsonl");
    assert_eq!(error_kind(&client, "import_logs", json!({"paths": [missing]})).await?, "io");

    // Still serving, and nothing was written by the failed calls.
    let sessions = ok(&client, "list_sessions", json!({})).await?;
    assert_eq!(sessions["sessions"].as_array().map(Vec::len), Some(1), "{sessions}");
    assert_eq!(sessions["sessions"][0]["turns"], json!(3));
    client.cancel().await?;
    Ok(())
}

/// A busy index is a tool error of kind `busy` after the busy timeout, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_busy_index_is_a_busy_error() -> TestResult {
    let (_dir, db) = seeded()?;
    let mut command = tokio::process::Command::new(BIN);
    command.arg("serve").arg("--db").arg(&db).arg("--busy-timeout").arg("0.3").arg("-q");
    let client = ().serve(TokioChildProcess::new(command)?).await?;
    // Another writer in the middle of a transaction: writes wait then fail busy, reads answer.
    let held = common::WriteHold::begin(&db).map_err(|e| e.to_string())?;
    let turn = json!({"session": "work", "user": "one more question", "assistant": "one more answer"});
    assert_eq!(error_kind(&client, "record_turn", turn.clone()).await?, "busy");
    ok(&client, "list_sessions", json!({})).await?;
    drop(held);
    ok(&client, "record_turn", turn).await?;
    client.cancel().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_and_the_cli_share_one_index() -> TestResult {
    const TASKS_PER_SERVER: usize = 3;
    const TURNS_PER_TASK: usize = 12;
    const IMPORTED: usize = 400;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log = dir.path().join("import.jsonl");
    let mut lines = String::new();
    for i in 0..IMPORTED {
        lines.push_str(&format!(
            "{}\n",
            json!({"session": "imported", "user": format!("imported question {i} about shard{i}"), "assistant": format!("imported answer {i}")})
        ));
    }
    std::fs::write(&log, lines)?;

    let servers = [std::sync::Arc::new(start(&db).await?), std::sync::Arc::new(start(&db).await?)];
    let import = {
        let (db, log) = (db.clone(), log.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["--busy-timeout", "20", "-q", "--json", "import"])
                .arg(&log)
                .arg("--db")
                .arg(&db)
                .output()
        })
    };
    let mut tasks = Vec::new();
    for (s, server) in servers.iter().enumerate() {
        for t in 0..TASKS_PER_SERVER {
            let server = std::sync::Arc::clone(server);
            tasks.push(tokio::spawn(async move {
                let session = format!("agent-{s}-{t}");
                for i in 0..TURNS_PER_TASK {
                    let user = format!("question {i} from {session}");
                    let assistant = format!("answer {i} for {session}");
                    let added = ok(
                        &server,
                        "record_turn",
                        json!({"session": session, "user": user, "assistant": assistant}),
                    )
                    .await?;
                    assert_eq!(added["turn_id"], json!(i), "{added}");
                    if i % 4 == 3 {
                        let selected =
                            ok(&server, "select_context", json!({"session": session, "query": user})).await?;
                        assert!(selected["blocks"].as_array().is_some_and(|b| !b.is_empty()), "{selected}");
                    }
                }
                TestResult::Ok(())
            }));
        }
    }
    for task in tasks {
        task.await??;
    }
    let output = import.await??;
    assert!(output.status.success(), "import failed: {}", String::from_utf8_lossy(&output.stderr));
    for server in servers {
        std::sync::Arc::try_unwrap(server).map_err(|_| "server still shared")?.cancel().await?;
    }

    let gk = open(&db)?;
    let sessions = gk.sessions()?;
    assert_eq!(sessions.len(), 2 * TASKS_PER_SERVER + 1);
    for s in 0..2 {
        for t in 0..TASKS_PER_SERVER {
            let name = format!("agent-{s}-{t}");
            let session = gk.session(&name)?;
            let info = sessions.iter().find(|i| i.name == name).ok_or("session missing")?;
            assert_eq!(info.turns as usize, TURNS_PER_TASK, "{name}");
            for i in 0..TURNS_PER_TASK {
                let turn = session.turn(i as u32)?.ok_or("turn missing")?;
                assert_eq!(turn.user, format!("question {i} from {name}"));
                assert_eq!(turn.assistant, format!("answer {i} for {name}"));
            }
        }
    }
    let imported = sessions.iter().find(|i| i.name == "imported").ok_or("imported missing")?;
    assert_eq!(imported.turns as usize, IMPORTED);
    assert_eq!(gk.session("imported")?.turn(399)?.ok_or("turn missing")?.assistant, "imported answer 399");
    // Postings, document frequencies and counts agree with the stored turns.
    let report = gk.verify()?;
    assert_eq!(report.problem_count, 0, "{:?}", report.problems);
    assert_eq!(report.turns as usize, 2 * TASKS_PER_SERVER * TURNS_PER_TASK + IMPORTED);
    Ok(())
}

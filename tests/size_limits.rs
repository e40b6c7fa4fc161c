//! The size limits of DESIGN §3.8 at every entry where text comes in (`import`, `add`, the
//! server's `record_turn`, a hook's import, `evidence put`, `evidence index`): a text at the
//! limit is stored and reads back exactly, one byte past it is refused with an error that names
//! the limit, and ten times the limit is refused the same way (generated on disk as it is
//! written, or sparse, so the test's own memory stays small).

mod common;

use common::mcp::{McpResult, RawServer};
use common::{TestEnv, TestResult};
use ctxgate::limits::{MAX_EVIDENCE_BYTES, MAX_TEXT_BYTES, MAX_TURN_BYTES};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Text of `len` bytes, words of several letters: anchors to extract, and it compresses.
fn text(len: usize) -> String {
    let mut out = String::with_capacity(len + 16);
    let mut i = 0u32;
    while out.len() < len {
        out.push_str(["pool ", "timeout ", "redis ", "lease "][(i % 4) as usize]);
        i += 1;
    }
    out.truncate(len);
    out
}

/// Writes `prefix`, `len` bytes of [`text`] (a block at a time; its last byte not a space,
/// which an import would trim), and `suffix`.
fn write_line_with_filler(file: &mut std::fs::File, prefix: &str, len: usize, suffix: &str) -> TestResult {
    file.write_all(prefix.as_bytes())?;
    let block = text(1 << 20);
    let mut left = len.saturating_sub(1);
    while left > 0 {
        let n = left.min(block.len());
        file.write_all(&block.as_bytes()[..n])?;
        left -= n;
    }
    if len > 0 {
        file.write_all(b"z")?;
    }
    file.write_all(suffix.as_bytes())?;
    Ok(())
}

/// The error's stderr names the limit.
fn assert_names_limit(run: &common::Run, limit: u64) {
    assert!(run.code.is_some_and(|c| c != 0), "refused: {run:#?}");
    assert!(run.stderr.contains(&limit.to_string()), "the error names the limit {limit}: {}", run.stderr);
}

/// `show --json` of a session's turns: `(user, assistant)`.
fn shown(env: &TestEnv, session: &str) -> TestResult<Vec<(String, String)>> {
    let doc: Value = env.run(["--json", "show", "--session", session])?.ok()?.json()?;
    let turns = doc["turns"].as_array().ok_or("no turns")?;
    Ok(turns
        .iter()
        .map(|t| {
            (
                t["user"].as_str().unwrap_or("?").to_string(),
                t["assistant"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect())
}

#[test]
fn import_takes_a_turn_at_the_limit_and_refuses_one_past_it_and_ten_times_it() -> TestResult {
    let env = TestEnv::new()?;
    let log = env.dir.path().join("log.jsonl");
    // At the limit: user and assistant text together are MAX_TURN_BYTES.
    let assistant = "ok";
    let user = text(MAX_TURN_BYTES - assistant.len());
    let line = json!({"session": "big", "user": user, "assistant": assistant});
    std::fs::write(&log, format!("{line}\n"))?;
    env.run([Path::new("import"), &log])?.ok()?;
    assert_eq!(
        shown(&env, "big")?,
        vec![(user.clone(), assistant.to_string())],
        "the turn reads back exactly"
    );
    env.run(["verify"])?.ok()?;
    // An export of it imports again.
    env.run(["export", "--session", "big"])?.ok()?;

    // One byte past it.
    let past = json!({"session": "past", "user": format!("{user}x"), "assistant": assistant});
    std::fs::write(&log, format!("{past}\n"))?;
    let run = env.run([Path::new("import"), &log])?;
    assert_names_limit(&run, MAX_TURN_BYTES as u64);
    assert!(run.stderr.contains("log.jsonl:1"), "names the line: {}", run.stderr);

    // Ten times it, as one line, after a good one: refused, nothing of the file imported.
    let mut file = std::fs::File::create(&log)?;
    writeln!(file, "{}", json!({"session": "ten", "user": "a small first turn", "assistant": "fine"}))?;
    write_line_with_filler(
        &mut file,
        r#"{"session":"ten","user":""#,
        10 * MAX_TURN_BYTES,
        "\",\"assistant\":\"x\"}\n",
    )?;
    writeln!(file, "{}", json!({"session": "ten", "user": "a turn after it", "assistant": "fine"}))?;
    drop(file);
    let run = env.run([Path::new("import"), &log])?;
    assert_names_limit(&run, ctxgate::limits::MAX_LINE_BYTES as u64);
    assert!(run.stderr.contains("log.jsonl:2"), "names the line: {}", run.stderr);
    assert!(env.run(["show", "--session", "ten"])?.code != Some(0), "nothing of the file was imported");
    // With --skip-invalid the line is skipped and the others are imported.
    env.run([Path::new("import"), Path::new("--skip-invalid"), &log])?.ok()?;
    assert_eq!(shown(&env, "ten")?.len(), 2);
    env.run(["verify"])?.ok()?;
    Ok(())
}

#[test]
fn add_takes_texts_at_the_limit_and_refuses_larger_ones_unread() -> TestResult {
    let env = TestEnv::new()?;
    let user_file = env.dir.path().join("user.txt");
    let assistant_file = env.dir.path().join("assistant.txt");
    let user = text(MAX_TEXT_BYTES);
    let assistant = text(MAX_TEXT_BYTES);
    std::fs::write(&user_file, &user)?;
    std::fs::write(&assistant_file, &assistant)?;
    let files = |u: &Path, a: &Path| -> TestResult<common::Run> {
        env.run([
            Path::new("add"),
            Path::new("-s"),
            Path::new("big"),
            Path::new("--user-file"),
            u,
            Path::new("--assistant-file"),
            a,
        ])
    };
    files(&user_file, &assistant_file)?.ok()?;
    assert_eq!(shown(&env, "big")?, vec![(user.clone(), assistant.clone())]);

    std::fs::write(&user_file, format!("{user}x"))?;
    let run = files(&user_file, &assistant_file)?;
    assert_names_limit(&run, MAX_TEXT_BYTES as u64);
    let mut file = std::fs::File::create(&user_file)?;
    write_line_with_filler(&mut file, "", 10 * MAX_TEXT_BYTES, "")?;
    drop(file);
    let run = files(&user_file, &assistant_file)?;
    assert_names_limit(&run, MAX_TEXT_BYTES as u64);
    let json = env.run([
        Path::new("--json"),
        Path::new("add"),
        Path::new("-s"),
        Path::new("big"),
        Path::new("--user-file"),
        &user_file,
        Path::new("-a"),
        Path::new("ok"),
    ])?;
    assert_eq!(json.json_error()?.error.kind, "bad_input");
    assert_eq!(shown(&env, "big")?.len(), 1, "nothing refused was stored");
    Ok(())
}

/// The text of a tool's answer, or its error's kind and message.
fn tool_text(response: &Value) -> (bool, String) {
    let result = &response["result"];
    let error = result["isError"].as_bool().unwrap_or(false) || response.get("error").is_some();
    let text = result["content"][0]["text"].as_str().map_or_else(|| response.to_string(), str::to_string);
    (error, text)
}

#[test]
fn record_turn_takes_texts_at_the_limit_and_refuses_larger_ones() -> McpResult {
    let env = TestEnv::new().map_err(|e| e.to_string())?;
    let mut server = RawServer::start(&env.db)?;
    let at = text(MAX_TEXT_BYTES);
    let call = |server: &mut RawServer, id: u64, user: &str| -> McpResult<Value> {
        let arguments = json!({"session": "big", "user": user, "assistant": "ok"}).to_string();
        server.call_raw(id, "record_turn", &arguments)?;
        server.response(id, Duration::from_secs(120))
    };
    let (error, answer) = tool_text(&call(&mut server, 1, &at)?);
    assert!(!error, "{}", &answer[..answer.len().min(300)]);
    let (error, answer) = tool_text(&call(&mut server, 2, &format!("{at}x"))?);
    assert!(error && answer.contains(&MAX_TEXT_BYTES.to_string()), "{}", &answer[..answer.len().min(300)]);
    // Ten times the limit is past the message limit: refused before it is parsed.
    let response = call(&mut server, 3, &text(10 * MAX_TEXT_BYTES))?;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&ctxgate::server::MAX_MESSAGE_BYTES.to_string()), "{response}");
    drop(server);
    assert_eq!(shown(&env, "big").map_err(|e| e.to_string())?, vec![(at, "ok".to_string())]);
    Ok(())
}

/// A Claude Code transcript of one turn: a user message of `user` bytes (written a block at a
/// time) and a short reply; its timestamp is `TIME`.
fn transcript(path: &Path, user_len: usize) -> TestResult {
    let mut file = std::fs::File::create(path)?;
    let head = |n: u32, kind: &str| {
        format!(
            r#"{{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/work/p","sessionId":"s1","version":"1.0.83","type":"{kind}","uuid":"00000000-0000-4000-8000-00000000000{n}","timestamp":"{TIME}","#
        )
    };
    write_line_with_filler(
        &mut file,
        &format!(r#"{}"message":{{"role":"user","content":""#, head(1, "user")),
        user_len,
        "\"}}\n",
    )?;
    let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "ok"}]});
    writeln!(file, "{}\"message\":{reply}}}", head(2, "assistant"))?;
    Ok(())
}

const TIME: &str = "2025-06-14T09:00:01.000Z";

#[test]
fn a_hook_imports_a_turn_at_the_limit_and_says_why_it_leaves_a_larger_one() -> TestResult {
    let env = TestEnv::new()?;
    let path = env.dir.path().join("s1.jsonl");
    let hook = |path: &Path| -> TestResult<common::Run> {
        let event =
            json!({"session_id": "s1", "transcript_path": path, "cwd": "/work/p", "hook_event_name": "Stop"});
        let mut child = common::ctxgate()
            .arg("--db")
            .arg(&env.db)
            .args(["hook", "claude-code", "--deadline-ms", "600000"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        child.stdin.take().ok_or("no stdin")?.write_all(event.to_string().as_bytes())?;
        Ok(common::Run::from_output(child.wait_with_output()?))
    };
    // At the limit: the user text, the reply and the turn's time together.
    transcript(&path, MAX_TURN_BYTES - "ok".len() - TIME.len())?;
    hook(&path)?.ok()?;
    let sessions: Value = env.run(["--json", "sessions"])?.ok()?.json()?;
    let name = sessions["sessions"][0]["name"]
        .as_str()
        .ok_or_else(|| format!("no session: {sessions}"))?
        .to_string();
    let turns = shown(&env, &name)?;
    assert_eq!((turns.len(), turns[0].0.len()), (1, MAX_TURN_BYTES - 2 - TIME.len()));

    for len in [MAX_TURN_BYTES + 1 - 2 - TIME.len(), 10 * MAX_TURN_BYTES] {
        let env_past = TestEnv::new()?;
        let path = env_past.dir.path().join("s1.jsonl");
        transcript(&path, len)?;
        // A hook never fails the agent: it exits 0, stores nothing and logs why.
        let event =
            json!({"session_id": "s1", "transcript_path": path, "cwd": "/work/p", "hook_event_name": "Stop"});
        let mut child = common::ctxgate()
            .arg("--db")
            .arg(&env_past.db)
            .args(["hook", "claude-code", "--deadline-ms", "600000"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        child.stdin.take().ok_or("no stdin")?.write_all(event.to_string().as_bytes())?;
        let run = common::Run::from_output(child.wait_with_output()?);
        assert_eq!(run.code, Some(0), "{run:#?}");
        assert!(run.stderr.contains(&MAX_TURN_BYTES.to_string()), "says why: {}", run.stderr);
        let import =
            env_past.run([Path::new("import"), Path::new("--format"), Path::new("claude-code"), &path])?;
        assert_names_limit(&import, MAX_TURN_BYTES as u64);
    }
    Ok(())
}

#[test]
fn evidence_put_and_index_take_a_document_at_the_limit_and_refuse_larger_ones() -> TestResult {
    let env = TestEnv::new()?;
    let tree = env.dir.path().join("tree");
    std::fs::create_dir(&tree)?;
    let at = text(MAX_EVIDENCE_BYTES as usize);
    std::fs::write(tree.join("at.txt"), &at)?;
    std::fs::write(tree.join("past.txt"), format!("{at}x"))?;
    // Ten times the limit, sparse: no disk, and refused by its size.
    std::fs::File::create(tree.join("ten.txt"))?.set_len(10 * MAX_EVIDENCE_BYTES)?;

    let put = |name: &str| {
        env.run([
            Path::new("evidence"),
            Path::new("put"),
            Path::new("--ref"),
            Path::new(name),
            &tree.join(name),
        ])
    };
    put("at.txt")?.ok()?;
    let shown = env.run(["evidence", "show", "at.txt"])?.ok()?;
    assert!(shown.stdout_bytes == at.as_bytes(), "the document reads back exactly");
    for name in ["past.txt", "ten.txt"] {
        let run = put(name)?;
        assert_names_limit(&run, MAX_EVIDENCE_BYTES);
        assert!(run.stderr.contains(name), "{}", run.stderr);
    }

    let other = TestEnv::new()?;
    let report: Value =
        other.run([Path::new("--json"), Path::new("evidence"), Path::new("index"), &tree])?.json()?;
    assert_eq!(report["indexed"], json!(1), "{report}");
    let skipped = report["skipped"].as_array().ok_or("no skipped")?;
    let mut names: Vec<&str> = skipped.iter().filter_map(|s| s["path"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["past.txt", "ten.txt"], "{report}");
    assert!(
        skipped
            .iter()
            .all(|s| s["reason"].as_str().is_some_and(|r| r.contains(&MAX_EVIDENCE_BYTES.to_string())))
    );
    let shown = other.run(["evidence", "show", "at.txt"])?.ok()?;
    assert!(shown.stdout_bytes == at.as_bytes());
    Ok(())
}

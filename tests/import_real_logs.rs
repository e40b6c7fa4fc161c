//! Logs as other tools write them, imported by the real binary (issue 22): Claude Code rewinds,
//! harness rows, rejections and files without `sessionId`; Claude.ai and ChatGPT exports of one
//! conversation object; Claude.ai attachments as evidence; session names made from file names
//! unique per path; a bad session name in a log reported at its line.

mod common;

use common::{TestEnv, TestResult};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The fixture at `relative` (from the repository root).
fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Imports `path` (exit 0) and returns `import --json`'s document.
fn import(env: &TestEnv, path: &Path) -> TestResult<Value> {
    env.run(["--json".as_ref(), "import".as_ref(), path.as_os_str()])?.ok()?.json()
}

/// `(user, assistant)` of every turn of `session`, from `show --json`.
fn turns(env: &TestEnv, session: &str) -> TestResult<Vec<(String, String)>> {
    let doc: Value = env.run(["--json", "show", "-s", session])?.ok()?.json()?;
    let turns = doc["turns"].as_array().ok_or("show --json has `turns`")?;
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

fn owned(turns: &[(&str, &str)]) -> Vec<(String, String)> {
    turns.iter().map(|(u, a)| (u.to_string(), a.to_string())).collect()
}

/// Session names with their turn counts, from `sessions --json`.
fn sessions(env: &TestEnv) -> TestResult<Vec<(String, u32)>> {
    let doc: Value = env.run(["--json", "sessions"])?.ok()?.json()?;
    let sessions = doc["sessions"].as_array().ok_or("sessions --json has `sessions`")?;
    Ok(sessions
        .iter()
        .map(|s| (s["name"].as_str().unwrap_or("?").to_string(), s["turns"].as_u64().unwrap_or(0) as u32))
        .collect())
}

/// Issue 22, findings 3, 5 and 6: only the branch the rewind kept, no harness text, a repeated
/// record once, the rejection's words on the user's side of the call's turn, and `show` marks
/// the failed call.
#[test]
fn r22_claude_code_rewind_harness_and_rejection() -> TestResult {
    let env = TestEnv::new()?;
    let doc = import(&env, &fixture("fixtures/import/claude-code/rewind.jsonl"))?;
    assert_eq!(
        (doc["new_turns"].as_u64(), doc["files"][0]["format"].as_str()),
        (Some(3), Some("claude-code"))
    );
    let session = "5b0c3e1a-7d2f-4c8e-9a1b-3e4f5a6b7c8d";
    assert_eq!(sessions(&env)?, [(session.to_string(), 3)]);
    assert_eq!(
        turns(&env, session)?,
        owned(&[
            (
                "Add a TTL cache to `load_config`.\n\nHold. I want to keep it simple - no connection pooling for \
                 now.",
                "I'll wrap it in a connection pool first.\n\n[tool: Edit (failed)]\n\nUnderstood: a plain \
                 `HashMap` with an expiry per entry, no pool.\n\n[tool: Read]\n\n[tool: Grep]\n\nDone: entries \
                 expire after 60 s."
            ),
            ("Now add a unit test for the expiry.", "[tool: Bash]\n\nThe test passes."),
            ("Commit it.", "Committed as 3f2a9c1."),
        ])
    );
    let human = env.run(["show", "-s", session])?.ok()?.stdout;
    let tool_lines: Vec<&str> = human.lines().filter(|l| l.starts_with("tool ")).collect();
    assert_eq!(tool_lines.len(), 4, "{human}");
    assert!(
        tool_lines[0].starts_with("tool Edit (toolu_01Rej): ") && tool_lines[0].ends_with(" · failed"),
        "{human}"
    );
    assert!(tool_lines[1..].iter().all(|l| !l.contains("failed")), "{human}");
    // Four tool results, the repeated one stored once.
    assert_eq!(doc["tool_outputs"].as_u64(), Some(4), "{doc:#}");
    Ok(())
}

/// Issue 22, finding 7: a Claude Code file whose records have no `sessionId` is the session it
/// is named after; a rewind to the very first prompt leaves only the new branch.
#[test]
fn r22_claude_code_file_without_session_id() -> TestResult {
    let env = TestEnv::new()?;
    let stem = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b";
    import(&env, &fixture(&format!("fixtures/import/claude-code/{stem}.jsonl")))?;
    assert_eq!(sessions(&env)?, [(stem.to_string(), 2)]);
    assert_eq!(
        turns(&env, stem)?,
        owned(&[
            (
                "What does the `?` operator do on an `Option`?",
                "It returns `None` early from a function that returns an `Option`."
            ),
            ("And in `main`?", "`main` must return `Option` or `Result` for `?` to compile there."),
        ])
    );
    Ok(())
}

/// Issue 22, findings 2 and 4: a Claude.ai export of one conversation object is detected and
/// read (and with `--format claude`); its attachments are evidence, named in the user text by
/// the ref `evidence show` reads them back from.
#[test]
fn r22_claude_ai_single_object_with_attachments() -> TestResult {
    for format in [None, Some("claude")] {
        let env = TestEnv::new()?;
        let file = fixture("fixtures/import/claude/single_conversation.json");
        let mut args: Vec<&std::ffi::OsStr> = vec!["--json".as_ref(), "import".as_ref()];
        if let Some(format) = format {
            args.extend([std::ffi::OsStr::new("--format"), std::ffi::OsStr::new(format)]);
        }
        args.push(file.as_os_str());
        let doc: Value = env.run(args)?.ok()?.json()?;
        assert_eq!(doc["files"][0]["format"].as_str(), Some("claude"), "{format:?}");
        let session = "e3b7a9d1-4c2f-4a8e-b6d5-0f1e2d3c4b5a";
        let at = format!("tool-output/{session}");
        let got = turns(&env, session)?;
        assert_eq!(
            got,
            owned(&[
                (
                    &format!("[attachment: slow-query.log, evidence {at}/attachment-m-0001-0.txt]"),
                    "The query scans 1.8 M rows: there is no index on `customer_email`. Add `CREATE INDEX \
                     orders_email_created ON orders (customer_email, created_at DESC);`"
                ),
                (
                    &format!(
                        "Would a partial index help? Most rows are archived. Here is the table definition.\n\n\
                         [attachment: orders.sql, evidence {at}/attachment-m-0003-0.txt]"
                    ),
                    "[tool: run_sql (failed)]\n\nI could not run EXPLAIN, but yes: `CREATE INDEX ... WHERE NOT \
                     archived` keeps the index small."
                ),
            ]),
            "{format:?}"
        );
        let log = env.run(["evidence", "show", &format!("{at}/attachment-m-0001-0.txt")])?.ok()?;
        assert_eq!(
            log.stdout,
            "# Query_time: 4.812  Lock_time: 0.000 Rows_sent: 20  Rows_examined: 1843220\nSELECT * FROM orders \
             WHERE customer_email = 'ana@example.com' ORDER BY created_at DESC LIMIT 20;"
        );
        let sql = env.run(["evidence", "show", &format!("{at}/attachment-m-0003-0.txt")])?.ok()?;
        assert!(sql.stdout.starts_with("CREATE TABLE orders ("), "{}", sql.stdout);
        assert_eq!(doc["tool_outputs"].as_u64(), Some(3), "two attachments and the failed result: {doc:#}");
    }
    // Imported under another session name, the turn names the ref its attachment is stored under.
    let env = TestEnv::new()?;
    let file = fixture("fixtures/import/claude/single_conversation.json");
    env.run([std::ffi::OsStr::new("import"), "--session".as_ref(), "db-work".as_ref(), file.as_os_str()])?
        .ok()?;
    let first = turns(&env, "db-work")?.into_iter().next().ok_or("no turn")?.0;
    let reference = "tool-output/db-work/attachment-m-0001-0.txt";
    assert_eq!(first, format!("[attachment: slow-query.log, evidence {reference}]"));
    let log = env.run(["evidence", "show", reference])?.ok()?;
    assert!(log.stdout.starts_with("# Query_time: 4.812"), "{}", log.stdout);
    Ok(())
}

/// Issue 22, finding 2: a ChatGPT export of one conversation object, auto-detected and with
/// `--format chatgpt`, imports as the same conversation in an array does.
#[test]
fn r22_chatgpt_single_object() -> TestResult {
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(fixture(
        "fixtures/import/chatgpt/conversations.json",
    ))?)?;
    let env = TestEnv::new()?;
    let one = env.dir.path().join("conversation.json");
    std::fs::write(&one, serde_json::to_string_pretty(&all[1])?)?;
    for format in ["auto", "chatgpt"] {
        let env = TestEnv::new()?;
        let run = env.run([
            "--json".as_ref(),
            "import".as_ref(),
            "--format".as_ref(),
            format.as_ref(),
            one.as_os_str(),
        ])?;
        let doc: Value = run.ok()?.json()?;
        assert_eq!(doc["files"][0]["format"].as_str(), Some("chatgpt"), "{format}");
        let session = "7c9e4d12-5f3a-4b8e-a1d0-93c2e6b7f801";
        assert_eq!(sessions(&env)?, [(session.to_string(), 2)], "{format}");
        let got = turns(&env, session)?;
        assert_eq!(got[0].0, "来週、東京で三日間過ごします。雨の日でも楽しめる場所は？☔", "{format}");
    }
    Ok(())
}

/// `NAME@HASH#n`: conversation `n` of a file without ids (DESIGN §8.7), from the file's name and
/// the top 32 bits of the XXH3 of its canonical path.
fn file_key(file: &Path, n: u64) -> TestResult<String> {
    let canonical = std::fs::canonicalize(file)?;
    let digest = xxhash_rust::xxh3::xxh3_64(canonical.as_os_str().as_encoded_bytes()) >> 32;
    Ok(format!("{}@{digest:08x}#{n}", canonical.file_name().ok_or("a file name")?.to_string_lossy()))
}

/// Issue 22, finding 9: two different `training_set.jsonl` in two directories were both
/// `training_set.jsonl#N` and conflicted; now each file's conversations are sessions of their
/// own, and importing the directory again adds nothing.
#[test]
fn r22_names_from_file_names_are_unique_per_path() -> TestResult {
    let env = TestEnv::new()?;
    let data = env.dir.path().join("data");
    let mut files = Vec::new();
    for (dir, topic) in [("run-a", "billing"), ("run-b", "shipping")] {
        std::fs::create_dir_all(data.join(dir))?;
        let mut text = String::new();
        for i in 1..=2 {
            let messages = json!([
                {"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": format!("{topic} question {i}")},
                {"role": "assistant", "content": format!("{topic} answer {i}")},
            ]);
            text.push_str(&json!({"messages": messages}).to_string());
            text.push('\n');
        }
        let file = data.join(dir).join("training_set.jsonl");
        std::fs::write(&file, text)?;
        files.push(file);
    }
    let doc = import(&env, &data)?;
    assert_eq!(doc["new_turns"].as_u64(), Some(4), "{doc:#}");
    let mut expected = Vec::new();
    for file in &files {
        expected.extend([(file_key(file, 1)?, 1), (file_key(file, 2)?, 1)]);
    }
    assert_eq!(sessions(&env)?, expected);
    assert_ne!(expected[0].0, expected[2].0);
    assert_eq!(turns(&env, &expected[2].0)?, owned(&[("shipping question 1", "shipping answer 1")]));
    let again = import(&env, &data)?;
    assert_eq!((again["new_turns"].as_u64(), again["existing_turns"].as_u64()), (Some(0), Some(4)));
    // The same file reached through another path keeps its names.
    let relative = env.dir.path().join("data/run-a/../run-a/training_set.jsonl");
    let third = import(&env, &relative)?;
    assert_eq!((third["new_turns"].as_u64(), third["existing_turns"].as_u64()), (Some(0), Some(2)));
    Ok(())
}

/// Issue 22, finding 10: a session name read from a log that the index cannot take is reported
/// with the file and line, and nothing is imported.
#[test]
fn r22_a_bad_session_name_names_its_line() -> TestResult {
    let env = TestEnv::new()?;
    let cases = [
        (
            "chat.jsonl",
            format!(
                "{}\n{}\n",
                json!({"id": "ok-1", "messages": [{"role": "user", "content": "hi"}]}),
                json!({"id": "bad\u{7}id", "messages": [{"role": "user", "content": "ho"}]})
            ),
            "2: `id` cannot be a session name: it contains control characters",
        ),
        (
            "claude.jsonl",
            format!(
                "{}\n",
                json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "x".repeat(300),
                       "message": {"role": "user", "content": "hi"}})
            ),
            "1: `sessionId` cannot be a session name: it is 300 bytes, over the limit of 256",
        ),
        (
            "export.json",
            format!(
                "[\n{}\n]\n",
                json!({"uuid": "c\u{0}1", "chat_messages": [{"sender": "human", "text": "hi"}]})
            ),
            "2: `uuid` cannot be a session name: it contains control characters",
        ),
    ];
    for (name, text, what) in cases {
        let file = env.dir.path().join(name);
        std::fs::write(&file, text)?;
        let run = env.run(["import".as_ref(), file.as_os_str()])?.expect_code(1)?;
        let expected = format!("ctxgate: error: {}:{what}", file.display());
        assert!(run.stderr.contains(&expected), "{name}: {}", run.stderr);
    }
    if env.db.exists() {
        assert_eq!(sessions(&env)?, [], "nothing is imported");
    }
    Ok(())
}

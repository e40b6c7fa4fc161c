//! Tool results of imported logs stored as evidence, driven through the real binary (issue 23,
//! findings 4 and 8): refs unique per session, every output that cannot be stored reported in
//! `import --json` and by exit code 1, and a later import storing the outputs still missing.

mod common;

use common::{TestEnv, TestResult};
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};

/// `import --json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportDoc {
    files: Vec<FileDoc>,
    new_turns: u64,
    existing_turns: u64,
    skipped: u64,
    tool_outputs: u64,
    tool_outputs_failed: u64,
    files_imported: u64,
    files_skipped: u64,
    files_failed: u64,
    seconds: f64,
    schema_version: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    path: String,
    status: String,
    format: String,
    sessions: Vec<serde_json::Value>,
    new_turns: u64,
    existing_turns: u64,
    skipped: Vec<serde_json::Value>,
    tool_outputs: u64,
    tool_outputs_failed: u64,
    failed_tool_outputs: Vec<FailedDoc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FailedDoc {
    evidence_ref: String,
    session: String,
    reason: String,
}

/// One document of `evidence list --json`.
#[derive(Debug, Deserialize)]
struct ListedDoc {
    evidence_ref: String,
    session: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ListDoc {
    documents: Vec<ListedDoc>,
}

/// An OpenAI chat-messages log: per conversation (its `id` is the session), one turn per call,
/// each call `(call id, result)`.
fn write_log(dir: &Path, conversations: &[(&str, Vec<(String, String)>)]) -> TestResult<PathBuf> {
    let mut text = String::new();
    for (id, calls) in conversations {
        let mut messages = Vec::new();
        for (i, (call_id, result)) in calls.iter().enumerate() {
            messages.push(json!({"role": "user", "content": format!("question {i} of {id}")}));
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": "run_query", "arguments": "{}"}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": result}));
            messages.push(json!({"role": "assistant", "content": format!("answer {i} of {id}")}));
        }
        text.push_str(&json!({"id": id, "messages": messages}).to_string());
        text.push('\n');
    }
    let path = dir.join("chat.jsonl");
    std::fs::write(&path, text)?;
    Ok(path)
}

fn listed(env: &TestEnv) -> TestResult<Vec<ListedDoc>> {
    Ok(env.run(["--json", "evidence", "list"])?.ok()?.json::<ListDoc>()?.documents)
}

/// Issue 23, finding 8: `a/b` and `a_b` shared `tool-output/a_b/`, and names over 120 bytes
/// shared their first 120 bytes; 2 of these 4 results were stored, and `--json` said
/// `"tool_outputs": 2` with nothing about the others.
#[test]
fn sessions_that_sanitize_alike_keep_every_result() -> TestResult {
    let env = TestEnv::new()?;
    let long = "s".repeat(125);
    let (long_1, long_2) = (format!("{long}-1"), format!("{long}-2"));
    let sessions = ["a/b", "a_b", long_1.as_str(), long_2.as_str()];
    let conversations: Vec<(&str, Vec<(String, String)>)> = sessions
        .iter()
        .map(|s| (*s, vec![("call_1".to_string(), format!("rows of session {s}: 42"))]))
        .collect();
    let log = write_log(env.dir.path(), &conversations)?;
    let doc: ImportDoc = env.run(["--json".as_ref(), "import".as_ref(), log.as_os_str()])?.ok()?.json()?;
    assert_eq!((doc.new_turns, doc.tool_outputs, doc.tool_outputs_failed), (4, 4, 0), "{doc:#?}");

    let documents = listed(&env)?;
    assert_eq!(documents.len(), 4, "{documents:#?}");
    for session in sessions {
        let mine: Vec<&ListedDoc> =
            documents.iter().filter(|d| d.session.as_deref() == Some(session)).collect();
        assert_eq!(mine.len(), 1, "{session}: {documents:#?}");
        let shown = env.run(["evidence", "show", &mine[0].evidence_ref])?.ok()?;
        assert_eq!(shown.stdout, format!("rows of session {session}: 42"), "{}", mine[0].evidence_ref);
    }
    Ok(())
}

/// Issue 23, findings 4 and 8: an output that cannot be stored fails the import (exit 1) and
/// is listed with its ref and why, its turns stay imported; once the obstacle is gone the same
/// import stores exactly the missing outputs. The states an import killed while storing
/// outputs leaves (a file written but not indexed, or neither) are recovered the same way.
#[test]
fn failed_and_missing_outputs_are_reported_and_stored_on_the_next_import() -> TestResult {
    let env = TestEnv::new()?;
    let calls = |session: &str| -> Vec<(String, String)> {
        (1..=3).map(|i| (format!("call_{i}"), format!("output {i} of {session}"))).collect()
    };
    let log = write_log(env.dir.path(), &[("s1", calls("s1")), ("s2", calls("s2"))])?;
    let import = || env.run(["--json".as_ref(), "import".as_ref(), log.as_os_str()]);

    // Obstacles: a file where session s2's directory must go, and other bytes at one s1 ref.
    let root = env.dir.path().join("index.evidence");
    std::fs::create_dir_all(root.join("tool-output/s1"))?;
    std::fs::write(root.join("tool-output/s2"), "not a directory")?;
    std::fs::write(root.join("tool-output/s1/call_2.txt"), "someone else's bytes")?;

    let run = import()?.expect_code(1)?;
    let doc: ImportDoc = run.json()?;
    assert_eq!((doc.new_turns, doc.tool_outputs, doc.tool_outputs_failed), (6, 2, 4), "{doc:#?}");
    let file = &doc.files[0];
    assert_eq!((file.format.as_str(), file.sessions.len(), file.skipped.len()), ("openai", 2, 0));
    assert!(file.path.ends_with("chat.jsonl"), "{}", file.path);
    // Outputs not stored do not fail the file: its turns are imported.
    assert_eq!(file.status, "imported");
    assert_eq!((doc.files_imported, doc.files_skipped, doc.files_failed), (1, 0, 0));
    assert_eq!(
        (file.new_turns, file.existing_turns, file.tool_outputs, file.tool_outputs_failed),
        (6, 0, 2, 4)
    );
    let mut failed: Vec<(&str, &str)> =
        file.failed_tool_outputs.iter().map(|f| (f.evidence_ref.as_str(), f.session.as_str())).collect();
    failed.sort();
    assert_eq!(
        failed,
        [
            ("tool-output/s1/call_2.txt", "s1"),
            ("tool-output/s2/call_1.txt", "s2"),
            ("tool-output/s2/call_2.txt", "s2"),
            ("tool-output/s2/call_3.txt", "s2"),
        ]
    );
    let conflict = file.failed_tool_outputs.iter().find(|f| f.session == "s1").ok_or("s1 failure")?;
    assert!(conflict.reason.contains("other content"), "{conflict:?}");
    let error = run.json_error()?;
    assert!(
        error.error.message.contains("4 tool outputs were not stored")
            && error.error.message.contains("run the same import again"),
        "{error:?}"
    );
    assert_eq!(env.stats()?.turns, 6, "the turns are imported all the same");

    // The human report lists them too.
    let human = env.run(["import".as_ref(), log.as_os_str()])?.expect_code(1)?;
    assert!(
        human.stdout.contains("tool output not stored: tool-output/s2/call_3.txt (session s2)")
            && human.stdout.contains("4 tool outputs NOT stored"),
        "{}",
        human.stdout
    );
    assert!(human.stderr.contains("ctxgate: error: 4 tool outputs were not stored"), "{}", human.stderr);

    // The obstacles removed: the same import adds no turn and stores the 4 missing outputs.
    std::fs::remove_file(root.join("tool-output/s2"))?;
    std::fs::remove_file(root.join("tool-output/s1/call_2.txt"))?;
    let doc: ImportDoc = import()?.ok()?.json()?;
    assert_eq!((doc.new_turns, doc.existing_turns, doc.tool_outputs, doc.tool_outputs_failed), (0, 6, 4, 0));
    assert_eq!(listed(&env)?.len(), 6);

    // What a kill while storing leaves: one output written but not indexed, one neither.
    env.run(["evidence", "forget", "tool-output/s1/call_1.txt", "tool-output/s2/call_3.txt"])?.ok()?;
    std::fs::remove_file(root.join("tool-output/s2/call_3.txt"))?;
    assert_eq!(listed(&env)?.len(), 4);
    let doc: ImportDoc = import()?.ok()?.json()?;
    assert_eq!((doc.new_turns, doc.tool_outputs, doc.tool_outputs_failed), (0, 2, 0), "{doc:#?}");
    let documents = listed(&env)?;
    assert_eq!(documents.len(), 6, "{documents:#?}");
    for (reference, session) in [("tool-output/s1/call_1.txt", "s1"), ("tool-output/s2/call_3.txt", "s2")] {
        assert!(
            documents.iter().any(|d| d.evidence_ref == reference && d.session.as_deref() == Some(session)),
            "{reference}: {documents:#?}"
        );
    }
    assert_eq!(std::fs::read_to_string(root.join("tool-output/s2/call_3.txt"))?, "output 3 of s2");

    // Nothing missing: nothing stored, success.
    let doc: ImportDoc = import()?.ok()?.json()?;
    assert_eq!((doc.tool_outputs, doc.tool_outputs_failed), (0, 0));
    env.run(["verify"])?.ok()?;
    assert_eq!((doc.skipped, doc.schema_version), (0, 1));
    assert!(doc.seconds >= 0.0);
    Ok(())
}

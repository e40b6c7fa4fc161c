//! Imports of directories and of several files through the real binary (issue 22, findings 1,
//! 8 and 10; issue 54, findings 12 and 16; and `export` → `import` leaving evidence behind):
//! every file reported as imported, skipped or failed (a failure with the system's reason);
//! later files imported after one that fails, a missing path of a list too; a failed file
//! writes nothing; the exit code says a file failed; a wrong `--format` names the format the
//! file looks like; first records longer than any fixed window detected; symbolic links
//! followed only inside the walked directory; tool outputs carried by `export`.

mod common;

use common::{TestEnv, TestResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::path::Path;

/// One session of `sessions --json` (only what these tests compare).
#[derive(Debug, Deserialize)]
struct Listed {
    name: String,
    turns: u32,
}

#[derive(Debug, Deserialize)]
struct Listing {
    sessions: Vec<Listed>,
}

/// Each session's name and turn count, by name.
fn sessions(env: &TestEnv) -> TestResult<Vec<(String, u32)>> {
    let listing: Listing = env.run(["--json", "sessions"])?.ok()?.json()?;
    let mut out: Vec<(String, u32)> = listing.sessions.into_iter().map(|s| (s.name, s.turns)).collect();
    out.sort();
    Ok(out)
}

fn owned(rows: &[(&str, u32)]) -> Vec<(String, u32)> {
    rows.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

/// A canonical line.
fn canonical(session: &str, user: &str, assistant: &str) -> String {
    json!({"session": session, "user": user, "assistant": assistant}).to_string() + "\n"
}

/// A Claude Code session log (the documented record layout: `type`, `sessionId`, `uuid`,
/// `parentUuid`, `message`): two turns, the first calling Bash (text output), the second
/// a query tool (JSON output).
fn claude_code_log(session: &str) -> String {
    let records = [
        json!({"type": "user", "sessionId": session, "uuid": "u1", "parentUuid": null,
               "timestamp": "2025-06-14T09:00:00.000Z",
               "message": {"role": "user", "content": "list the files"}}),
        json!({"type": "assistant", "sessionId": session, "uuid": "a1", "parentUuid": "u1",
               "timestamp": "2025-06-14T09:00:01.000Z",
               "message": {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "toolu_ls1", "name": "Bash", "input": {"command": "ls"}}]}}),
        json!({"type": "user", "sessionId": session, "uuid": "u2", "parentUuid": "a1",
               "timestamp": "2025-06-14T09:00:02.000Z",
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "toolu_ls1", "content": "Cargo.toml\nsrc"}]}}),
        json!({"type": "assistant", "sessionId": session, "uuid": "a2", "parentUuid": "u2",
               "timestamp": "2025-06-14T09:00:03.000Z",
               "message": {"role": "assistant", "content": [
                   {"type": "text", "text": "Two entries: Cargo.toml and src."}]}}),
        json!({"type": "user", "sessionId": session, "uuid": "u3", "parentUuid": "a2",
               "timestamp": "2025-06-14T09:00:04.000Z",
               "message": {"role": "user", "content": "count the rows"}}),
        json!({"type": "assistant", "sessionId": session, "uuid": "a3", "parentUuid": "u3",
               "timestamp": "2025-06-14T09:00:05.000Z",
               "message": {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "toolu_q1", "name": "Query", "input": {"sql": "select count(*)"}}]}}),
        json!({"type": "user", "sessionId": session, "uuid": "u4", "parentUuid": "a3",
               "timestamp": "2025-06-14T09:00:06.000Z",
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "toolu_q1", "content": "{\"rows\": 3}"}]}}),
        json!({"type": "assistant", "sessionId": session, "uuid": "a4", "parentUuid": "u4",
               "timestamp": "2025-06-14T09:00:07.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "There are 3 rows."}]}}),
    ];
    records.iter().map(|r| r.to_string() + "\n").collect()
}

/// An OpenAI chat-messages line: one conversation of one turn.
fn openai(user: &str, assistant: &str) -> String {
    json!({"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]})
        .to_string()
        + "\n"
}

/// The files of the mixed directory, with what each must report.
struct Mixed {
    dir: std::path::PathBuf,
    /// The file that fails, and its good version.
    broken: std::path::PathBuf,
    broken_fixed: String,
}

/// A directory of good logs of four formats, a shell-history-style prompt log and a Gemini
/// checkpoint (no format ctxgate reads), a log with one malformed record, and links: to a
/// file inside without a log extension (followed), to a file outside (not), to a directory
/// inside (a loop if walked through), to a file the walk reads anyway, and a broken one.
fn mixed(env: &TestEnv) -> TestResult<Mixed> {
    let root = env.dir.path().join("logs");
    let outside = env.dir.path().join("elsewhere");
    for dir in [root.join("nested"), root.join("store"), outside.clone()] {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        root.join("a-canonical.jsonl"),
        canonical("canon", "how do I rotate the redis password", "CONFIG SET requirepass")
            + &canonical("canon", "and the sentinels", "restart them one at a time"),
    )?;
    std::fs::write(
        root.join("b-history.jsonl"),
        json!({"display": "fix the failing test", "pastedContents": {}, "timestamp": 1_759_000_000_000u64,
               "project": "/home/mei/src/app"})
        .to_string()
            + "\n",
    )?;
    // A Gemini CLI session file (`~/.gemini/tmp/<project>/chats/session-*.json`), pretty-printed.
    let gemini = json!({"sessionId": "9b1c", "projectHash": "a1b2", "startTime": "2025-09-01T10:00:00.000Z",
        "messages": [{"id": "m1", "timestamp": "2025-09-01T10:00:01.000Z", "type": "user", "content": "explain raft"},
                     {"id": "m2", "timestamp": "2025-09-01T10:00:02.000Z", "type": "gemini", "content": "a consensus protocol"}]});
    std::fs::write(root.join("c-gemini-session.json"), serde_json::to_string_pretty(&gemini)?)?;
    // A Gemini CLI checkpoint: an array of `{role, parts}`.
    std::fs::write(
        root.join("c-gemini.json"),
        json!([{"role": "user", "parts": [{"text": "explain raft"}]},
               {"role": "model", "parts": [{"text": "a consensus protocol"}]}])
        .to_string(),
    )?;
    let good_lines = openai("kafka consumer lag?", "check the consumer groups")
        + &openai("kafka retention?", "retention.ms per topic")
        + &openai("kafka compaction?", "cleanup.policy=compact");
    let broken = root.join("d-broken.jsonl");
    std::fs::write(&broken, good_lines.clone() + "{\"messages\": [\n")?;
    std::fs::write(root.join("e-claude-code.jsonl"), claude_code_log("cc-session"))?;
    std::fs::write(root.join("store").join("kept.log"), canonical("linked", "nginx upstream", "proxy_pass"))?;
    std::fs::write(outside.join("secret.jsonl"), canonical("outside", "private", "never read"))?;
    std::fs::write(
        root.join("nested").join("f-sharegpt.json"),
        json!([{"id": "sg-1", "conversations": [
            {"from": "human", "value": "what is raft"}, {"from": "gpt", "value": "a consensus protocol"},
            {"from": "human", "value": "and paxos"}, {"from": "gpt", "value": "an older one"}]}])
        .to_string(),
    )?;
    std::os::unix::fs::symlink("store/kept.log", root.join("g-inside.jsonl"))?;
    std::os::unix::fs::symlink(outside.join("secret.jsonl"), root.join("h-outside.jsonl"))?;
    std::os::unix::fs::symlink(".", root.join("i-loop"))?;
    std::os::unix::fs::symlink("a-canonical.jsonl", root.join("j-same.jsonl"))?;
    std::os::unix::fs::symlink("missing.jsonl", root.join("k-broken.jsonl"))?;
    std::os::unix::fs::symlink(&outside, root.join("l-outside-dir"))?;
    Ok(Mixed { dir: root, broken, broken_fixed: good_lines })
}

/// Each file's path (relative to `root`), status, format and new turns, from `import --json`.
fn statuses(doc: &Value, root: &Path) -> TestResult<Vec<(String, String, String, u64)>> {
    let files = doc["files"].as_array().ok_or("no files")?;
    files
        .iter()
        .map(|f| {
            let path = f["path"].as_str().ok_or("no path")?;
            let relative = Path::new(path).strip_prefix(root).map_err(|_| format!("{path} outside"))?;
            Ok((
                relative.display().to_string(),
                f["status"].as_str().ok_or("no status")?.to_string(),
                f["format"].as_str().ok_or("no format")?.to_string(),
                f["new_turns"].as_u64().ok_or("no new_turns")?,
            ))
        })
        .collect()
}

fn row(path: &str, status: &str, format: &str, turns: u64) -> (String, String, String, u64) {
    (path.to_string(), status.to_string(), format.to_string(), turns)
}

fn reason_of<'a>(doc: &'a Value, name: &str) -> TestResult<&'a str> {
    let files = doc["files"].as_array().ok_or("no files")?;
    let file = files
        .iter()
        .find(|f| f["path"].as_str().is_some_and(|p| p.ends_with(name)))
        .ok_or_else(|| format!("{name} not reported"))?;
    Ok(file["reason"].as_str().ok_or_else(|| format!("{name} has no reason"))?)
}

#[test]
fn a_directory_import_reports_every_file_and_imports_past_failures() -> TestResult {
    let env = TestEnv::new()?;
    let mixed = mixed(&env)?;
    let run = env.run(["--json".as_ref(), "import".as_ref(), mixed.dir.as_os_str()])?.expect_code(7)?;
    let doc: Value = run.json()?;
    assert_eq!(
        statuses(&doc, &mixed.dir)?,
        vec![
            row("a-canonical.jsonl", "imported", "jsonl", 2),
            row("b-history.jsonl", "skipped", "auto", 0),
            row("c-gemini-session.json", "skipped", "auto", 0),
            row("c-gemini.json", "skipped", "auto", 0),
            row("d-broken.jsonl", "failed", "openai", 0),
            row("e-claude-code.jsonl", "imported", "claude-code", 2),
            row("g-inside.jsonl", "imported", "jsonl", 1),
            row("h-outside.jsonl", "skipped", "auto", 0),
            row("i-loop", "skipped", "auto", 0),
            row("j-same.jsonl", "skipped", "auto", 0),
            row("k-broken.jsonl", "skipped", "auto", 0),
            row("l-outside-dir", "skipped", "auto", 0),
            row("nested/f-sharegpt.json", "imported", "sharegpt", 2),
        ],
        "{doc:#}"
    );
    assert_eq!(
        (&doc["files_imported"], &doc["files_skipped"], &doc["files_failed"], &doc["new_turns"]),
        (&json!(4), &json!(8), &json!(1), &json!(7)),
        "{doc:#}"
    );
    let broken = doc["files"][4].clone();
    assert_eq!(broken["error_kind"], json!("bad_log"), "{broken:#}");
    let reason = broken["reason"].as_str().ok_or("no reason")?;
    assert!(reason.starts_with(&format!("{}:4: invalid JSON", mixed.broken.display())), "{reason}");
    assert!(reason_of(&doc, "b-history.jsonl")?.contains("not a log format ctxgate can tell"));
    let outside = reason_of(&doc, "h-outside.jsonl")?;
    assert!(outside.contains("outside") && outside.contains("not followed"), "{outside}");
    assert!(reason_of(&doc, "l-outside-dir")?.contains("outside"));
    assert!(reason_of(&doc, "i-loop")?.contains("directory"));
    assert!(reason_of(&doc, "j-same.jsonl")?.contains("imported under its own path"));
    assert!(reason_of(&doc, "k-broken.jsonl")?.contains("cannot be followed"));
    // The error names the failure and what to do; `--json` errors are one line.
    let error = run.json_error()?.error;
    assert_eq!(error.kind, "import_incomplete", "{error:?}");
    assert!(error.message.starts_with("1 file failed"), "{error:?}");

    // Later files were imported; nothing of the failed file (its three good lines) was, and
    // nothing from outside the directory.
    let expected = [("canon", 2), ("cc-session", 2), ("linked", 1), ("sg-1", 2)];
    assert_eq!(sessions(&env)?, owned(&expected));

    // The human report lists every file too, with the same exit code.
    let human = env.run(["import".as_ref(), mixed.dir.as_os_str()])?.expect_code(7)?;
    assert!(human.stdout.contains("b-history.jsonl: skipped: not a log format"), "{}", human.stdout);
    assert!(human.stdout.contains("d-broken.jsonl: FAILED, nothing imported: "), "{}", human.stdout);
    assert!(human.stdout.contains("4 files imported, 8 skipped, 1 FAILED: 0 new turns"), "{}", human.stdout);
    assert!(human.stderr.contains("1 file failed (listed above"), "{}", human.stderr);

    // Fixed, the file imports on its own run and everything else is already there: exit 0.
    std::fs::write(&mixed.broken, &mixed.broken_fixed)?;
    let doc: Value = env.run(["--json".as_ref(), "import".as_ref(), mixed.dir.as_os_str()])?.ok()?.json()?;
    assert_eq!(
        (&doc["files_imported"], &doc["files_failed"], &doc["new_turns"], &doc["existing_turns"]),
        (&json!(5), &json!(0), &json!(3), &json!(7)),
        "{doc:#}"
    );
    let after = sessions(&env)?;
    assert_eq!(after.len(), 7, "{after:?}");
    assert_eq!(after.iter().map(|(_, t)| t).sum::<u32>(), 10, "{after:?}");
    Ok(())
}

/// A file named on the command line that cannot be read as a log is a failure (it was asked
/// for), not a skip; the other files are imported all the same. Alone, it is the error.
#[test]
fn an_explicit_file_that_cannot_be_told_fails_and_the_others_are_imported() -> TestResult {
    let env = TestEnv::new()?;
    let history = env.dir.path().join("history.jsonl");
    std::fs::write(&history, "{\"display\": \"fix it\", \"timestamp\": 1759000000000}\n")?;
    let good = env.dir.path().join("good.jsonl");
    std::fs::write(&good, canonical("kept", "redis lock ttl", "SET NX PX"))?;

    let run = env.run(["--json".as_ref(), "import".as_ref(), history.as_os_str(), good.as_os_str()])?;
    let doc: Value = run.expect_code(7)?.json()?;
    assert_eq!(
        statuses(&doc, env.dir.path())?,
        vec![row("history.jsonl", "failed", "auto", 0), row("good.jsonl", "imported", "jsonl", 1)]
    );
    assert_eq!(doc["files"][0]["error_kind"], json!("unknown_format"));
    assert!(reason_of(&doc, "history.jsonl")?.contains("cannot tell the log format; pass --format"));
    assert_eq!(sessions(&env)?, owned(&[("kept", 1)]));

    let alone = env.run(["import".as_ref(), history.as_os_str()])?.expect_code(1)?;
    assert!(alone.stderr.contains("history.jsonl: cannot tell the log format; pass --format"), "{alone:?}");
    let alone = env.run(["--json".as_ref(), "import".as_ref(), history.as_os_str()])?.expect_code(1)?;
    assert_eq!(alone.json_error()?.error.kind, "unknown_format");
    Ok(())
}

/// A list of paths imports past one that is missing, as a directory imports past a file that
/// fails: each path listed, the missing one failed with the system's reason, exit 7 (issue 54,
/// findings 12 and 16). Alone, the missing path is the import's error.
#[test]
fn a_missing_path_in_a_list_fails_alone_and_the_others_are_imported() -> TestResult {
    let env = TestEnv::new()?;
    let first = env.dir.path().join("first.jsonl");
    std::fs::write(&first, canonical("one", "redis lock ttl", "SET NX PX"))?;
    let missing = env.dir.path().join("missing.jsonl");
    let last = env.dir.path().join("last.jsonl");
    std::fs::write(&last, canonical("two", "nginx upstream", "proxy_pass"))?;
    let paths = [first.as_os_str(), missing.as_os_str(), last.as_os_str()];

    let run = env.run([OsStr::new("--json"), OsStr::new("import")].into_iter().chain(paths))?;
    let doc: Value = run.expect_code(7)?.json()?;
    assert_eq!(
        statuses(&doc, env.dir.path())?,
        vec![
            row("first.jsonl", "imported", "jsonl", 1),
            row("missing.jsonl", "failed", "auto", 0),
            row("last.jsonl", "imported", "jsonl", 1)
        ],
        "{doc:#}"
    );
    assert_eq!(doc["files"][1]["error_kind"], json!("io"), "{doc:#}");
    let reason = reason_of(&doc, "missing.jsonl")?;
    assert!(reason.contains("No such file or directory (os error 2)"), "{reason}");
    assert_eq!(sessions(&env)?, owned(&[("one", 1), ("two", 1)]));

    let human = env.run([OsStr::new("import")].into_iter().chain(paths))?.expect_code(7)?;
    assert!(
        human.stdout.contains("missing.jsonl: FAILED, nothing imported: cannot read"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("2 files imported, 1 FAILED"), "{}", human.stdout);

    let alone = env.run([OsStr::new("import"), missing.as_os_str()])?.expect_code(1)?;
    assert!(alone.stderr.contains("No such file or directory"), "{}", alone.stderr);
    Ok(())
}

/// A file of a directory that cannot be read is reported with the system's reason (issue 54,
/// finding 16). Root reads every file whatever its mode: there the case cannot be made.
#[cfg(unix)]
#[test]
fn an_unreadable_file_in_a_directory_is_reported_with_the_system_reason() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new()?;
    let dir = env.dir.path().join("logs");
    std::fs::create_dir(&dir)?;
    std::fs::write(dir.join("a.jsonl"), canonical("kept", "redis lock ttl", "SET NX PX"))?;
    let locked = dir.join("b.jsonl");
    std::fs::write(&locked, canonical("locked", "nginx upstream", "proxy_pass"))?;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000))?;
    if std::fs::read(&locked).is_ok() {
        eprintln!("skipped: this user reads a file of mode 000 (root): no file here is unreadable");
        return Ok(());
    }
    let doc: Value =
        env.run(["--json".as_ref(), "import".as_ref(), dir.as_os_str()])?.expect_code(7)?.json()?;
    let reason = reason_of(&doc, "b.jsonl")?;
    assert!(reason.contains("Permission denied (os error 13)"), "{reason}");
    assert_eq!(sessions(&env)?, owned(&[("kept", 1)]));
    Ok(())
}

#[test]
fn a_wrong_format_is_an_error_naming_the_format_the_file_looks_like() -> TestResult {
    let env = TestEnv::new()?;
    let dir = env.dir.path().join("agent");
    std::fs::create_dir(&dir)?;
    let log = dir.join("session.jsonl");
    std::fs::write(&log, claude_code_log("cc-session"))?;
    let shown = log.display().to_string();

    // Codex reads nothing of it (no record of its types): it used to exit 0 importing nothing.
    let run = env.run(["import".as_ref(), "--format".as_ref(), "codex".as_ref(), log.as_os_str()])?;
    let run = run.expect_code(1)?;
    assert_eq!(
        run.stderr.trim(),
        format!(
            "ctxgate: error: {shown}: not in format codex (read so it holds no turns): it looks like claude-code: pass --format claude-code, or leave --format out to detect it"
        )
    );
    // A format whose parser refuses the file: its message is kept, with the line.
    let run = env.run([
        "--json".as_ref(),
        "import".as_ref(),
        "--format".as_ref(),
        "openai".as_ref(),
        log.as_os_str(),
    ])?;
    let error = run.expect_code(1)?.json_error()?.error;
    assert_eq!(error.kind, "bad_log");
    assert_eq!(
        error.message,
        format!(
            "{shown}: not in format openai (line 1: missing `messages`): it looks like claude-code: pass --format claude-code, or leave --format out to detect it"
        )
    );
    assert_eq!(sessions(&env)?, owned(&[]));

    // In a directory, the file fails with the same message and the others go on.
    std::fs::write(dir.join("rollout.jsonl"), codex_log())?;
    let run = env.run([
        "--json".as_ref(),
        "import".as_ref(),
        "--format".as_ref(),
        "codex".as_ref(),
        dir.as_os_str(),
    ])?;
    let doc: Value = run.expect_code(7)?.json()?;
    assert_eq!(
        statuses(&doc, &dir)?,
        vec![row("rollout.jsonl", "imported", "codex", 1), row("session.jsonl", "failed", "codex", 0)]
    );
    assert!(reason_of(&doc, "session.jsonl")?.contains("it looks like claude-code"));
    assert_eq!(sessions(&env)?, owned(&[("0199a3c4-0000-7000-8000-00000000c0de", 1)]));

    // The right format imports it.
    env.run(["import".as_ref(), "--format".as_ref(), "claude-code".as_ref(), log.as_os_str()])?.ok()?;
    assert_eq!(sessions(&env)?.len(), 2);
    Ok(())
}

/// A Codex rollout of one answered turn (records `session_meta` and `response_item`).
fn codex_log() -> String {
    let records = [
        json!({"timestamp": "2025-10-02T07:00:00.000Z", "type": "session_meta",
               "payload": {"id": "0199a3c4-0000-7000-8000-00000000c0de", "timestamp": "2025-10-02T07:00:00.000Z",
                           "cwd": "/home/mei/src/app"}}),
        json!({"timestamp": "2025-10-02T07:00:01.000Z", "type": "response_item",
               "payload": {"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": "round the durations"}]}}),
        json!({"timestamp": "2025-10-02T07:00:02.000Z", "type": "response_item",
               "payload": {"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": "rounded to milliseconds"}]}}),
    ];
    records.iter().map(|r| r.to_string() + "\n").collect()
}

/// Detection used to read 256 KiB: a longer first line (a pasted log, an image) made the
/// file unrecognisable. Lines of several MiB, in a directory, are detected now.
#[test]
fn a_first_record_longer_than_any_window_is_detected() -> TestResult {
    let env = TestEnv::new()?;
    let dir = env.dir.path().join("long");
    std::fs::create_dir(&dir)?;
    let pasted = "slow query log line: SELECT * FROM orders WHERE total > 100; ".repeat(60_000); // ~3.5 MiB
    let mut claude = claude_code_log("long-cc");
    claude = claude.replacen("list the files", &format!("list the files {pasted}"), 1);
    assert!(claude.lines().next().is_some_and(|l| l.len() > 3 << 20));
    std::fs::write(dir.join("a-claude.jsonl"), claude)?;
    std::fs::write(
        dir.join("b-canonical.jsonl"),
        canonical("long-canon", &"x".repeat(5 << 20), "ok") + &canonical("long-canon", "second", "ok"),
    )?;
    // A JSON array whose first conversation is over 256 KiB, pretty-printed over many lines.
    let conversation = json!([{"id": "sg-long", "conversations": [
        {"from": "human", "value": pasted}, {"from": "gpt", "value": "add an index on total"}]}]);
    std::fs::write(dir.join("c-sharegpt.json"), serde_json::to_string_pretty(&conversation)?)?;

    let doc: Value = env.run(["--json".as_ref(), "import".as_ref(), dir.as_os_str()])?.ok()?.json()?;
    assert_eq!(
        statuses(&doc, &dir)?,
        vec![
            row("a-claude.jsonl", "imported", "claude-code", 2),
            row("b-canonical.jsonl", "imported", "jsonl", 2),
            row("c-sharegpt.json", "imported", "sharegpt", 1),
        ]
    );
    assert_eq!(sessions(&env)?, owned(&[("long-canon", 2), ("long-cc", 2), ("sg-long", 1)]));
    Ok(())
}

/// `export` carries each tool call's stored output; importing the export into a fresh index
/// (with its own evidence root) stores the same evidence under the same refs.
#[test]
fn export_then_import_restores_tool_outputs_as_evidence() -> TestResult {
    let first = TestEnv::new()?;
    let log = first.dir.path().join("session.jsonl");
    std::fs::write(&log, claude_code_log("cc-session"))?;
    let root = first.dir.path().join("evidence");
    let at = |env: &TestEnv, root: &Path, args: &[&str]| {
        let mut all: Vec<&OsStr> = vec![OsStr::new("--evidence-root"), root.as_os_str()];
        all.extend(args.iter().map(OsStr::new));
        env.run(all)
    };
    at(&first, &root, &["import", log.to_str().ok_or("utf-8")?])?.ok()?;
    let export = at(&first, &root, &["export", "-s", "cc-session"])?.ok()?;
    let lines: Vec<Value> = export.stdout.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let results: Vec<&Value> = lines.iter().map(|l| &l["tools"][0]["result"]).collect();
    assert_eq!(results, [&json!("Cargo.toml\nsrc"), &json!("{\"rows\": 3}")], "{}", export.stdout);

    let second = TestEnv::new()?;
    let exported = second.dir.path().join("export.jsonl");
    std::fs::write(&exported, &export.stdout)?;
    let root2 = second.dir.path().join("evidence");
    let doc: Value =
        at(&second, &root2, &["--json", "import", exported.to_str().ok_or("utf-8")?])?.ok()?.json()?;
    assert_eq!((&doc["new_turns"], &doc["tool_outputs"]), (&json!(2), &json!(2)), "{doc:#}");
    let refs = ["tool-output/cc-session/toolu_ls1.txt", "tool-output/cc-session/toolu_q1.json"];
    let listed = |env: &TestEnv, root: &Path| -> TestResult<Vec<(String, Option<String>)>> {
        let doc: Value = at(env, root, &["--json", "evidence", "list"])?.ok()?.json()?;
        let documents = doc["documents"].as_array().ok_or("no documents")?;
        Ok(documents
            .iter()
            .map(|d| {
                (
                    d["evidence_ref"].as_str().unwrap_or_default().to_string(),
                    d["session"].as_str().map(String::from),
                )
            })
            .collect())
    };
    let expected: Vec<(String, Option<String>)> =
        refs.iter().map(|r| (r.to_string(), Some("cc-session".to_string()))).collect();
    assert_eq!(listed(&first, &root)?, expected);
    assert_eq!(listed(&second, &root2)?, expected);
    for (reference, content) in refs.iter().zip(["Cargo.toml\nsrc", "{\"rows\": 3}"]) {
        let read = at(&second, &root2, &["evidence", "show", reference])?.ok()?;
        assert_eq!(read.stdout, content, "{reference}");
    }
    // The export of the second index is the first's: nothing was lost on the way.
    assert_eq!(at(&second, &root2, &["export", "-s", "cc-session"])?.ok()?.stdout, export.stdout);
    // Importing the export again stores nothing twice; an export line without `result`
    // (the format before) imports as it did.
    let again: Value =
        at(&second, &root2, &["--json", "import", exported.to_str().ok_or("utf-8")?])?.ok()?.json()?;
    assert_eq!((&again["new_turns"], &again["tool_outputs"]), (&json!(0), &json!(0)), "{again:#}");
    let old = second.dir.path().join("old.jsonl");
    std::fs::write(
        &old,
        "{\"session\":\"old\",\"user\":\"u\",\"assistant\":\"a\",\"tools\":[{\"name\":\"Bash\",\"arguments\":\"ls\",\"result_bytes\":3}]}\n",
    )?;
    let doc: Value =
        at(&second, &root2, &["--json", "import", old.to_str().ok_or("utf-8")?])?.ok()?.json()?;
    assert_eq!((&doc["new_turns"], &doc["tool_outputs"]), (&json!(1), &json!(0)), "{doc:#}");
    Ok(())
}

/// The server's `import_logs` returns the document `import --json` prints, per-file statuses
/// included, and it conforms to the tool's output schema. A failed file is in the document, not
/// a tool error: the other files were imported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_logs_reports_every_file_as_the_cli_does() -> common::mcp::McpResult {
    use common::mcp::{check_schema, ok, start};
    let cli = TestEnv::new().map_err(|e| e.to_string())?;
    let mixed = mixed(&cli).map_err(|e| e.to_string())?;
    let run =
        cli.run(["--json".as_ref(), "import".as_ref(), mixed.dir.as_os_str()]).map_err(|e| e.to_string())?;
    let mut expected: Value = serde_json::from_str(&run.stdout)?;

    let server = TestEnv::new().map_err(|e| e.to_string())?;
    let client = start(&server.db).await?;
    let mut got = ok(&client, "import_logs", json!({"paths": [mixed.dir]})).await?;
    let tools = client.list_all_tools().await?;
    let tool = tools.iter().find(|t| t.name == "import_logs").ok_or("no import_logs")?;
    let schema = Value::Object(tool.output_schema.as_ref().ok_or("no output schema")?.as_ref().clone());
    check_schema(&got, &schema, &schema, "import_logs").map_err(|e| format!("{e}\nschema: {schema}"))?;
    client.cancel().await?;
    for doc in [&mut expected, &mut got] {
        doc.as_object_mut().ok_or("not an object")?.remove("seconds");
    }
    assert_eq!(got, expected);
    assert_eq!((&got["files_imported"], &got["files_failed"]), (&json!(4), &json!(1)));
    Ok(())
}

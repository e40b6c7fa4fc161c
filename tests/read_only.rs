//! Read-only commands (issue 22, item 12): they open the index read-only, never create or
//! modify a file, and a missing index is `unknown_index` (exit 6). `forget --dry-run` writes
//! nothing and reports what `forget` then deletes. Unix seconds show as RFC 3339.

mod common;

use common::{TestEnv, TestResult, run_at};
use ctxgate::{EvidenceOptions, Gatekeeper, ImportOptions, Options};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Every command that only reads the index, with the arguments it needs.
const READ_ONLY: &[&[&str]] = &[
    &["select", "-s", "s", "redis lock"],
    &["prompt", "-s", "s", "redis lock"],
    &["gate", "-s", "s", "redis lock"],
    &["search", "redis lock"],
    &["sessions"],
    &["stats"],
    &["verify"],
    &["export", "-s", "s"],
    &["show", "-s", "s"],
    &["evidence", "list"],
    &["evidence", "show", "notes/a.txt"],
    &["evidence", "project", "notes/a.txt"],
    &["forget", "--dry-run", "--before", "2030-01-01"],
    &["forget", "--dry-run", "--session", "s"],
];

/// Commands that change an existing index and must not create one to change.
const WRITE_EXISTING: &[&[&str]] = &[
    &["forget", "--before", "2030-01-01"],
    &["forget", "--session", "s"],
    &["compact"],
    &["rebuild"],
    &["evidence", "forget", "notes/a.txt"],
];

/// Name, bytes and modification time of every entry under `dir`: what a command must leave.
fn snapshot(dir: &Path) -> TestResult<BTreeMap<PathBuf, (Vec<u8>, SystemTime)>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
                out.insert(entry.path(), (Vec::new(), meta.modified()?));
            } else {
                out.insert(entry.path(), (std::fs::read(entry.path())?, meta.modified()?));
            }
        }
    }
    Ok(out)
}

/// An index with a session `s` of three turns and one evidence document `notes/a.txt`.
fn populated() -> TestResult<TestEnv> {
    let env = TestEnv::new()?;
    env.add("s", "The redis lock TTL expires during long jobs.", "Renew the lock from a watchdog thread.")?;
    env.add("s", "How long should the TTL be?", "Thirty seconds, renewed every ten.")?;
    env.add("s", "And the ingress 502 errors?", "Raise the upstream keepalive timeout.")?;
    let doc = env.dir.path().join("a.txt");
    std::fs::write(&doc, "redis lock renewal log: 3 renewals failed at 02:00\n")?;
    env.run(["evidence", "put", "--ref", "notes/a.txt", doc.to_str().ok_or("path")?])?.ok()?;
    std::fs::remove_file(&doc)?;
    Ok(env)
}

#[test]
fn read_only_commands_on_a_missing_index_are_unknown_index_and_create_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let missing = [
        dir.path().join("typo.redb"),
        dir.path().join("no-such-dir").join("index.redb"),
        dir.path().join("empty.redb"),
    ];
    std::fs::write(&missing[2], b"")?;
    for db in &missing {
        for args in READ_ONLY.iter().chain(WRITE_EXISTING) {
            let before = snapshot(dir.path())?;
            let run = run_at(db, args.iter().copied())?.expect_code(6)?;
            assert!(
                run.stderr.contains(&db.display().to_string()),
                "{args:?}: the path is named: {}",
                run.stderr
            );
            assert!(
                run.stderr.contains("ctxgate import") && run.stderr.contains("ctxgate add"),
                "{args:?}: the message says how to create one: {}",
                run.stderr
            );
            assert_eq!(
                snapshot(dir.path())?,
                before,
                "{} {args:?}: no file created or changed",
                db.display()
            );

            let mut json_args = vec!["--json"];
            json_args.extend_from_slice(args);
            let doc = run_at(db, &json_args)?.expect_code(6)?.json_error()?;
            assert_eq!(doc.error.kind, "unknown_index", "{args:?}: {doc:#?}");
            assert!(doc.error.message.contains(&db.display().to_string()), "{doc:#?}");
            assert_eq!(snapshot(dir.path())?, before, "{} --json {args:?}", db.display());
        }
    }
    let help = common::ctxgate().arg("--help").output()?;
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("6  no index at the path"),
        "exit code 6 is documented"
    );
    Ok(())
}

#[test]
fn read_only_commands_leave_every_byte_and_time_of_an_index_alone() -> TestResult {
    let env = populated()?;
    // Modification times have at least this resolution on every file system tests run on.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = snapshot(env.dir.path())?;
    assert!(before.contains_key(&env.db), "{before:?}");
    for args in READ_ONLY {
        let run = env.run(args.iter().copied())?;
        assert_eq!(run.code, Some(0), "{args:?}: {run:#?}");
        assert_eq!(snapshot(env.dir.path())?, before, "{args:?} changed a file");
    }
    // With --json, and with threads, the same.
    for args in [&["--json", "select", "-s", "s", "ttl"][..], &["--threads", "2", "--json", "search", "ttl"]]
    {
        env.run(args)?.ok()?;
        assert_eq!(snapshot(env.dir.path())?, before, "{args:?} changed a file");
    }
    Ok(())
}

#[test]
fn readers_and_writers_never_wait_for_each_other_only_writers_for_writers() -> TestResult {
    let env = populated()?;
    let reader = Gatekeeper::open_read_only(&env.db, Options::default())?;
    assert!(!reader.session("s")?.select("redis lock")?.blocks.is_empty());
    // Another process's reads and writes go on beside this reader.
    let sessions = env.run(["sessions"])?.ok()?;
    assert!(sessions.stdout.contains("3 turns"), "{}", sessions.stdout);
    env.run(["select", "-s", "s", "redis lock"])?.ok()?;
    env.run(["--busy-timeout", "0.2", "add", "-s", "s", "-u", "more"])?.ok()?;
    assert_eq!(reader.sessions()?[0].turns, 4, "each call reads the last commit");
    drop(reader);
    // While another writer is in a transaction: reads answer, a write waits then is busy.
    let held = common::WriteHold::begin(&env.db)?;
    assert!(env.run(["--busy-timeout", "0.2", "sessions"])?.ok()?.stdout.contains("4 turns"));
    let again: common::SelectDoc = env.run(["--json", "select", "-s", "s", "redis lock"])?.ok()?.json()?;
    assert!(!again.blocks.is_empty(), "{again:?}");
    let busy = env.run(["--busy-timeout", "0.2", "add", "-s", "s", "-u", "even more"])?.expect_code(4)?;
    assert!(busy.stderr.contains("busy"), "{}", busy.stderr);
    drop(held);
    env.add("s", "even more", "")?;
    assert!(env.run(["sessions"])?.ok()?.stdout.contains("5 turns"));
    Ok(())
}

#[test]
fn a_file_a_writer_did_not_close_is_repaired_then_read() -> TestResult {
    let env = populated()?;
    let copy = env.dir.path().join("copy.redb");
    {
        // Copied while a writer has it open: the copy was not closed cleanly.
        let writer = Gatekeeper::open(&env.db, Options::default())?;
        writer.session("s")?.add_turn("one more redis question", "one more answer")?;
        std::fs::copy(&env.db, &copy)?;
    }
    let run = run_at(&copy, ["sessions"])?.ok()?;
    assert!(run.stdout.contains("4 turns"), "{run:#?}");
    assert!(run.stderr.contains("not closed cleanly"), "the repair is logged: {}", run.stderr);
    // Repaired once: now reads leave it alone.
    let before = std::fs::read(&copy)?;
    run_at(&copy, ["select", "-s", "s", "redis"])?.ok()?;
    assert_eq!(std::fs::read(&copy)?, before);
    Ok(())
}

#[test]
fn a_read_only_gatekeeper_refuses_every_write_before_touching_a_file() -> TestResult {
    let env = populated()?;
    let before = snapshot(env.dir.path())?;
    let mut gk = Gatekeeper::open_read_only(&env.db, Options::default())?;
    assert!(gk.is_read_only());
    assert_eq!(gk.session("s")?.select("redis lock")?.blocks[0].turn_id, 0);
    let log = env.dir.path().join("log.jsonl");
    let errors = [
        gk.session("s")?.add_turn("u", "a").map(drop),
        gk.session("new")?.add_turn("u", "a").map(drop),
        gk.fold_pending(),
        gk.forget_session("s").map(drop),
        gk.forget_before("2030-01-01").map(drop),
        gk.import(&[log], &ImportOptions::default()).map(drop),
        gk.put_evidence("notes/b.txt", b"new", &EvidenceOptions::default()).map(drop),
        gk.index_evidence(env.dir.path(), &EvidenceOptions::default()).map(drop),
        gk.forget_evidence(&["notes/a.txt".to_string()]).map(drop),
        gk.compact().map(drop),
    ];
    for (i, result) in errors.into_iter().enumerate() {
        let err = result.err().ok_or(format!("write {i} succeeded on a read-only index"))?;
        assert_eq!(err.kind(), "read_only", "write {i}: {err}");
        assert!(err.to_string().contains(&env.db.display().to_string()), "write {i}: {err}");
    }
    drop(gk);
    assert_eq!(snapshot(env.dir.path())?, before, "no file created or changed");

    let missing = env.dir.path().join("missing.redb");
    let err =
        Gatekeeper::open_read_only(&missing, Options::default()).err().ok_or("opened a missing index")?;
    assert_eq!(err.kind(), "unknown_index", "{err}");
    assert!(!missing.exists());
    Ok(())
}

/// `forget` as JSON, without `dry_run`.
fn forget_json(env: &TestEnv, args: &[&str]) -> TestResult<(bool, serde_json::Value)> {
    let mut all = vec!["--json", "forget"];
    all.extend_from_slice(args);
    let mut doc: serde_json::Value = env.run(&all)?.ok()?.json()?;
    let dry = doc.as_object_mut().and_then(|o| o.remove("dry_run")).ok_or("no dry_run field")?;
    Ok((dry == serde_json::Value::Bool(true), doc))
}

#[test]
fn forget_dry_run_changes_nothing_and_reports_what_forget_then_deletes() -> TestResult {
    let env = TestEnv::new()?;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/import/chatgpt/conversations.json");
    env.run(["import", fixture.to_str().ok_or("path")?])?.ok()?;
    for i in 0..12 {
        env.add(&format!("untimed{i:02}"), &format!("redis question {i}"), "an answer")?;
    }
    let sessions: serde_json::Value = env.run(["--json", "sessions"])?.ok()?.json()?;
    let names: Vec<&str> = sessions["sessions"]
        .as_array()
        .ok_or("sessions")?
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    let (timed, untimed) = names.split_at(3);

    // Ended 2024-04-03T08:06:40Z and 2024-04-05T06:53:20Z; the third on 2024-04-06.
    let before = snapshot(env.dir.path())?;
    let (dry, planned) = forget_json(&env, &["--dry-run", "--before", "2024-04-06"])?;
    assert!(dry);
    assert_eq!(snapshot(env.dir.path())?, before, "a dry run writes nothing");
    assert_eq!(planned["sessions"], serde_json::json!(timed[..2]), "{planned:#}");
    assert_eq!(planned["turns"], 8, "6 + 2 turns: {planned:#}");
    assert_eq!(planned["kept"], 13, "{planned:#}");
    assert_eq!(planned["kept_without_time"], serde_json::json!(untimed), "--json lists every kept name");
    assert!(
        planned["postings"].as_u64() > Some(0) && planned["anchors_dropped"].as_u64() > Some(0),
        "{planned:#}"
    );

    // People get the forgotten sessions and two summary lines, not a line per kept session.
    let human = env.run(["forget", "--dry-run", "--before", "2024-04-06"])?.ok()?;
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", human.stdout);
    assert_eq!(lines[0], format!("would forget {}", timed[0]));
    assert_eq!(lines[1], format!("would forget {}", timed[1]));
    assert!(lines[2].starts_with("would delete 2 sessions, 8 turns"), "{}", human.stdout);
    assert_eq!(
        lines[3],
        "kept         13 sessions (12 of them without a recorded time: `--json` lists them)"
    );
    assert_eq!(snapshot(env.dir.path())?, before, "a dry run writes nothing");

    let (dry, done) = forget_json(&env, &["--before", "2024-04-06"])?;
    assert!(!dry);
    assert_eq!(done, planned, "the dry run reported exactly what forget deleted");
    let (_, again) = forget_json(&env, &["--dry-run", "--before", "2024-04-06"])?;
    assert_eq!(again["sessions"], serde_json::json!([]), "{again:#}");

    // One session by name: the same agreement, pending turns included.
    let (_, planned) = forget_json(&env, &["--dry-run", "--session", untimed[0]])?;
    assert_eq!(
        (planned["turns"].as_u64(), planned["pending_turns"].as_u64()),
        (Some(1), Some(1)),
        "{planned:#}"
    );
    let (_, done) = forget_json(&env, &["--session", untimed[0]])?;
    assert_eq!(done, planned);
    let unknown = env.run(["--json", "forget", "--dry-run", "--session", untimed[0]])?.expect_code(1)?;
    assert_eq!(unknown.json_error()?.error.kind, "unknown_session");
    env.run(["verify"])?.ok()?;
    Ok(())
}

#[test]
fn unix_second_times_are_shown_as_rfc3339() -> TestResult {
    let env = TestEnv::new()?;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/import/chatgpt/conversations.json");
    env.run(["import", fixture.to_str().ok_or("path")?])?.ok()?;
    let doc: serde_json::Value = env.run(["--json", "sessions"])?.ok()?.json()?;
    let times: Vec<(&str, &str)> = doc["sessions"]
        .as_array()
        .ok_or("sessions")?
        .iter()
        .map(|s| (s["time_start"].as_str().unwrap_or("-"), s["time_end"].as_str().unwrap_or("-")))
        .collect();
    // The export's create_time values: 1712131200.512 .. 1712131600, and so on.
    assert_eq!(
        times,
        [
            ("2024-04-03T08:00:00.512Z", "2024-04-03T08:06:40Z"),
            ("2024-04-05T06:53:20Z", "2024-04-05T06:53:20Z"),
            ("2024-04-06T10:40:00Z", "2024-04-06T10:41:40Z"),
        ],
        "{doc:#}"
    );
    let gk = Gatekeeper::open_read_only(&env.db, Options::default())?;
    assert_eq!(gk.sessions()?[0].time_start.as_deref(), Some("2024-04-03T08:00:00.512Z"));
    Ok(())
}

/// Without `--db`, the index is `index.redb` in the platform data directory
/// (`$XDG_DATA_HOME/ctxgate` on Linux): a query there creates not even the directory, a turn
/// added creates both, and the query then reads it.
#[cfg(target_os = "linux")]
#[test]
fn the_default_index_is_created_only_by_a_command_that_writes() -> TestResult {
    let home = tempfile::tempdir()?;
    let data = home.path().join("data");
    let at_home = |args: &[&str]| -> TestResult<common::Run> {
        let output =
            common::ctxgate().env("HOME", home.path()).env("XDG_DATA_HOME", &data).args(args).output()?;
        Ok(common::Run::from_output(output))
    };
    let default = data.join("ctxgate").join("index.redb");
    let missing = at_home(&["--json", "sessions"])?.expect_code(6)?;
    assert_eq!(missing.json_error()?.error.kind, "unknown_index");
    assert!(missing.stderr.contains(&default.display().to_string()), "{}", missing.stderr);
    assert!(!data.exists(), "a query created {}", data.display());
    at_home(&["add", "-s", "s", "--user", "How do I expire a Redis lock?", "--assistant", "PX 30000."])?
        .ok()?;
    assert!(default.is_file(), "add did not create {}", default.display());
    let listed = at_home(&["sessions"])?.ok()?;
    assert!(listed.stdout.contains('s'), "{}", listed.stdout);
    Ok(())
}

//! A process killed with SIGKILL in the middle of writing leaves an index that opens, verifies,
//! and holds a prefix of what was being written; running the import again completes it.

mod common;

use common::{TestEnv, TestResult, ctxgate};
use std::io::Write;
use std::time::{Duration, Instant};

#[test]
fn an_import_killed_midway_leaves_a_consistent_prefix() -> TestResult {
    let env = TestEnv::new()?;
    let log = env.dir.path().join("big.jsonl");
    let sessions = ["alpha", "beta"];
    // Nearly four batches of `ctxgate::BATCH_TURNS`, so the kill can land between
    // commits (a release build writes the first batch in about 0.2 s and all of them in 0.6 s).
    let per_session = 30_000usize;
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&log)?);
        for i in 0..per_session {
            for (s, name) in sessions.iter().enumerate() {
                let line = serde_json::json!({
                    "session": name,
                    "user": format!("question {i} about service_{s}_{} and retry_policy_{}", i % 97, i % 13),
                    "assistant": format!("answer {i}: raise the timeout of worker_{} to {} ms", i % 31, 100 + i % 900),
                });
                writeln!(out, "{line}")?;
            }
        }
    }
    let mut child = ctxgate().arg("--db").arg(&env.db).arg("import").arg(&log).spawn()?;
    // Kill it once the index file shows that writing has started, or after a bound.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if std::fs::metadata(&env.db).map(|m| m.len() > 2_000_000).unwrap_or(false) {
            break;
        }
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(30));
    child.kill()?; // SIGKILL on Unix: no destructor, no flush
    let status = child.wait()?;
    assert_eq!(status.code(), None, "the import finished before it could be killed: grow the log");

    let verify = env.run(["verify"])?;
    assert_eq!(verify.code, Some(0), "{verify:#?}");
    // Each session holds a prefix of its turns in the file.
    for name in sessions {
        let exported = env.run(["export", "--session", name])?;
        if exported.code != Some(0) {
            continue; // killed before this session's first batch
        }
        for (i, line) in exported.stdout.lines().enumerate() {
            let turn: serde_json::Value = serde_json::from_str(line)?;
            assert_eq!(turn["turn"], serde_json::json!(i));
            assert!(
                turn["user"].as_str().is_some_and(|u| u.starts_with(&format!("question {i} "))),
                "{line}"
            );
        }
    }
    // Importing again completes it, exactly.
    env.run(["import", log.to_str().ok_or("utf-8 path")?])?.ok()?;
    let stats = env.stats()?;
    assert_eq!(stats.turns, (per_session * sessions.len()) as u64);
    assert_eq!(env.run(["verify"])?.code, Some(0));
    Ok(())
}

#[test]
fn a_rebuild_killed_at_any_point_leaves_the_index_answering_as_before() -> TestResult {
    let env = TestEnv::new()?;
    import_service_log(&env, "log.jsonl", 4000, |i| format!("s{}", i % 3))?;
    let answers = |env: &TestEnv| -> TestResult<Vec<String>> {
        ["service_7 time out", "worker_3 lock", "retry_policy_5"]
            .iter()
            .map(|q| Ok(env.run(["--json", "select", "--session", "s1", q])?.ok()?.stdout))
            .collect()
    };
    let before = answers(&env)?;
    for delay_ms in [30, 250, 900] {
        kill_after(&env, "rebuild", delay_ms)?;
        assert_eq!(env.run(["verify"])?.code, Some(0), "after a kill at {delay_ms} ms");
        assert_eq!(answers(&env)?, before, "after a kill at {delay_ms} ms");
    }
    // A rebuild that runs to the end changes no answer either, and clears what the killed ones left.
    env.run(["rebuild"])?.ok()?;
    assert_eq!(answers(&env)?, before);
    assert_eq!(ctxgate::jobs::rebuild_scratch_files(&env.db)?, Vec::<std::path::PathBuf>::new());
    Ok(())
}

#[test]
fn a_compact_killed_at_any_point_leaves_the_index_answering_as_before() -> TestResult {
    let env = TestEnv::new()?;
    // Three logs of new sessions, imported one after the other: each adds posting lists all
    // over the tree, so `compact` has pages to rewrite in key order.
    for file in 0..3 {
        import_service_log(&env, &format!("log{file}.jsonl"), 6000, |i| format!("f{file}-s{}", i % 3))?;
    }
    let answers = |env: &TestEnv| -> TestResult<Vec<String>> {
        let mut out = Vec::new();
        for q in ["service_7 time out", "worker_3 lock", "retry_policy_5"] {
            out.push(env.run(["--json", "select", "--session", "f1-s1", q])?.ok()?.stdout);
            out.push(env.run(["--json", "search", q])?.ok()?.stdout);
        }
        Ok(out)
    };
    let before = answers(&env)?;
    let mut killed = 0;
    for delay_ms in [20, 100, 300, 900] {
        killed += usize::from(kill_after(&env, "compact", delay_ms)?);
        assert_eq!(env.run(["verify"])?.code, Some(0), "after a kill at {delay_ms} ms");
        assert_eq!(answers(&env)?, before, "after a kill at {delay_ms} ms");
    }
    assert!(killed > 0, "every compact finished before its kill: grow the logs");
    let report: serde_json::Value = serde_json::from_str(&env.run(["--json", "compact"])?.ok()?.stdout)?;
    assert_eq!(env.run(["verify"])?.code, Some(0));
    assert_eq!(answers(&env)?, before);
    assert!(report["bytes_after"].as_u64() <= report["bytes_before"].as_u64(), "{report}");
    Ok(())
}

#[test]
fn an_interrupted_import_whose_run_file_is_lost_is_recovered_by_rebuild() -> TestResult {
    let env = TestEnv::new()?;
    // Eight batches of `ctxgate::BATCH_TURNS` (a budget that lets each be full), each written
    // as a run: the kill lands after the first batch's commit, which records its run.
    let log = write_service_log(&env, "big.jsonl", 8 * ctxgate::BATCH_TURNS, |i| format!("s{}", i % 3))?;
    let runs = env.dir.path().join("index.redb.runs");
    assert!(env.db.ends_with("index.redb"), "the run file is named after the index");
    let mut child = (ctxgate().arg("--db").arg(&env.db).args(["import", "--memory-mib", "4096"]).arg(&log))
        .env("CTXGATE_LOG", "debug")
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // The writer logs each batch after its commit.
    let written = format!("wrote {} turns", ctxgate::BATCH_TURNS);
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let committed = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .any(|line| line.contains(&written));
    child.kill()?;
    assert!(committed, "no batch was committed");
    assert_eq!(child.wait()?.code(), None, "the import finished before it could be killed: grow the log");

    // A twin with its run file answers as the import left it (its runs merged when it opens).
    let twin = TestEnv::new()?;
    std::fs::copy(&env.db, &twin.db)?;
    std::fs::copy(&runs, twin.dir.path().join("index.redb.runs"))?;
    let answers = |env: &TestEnv| -> TestResult<Vec<String>> {
        let mut out = vec![env.run(["--json", "sessions"])?.ok()?.stdout];
        for q in ["service_7 time out", "worker_3 lock", "retry_policy_5"] {
            out.push(env.run(["--json", "search", q])?.ok()?.stdout);
        }
        Ok(out)
    };
    let expected = answers(&twin)?;
    assert!(twin.stats()?.turns >= ctxgate::BATCH_TURNS as u64);

    std::fs::remove_file(&runs)?;
    let refused = env.run(["stats"])?.expect_code(3)?;
    assert!(
        refused.stderr.contains("index.redb.runs is missing") && refused.stderr.contains("ctxgate rebuild"),
        "{refused:#?}"
    );
    env.run(["rebuild"])?.ok()?;
    assert_eq!(env.run(["verify"])?.code, Some(0));
    assert_eq!(answers(&env)?, expected, "the rebuild derives the lost runs' postings again");
    Ok(())
}

/// Writes `turns` turns about services and workers as canonical JSONL to `name` in the test's
/// directory, turn `i` in session `session(i)`, and imports it.
fn import_service_log(
    env: &TestEnv,
    name: &str,
    turns: usize,
    session: impl Fn(usize) -> String,
) -> TestResult {
    let log = write_service_log(env, name, turns, session)?;
    env.run(["import", log.to_str().ok_or("utf-8 path")?])?.ok()?;
    Ok(())
}

/// Writes `turns` turns about services and workers as canonical JSONL to `name` in the test's
/// directory, turn `i` in session `session(i)`.
fn write_service_log(
    env: &TestEnv,
    name: &str,
    turns: usize,
    session: impl Fn(usize) -> String,
) -> TestResult<std::path::PathBuf> {
    let log = env.dir.path().join(name);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&log)?);
    for i in 0..turns {
        let line = serde_json::json!({
            "session": session(i),
            "user": format!("why does service_{} time out after retry_policy_{}?", i % 53, i % 7),
            "assistant": format!("worker_{} holds the lock for {} ms", i % 29, 50 + i % 400),
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(log)
}

/// Runs `ctxgate COMMAND` on the index and sends it SIGKILL after `delay_ms`; true if the kill
/// ended it (false: it had finished).
fn kill_after(env: &TestEnv, command: &str, delay_ms: u64) -> TestResult<bool> {
    let mut child =
        ctxgate().arg("--db").arg(&env.db).arg(command).stdout(std::process::Stdio::null()).spawn()?;
    std::thread::sleep(Duration::from_millis(delay_ms));
    child.kill()?;
    Ok(child.wait()?.code().is_none())
}

//! Hooks under contention (issue 54): several agent sessions' hooks at once, each with a
//! transcript longer than its deadline lets it import. Each hook keeps its deadline, keeps what
//! it wrote, and the next event goes on from there, until every transcript is in. Before the
//! import had a time limit, a hook stopped at its deadline left its one long write unfinished,
//! and every later hook started it again: the transcripts never got in.

mod common;

use common::{Run, TestResult, ctxgate};
use serde_json::{Value, json};
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const PROJECT: &str = "/home/mei/src/ledger";

/// Hooks run at once, one per agent session.
const SESSIONS: usize = 3;

/// Turns in each transcript: a debug build parses one in under a second, and imports it in
/// several.
const TURNS: usize = 3_000;

/// The hooks' deadline.
const DEADLINE: Duration = Duration::from_millis(3000);

/// What a process may take past its deadline to start and exit on a loaded machine: the hook
/// gives up at the deadline itself, so a hook that ignored it would show as its whole import.
const EXIT_SLACK: Duration = Duration::from_secs(3);

/// Rounds of prompts before every transcript must be in.
const ROUNDS: usize = 40;

/// Writes a Claude Code transcript of [`TURNS`] turns for `session`, as Claude Code writes its
/// records (the fields of fixtures/import/claude-code/session.jsonl).
fn transcript(dir: &Path, session: &str) -> TestResult<PathBuf> {
    let path = dir.join(format!("{session}.jsonl"));
    let mut out = BufWriter::new(std::fs::File::create(&path)?);
    let start = 1_750_000_000u64;
    for n in 1..=2 * TURNS {
        let turn = (n - 1) / 2;
        let (role, message) = if n % 2 == 1 {
            let text = format!(
                "Turn {turn} of {session}: why does worker_{} time out on the ledger_{} queue after the retry_policy_{} change?",
                turn % 37,
                turn % 11,
                turn % 7
            );
            ("user", json!({ "role": "user", "content": text }))
        } else {
            let text = format!(
                "Worker_{} waits {} ms on ledger_{}: raise the visibility timeout and keep retry_policy_{} at three attempts.",
                turn % 37,
                100 + turn,
                turn % 11,
                turn % 7
            );
            let message = json!({
                "id": format!("msg_{n:08}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
                "content": [{ "type": "text", "text": text }], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": { "input_tokens": 4, "output_tokens": 7 }
            });
            ("assistant", message)
        };
        let seconds = start + n as u64;
        let line = json!({
            "parentUuid": if n == 1 { Value::Null } else { json!(format!("00000000-0000-4000-8000-{:012}", n - 1)) },
            "isSidechain": false, "userType": "external", "cwd": PROJECT, "sessionId": session,
            "version": "1.0.83", "gitBranch": "main", "type": role,
            "uuid": format!("00000000-0000-4000-8000-{n:012}"),
            "timestamp": format!("2025-06-15T{:02}:{:02}:{:02}.000Z", seconds / 3600 % 24, seconds / 60 % 60, seconds % 60),
            "message": message,
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(path)
}

/// Starts the prompt hook of `session` with the [`DEADLINE`].
fn start_hook(db: &Path, session: &str, path: &Path) -> TestResult<std::process::Child> {
    let event = json!({
        "session_id": session, "transcript_path": path, "cwd": PROJECT, "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit", "prompt": "Why does the worker time out on the ledger queue?",
    });
    let mut child = ctxgate()
        .arg("--db")
        .arg(db)
        .args(["hook", "claude-code", "--deadline-ms", &DEADLINE.as_millis().to_string()])
        .env_remove("CTXGATE_HOOK_DEADLINE_MS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().ok_or("no stdin")?.write_all(event.to_string().as_bytes())?;
    Ok(child)
}

/// Stored turns of each session, by the session id the name ends with.
fn stored(db: &Path) -> TestResult<Vec<(String, u64)>> {
    let run = common::run_at(db, ["--json", "sessions"])?.ok()?;
    let doc: Value = serde_json::from_str(&run.stdout)?;
    let sessions = doc["sessions"].as_array().ok_or("no sessions array")?;
    let mut counts: Vec<(String, u64)> = (sessions.iter())
        .map(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            (name.rsplit('#').next().unwrap_or(name).to_string(), s["turns"].as_u64().unwrap_or_default())
        })
        .collect();
    counts.sort();
    Ok(counts)
}

#[test]
fn hooks_at_once_keep_their_deadline_and_each_goes_on_where_the_last_stopped() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let sessions: Vec<String> =
        (0..SESSIONS).map(|i| format!("c0ffee00-0000-4000-8000-00000000000{i}")).collect();
    let paths = (sessions.iter()).map(|s| transcript(dir.path(), s)).collect::<TestResult<Vec<_>>>()?;
    let complete: Vec<(String, u64)> = sessions.iter().map(|s| (s.clone(), TURNS as u64)).collect();
    let mut before = 0u64;
    let mut rounds = 0;
    let mut cut_short = 0;
    while rounds < ROUNDS {
        rounds += 1;
        let started = Instant::now();
        let children = (sessions.iter().zip(&paths))
            .map(|(session, path)| start_hook(&db, session, path))
            .collect::<TestResult<Vec<_>>>()?;
        for child in children {
            let run = Run::from_output(child.wait_with_output()?);
            assert_eq!(run.code, Some(0), "round {rounds}: a hook never fails the agent: {run:#?}");
        }
        let elapsed = started.elapsed();
        assert!(elapsed < DEADLINE + EXIT_SLACK, "round {rounds}: the hooks took {elapsed:?}");
        let counts = stored(&db)?;
        let total: u64 = counts.iter().map(|(_, turns)| turns).sum();
        if counts == complete {
            break;
        }
        cut_short += 1;
        // Nothing a hook wrote is lost when it stops, and none starts over.
        assert!(total >= before, "round {rounds}: {total} turns stored, {before} before");
        before = total;
    }
    assert_eq!(stored(&db)?, complete, "every transcript is in after {rounds} rounds");
    assert!(cut_short > 0, "no hook was cut short: the transcripts are too short to test the time limit");
    assert_eq!(common::run_at(&db, ["verify"])?.code, Some(0), "the hooks left a sound index");
    // Three hooks created the index at once: none found it half made.
    let log = std::fs::read_to_string(dir.path().join("hook.log")).unwrap_or_default();
    assert!(!log.contains("not a ctxgate index"), "{log}");
    Ok(())
}

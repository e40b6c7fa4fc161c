//! The damage harness (issue 54): seeded damage to the index file, to the run file an
//! interrupted import left, and to evidence documents — bit flips, zeroed pages and runs,
//! truncations — then the real binary reads and rebuilds each damaged copy. Whatever the damage, no process panics or aborts (exit 101, 134, or a
//! signal); a read that exits 0 returns exactly the original text (no silent wrong answer),
//! and one that fails has a documented error kind; `rebuild` exits 0 only when every session
//! and turn came through unchanged, and when it exits non-zero having dropped turns, what it
//! kept is original text (it never launders corruption).
//!
//! `CTXGATE_DAMAGE_TRIALS` sets the number of trials (default 200), `CTXGATE_DAMAGE_SEED` the
//! seed (printed with every failure, so a failing trial replays).
//! `tests/damaged.rs` pins the damage that made redb panic; this harness checks the answers.

mod common;

use common::{Rng, TestResult};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const PAGE: usize = 4096;
const SESSIONS: [&str; 3] = ["alpha", "beta", "gamma"];
const DOCS: [&str; 2] = ["round_1/plan.json", "round_1/log.txt"];

/// Error kinds a damaged file may give (README, DESIGN §3.8), each with its way out.
const DOCUMENTED: [&str; 9] = [
    "damaged",
    "corrupt",
    "needs_rebuild",
    "needs_upgrade",
    "not_an_index",
    "unknown_index",
    "unknown_session",
    "evidence_changed",
    "io",
];

/// A session's turns: (user, assistant).
type Turns = Vec<(String, String)>;

/// The pristine index, its evidence root, and what it holds.
struct Pristine {
    dir: tempfile::TempDir,
    index: Vec<u8>,
    sessions: Vec<(String, Turns)>,
    docs: Vec<(String, Vec<u8>)>,
}

fn ctxgate(db: &Path, evidence: &Path) -> Command {
    let mut cmd = common::ctxgate();
    cmd.env_remove("RUST_BACKTRACE").arg("--db").arg(db).arg("--evidence-root").arg(evidence).args([
        "--busy-timeout",
        "10",
        "--json",
    ]);
    cmd
}

fn pristine() -> &'static Pristine {
    static PRISTINE: OnceLock<Pristine> = OnceLock::new();
    PRISTINE.get_or_init(|| build().expect("building the index to damage"))
}

fn build() -> TestResult<Pristine> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let evidence = dir.path().join("evidence");
    let words = ["redis", "lock", "lease", "vacuum", "kafka", "offset", "retry", "shard", "tokio", "cache"];
    let mut rng = Rng(0x5eed);
    let mut log = String::new();
    for session in SESSIONS {
        for turn in 0..30 {
            let mut text =
                |n: usize| (0..n).map(|_| words[rng.below(words.len())]).collect::<Vec<_>>().join(" ");
            let line = serde_json::json!({
                "session": session,
                "user": format!("{} q{turn}?", text(8)),
                "assistant": format!("{} a{turn}.", text(30)),
            });
            log.push_str(&format!("{line}\n"));
        }
    }
    let log_path = dir.path().join("log.jsonl");
    std::fs::write(&log_path, log)?;
    expect_ok(ctxgate(&db, &evidence).arg("import").arg(&log_path))?;
    // A turn added alone stays pending: its row is read beside the folded ones.
    expect_ok(ctxgate(&db, &evidence).args([
        "add",
        "-s",
        "beta",
        "-u",
        "redis lease again",
        "-a",
        "PX 30000",
    ]))?;
    let mut docs = Vec::new();
    for (reference, bytes) in [
        (DOCS[0], br#"{"rows": [1, 2, 3], "owner": "billing", "note": "lease redis shard"}"#.to_vec()),
        (DOCS[1], "line one: kafka offset\nline two: retry the shard\n".repeat(40).into_bytes()),
    ] {
        let file = dir.path().join("doc");
        std::fs::write(&file, &bytes)?;
        expect_ok(ctxgate(&db, &evidence).args(["evidence", "put", "--ref", reference]).arg(&file))?;
        docs.push((reference.to_string(), bytes));
    }
    let mut sessions = Vec::new();
    for session in SESSIONS {
        let out = ctxgate(&db, &evidence).args(["show", "-s", session]).output()?;
        sessions.push((session.to_string(), turns(&out.stdout).ok_or("show of the pristine index")?));
    }
    let index = std::fs::read(&db)?;
    Ok(Pristine { dir, index, sessions, docs })
}

fn expect_ok(cmd: &mut Command) -> TestResult {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

/// The turns of a `show --json` document.
fn turns(stdout: &[u8]) -> Option<Turns> {
    let doc: Value = serde_json::from_slice(stdout).ok()?;
    doc["turns"]
        .as_array()?
        .iter()
        .map(|t| Some((t["user"].as_str()?.to_string(), t["assistant"].as_str()?.to_string())))
        .collect()
}

/// One way of damaging `bytes`.
fn damage(bytes: &mut Vec<u8>, rng: &mut Rng) -> String {
    let len = bytes.len();
    match rng.below(8) {
        0..=3 => {
            let (at, bit) = (rng.below(len), rng.below(8));
            bytes[at] ^= 1 << bit;
            format!("flip {at}:{bit}")
        }
        4 if len > PAGE => {
            let page = rng.below(len / PAGE);
            bytes[page * PAGE..((page + 1) * PAGE).min(len)].fill(0);
            format!("zero page {page}")
        }
        4 | 5 => {
            let at = rng.below(len);
            let end = (at + [16, 256][rng.below(2)]).min(len);
            bytes[at..end].fill(0);
            format!("zero {at}..{end}")
        }
        _ => {
            let at = if rng.below(2) == 0 { rng.below(len) } else { rng.below(len / PAGE + 1) * PAGE };
            bytes.truncate(at.min(len.saturating_sub(1)));
            format!("truncate to {}", bytes.len())
        }
    }
}

/// What one process did, checked against the rules that hold for every command: no panic, no
/// abort, no signal; a failure has a documented kind (`verify`'s exit 1 with its report of
/// inconsistencies is documented as such). Returns the exit code and stdout.
fn run(cmd: &mut Command, what: &str, failures: &mut Vec<String>) -> TestResult<(i32, Vec<u8>)> {
    let out = cmd.output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let Some(code) = out.status.code() else {
        failures.push(format!("{what}: killed by a signal ({:?}): {stderr}", out.status));
        return Ok((-1, out.stdout));
    };
    if code == 101 || code == 134 || stderr.contains("panicked") {
        failures.push(format!("{what}: exit {code}, a panic or an abort: {stderr}"));
    } else if code != 0 {
        let kind = stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v["error"]["kind"].as_str().map(str::to_string));
        let verify_report = what.ends_with(": verify") && code == 1;
        match kind {
            Some(kind) if DOCUMENTED.contains(&kind.as_str()) || verify_report => {}
            _ => failures.push(format!("{what}: exit {code} without a documented kind: {stderr}")),
        }
    }
    Ok((code, out.stdout))
}

/// `show -s name`, checked by [`run`] as `what`: its exit code and the turns it printed.
fn show(
    db: &Path,
    evidence: &Path,
    name: &str,
    what: &str,
    failures: &mut Vec<String>,
) -> TestResult<(i32, Option<Turns>)> {
    let (code, stdout) =
        run(ctxgate(db, evidence).args(["show", "-s", name]), &format!("{what}: show {name}"), failures)?;
    Ok((code, turns(&stdout)))
}

/// Whether `kept` is `original` with some turns left out, in order.
fn is_subsequence(kept: &Turns, original: &Turns) -> bool {
    let mut rest = original.iter();
    kept.iter().all(|turn| rest.any(|o| o == turn))
}

/// A trial on the index file: reads, then a rebuild and reads after it.
fn index_trial(rng: &mut Rng, what: &str, failures: &mut Vec<String>) -> TestResult {
    let p = pristine();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let evidence = p.dir.path().join("evidence");
    let mut bytes = p.index.clone();
    let case = damage(&mut bytes, rng);
    let what = format!("{what} ({case})");
    std::fs::write(&db, &bytes)?;
    let (name, original) = &p.sessions[rng.below(p.sessions.len())];
    let (code, shown) = show(&db, &evidence, name, &what, failures)?;
    if code == 0 && shown.as_ref() != Some(original) {
        failures.push(format!("{what}: show {name} exited 0 with other turns than the original"));
    }
    let (code, _) = run(ctxgate(&db, &evidence).arg("rebuild"), &format!("{what}: rebuild"), failures)?;
    // After a rebuild, each session reads back whole (exit 0) or what it kept is original.
    let mut dropped = false;
    for (name, original) in &p.sessions {
        let (shown, kept) = show(&db, &evidence, name, &format!("{what}: after rebuild"), failures)?;
        match kept {
            Some(kept) if shown == 0 && kept == *original => {}
            Some(kept) if shown == 0 && is_subsequence(&kept, original) => dropped = true,
            Some(_) if shown == 0 => {
                failures.push(format!(
                    "{what}: after rebuild (exit {code}) session {name} holds text that is not the original"
                ));
            }
            _ => dropped = true,
        }
    }
    if code == 0 && dropped {
        failures.push(format!("{what}: rebuild exited 0 and turns are missing or unreadable after it"));
    }
    Ok(())
}

/// A trial on an evidence document: `evidence show` serves the original bytes or refuses, and
/// `verify` notices a change.
fn evidence_trial(rng: &mut Rng, what: &str, failures: &mut Vec<String>) -> TestResult {
    // The index records its evidence root: the documents are damaged where they are, one trial
    // at a time, and put back after it.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let p = pristine();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    std::fs::write(&db, &p.index)?;
    let evidence = p.dir.path().join("evidence");
    let (reference, original) = &p.docs[rng.below(p.docs.len())];
    let mut bytes = original.clone();
    let case = damage(&mut bytes, rng);
    let what = format!("{what} ({reference}: {case})");
    std::fs::write(evidence.join(reference), &bytes)?;
    let checked = (|| -> TestResult {
        let (code, stdout) = run(
            ctxgate(&db, &evidence).args(["evidence", "show", reference]),
            &format!("{what}: evidence show"),
            failures,
        )?;
        if code == 0 && stdout != *original {
            failures.push(format!("{what}: evidence show exited 0 with bytes other than the original"));
        }
        let (code, _) = run(ctxgate(&db, &evidence).arg("verify"), &format!("{what}: verify"), failures)?;
        if code == 0 && bytes != *original {
            failures.push(format!("{what}: verify exited 0 on a changed document"));
        }
        Ok(())
    })();
    std::fs::write(evidence.join(reference), original)?;
    checked
}

/// An index whose import was killed with runs recorded and not merged: its file, its run
/// file, and each session's turns as a read after the merge gives them.
struct Interrupted {
    index: Vec<u8>,
    runs: Vec<u8>,
    sessions: Vec<(String, Turns)>,
}

fn interrupted() -> &'static Interrupted {
    static INTERRUPTED: OnceLock<Interrupted> = OnceLock::new();
    INTERRUPTED.get_or_init(|| build_interrupted().expect("an import interrupted with runs recorded"))
}

/// Kills an import of small batches (each writes a run) later and later until the killed
/// index has runs to merge (the next open says so).
fn build_interrupted() -> TestResult<Interrupted> {
    let dir = tempfile::tempdir()?;
    let words = ["redis", "lock", "lease", "vacuum", "kafka", "offset", "retry", "shard", "tokio", "cache"];
    let mut rng = Rng(0x0005_eed5);
    let mut log = String::new();
    for turn in 0..6000 {
        let mut text = |n: usize| (0..n).map(|_| words[rng.below(words.len())]).collect::<Vec<_>>().join(" ");
        let line = serde_json::json!({
            "session": SESSIONS[turn % SESSIONS.len()],
            "user": format!("{} q{turn}?", text(8)),
            "assistant": format!("{} a{turn}.", text(30)),
        });
        log.push_str(&format!("{line}\n"));
    }
    let log_path = dir.path().join("log.jsonl");
    std::fs::write(&log_path, log)?;
    let evidence = dir.path().join("evidence");
    for attempt in 0..40u64 {
        let db = dir.path().join(format!("index-{attempt}.redb"));
        let mut import = ctxgate(&db, &evidence)
            .args(["import", "--memory-mib", "1", "--no-compact"])
            .arg(&log_path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        std::thread::sleep(std::time::Duration::from_millis(150 + 100 * attempt));
        import.kill()?;
        import.wait()?;
        let runs_path = dir.path().join(format!("index-{attempt}.redb.runs"));
        let (Ok(index), Ok(runs)) = (std::fs::read(&db), std::fs::read(&runs_path)) else { continue };
        // A copy opened once: does it merge runs, and what does each session hold then?
        let copy = dir.path().join("copy.redb");
        std::fs::write(&copy, &index)?;
        std::fs::write(dir.path().join("copy.redb.runs"), &runs)?;
        let out = ctxgate(&copy, &evidence).args(["-v", "show", "-s", SESSIONS[0]]).output()?;
        if !String::from_utf8_lossy(&out.stderr).contains("merging the postings of an interrupted import") {
            continue;
        }
        let mut sessions = Vec::new();
        for session in SESSIONS {
            let out = ctxgate(&copy, &evidence).args(["show", "-s", session]).output()?;
            sessions.push((session.to_string(), turns(&out.stdout).ok_or("show of the merged copy")?));
        }
        return Ok(Interrupted { index, runs, sessions });
    }
    Err("no import was killed with runs recorded".into())
}

/// A trial on the run file of an interrupted import: a read after the damage merges the runs
/// or refuses them; what it shows is the original, and a rebuild restores every turn.
fn runs_trial(rng: &mut Rng, what: &str, failures: &mut Vec<String>) -> TestResult {
    let p = interrupted();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let evidence = dir.path().join("evidence");
    std::fs::write(&db, &p.index)?;
    let mut runs = p.runs.clone();
    let case = damage(&mut runs, rng);
    let what = format!("{what} (run file: {case})");
    std::fs::write(dir.path().join("index.redb.runs"), &runs)?;
    let (name, original) = &p.sessions[rng.below(p.sessions.len())];
    let (code, shown) = show(&db, &evidence, name, &what, failures)?;
    if code == 0 && shown.as_ref() != Some(original) {
        failures.push(format!("{what}: show {name} exited 0 with other turns than the original"));
    }
    run(
        ctxgate(&db, &evidence).args(["select", "-s", name, "redis lease shard"]),
        &format!("{what}: select"),
        failures,
    )?;
    // The runs are derived data: a rebuild derives the postings again from the stored turns.
    let (code, _) = run(ctxgate(&db, &evidence).arg("rebuild"), &format!("{what}: rebuild"), failures)?;
    if code != 0 {
        failures.push(format!("{what}: rebuild exited {code} with every turn intact"));
    }
    for (name, original) in &p.sessions {
        let (shown, kept) = show(&db, &evidence, name, &format!("{what}: after rebuild"), failures)?;
        if shown != 0 || kept.as_ref() != Some(original) {
            failures
                .push(format!("{what}: after rebuild, session {name} is not the original (exit {shown})"));
        }
    }
    Ok(())
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn damaged_files_never_give_a_silent_wrong_answer_a_panic_or_a_clean_rebuild_with_data_dropped() -> TestResult
{
    let trials = env_number("CTXGATE_DAMAGE_TRIALS", 200) as usize;
    let seed = env_number("CTXGATE_DAMAGE_SEED", 0x0da3_a6e5);
    pristine();
    interrupted();
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let workers = 2;
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let failures = &failures;
            scope.spawn(move || {
                for trial in (worker..trials).step_by(workers) {
                    let mut rng = Rng(seed ^ (trial as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let what = format!("trial {trial} (CTXGATE_DAMAGE_SEED={seed})");
                    let mut found = Vec::new();
                    let ran = match rng.below(8) {
                        0 | 1 => evidence_trial(&mut rng, &what, &mut found),
                        2 => runs_trial(&mut rng, &what, &mut found),
                        _ => index_trial(&mut rng, &what, &mut found),
                    };
                    if let Err(e) = ran {
                        found.push(format!("{what}: could not run: {e}"));
                    }
                    failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(found);
                }
            });
        }
    });
    let failures = failures.into_inner()?;
    eprintln!("{trials} damage trials (seed {seed}): {} broken rules", failures.len());
    assert!(failures.is_empty(), "{} broken rules:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

/// The rules the harness checks hold on the pristine files (so a failure is the damage's).
#[test]
fn the_pristine_index_reads_back_and_rebuilds_cleanly() -> TestResult {
    let p = pristine();
    let dir = tempfile::tempdir()?;
    let db: PathBuf = dir.path().join("index.redb");
    std::fs::write(&db, &p.index)?;
    let evidence = p.dir.path().join("evidence");
    let mut failures = Vec::new();
    let (code, _) = run(ctxgate(&db, &evidence).arg("rebuild"), "rebuild", &mut failures)?;
    assert_eq!(code, 0, "{failures:?}");
    for (name, original) in &p.sessions {
        let (code, stdout) = run(ctxgate(&db, &evidence).args(["show", "-s", name]), "show", &mut failures)?;
        assert_eq!((code, turns(&stdout).as_ref()), (0, Some(original)));
    }
    for (reference, original) in &p.docs {
        let (code, stdout) =
            run(ctxgate(&db, &evidence).args(["evidence", "show", reference]), "show", &mut failures)?;
        assert_eq!((code, &stdout), (0, original));
    }
    assert!(failures.is_empty(), "{failures:?}");
    Ok(())
}

//! Many processes on one index, as agents on one machine use it: an import of several batches
//! runs while other processes read and write; processes are killed at random points. Every
//! call is a real `ctxgate` process.

mod common;

use common::{Run, TestResult, ctxgate, run_at};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Turns an import writes per batch (`write::batch::BATCH_TURNS`), under a memory budget that
/// lets every batch be full ([`FULL_BATCHES`]).
const BATCH: u64 = 16_384;
/// `import --memory-mib` for batches of [`BATCH`] turns of the generated corpus (at the default
/// budget they end near 10,000).
const FULL_BATCHES: &str = "4096";
/// A writer waits for the import's batch in progress (seconds; batches of a debug build take
/// a few seconds on a loaded machine).
const WRITER_WAIT: &str = "60";

/// A generated canonical JSONL file of `turns` turns in sessions `bulk-NNNN`.
fn bulk_file(dir: &Path, turns: u64, seed: u64) -> TestResult<PathBuf> {
    let path = dir.join(format!("bulk-{turns}.jsonl"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    corpus::jsonl::write(&mut out, corpus::Corpus::new(seed).spread(turns, 8), |i| format!("bulk-{i:04}"))?;
    std::io::Write::flush(&mut out)?;
    Ok(path)
}

fn spawn(db: &Path, args: &[&str]) -> TestResult<Child> {
    let child = ctxgate()
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    Ok(child)
}

/// Turns per session name, from `sessions --json`.
fn session_turns(db: &Path) -> TestResult<Vec<(String, u64)>> {
    let out = run_at(db, ["--json", "sessions"])?;
    if out.code != Some(0) {
        return Err(format!("sessions failed: {}", out.stderr).into());
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout_bytes)?;
    let list = doc["sessions"].as_array().ok_or("no sessions array")?;
    Ok(list
        .iter()
        .map(|s| (s["name"].as_str().unwrap_or("").to_string(), s["turns"].as_u64().unwrap_or(0)))
        .collect())
}

fn turns_of(sessions: &[(String, u64)], prefix: &str) -> u64 {
    sessions.iter().filter(|(name, _)| name.starts_with(prefix)).map(|(_, turns)| turns).sum()
}

fn seed_index(db: &Path) -> TestResult {
    for (user, assistant) in [
        ("How should the worker take the Redis lock?", "SET lock <token> NX PX 45000, renewed every 15 s."),
        (
            "The Postgres vacuum falls behind on the events table.",
            "Lower autovacuum_vacuum_scale_factor to 0.02.",
        ),
        ("Which helm flag waits for the rollout?", "Pass wait with a timeout of 10m."),
    ] {
        let out = run_at(db, ["add", "-s", "seed", "-u", user, "-a", assistant])?;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    Ok(())
}

/// What a loop of calls saw.
#[derive(Default)]
struct Calls {
    /// `(started, ended, exit status success, stdout, stderr)` of each call.
    calls: Vec<(Instant, Instant, bool, Vec<u8>, String)>,
}

/// Runs `call(i)` again and again on a thread until `stop` is set.
fn looping(
    stop: &Arc<AtomicBool>,
    call: impl Fn(usize) -> TestResult<Run> + Send + 'static,
) -> std::thread::JoinHandle<Result<Calls, String>> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let mut calls = Calls::default();
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let out = call(i).map_err(|e| e.to_string())?;
            calls.calls.push((started, Instant::now(), out.code == Some(0), out.stdout_bytes, out.stderr));
            i += 1;
        }
        Ok(calls)
    })
}

/// Sets the flag when dropped: a test that returns early (an error, a failed assertion) stops
/// its looping threads instead of leaving them starting processes until the binary ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn joined(handle: std::thread::JoinHandle<Result<Calls, String>>) -> TestResult<Calls> {
    Ok(handle.join().map_err(|_| "a looping thread panicked")??)
}

#[test]
fn readers_and_writers_go_on_through_an_import_and_every_acknowledged_turn_is_stored() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    seed_index(&db)?;
    let turns = 3 * BATCH + 2_000;
    let bulk = bulk_file(dir.path(), turns, 11)?;
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_return = StopOnDrop(Arc::clone(&stop));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let db = db.clone();
            looping(&stop, move |i| {
                let query = ["redis lock renewal", "vacuum scale factor", "helm rollout wait"][(r + i) % 3];
                run_at(&db, ["--json", "select", "-s", "seed", query])
            })
        })
        .collect();
    let watcher = {
        let db = db.clone();
        looping(&stop, move |_| run_at(&db, ["--json", "sessions"]))
    };
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let db = db.clone();
            looping(&stop, move |i| {
                let user = format!("writer {w} turn {i}: the cache hit ratio fell to 61 percent");
                let session = format!("writer-{w}");
                run_at(
                    &db,
                    ["--busy-timeout", WRITER_WAIT, "add", "-s", &session, "-u", &user, "-a", "warm it"],
                )
            })
        })
        .collect();
    let import_started = Instant::now();
    // The import waits for the writers' adds between its batches: on a loaded machine that can
    // pass the default 5 s, which is not what this test is about.
    let import = run_at(
        &db,
        [
            "--busy-timeout",
            WRITER_WAIT,
            "-q",
            "import",
            "--memory-mib",
            FULL_BATCHES,
            bulk.to_str().ok_or("path")?,
        ],
    )?;
    let import_ended = Instant::now();
    // A last round of calls after the import.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    assert_eq!(import.code, Some(0), "the import: {}", import.stderr);
    let during = |calls: &Calls| {
        calls.calls.iter().filter(|(s, e, ..)| *s > import_started && *e < import_ended).count()
    };

    for reader in readers {
        let calls = joined(reader)?;
        for (_, _, ok, stdout, stderr) in &calls.calls {
            assert!(ok, "a reader failed during the import: {stderr}");
            let doc: serde_json::Value = serde_json::from_slice(stdout)?;
            assert!(!doc["blocks"].as_array().ok_or("blocks")?.is_empty(), "{doc}");
        }
        assert!(during(&calls) > 0, "no reader call began and ended while the import ran");
    }
    // Readers see the import batch by batch: a whole number of committed batches, or all.
    let watched = joined(watcher)?;
    let mut seen = std::collections::BTreeSet::new();
    for (_, _, ok, stdout, stderr) in &watched.calls {
        assert!(ok, "{stderr}");
        let doc: serde_json::Value = serde_json::from_slice(stdout)?;
        let bulk: u64 = (doc["sessions"].as_array().ok_or("sessions")?.iter())
            .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("bulk-")))
            .map(|s| s["turns"].as_u64().unwrap_or(0))
            .sum();
        assert!(
            bulk.is_multiple_of(BATCH) || bulk == turns,
            "a reader saw {bulk} imported turns: part of a batch"
        );
        seen.insert(bulk);
    }
    assert!(seen.iter().any(|&n| n > 0 && n < turns), "no reader saw the import in progress: {seen:?}");

    let writers: Vec<Calls> = writers.into_iter().map(joined).collect::<TestResult<_>>()?;
    let sessions = session_turns(&db)?;
    let mut added_during = 0;
    for (w, calls) in writers.iter().enumerate() {
        for (_, _, ok, _, stderr) in &calls.calls {
            assert!(ok, "a writer failed: {stderr}");
        }
        added_during += during(calls);
        let stored = turns_of(&sessions, &format!("writer-{w}"));
        assert_eq!(stored, calls.calls.len() as u64, "writer {w}: acknowledged adds stored");
    }
    assert!(added_during > 0, "no add began and ended while the import ran: writers waited for all of it");
    assert_eq!(turns_of(&sessions, "bulk-"), turns);
    let verify = run_at(&db, ["verify"])?;
    assert_eq!(verify.code, Some(0), "{}", verify.stderr);
    Ok(())
}

/// A small deterministic generator for the kill points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn processes_killed_at_random_points_leave_a_verified_index_with_every_acknowledged_turn() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    seed_index(&db)?;
    let turns = 2 * BATCH + 500;
    let bulk = bulk_file(dir.path(), turns, 12)?;
    let bulk = bulk.to_str().ok_or("path")?;
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64 | 1;
    eprintln!("kill points from seed {seed}");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut acknowledged = 0u64;
    let mut maybe = 0u64; // adds killed before they answered: stored or not
    let mut rounds = 0;
    while rounds < 2 || (rounds < 6 && started.elapsed() < Duration::from_secs(40)) {
        rounds += 1;
        let mut importer = spawn(&db, &["-q", "import", "--memory-mib", FULL_BATCHES, bulk])?;
        let mut reader = spawn(&db, &["select", "-s", "seed", "redis lock renewal"])?;
        let mut writer = spawn(
            &db,
            &["--busy-timeout", WRITER_WAIT, "add", "-s", "writer", "-u", &format!("round {rounds}")],
        )?;
        std::thread::sleep(Duration::from_millis(100 + rng.below(2_500)));
        importer.kill()?;
        importer.wait()?;
        match rng.below(3) {
            0 => {
                writer.kill()?;
                if writer.wait()?.success() {
                    acknowledged += 1;
                } else {
                    maybe += 1;
                }
            }
            _ => {
                let out = Run::from_output(writer.wait_with_output()?);
                assert!(out.code == Some(0), "a writer beside a killed import: {}", out.stderr);
                acknowledged += 1;
            }
        }
        if rng.below(2) == 0 {
            reader.kill()?;
        }
        reader.wait()?;
        // Whatever was killed where, the index opens, verifies, and holds every acknowledged turn.
        let verify = run_at(&db, ["verify"])?;
        assert_eq!(verify.code, Some(0), "round {rounds}: {}", verify.stderr);
        let stored = turns_of(&session_turns(&db)?, "writer");
        assert!(
            (acknowledged..=acknowledged + maybe).contains(&stored),
            "round {rounds}: {stored} turns stored of {acknowledged} acknowledged (+{maybe} killed)"
        );
    }
    // The import, run again, completes what the killed ones began.
    let out = run_at(&db, ["-q", "import", "--memory-mib", FULL_BATCHES, bulk])?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(turns_of(&session_turns(&db)?, "bulk-"), turns);
    let verify = run_at(&db, ["verify"])?;
    assert_eq!(verify.code, Some(0), "{}", verify.stderr);
    assert!(!dir.path().join("index.redb.runs").exists(), "the run file is gone once merged");
    Ok(())
}

/// Agents started together on a new machine: their first calls create the index at once. Each
/// process either makes the index or opens the one another made, never one half made ("not a
/// ctxgate index"), and every add is stored.
#[test]
fn processes_that_create_the_index_at_once_all_use_it() -> TestResult {
    const PROCESSES: usize = 4;
    let dir = tempfile::tempdir()?;
    for round in 0..8 {
        let db = dir.path().join(format!("new-{round}.redb"));
        let children = (0..PROCESSES)
            .map(|i| {
                spawn(&db, &["add", "-s", &format!("agent-{i}"), "-u", "first prompt", "-a", "first answer"])
            })
            .collect::<TestResult<Vec<_>>>()?;
        for child in children {
            let run = Run::from_output(child.wait_with_output()?);
            assert_eq!(run.code, Some(0), "round {round}: {}", run.stderr);
        }
        let sessions = session_turns(&db)?;
        assert_eq!(sessions.len(), PROCESSES, "round {round}: {sessions:?}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|name| name.contains(".new-") || name.contains("lock-probe"))
            .collect();
        assert!(leftovers.is_empty(), "round {round}: {leftovers:?}");
    }
    Ok(())
}

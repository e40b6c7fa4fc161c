//! An import's memory follows `--memory-mib`, not the file: the real binary imports a log of
//! long turns under a small budget and under one that lets every turn into one batch, and the
//! two indexes answer the same.
//!
//! One test in its own binary: the peak RSS of this process's children (`getrusage`) is the
//! largest of the imports run so far, so the small budget's import runs first.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Peak resident set of the children waited for so far, in KiB.
fn children_peak_kib() -> i64 {
    // SAFETY: `getrusage` fills the struct it is given; zeroed is a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    usage.ru_maxrss
}

fn ctxgate(db: &Path, args: &[&str]) -> Result<String, Box<dyn std::error::Error>> {
    let out = Command::new(env!("CARGO_BIN_EXE_ctxgate")).arg("--db").arg(db).args(args).output()?;
    if !out.status.success() {
        return Err(format!("ctxgate {args:?} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// A canonical JSONL log of `turns` turns of about 48 KB each, in two sessions: many distinct
/// words a turn, so that each holds several times its text in anchors and postings once
/// prepared.
fn write_log(path: &Path, turns: usize) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut word = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        format!("w{}", (state >> 33) % 50_000)
    };
    for t in 0..turns {
        let user: Vec<String> = (0..400).map(|_| word()).collect();
        let assistant: Vec<String> = (0..8_000).map(|_| word()).collect();
        let line = serde_json::json!({
            "session": format!("s{}", t % 2),
            "user": format!("question {t}: {}", user.join(" ")),
            "assistant": assistant.join(" "),
        });
        writeln!(out, "{line}")?;
    }
    out.flush()
}

#[test]
fn a_small_budget_bounds_the_import_of_long_turns_and_changes_nothing_it_stores() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("long.jsonl");
    // ~19 MB of text: far under BATCH_TURNS turns, so without a budget one batch.
    write_log(&log, 400)?;
    let (small, large) = (dir.path().join("small.redb"), dir.path().join("large.redb"));

    let log_arg = log.to_str().ok_or("temp path is not UTF-8")?;
    ctxgate(&small, &["import", "--memory-mib", "8", log_arg])?;
    let small_peak = children_peak_kib();
    ctxgate(&large, &["import", "--memory-mib", "4096", log_arg])?;
    let large_peak = children_peak_kib();
    eprintln!("peak RSS: {small_peak} KiB with 8 MiB, {large_peak} KiB with 4096 MiB");
    // One batch of the whole log holds its anchors and postings, several times its 19 MB.
    assert!(
        small_peak + 40 * 1024 < large_peak,
        "an 8 MiB budget peaked at {small_peak} KiB, the whole log in one batch at {large_peak} KiB"
    );

    // The same index either way: every turn, and what a query selects.
    for session in ["s0", "s1"] {
        let exported = (
            ctxgate(&small, &["export", "--session", session])?,
            ctxgate(&large, &["export", "--session", session])?,
        );
        assert_eq!(exported.0.lines().count(), 200);
        assert!(exported.0 == exported.1, "session {session} differs between the two imports");
        let query = "question 7: w12 w345 w4242";
        let selected = (
            ctxgate(&small, &["--json", "select", "--session", session, query])?,
            ctxgate(&large, &["--json", "select", "--session", session, query])?,
        );
        assert_eq!(selected.0, selected.1);
    }
    Ok(())
}

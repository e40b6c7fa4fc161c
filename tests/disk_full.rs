//! A full disk (issue 54, finding 9): an import that runs out of space fails with kind `io`,
//! and the index it leaves is read by the read-only commands without freeing any space (a
//! read does not need the interrupted import's runs merged). Runs on a small tmpfs, mounted
//! for the test; where mounting is not permitted (not root, a container without the right),
//! the test says why and returns.

mod common;

use common::TestResult;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Unmounts the test's file system when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A tmpfs of `size` at `dir`, or why there is none.
fn mount_small(dir: &Path, size: &str) -> Result<Mounted, String> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !out.status.success() {
        return Err(format!("mount failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(Mounted(dir.to_path_buf()))
}

#[test]
fn after_an_import_fills_the_disk_reads_work_without_freeing_space() -> TestResult {
    let dir = tempfile::tempdir()?;
    let small = dir.path().join("small");
    std::fs::create_dir(&small)?;
    let _mounted = match mount_small(&small, "6m") {
        Ok(mounted) => mounted,
        Err(why) => {
            eprintln!("skipped: no small file system to fill ({why})");
            return Ok(());
        }
    };
    // 30,000 turns, ~8 MB of log: more than the 6 MiB disk holds once indexed.
    let words =
        ["redis", "lock", "lease", "vacuum", "kafka", "offset", "retry", "shard", "tokio", "cache", "pool"];
    let mut rng = common::Rng(17);
    let mut log = String::new();
    for i in 0..30_000 {
        let mut text = |n: usize| (0..n).map(|_| words[rng.below(words.len())]).collect::<Vec<_>>().join(" ");
        let line = serde_json::json!({"session": format!("s{}", i % 3), "user": format!("{} q{i}", text(10)), "assistant": format!("{} id_{i}", text(25))});
        log.push_str(&format!("{line}\n"));
    }
    let log_path = dir.path().join("log.jsonl");
    std::fs::write(&log_path, log)?;
    let db = small.join("index.redb");
    let import = common::run_at(
        &db,
        [Path::new("--json"), Path::new("import"), Path::new("--memory-mib"), Path::new("4"), &log_path],
    )?;
    assert_ne!(import.code, Some(0), "the disk was not filled: grow the log");
    // A warning may come before the error's JSON line.
    let error: serde_json::Value = serde_json::from_str(import.stderr.lines().last().ok_or("no error")?)?;
    assert_eq!(error["error"]["kind"], "io", "a full disk is kind io: {}", import.stderr);

    // Nothing is freed: every read works on the full disk.
    let sessions: serde_json::Value = common::run_at(&db, ["--json", "sessions"])?.ok()?.json()?;
    let listed = sessions["sessions"].as_array().ok_or("no sessions")?;
    assert_eq!(listed.len(), 3, "{sessions}");
    for session in listed {
        let name = session["name"].as_str().ok_or("no name")?;
        let turns = session["turns"].as_u64().ok_or("no turn count")?;
        assert!(turns > 0, "{session}");
        let shown: serde_json::Value = common::run_at(&db, ["--json", "show", "-s", name])?.ok()?.json()?;
        assert_eq!(
            shown["turns"].as_array().map(Vec::len),
            Some(turns as usize),
            "every committed turn reads"
        );
        common::run_at(&db, ["select", "-s", name, "--", "redis lock lease"])?.ok()?;
    }
    common::run_at(&db, ["stats"])?.ok()?;
    // Once a read has found the file as the import left it, reads leave its bytes alone.
    let before = std::fs::read(&db)?;
    common::run_at(&db, ["search", "kafka offset"])?.ok()?;
    common::run_at(&db, ["sessions"])?.ok()?;
    assert!(std::fs::read(&db)? == before, "a read wrote the index");
    Ok(())
}

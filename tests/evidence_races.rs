//! Evidence access under attack: a directory of the evidence root swapped for a link to an
//! outside directory, over and over, while the real binary indexes, stores and reads. Nothing
//! outside the root may be read, indexed or written, however the swaps fall (DESIGN §4: no
//! escape through links). Each test repeats until its time is up, so it hits the windows a
//! check-then-open design leaves.
#![cfg(target_os = "linux")]

mod common;

use common::{TestEnv, TestResult};
use rustix::fs::{CWD, RenameFlags, renameat_with};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What files outside the root hold: a marker no file inside has, and another length.
const SECRET: &str = "{\"password\": \"hunter2-outside-the-root\", \"padding\": \"................\"}";
const INSIDE: &str = "{\"value\": 1}";

/// A root with `dir` holding `files` inside documents, and an outside directory with files of
/// the same names, reachable through `root/<dir>-link`.
struct Tree {
    _base: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    dir: PathBuf,
    link: PathBuf,
}

impl Tree {
    fn new(dir: &str, files: usize) -> TestResult<Tree> {
        let base = tempfile::tempdir()?;
        let root = base.path().join("root");
        let outside = base.path().join("outside");
        std::fs::create_dir_all(root.join(dir))?;
        std::fs::create_dir_all(&outside)?;
        for i in 0..files {
            std::fs::write(root.join(dir).join(format!("doc{i}.json")), INSIDE)?;
            std::fs::write(outside.join(format!("doc{i}.json")), SECRET)?;
        }
        let link = root.join(format!("{dir}-link"));
        std::os::unix::fs::symlink(&outside, &link)?;
        Ok(Tree { dir: root.join(dir), root, outside, link, _base: base })
    }

    /// Exchanges the directory and the link (atomically, both names always exist) until
    /// `stop`, sleeping `pause` between exchanges; returns how many it made.
    fn swap_until(&self, stop: &AtomicBool, pause: Duration) -> u64 {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            if renameat_with(CWD, &self.dir, CWD, &self.link, RenameFlags::EXCHANGE).is_ok() {
                swaps += 1;
            }
            std::thread::sleep(pause);
        }
        // Leave the real directory under its own name.
        if swaps % 2 == 1 {
            let _ = renameat_with(CWD, &self.dir, CWD, &self.link, RenameFlags::EXCHANGE);
        }
        swaps
    }

    fn outside_files(&self) -> TestResult<usize> {
        Ok(std::fs::read_dir(&self.outside)?.count())
    }
}

fn root_arg(tree: &Tree) -> &str {
    tree.root.to_str().unwrap()
}

/// `ctxgate --evidence-root ROOT --json evidence ARGS...`.
fn evidence(env: &TestEnv, tree: &Tree, args: &[&str]) -> TestResult<common::Run> {
    let mut all = vec!["--evidence-root", root_arg(tree), "--json", "evidence"];
    all.extend_from_slice(args);
    env.run(all)
}

/// `evidence put --ref REFERENCE FILE`.
fn put(env: &TestEnv, tree: &Tree, reference: &str, file: &Path) -> TestResult<common::Run> {
    evidence(env, tree, &["put", "--ref", reference, file.to_str().ok_or("utf-8 path")?])
}

/// Runs `body` with the swapper going; returns the number of swaps.
fn with_swaps(tree: &Tree, pause: Duration, body: impl FnOnce() -> TestResult) -> TestResult<u64> {
    /// Stops the swapper however `body` ends, a failed assertion included (the scope waits
    /// for the swapper before it passes the panic on).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let swapper = scope.spawn(|| tree.swap_until(&stop, pause));
        let result = {
            let _stop = StopOnDrop(&stop);
            body()
        };
        let swaps = swapper.join().map_err(|_| "the swapper panicked")?;
        result.map(|()| swaps)
    })
}

#[derive(serde::Deserialize)]
struct List {
    documents: Vec<Listed>,
}

#[derive(serde::Deserialize)]
struct Listed {
    evidence_ref: String,
    bytes: u64,
}

#[test]
fn evidence_index_never_indexes_a_file_outside_the_root() -> TestResult {
    let tree = Tree::new("d", 2000)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut trials, mut indexed_some) = (0, false);
    let swaps = with_swaps(&tree, Duration::from_micros(300), || {
        while trials < 6 && Instant::now() < deadline {
            trials += 1;
            let env = TestEnv::new()?;
            let db = env.dir.path().join(format!("i{trials}.redb"));
            let indexed = common::run_at(&db, ["--json", "evidence", "index", root_arg(&tree)])?;
            assert!(indexed.code == Some(0), "{indexed:?}");
            let listed = common::run_at(&db, ["--json", "evidence", "list"])?.ok()?.json::<List>()?.documents;
            // A walk may meet the link under both names and index nothing; some trials index.
            indexed_some |= !listed.is_empty();
            for doc in &listed {
                assert_eq!(
                    doc.bytes,
                    INSIDE.len() as u64,
                    "trial {trials}: {} was indexed from outside the root",
                    doc.evidence_ref
                );
            }
            let shown = common::run_at(&db, ["--json", "select", "--session", "s", "hunter2 password"])?;
            assert!(!shown.stdout.contains("hunter2"), "trial {trials}: {}", shown.stdout);
        }
        Ok(())
    })?;
    assert!(swaps > 10, "the swapper ran ({swaps} swaps)");
    assert!(indexed_some, "no trial indexed anything");
    Ok(())
}

#[test]
fn evidence_put_never_writes_outside_the_root() -> TestResult {
    let tree = Tree::new("w", 0)?;
    let env = TestEnv::new()?;
    let input = env.dir.path().join("input.json");
    std::fs::write(&input, INSIDE)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut puts = 0;
    let mut refused = 0;
    let swaps = with_swaps(&tree, Duration::from_micros(300), || {
        while puts < 300 && Instant::now() < deadline {
            let reference = format!("w/doc{puts}.json");
            puts += 1;
            let run = put(&env, &tree, &reference, &input)?;
            match run.code {
                Some(0) => {}
                Some(1) => {
                    // `bad_ref` when the link is seen as such; when a swap falls between the
                    // refusal and its diagnosis, the file system's own error (`evidence`).
                    let kind = run.json_error()?.error.kind;
                    assert!(kind == "bad_ref" || kind == "evidence", "{reference}: {}", run.stderr);
                    refused += 1;
                }
                _ => return Err(format!("{reference}: {run:?}").into()),
            }
            assert_eq!(tree.outside_files()?, 0, "after {reference}: a file was written outside the root");
        }
        Ok(())
    })?;
    assert!(swaps > 10 && puts > 20, "{swaps} swaps, {puts} puts");
    // The swaps fell while some puts ran: those were refused, never written outside.
    assert!(refused < puts, "some puts succeeded ({refused} of {puts} refused)");
    Ok(())
}

#[test]
fn evidence_show_never_reads_outside_the_root() -> TestResult {
    let tree = Tree::new("w", 1)?;
    let env = TestEnv::new()?;
    // `evidence show` and `project` read an index; they do not create one.
    env.add("s", "a turn", "to create the index")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut shows = 0;
    let mut read_inside = 0;
    let swaps = with_swaps(&tree, Duration::from_micros(300), || {
        while shows < 300 && Instant::now() < deadline {
            shows += 1;
            for command in ["show", "project"] {
                let run = evidence(&env, &tree, &[command, "w/doc0.json"])?;
                assert!(
                    !run.stdout.contains("hunter2"),
                    "{command} {shows}: read outside the root: {}",
                    run.stdout
                );
                if run.code == Some(0) {
                    read_inside += 1;
                }
            }
        }
        Ok(())
    })?;
    assert!(swaps > 10 && shows > 20, "{swaps} swaps, {shows} shows");
    assert!(read_inside > 0, "the document inside was read while the link was not in its place");
    Ok(())
}

/// Not a race, the end state: a link planted where a directory of a ref goes, which is what the
/// swaps above leave half the time.
#[test]
fn a_link_in_place_of_a_directory_is_refused_by_every_access() -> TestResult {
    let tree = Tree::new("w", 1)?;
    let env = TestEnv::new()?;
    let input = env.dir.path().join("input.json");
    std::fs::write(&input, INSIDE)?;
    let link = tree.link.strip_prefix(&tree.root)?.to_str().unwrap().to_string();
    let refused = put(&env, &tree, &format!("{link}/new.json"), &input)?;
    assert_eq!(refused.expect_code(1)?.json_error()?.error.kind, "bad_ref");
    assert_eq!(tree.outside_files()?, 1);
    for command in ["show", "project"] {
        let run = evidence(&env, &tree, &[command, &format!("{link}/doc0.json")])?;
        assert_eq!(run.expect_code(1)?.json_error()?.error.kind, "bad_ref", "{command}");
    }
    assert!(Path::new(&tree.outside).join("doc0.json").exists());
    Ok(())
}

/// What a `put` killed mid-write (or out of disk space) leaves, under the fixed name builds
/// before unique names used and under a unique name of a process that is gone: neither blocks a
/// retry, neither is ever a document, and the next `evidence index` removes the dead writer's.
#[test]
fn a_temporary_file_left_by_a_killed_put_blocks_no_retry() -> TestResult {
    let tree = Tree::new("w", 0)?;
    let env = TestEnv::new()?;
    let input = env.dir.path().join("input.json");
    std::fs::write(&input, INSIDE)?;
    std::fs::write(tree.dir.join(".doc.json.ctxgate-tmp"), "{\"val")?;
    let dead = tree.dir.join(".ctxgate-tmp.0-3");
    std::fs::write(&dead, "{\"val")?;
    put(&env, &tree, "w/doc.json", &input)?.ok()?;
    assert_eq!(std::fs::read_to_string(tree.dir.join("doc.json"))?, INSIDE);
    // The names of temporary files are not refs.
    for reserved in ["w/.doc.json.ctxgate-tmp", "w/.ctxgate-tmp.0-3", "w/.ctxgate-tmp"] {
        assert_eq!(
            put(&env, &tree, reserved, &input)?.expect_code(1)?.json_error()?.error.kind,
            "bad_ref",
            "{reserved}"
        );
    }
    let db = env.dir.path().join("walk.redb");
    common::run_at(&db, ["evidence", "index", root_arg(&tree)])?.ok()?;
    let listed = common::run_at(&db, ["--json", "evidence", "list"])?.ok()?.json::<List>()?.documents;
    let refs: Vec<&str> = listed.iter().map(|d| d.evidence_ref.as_str()).collect();
    assert_eq!(refs, ["w/doc.json"]);
    assert!(!dead.exists(), "the dead writer's temporary file is removed");
    Ok(())
}

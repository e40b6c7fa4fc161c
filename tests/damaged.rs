//! A damaged index file is an error, never a panic (issue 23, finding 5).
//!
//! One small real index (four sessions, 301 turns, three evidence documents) is built with the
//! real binary; then copies of it are damaged (single bit flips at seeded offsets, in the file
//! header and in page headers too, zeroed runs, truncations) and every read command and a
//! write run on each copy. None may exit 101 or print "panicked", and every failure must name
//! the file and a way out. The patterns that made redb panic before are pinned as named
//! cases, placed by the file's structure (the leaf page of redb's table of tables, a leaf of
//! the turns table) rather than by offset, so that they survive small layout changes.
//!
//! `CTXGATE_DAMAGED_BIN=/path/to/ctxgate` runs the same trials against another build (an older
//! one, to see them fail).

mod common;

use common::TestResult;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Trials of the seeded test: at least [`MIN_TRIALS`] however slow the machine, then more up to
/// this many while [`TRIAL_TIME`] lasts.
const MAX_TRIALS: usize = 160;
const TRIAL_TIME: Duration = Duration::from_secs(40);
const MIN_TRIALS: usize = 10;
const PAGE: usize = 4096;

fn bin() -> OsString {
    std::env::var_os("CTXGATE_DAMAGED_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_ctxgate").into())
}

fn ctxgate(db: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env_remove("CTXGATE_DB")
        .env_remove("CTXGATE_LOG")
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE");
    // Nothing else holds these files: the timeout only bounds the open's own work (a debug
    // build of redb walks the whole file on open, slow on a loaded machine), and a lock left
    // held still fails, late.
    cmd.arg("--db").arg(db).arg("--busy-timeout").arg("10");
    cmd
}

/// The pristine index: its bytes, and the directory that holds its evidence root.
struct Pristine {
    _dir: tempfile::TempDir,
    evidence: PathBuf,
    bytes: Vec<u8>,
    /// The stored row of turn 10 of sess-1 (its text is compressed: found by its bytes).
    turn_row: Vec<u8>,
}

fn pristine() -> &'static Pristine {
    static PRISTINE: OnceLock<Pristine> = OnceLock::new();
    PRISTINE.get_or_init(|| build().expect("building the index to damage"))
}

fn build() -> TestResult<Pristine> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log = dir.path().join("log.jsonl");
    let words = [
        "redis", "lock", "postgres", "vacuum", "kafka", "consumer", "offset", "retry", "timeout", "billing",
        "worker", "deploy", "latency", "cache", "shard", "replica", "queue", "tokio", "rayon", "memory",
    ];
    let mut state = 7u64;
    let mut word = || words[(next(&mut state) % words.len() as u64) as usize];
    let mut text = String::new();
    for session in 0..4 {
        for turn in 0..75 {
            let user: Vec<&str> = (0..10).map(|_| word()).collect();
            let assistant: Vec<&str> = (0..24).map(|_| word()).collect();
            let line = serde_json::json!({
                "session": format!("sess-{session}"),
                "user": format!("{} case{session}_{turn}?", user.join(" ")),
                "assistant": format!("{} ident_{turn}.", assistant.join(" ")),
            });
            text.push_str(&format!("{line}\n"));
        }
    }
    std::fs::write(&log, text)?;
    expect_ok(ctxgate(&db).arg("import").arg(&log))?;
    for i in 1..=3 {
        let doc = dir.path().join(format!("doc{i}.json"));
        std::fs::write(
            &doc,
            format!(r#"{{"rows": [{i}, 2, 3], "name": "doc{i}", "note": "latency budget redis"}}"#),
        )?;
        expect_ok(
            ctxgate(&db).args(["evidence", "put", "--ref", &format!("round_1/doc{i}.json")]).arg(&doc),
        )?;
    }
    expect_ok(ctxgate(&db).args([
        "add",
        "-s",
        "sess-0",
        "-u",
        "redis lock again",
        "--assistant",
        "PX 30000",
    ]))?;
    let bytes = std::fs::read(&db)?;
    let turn_row = {
        const TURNS: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("turns");
        let sessions: redb::TableDefinition<&str, u32> = redb::TableDefinition::new("session_names");
        let file = redb::ReadOnlyDatabase::open(&db)?;
        let txn = redb::ReadableDatabase::begin_read(&file)?;
        let session = txn.open_table(sessions)?.get("sess-1")?.ok_or("no sess-1")?.value();
        let row = txn.open_table(TURNS)?.get((u64::from(session) << 32) | 10)?.ok_or("no turn 10")?;
        row.value().to_vec()
    };
    Ok(Pristine { evidence: dir.path().join("index.evidence"), _dir: dir, bytes, turn_row })
}

fn expect_ok(cmd: &mut Command) -> TestResult {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

/// xorshift64: the trials' offsets, the same on every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The commands run on every damaged copy: each read command, and a write.
const COMMANDS: [&[&str]; 8] = [
    &["stats"],
    &["sessions"],
    &["select", "-s", "sess-0", "--", "redis lock budget"],
    &["search", "kafka offset"],
    &["show", "-s", "sess-1"],
    &["verify"],
    &["export", "-s", "sess-2"],
    &["add", "-s", "sess-3", "-u", "redis again", "--assistant", "ok then"],
];

/// What the commands did on one damaged copy.
#[derive(Debug, Default)]
struct Outcome {
    /// Exit codes, one per command.
    codes: Vec<i32>,
    /// What broke the rules, one line each.
    failures: Vec<String>,
}

/// Runs every command on a fresh copy of `bytes` (a command may repair or change the file).
fn check(case: &str, bytes: &[u8]) -> TestResult<Outcome> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut outcome = Outcome::default();
    for args in COMMANDS {
        std::fs::write(&db, bytes)?;
        let out = ctxgate(&db).arg("--evidence-root").arg(&pristine().evidence).args(args).output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{case}: `{}`", args.join(" "));
        let Some(code) = out.status.code() else {
            outcome.failures.push(format!("{what}: killed by a signal ({:?}); stderr: {stderr}", out.status));
            continue;
        };
        outcome.codes.push(code);
        if code == 101 || stderr.contains("panicked") {
            let first = stderr.lines().take(3).collect::<Vec<_>>().join(" | ");
            outcome.failures.push(format!("{what}: exit {code}, a panic: {first}"));
        } else if code != 0 {
            let named = stderr.contains(&db.display().to_string());
            let way_out = ["ctxgate rebuild", "backup", "ctxgate verify"].iter().any(|w| stderr.contains(w));
            if !named || !way_out {
                outcome
                    .failures
                    .push(format!("{what}: exit {code} without the file and a way out: {stderr}"));
            }
        }
    }
    Ok(outcome)
}

/// One way of damaging the file, chosen from `state`.
fn damage(bytes: &[u8], state: &mut u64) -> (String, Vec<u8>) {
    let mut out = bytes.to_vec();
    let len = bytes.len();
    let pages = len / PAGE;
    match next(state) % 8 {
        // A bit anywhere.
        0..=2 => {
            let (at, bit) = ((next(state) % len as u64) as usize, next(state) % 8);
            out[at] ^= 1 << bit;
            (format!("flip {at}:{bit}"), out)
        }
        // A bit of redb's header (the god byte, page size, region layout, both commit slots).
        3 => {
            let (at, bit) = ((next(state) % 512) as usize, next(state) % 8);
            out[at] ^= 1 << bit;
            (format!("flip header {at}:{bit}"), out)
        }
        // A bit of a page's header (type, entry count, the first offsets).
        4 => {
            let page = 1 + (next(state) % (pages as u64 - 1)) as usize;
            let (at, bit) = (page * PAGE + (next(state) % 16) as usize, next(state) % 8);
            out[at] ^= 1 << bit;
            (format!("flip page {page} header {at}:{bit}"), out)
        }
        // A run of zeros.
        5 | 6 => {
            let run = [16, 256, PAGE][(next(state) % 3) as usize];
            let at = (next(state) % len as u64) as usize;
            let end = (at + run).min(len);
            out[at..end].fill(0);
            (format!("zero {at}+{run}"), out)
        }
        // Cut short.
        _ => {
            let at = (next(state) % len as u64) as usize;
            out.truncate(at);
            (format!("truncate to {at}"), out)
        }
    }
}

#[test]
fn damaged_copies_are_errors_naming_the_file_never_panics() -> TestResult {
    let bytes = &pristine().bytes;
    let started = Instant::now();
    let failures = std::sync::Mutex::new(Vec::new());
    let (trials, failed_exits, panicking_trials) = (
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    );
    let workers = 2;
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (failures, trials, failed_exits, panicking) =
                (&failures, &trials, &failed_exits, &panicking_trials);
            scope.spawn(move || {
                let mut state = 0x9e37_79b9_7f4a_7c15 ^ (worker as u64 + 1);
                let mut i = worker;
                while i < MAX_TRIALS && (i < MIN_TRIALS || started.elapsed() < TRIAL_TIME) {
                    let (case, damaged) = damage(bytes, &mut state);
                    let outcome = check(&format!("trial {i} ({case})"), &damaged).expect("running a trial");
                    failed_exits.fetch_add(
                        outcome.codes.iter().filter(|c| **c != 0).count(),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    if outcome.failures.iter().any(|f| f.contains("a panic")) {
                        panicking.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    failures.lock().expect("failures").extend(outcome.failures);
                    trials.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    i += workers;
                }
            });
        }
    });
    let trials = trials.into_inner();
    let failures = failures.into_inner()?;
    eprintln!(
        "{trials} damaged copies x {} commands in {:.1} s: {} failed exits, {} copies with a panic, {} broken rules",
        COMMANDS.len(),
        started.elapsed().as_secs_f64(),
        failed_exits.into_inner(),
        panicking_trials.into_inner(),
        failures.len()
    );
    assert!(failures.is_empty(), "{} broken rules:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

/// The leaf pages of redb's table of tables (one per commit slot): a leaf (type byte 1) with
/// the key `session_names`. Returns each page's start.
fn table_tree_leaves(bytes: &[u8]) -> Vec<usize> {
    let name = b"session_names";
    let mut pages: Vec<usize> = bytes
        .windows(name.len())
        .enumerate()
        .filter(|(_, w)| *w == name)
        .map(|(at, _)| at / PAGE * PAGE)
        .filter(|page| bytes[*page] == 1)
        .collect();
    pages.dedup();
    pages
}

/// In the leaf at `page`, with variable-length keys and values: the offsets of the `u32` key
/// ends and value ends (`[type, reserved, entries: u16, key ends.., value ends..]`), and the
/// keys.
fn leaf_entries(bytes: &[u8], page: usize) -> (Vec<usize>, Vec<usize>, Vec<Vec<u8>>) {
    let entries = u16::from_le_bytes([bytes[page + 2], bytes[page + 3]]) as usize;
    let key_ends: Vec<usize> = (0..entries).map(|i| page + 4 + 4 * i).collect();
    let value_ends: Vec<usize> = (0..entries).map(|i| page + 4 + 4 * (entries + i)).collect();
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes")) as usize;
    let data = 4 + 8 * entries;
    let mut keys = Vec::new();
    let mut start = data;
    for &end in &key_ends {
        let end = u32_at(end);
        keys.push(bytes[page + start..page + end].to_vec());
        start = end;
    }
    (key_ends, value_ends, keys)
}

/// A named damage: what it does to every copy of a structure, and where redb panicked on it
/// before ctxgate caught it (a debug build; redb 4.6).
///
/// `untouched` are the commands (by their first two words) that do not read the damaged
/// structure: read-only, they may answer (exit 0) from the pages that are intact. Every other
/// command must fail `damaged`.
struct Regression {
    name: &'static str,
    panicked_at: &'static str,
    apply: fn(&mut Vec<u8>) -> usize,
    untouched: &'static [&'static str],
}

const REGRESSIONS: [Regression; 4] = [
    Regression {
        // `&str` keys are checked with `str::from_utf8(..).unwrap()`.
        name: "table name not UTF-8",
        panicked_at: "redb types.rs:803 (unwrap of a Utf8Error)",
        apply: |bytes| {
            let name = b"session_names";
            let mut done = 0;
            for page in table_tree_leaves(bytes) {
                let (_, _, keys) = leaf_entries(bytes, page);
                if keys.iter().any(|k| k == name) {
                    let at = page + find(&bytes[page..page + PAGE], name).expect("the key is in its page");
                    bytes[at] ^= 0x80;
                    done += 1;
                }
            }
            done
        },
        untouched: &[],
    },
    Regression {
        name: "table tree leaf of page type 0",
        panicked_at: "redb btree.rs:1110 (unreachable)",
        apply: |bytes| {
            let pages = table_tree_leaves(bytes);
            for &page in &pages {
                bytes[page] = 0;
            }
            pages.len()
        },
        untouched: &[],
    },
    Regression {
        // The value before `meta` ends past the page: reading `meta`'s value slices out of it.
        name: "table tree value end past its page",
        panicked_at: "redb btree_base.rs:283 (slice out of range)",
        apply: |bytes| {
            let mut done = 0;
            for page in table_tree_leaves(bytes) {
                let (_, value_ends, keys) = leaf_entries(bytes, page);
                if let Some(meta) = keys.iter().position(|k| k == b"meta").filter(|i| *i > 0) {
                    bytes[value_ends[meta - 1] + 1] ^= 0x10; // + 4096
                    done += 1;
                }
            }
            done
        },
        untouched: &[],
    },
    Regression {
        name: "turns leaf of page type 0",
        panicked_at: "redb btree_base.rs:35 (debug assertion: invalid page type; a release build returns Corrupted)",
        apply: |bytes| {
            // Every page holding it: a copy-on-write file may keep older copies of the leaf.
            let row = &pristine().turn_row;
            let pages: Vec<usize> = (0..bytes.len() / PAGE)
                .filter(|p| find(&bytes[p * PAGE..(p + 1) * PAGE], row).is_some())
                .collect();
            for &page in &pages {
                bytes[page * PAGE] = 0;
            }
            pages.len()
        },
        // A turn of sess-1: counts, the session list, and other sessions' turns read fine; so
        // may a search whose hits are elsewhere (compressed rows put ~80 turns in a leaf:
        // whether its hits are in this one depends on the layout).
        untouched: &["stats", "sessions", "select -s", "export -s", "search kafka offset"],
    },
];

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn damage_that_made_redb_panic_is_a_damaged_error_with_exit_5() -> TestResult {
    let mut failures = Vec::new();
    for regression in &REGRESSIONS {
        let mut bytes = pristine().bytes.clone();
        let applied = (regression.apply)(&mut bytes);
        assert!(applied > 0, "{}: the structure it damages is not in the file any more", regression.name);
        let case = format!("{} (panicked at {})", regression.name, regression.panicked_at);
        let outcome = check(&case, &bytes)?;
        failures.extend(outcome.failures);
        let untouched =
            |args: &[&str]| regression.untouched.contains(&args[..args.len().min(2)].join(" ").as_str());
        let expected: Vec<Vec<i32>> =
            COMMANDS.iter().map(|args| if untouched(args) { vec![0, 5] } else { vec![5] }).collect();
        if outcome.codes.iter().zip(&expected).any(|(c, allowed)| !allowed.contains(c)) {
            failures.push(format!(
                "{case}: exit codes {:?}, expected 5 (damaged) for every command reading the damage ({expected:?})",
                outcome.codes
            ));
        }
        // The JSON error of the same: kind `damaged`, the file named.
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("index.redb");
        std::fs::write(&db, &bytes)?;
        let json_command = if untouched(&["stats"]) { "verify" } else { "stats" };
        let out = ctxgate(&db).args(["--json", json_command]).output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let doc: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| serde_json::json!({"unparsed": format!("{e}: {stderr}")}));
        if doc["error"]["kind"] != "damaged"
            || !doc["error"]["message"].as_str().is_some_and(|m| m.contains("is damaged"))
        {
            failures.push(format!("{case}: --json {json_command}: {doc}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[test]
fn a_truncated_file_is_damaged_not_another_programs_file() -> TestResult {
    let bytes = &pristine().bytes;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    std::fs::write(&db, &bytes[..bytes.len() / 2])?;
    let out = ctxgate(&db).arg("stats").output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("index.redb is damaged") && stderr.contains("ctxgate rebuild"), "{stderr}");
    assert!(!stderr.contains("not a ctxgate index"), "{stderr}");
    Ok(())
}

#[test]
fn help_lists_exit_code_5() -> TestResult {
    let out = Command::new(bin()).arg("--help").output()?;
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.lines().any(|l| l.trim_start().starts_with("5  the index file is damaged")), "{help}");
    Ok(())
}

/// The server answers a call on a damaged file with a `damaged` tool error naming it, and
/// goes on serving: the same server answers once the file is good again.
#[tokio::test]
async fn the_server_reports_a_damaged_file_and_keeps_serving()
-> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let pristine = pristine();
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    // The server opens the index once when it starts (a damaged one then stops it with exit
    // 5): the file is damaged after that.
    std::fs::write(&db, &pristine.bytes)?;
    let mut command = tokio::process::Command::new(bin());
    command.arg("serve").arg("--db").arg(&db).arg("-q").env_remove("CTXGATE_LOG").env_remove("RUST_LOG");
    let client = ().serve(rmcp::transport::TokioChildProcess::new(command)?).await?;
    let list = || CallToolRequestParams::new("list_sessions").with_arguments(serde_json::Map::new());
    let mut bytes = pristine.bytes.clone();
    (REGRESSIONS[1].apply)(&mut bytes);
    std::fs::write(&db, &bytes)?;
    for attempt in 0..2 {
        let result = client.call_tool(list()).await?;
        assert_eq!(result.is_error, Some(true), "attempt {attempt}: {result:?}");
        let text = result.content.first().and_then(|c| c.as_text()).ok_or("no error text")?;
        let content: serde_json::Value = serde_json::from_str(&text.text)?;
        assert_eq!(content["error"]["kind"], "damaged", "attempt {attempt}: {content}");
        let message = content["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&db.display().to_string()) && message.contains("ctxgate rebuild"),
            "{message}"
        );
    }
    std::fs::write(&db, &pristine.bytes)?;
    let result = client.call_tool(list()).await?;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let sessions = result.structured_content.ok_or("no result")?;
    assert_eq!(sessions["sessions"].as_array().map(Vec::len), Some(4), "{sessions}");
    client.cancel().await?;
    Ok(())
}

/// Runs `ctxgate import` of a log of eight batches and kills it once the first batch's commit
/// (which records its run in the run file) is logged.
fn interrupted_import(db: &Path, dir: &Path) -> TestResult {
    let turns = 8 * ctxgate::BATCH_TURNS;
    let log = dir.join("big.jsonl");
    let mut text = String::new();
    for i in 0..turns {
        let line = serde_json::json!({
            "session": format!("s{}", i % 3),
            "user": format!("why does service_{} time out after retry_policy_{}?", i % 53, i % 7),
            "assistant": format!("worker_{} holds the lock for {} ms", i % 29, 50 + i % 400),
        });
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(&log, text)?;
    // A budget that lets each batch hold BATCH_TURNS turns.
    let mut child = ctxgate(db)
        .args(["import", "--memory-mib", "4096"])
        .arg(&log)
        .env("CTXGATE_LOG", "debug")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let written = format!("wrote {} turns", ctxgate::BATCH_TURNS);
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let committed = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .any(|l| l.contains(&written));
    child.kill()?;
    assert!(committed, "no batch was committed");
    assert_eq!(child.wait()?.code(), None, "the import finished before it could be killed: grow the log");
    Ok(())
}

#[test]
fn a_damaged_run_file_names_rebuild_which_recovers_not_verify() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    interrupted_import(&db, dir.path())?;
    let runs = dir.path().join("index.redb.runs");
    let mut bytes = std::fs::read(&runs)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&runs, &bytes)?;
    for args in [&["stats"][..], &["verify"]] {
        let out = ctxgate(&db).args(args).output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(
            stderr.contains("index.redb.runs is damaged") && stderr.contains("ctxgate rebuild"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("ctxgate verify"),
            "verify fails the same way: it must not be the advice: {stderr}"
        );
    }
    let out = ctxgate(&db).arg("rebuild").output()?;
    assert!(out.status.success(), "rebuild: {}", String::from_utf8_lossy(&out.stderr));
    let out = ctxgate(&db).arg("verify").output()?;
    assert!(out.status.success(), "verify after rebuild: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

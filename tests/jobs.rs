//! The offline jobs on real index files: verify, forget, compact.

use ctxgate::{Gatekeeper, ImportOptions, Options};
use std::path::{Path, PathBuf};
use std::process::Command;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn open(path: &Path) -> Result<Gatekeeper, ctxgate::Error> {
    Gatekeeper::open(path, Options::default())
}

const TOPICS: [&str; 6] = ["redis", "asyncio", "postgres", "kubernetes", "terraform", "grpc"];

/// A turn of session `s`: a topic shared by every session, and identifiers of its own.
fn turn(s: usize, t: usize) -> (String, String) {
    let topic = TOPICS[(s + t) % TOPICS.len()];
    let user = format!("How do I configure {topic} retry_policy_{t} for service_{s}_{}?", t % 7);
    let assistant = format!(
        "Set {topic} max_retries_{} in config_{s}.yaml; only_session_{s} uses backoff_ms {}.",
        t % 5,
        100 + t
    );
    (user, assistant)
}

fn add_sessions(gk: &Gatekeeper, sessions: usize, turns: usize) -> TestResult {
    for t in 0..turns {
        for s in 0..sessions {
            let (user, assistant) = turn(s, t);
            gk.session(&format!("s{s}"))?.add_turn(&user, &assistant)?;
        }
    }
    Ok(())
}

fn blocks(gk: &Gatekeeper, session: &str, query: &str) -> Result<Vec<(u32, String, String)>, ctxgate::Error> {
    let selection = gk.session(session)?.select(query)?;
    Ok(selection.blocks.into_iter().map(|b| (b.turn_id, b.user, b.assistant)).collect())
}

fn cli(db: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgate")).arg("--db").arg(db).args(args).output().expect("run ctxgate")
}

#[test]
fn verify_passes_on_folded_and_pending_turns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    add_sessions(&gk, 3, 100)?;
    let stats = gk.stats()?;
    assert!(stats.pending_turns > 0 && stats.pending_turns < 300, "{stats:?}");
    let report = gk.verify()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!((report.sessions, report.turns), (3, 300));
    assert_eq!(report.pending_turns, stats.pending_turns);
    assert!(report.postings > 0 && report.anchors > 0);
    drop(gk);
    let out = cli(&db, &["verify"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cli(&db, &["--json", "verify"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(doc["ok"], true);
    Ok(())
}

#[test]
fn verify_reports_a_tampered_document_frequency() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    add_sessions(&gk, 3, 100)?;
    drop(gk);
    let tampered = {
        let redb = redb::Database::open(&db)?;
        let terms = redb::TableDefinition::<u64, u64>::new("terms");
        let txn = redb.begin_write()?;
        let hash = {
            let mut table = txn.open_table(terms)?;
            let (hash, df) = {
                use redb::ReadableTable;
                let first = table.first()?.ok_or("no terms")?;
                (first.0.value(), first.1.value())
            };
            table.insert(hash, df + 3)?;
            hash
        };
        txn.commit()?;
        hash
    };
    let report = open(&db)?.verify()?;
    assert!(!report.is_ok());
    let key = format!("terms {tampered:016x}");
    assert!(report.problems.iter().any(|p| p.key == key), "{:?}", report.problems);
    let out = cli(&db, &["verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&key));
    Ok(())
}

#[test]
fn forget_session_leaves_no_trace() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    add_sessions(&gk, 3, 100)?;
    let query = "postgres retry_policy_12 for service_0_5";
    let before = blocks(&gk, "s0", query)?;
    assert!(!before.is_empty());
    let own = "only_session_1";
    let idf_before = gk.session("s0")?.select(own)?.anchors;
    let report = gk.forget_session("s1")?;
    assert_eq!(report.sessions, vec!["s1".to_string()]);
    assert_eq!(report.turns, 100);
    assert!(report.anchors_dropped > 0);
    let names: Vec<String> = gk.sessions()?.into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["s0".to_string(), "s2".to_string()]);
    assert!(gk.session("s1")?.turn(0).is_err() || gk.session("s1")?.turn(0)?.is_none());
    let report = gk.verify()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.turns, 200);
    assert_eq!(blocks(&gk, "s0", query)?, before);
    // An anchor only s1 had: df 0, so idf = ln((N + 1) / 1) + 1.
    let stats = gk.stats()?;
    let anchors = gk.session("s0")?.select(own)?.anchors;
    let anchor = anchors.iter().find(|a| a.text.contains("only_session_1")).ok_or("anchor")?;
    let want = ((stats.turns as f64) + 1.0).ln() + 1.0;
    assert!((anchor.idf - want).abs() < 1e-9, "{} vs {want} (before: {idf_before:?})", anchor.idf);
    assert!(matches!(gk.forget_session("s1"), Err(ctxgate::Error::UnknownSession { .. })));
    Ok(())
}

/// A canonical JSONL log of `sessions` sessions, session `s` ending on day `s + 1` of 2024-01.
fn write_log(path: &Path, sessions: usize, turns: usize) -> TestResult {
    let mut text = String::new();
    for s in 0..sessions {
        for t in 0..turns {
            let (user, assistant) = turn(s, t);
            let time = format!("2024-01-{:02}T{:02}:{:02}:00Z", s + 1, t / 60 % 24, t % 60);
            let line = serde_json::json!({
                "session": format!("log{s}"), "user": user, "assistant": assistant, "time": time
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
    }
    std::fs::write(path, text)?;
    Ok(())
}

#[test]
fn forget_before_deletes_sessions_that_ended_earlier() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log: PathBuf = dir.path().join("log.jsonl");
    write_log(&log, 4, 40)?;
    let gk = open(&db)?;
    gk.import(&[log], &ImportOptions::default())?;
    gk.session("untimed")?.add_turn("redis question", "redis answer")?;
    assert!(matches!(gk.forget_before("soon"), Err(ctxgate::Error::InvalidInput { .. })));
    let report = gk.forget_before("2024-01-03")?;
    assert_eq!(report.sessions, vec!["log0".to_string(), "log1".to_string()]);
    assert_eq!(report.kept_without_time, vec!["untimed".to_string()]);
    assert_eq!(report.turns, 80);
    let names: Vec<String> = gk.sessions()?.into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["log2".to_string(), "log3".to_string(), "untimed".to_string()]);
    let verified = gk.verify()?;
    assert!(verified.is_ok(), "{:?}", verified.problems);
    drop(gk);
    let out = cli(&db, &["--json", "forget", "--before", "2024-01-04T00:00:00+01:00"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(doc["sessions"], serde_json::json!(["log2"]));
    let out = cli(&db, &["forget", "--session", "untimed"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(cli(&db, &["verify"]).status.success());
    Ok(())
}

#[test]
fn compact_after_forget_shrinks_the_file_and_keeps_answers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log = dir.path().join("log.jsonl");
    write_log(&log, 20, 150)?;
    let mut gk = open(&db)?;
    gk.import(&[log], &ImportOptions::default())?;
    let turns = gk.stats()?.turns;
    let forgotten = gk.forget_before("2024-01-11")?;
    assert_eq!(forgotten.sessions.len(), 10);
    let queries = ["postgres retry_policy_12 for service_15_5", "redis max_retries_3 backoff_ms 140"];
    let answer = |gk: &Gatekeeper| -> Result<Vec<ctxgate::Selection>, ctxgate::Error> {
        queries.iter().map(|q| gk.session("log15")?.select(q)).collect()
    };
    let before = answer(&gk)?;
    let report = gk.compact()?;
    assert!(report.bytes_after <= report.bytes_before, "{report:?}");
    assert_eq!(answer(&gk)?, before);
    let verified = gk.verify()?;
    assert!(verified.is_ok(), "{:?}", verified.problems);
    eprintln!(
        "{turns} turns, half the sessions forgotten: {} -> {} bytes ({report:?})",
        report.bytes_before, report.bytes_after
    );
    drop(gk);
    let out = cli(&db, &["--json", "compact"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert!(doc["bytes_after"].as_u64() <= doc["bytes_before"].as_u64());
    Ok(())
}

#[test]
fn rebuild_repairs_a_tampered_index_and_keeps_answers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    add_sessions(&gk, 3, 100)?;
    let query = "postgres retry_policy_12 for service_0_5";
    let before = gk.session("s0")?.select(query)?;
    let sessions = gk.sessions()?;
    drop(gk);
    {
        let redb = redb::Database::open(&db)?;
        let terms = redb::TableDefinition::<u64, u64>::new("terms");
        let txn = redb.begin_write()?;
        txn.open_table(terms)?.retain(|_, _| false)?;
        txn.commit()?;
    }
    assert!(!open(&db)?.verify()?.is_ok());
    let report = ctxgate::jobs::rebuild(&db, &Options::default())?;
    assert_eq!((report.sessions, report.turns), (3, 300));
    assert_eq!(ctxgate::jobs::rebuild_scratch_files(&db)?, Vec::<std::path::PathBuf>::new());
    let gk = open(&db)?;
    let verified = gk.verify()?;
    assert!(verified.is_ok(), "{:?}", verified.problems);
    assert_eq!(gk.sessions()?, sessions);
    assert_eq!(gk.session("s0")?.select(query)?, before);
    Ok(())
}

#[test]
fn rebuild_accepts_an_index_of_other_anchor_rules() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    add_sessions(&gk, 2, 20)?;
    drop(gk);
    {
        // meta: postcard string "ctxgate-index" (1 + 13 bytes), format version, rules version.
        let redb = redb::Database::open(&db)?;
        let meta = redb::TableDefinition::<&str, &[u8]>::new("meta");
        let txn = redb.begin_write()?;
        {
            use redb::ReadableTable;
            let mut table = txn.open_table(meta)?;
            let mut bytes = table.get("meta")?.ok_or("no meta")?.value().to_vec();
            assert_eq!(bytes[15], ctxgate::anchor::ANCHOR_RULES_VERSION as u8);
            bytes[15] += 1;
            table.insert("meta", bytes.as_slice())?;
        }
        txn.commit()?;
    }
    assert!(matches!(open(&db), Err(e) if e.kind() == "needs_rebuild"));
    assert_eq!(cli(&db, &["stats"]).status.code(), Some(3));
    let out = cli(&db, &["--json", "rebuild"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(doc["turns"], 40);
    let gk = open(&db)?;
    assert!(gk.verify()?.is_ok());
    assert_eq!(gk.stats()?.turns, 40);
    Ok(())
}

#[test]
fn verify_reports_a_record_that_does_not_decode() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let gk = open(&db)?;
    add_sessions(&gk, 2, 70)?;
    drop(gk);
    {
        let redb = redb::Database::open(&db)?;
        let turns = redb::TableDefinition::<u64, &[u8]>::new("turns");
        let txn = redb.begin_write()?;
        txn.open_table(turns)?.insert(5u64, [0xffu8, 0xff, 0xff].as_slice())?;
        txn.commit()?;
    }
    let report = open(&db)?.verify()?;
    assert!(report.problems.iter().any(|p| p.key == "turn 0:5"), "{:?}", report.problems);
    let out = cli(&db, &["--json", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(doc["ok"], false);
    assert!(doc["problem_count"].as_u64() >= Some(1));
    Ok(())
}

#[test]
fn rebuild_reports_progress_up_to_every_turn() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    add_sessions(&open(&db)?, 3, 50)?;
    let mut seen = Vec::new();
    let report = ctxgate::jobs::rebuild_with_progress(&db, &Options::default(), &mut |p| seen.push(p))?;
    assert!(!seen.is_empty());
    assert!(seen.windows(2).all(|w| w[0].turns_done < w[1].turns_done), "{seen:?}");
    assert!(seen.iter().all(|p| p.turns_total == 150));
    assert_eq!(seen.last().map(|p| p.turns_done), Some(report.turns));
    Ok(())
}

/// The `done` values a phase of `total` items reports: its start, every 1,024, its end.
fn throttled(total: u64) -> Vec<u64> {
    let mut want: Vec<u64> = (0..total).step_by(1024).collect();
    want.push(total);
    want
}

#[test]
fn verify_reports_progress_phase_by_phase_up_to_every_row() -> TestResult {
    use ctxgate::jobs::VerifyPhase;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log = dir.path().join("log.jsonl");
    write_log(&log, 40, 150)?;
    let gk = open(&db)?;
    gk.import(&[log], &ImportOptions::default())?;
    add_sessions(&gk, 2, 10)?;
    for n in 0..3 {
        let text = format!("redis retry_policy_{n} notes for service_{n}");
        gk.put_evidence(&format!("notes/{n}.txt"), text.as_bytes(), &ctxgate::EvidenceOptions::default())?;
    }
    let mut seen = Vec::new();
    let report = gk.verify_with_progress(&mut |p| seen.push(p))?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.turns, 6020);
    let mut phases: Vec<VerifyPhase> = seen.iter().map(|p| p.phase).collect();
    phases.dedup();
    assert_eq!(
        phases,
        [VerifyPhase::Turns, VerifyPhase::Postings, VerifyPhase::Anchors, VerifyPhase::Evidence]
    );
    for (phase, checked) in [
        (VerifyPhase::Turns, report.turns),
        (VerifyPhase::Postings, report.chunks),
        (VerifyPhase::Anchors, report.anchors),
        (VerifyPhase::Evidence, report.evidence),
    ] {
        let of_phase: Vec<_> = seen.iter().filter(|p| p.phase == phase).collect();
        assert!(of_phase.iter().all(|p| p.total == checked), "{phase:?}: {of_phase:?}");
        let done: Vec<u64> = of_phase.iter().map(|p| p.done).collect();
        assert_eq!(done, throttled(checked), "{phase:?}");
    }
    assert_eq!(report.evidence, 3);
    assert!(report.chunks > 1024, "{report:?}");
    assert_eq!(seen.last().map(|p| (p.done, p.total)), Some((3, 3)));
    drop(gk);
    // Not a terminal: no progress line on stderr.
    let out = cli(&db, &["verify"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!out.stderr.contains(&b'\r'), "{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

#[test]
fn compact_reports_progress_phase_by_phase_up_to_every_anchor() -> TestResult {
    use ctxgate::jobs::CompactPhase;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log = dir.path().join("log.jsonl");
    write_log(&log, 20, 150)?;
    let gk = open(&db)?;
    gk.import(&[log], &ImportOptions::default())?;
    add_sessions(&gk, 2, 10)?;
    // New turns of older sessions, folded into rows that hold later sessions too, split
    // them: rows before an anchor's last that are not full, which compact packs.
    for t in 0..7 {
        for s in 0..20 {
            let (user, assistant) = turn(s, 150 + t);
            gk.session(&format!("log{s}"))?.add_turn(&user, &assistant)?;
        }
    }
    let pending = gk.stats()?.pending_turns;
    assert!(pending > 0);
    drop(gk);

    let mut gk = open(&db)?;
    let mut seen = Vec::new();
    let report = gk.compact_with_progress(&mut |p| seen.push(p))?;
    assert_eq!(report.folded_turns, pending);
    let lists = report.lists_packed;
    assert!(lists > 0, "{report:?}");
    let mut phases: Vec<CompactPhase> = seen.iter().map(|p| p.phase).collect();
    phases.dedup();
    assert_eq!(
        phases,
        [CompactPhase::Folding, CompactPhase::Packing, CompactPhase::Ordering, CompactPhase::Compacting]
    );
    let of_phase = |phase| -> Vec<(u64, u64)> {
        seen.iter().filter(|p| p.phase == phase).map(|p| (p.done, p.total)).collect()
    };
    assert_eq!(of_phase(CompactPhase::Folding), [(0, pending), (pending, pending)]);
    let packing: Vec<(u64, u64)> = throttled(lists).into_iter().map(|done| (done, lists)).collect();
    assert_eq!(of_phase(CompactPhase::Packing), packing);
    let chunks = report.chunks_rewritten;
    let ordering: Vec<(u64, u64)> = throttled(chunks).into_iter().map(|done| (done, chunks)).collect();
    assert_eq!(of_phase(CompactPhase::Ordering), ordering);
    assert_eq!(of_phase(CompactPhase::Compacting), [(0, 0)]);
    let verified = gk.verify()?;
    assert!(verified.is_ok(), "{:?}", verified.problems);
    drop(gk);
    let out = cli(&db, &["--json", "compact"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!out.stderr.contains(&b'\r'), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(doc["lists_packed"], 0);
    // Every chunk was rewritten the first time; now the pages are full, so none is.
    assert_eq!(doc["chunks_rewritten"], 0);
    let rows = {
        use redb::{ReadableDatabase, ReadableTableMetadata};
        let redb = redb::Database::open(&db)?;
        redb.begin_read()?.open_table(redb::TableDefinition::<u128, &[u8]>::new("postings"))?.len()?
    };
    assert_eq!(chunks, rows);
    Ok(())
}

/// Bytes a file takes on disk (redb grows its file ahead of use; those bytes are not written).
#[cfg(unix)]
fn on_disk(path: &Path) -> std::io::Result<u64> {
    Ok(std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(path)?) * 512)
}

/// Writes `turns` turns of 512 KiB that neither compress nor make anchors (one long run of a
/// xorshift's letters and digits), alternately in sessions `a` and `b`.
fn write_incompressible_log(path: &Path, turns: usize) -> TestResult {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut text = String::new();
    for t in 0..turns {
        let mut letters = String::with_capacity(1 << 19);
        while letters.len() < 1 << 19 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            letters.extend(
                state.to_le_bytes().iter().map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
            );
        }
        let line = serde_json::json!({
            "session": if t % 2 == 0 { "a" } else { "b" }, "user": format!("dump {t}"),
            "assistant": letters, "time": "2024-01-01T00:00:00Z"
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(path, text)?;
    Ok(())
}

#[cfg(unix)]
#[test]
fn an_import_into_a_sparse_index_compacts_it_unless_told_not_to_it_is_small_or_in_use() -> TestResult {
    let dir = tempfile::tempdir()?;
    let small = dir.path().join("small.jsonl");
    std::fs::write(
        &small,
        "{\"session\":\"new\",\"user\":\"how do I tune redis maxmemory\",\"assistant\":\"set maxmemory_policy\"}\n",
    )?;
    let import_small = |db: &Path, extra: &[&str]| -> Result<serde_json::Value, Box<dyn std::error::Error>> {
        let mut args = vec!["--json", "import"];
        args.extend_from_slice(extra);
        args.push(small.to_str().ok_or("path")?);
        let out = cli(db, &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Ok(serde_json::from_slice(&out.stdout)?)
    };

    // An index made sparse by more than the floor: 48 MiB of text in two sessions whose turns
    // alternate, one of them forgotten (its pages are holes between the other's), three copies.
    let dbs = [dir.path().join("a.redb"), dir.path().join("b.redb"), dir.path().join("c.redb")];
    let bulk = dir.path().join("bulk.jsonl");
    write_incompressible_log(&bulk, 192)?;
    // 48 MiB in one transaction: on a loaded machine the next process may wait for the file
    // past the default 5 s, which is not what this test is about.
    for args in [
        vec!["--busy-timeout", "120", "import", "--no-compact", bulk.to_str().ok_or("path")?],
        vec!["--busy-timeout", "120", "forget", "--session", "a"],
    ] {
        let out = cli(&dbs[0], &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    for db in &dbs[1..] {
        std::fs::copy(&dbs[0], db)?;
    }
    let sparse = on_disk(&dbs[0])?;

    // A small import compacts the sparse index, and says so.
    let doc = import_small(&dbs[0], &[])?;
    let after = doc["compacted"]["bytes_after"].as_u64().ok_or("no compaction reported")?;
    assert!(after < doc["compacted"]["bytes_before"].as_u64().ok_or("bytes_before")?, "{doc}");
    let compacted = on_disk(&dbs[0])?;
    assert!(
        compacted + ctxgate::jobs::AUTO_COMPACT_MIN_BYTES <= sparse,
        "{compacted} bytes on disk after, {sparse} before"
    );

    // Told not to, it leaves the file as it is.
    let doc = import_small(&dbs[1], &["--no-compact"])?;
    assert!(doc.get("compacted").is_none(), "{doc}");
    assert!(on_disk(&dbs[1])? >= sparse);

    // While another process holds the index for a job, the import does not wait for it.
    let held = ctxgate::store::IndexLock::shared(&dbs[2], std::time::Duration::ZERO)?;
    let doc = import_small(&dbs[2], &[])?;
    assert!(doc.get("compacted").is_none(), "{doc}");
    drop(held);

    // The compacted index answers as the one left sparse.
    for query in ["redis maxmemory", "dump 7", "dump 8"] {
        let answers: Vec<_> = dbs[..2]
            .iter()
            .map(|db| String::from_utf8_lossy(&cli(db, &["--json", "search", query]).stdout).into_owned())
            .collect();
        assert_eq!(answers[0], answers[1]);
    }

    // A small index is mostly redb's own pages: sparse by share, with less than the floor to
    // give back, it is left alone, by the CLI (its report is then the library's) and by
    // `compact_if_sparse` with the CLI's floor; with no floor, it is compacted.
    let tiny = dir.path().join("tiny.redb");
    let log = dir.path().join("log.jsonl");
    write_log(&log, 6, 20)?;
    for args in [vec!["import", log.to_str().ok_or("path")?], vec!["forget", "--before", "2024-01-05"]] {
        let out = cli(&tiny, &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let doc = import_small(&tiny, &[])?;
    assert!(doc.get("compacted").is_none(), "{doc}");
    let mut gk = open(&tiny)?;
    assert!(gk.compact_if_sparse(ctxgate::jobs::AUTO_COMPACT_MIN_BYTES, &mut |_| {})?.is_none());
    let report =
        gk.compact_if_sparse(0, &mut |_| {})?.ok_or("a tiny sparse index not compacted with no floor")?;
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    Ok(())
}

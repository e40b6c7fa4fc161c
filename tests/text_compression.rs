//! Turn text is stored compressed (index format 2), with a zstd dictionary the index trains on
//! its own turns: by a bulk import from its first batch, by an index grown one turn at a time
//! once it passes 1,024 turns. Every turn reads back as it was given, before and after.

use ctxgate::{Format, Gatekeeper, ImportOptions, Options, TableSize};
use std::path::Path;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Turns of a working log: shared phrasing, changing names and numbers, ~450 bytes each.
fn turn(i: usize) -> (String, String) {
    let services = ["billing", "search", "ingest", "auth", "notifier", "scheduler", "gateway"];
    let service = services[i % services.len()];
    (
        format!(
            "Turn {i}: the {service} service answers slowly after the deploy of build {}; the p99 \
             went from {} ms to {} ms. What should I look at first?",
            1000 + i * 7,
            40 + i % 60,
            300 + i % 900
        ),
        format!(
            "Check the {service} connection pool first: with max_connections at {} and an idle \
             timeout of {} s, a burst of requests waits on the pool. Then compare the slow query \
             log of build {} with the one before it, and look at the GC pauses of the {service} \
             workers on the dashboard.",
            8 + i % 120,
            5 + i % 55,
            1000 + i * 7
        ),
    )
}

fn table<'a>(tables: &'a [TableSize], name: &str) -> &'a TableSize {
    tables.iter().find(|t| t.table == name).unwrap_or_else(|| panic!("no table {name} in {tables:?}"))
}

fn check_turns(gk: &Gatekeeper, session: &str, count: usize) -> TestResult {
    let mut seen = 0;
    gk.session(session)?.for_each_turn(|stored| {
        let (user, assistant) = turn(stored.turn_id as usize);
        assert_eq!((stored.user.as_str(), stored.assistant.as_str()), (user.as_str(), assistant.as_str()));
        seen += 1;
        Ok(())
    })?;
    assert_eq!(seen, count);
    Ok(())
}

fn raw_bytes(count: usize) -> usize {
    (0..count).map(turn).map(|(u, a)| u.len() + a.len()).sum()
}

#[test]
fn an_index_grown_turn_by_turn_trains_its_dictionary_once_it_has_enough_turns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    let gk = Gatekeeper::open(&path, Options::default())?;
    let session = gk.session("main")?;
    for i in 0..1000 {
        let (user, assistant) = turn(i);
        session.add_turn(&user, &assistant)?;
    }
    let before = gk.table_sizes()?;
    assert_eq!(table(&before, "text_dictionaries").rows, 0, "no dictionary before 1,024 turns");
    // zstd alone on each turn.
    let plain_per_turn = table(&before, "turns").stored_bytes as f64 / 1000.0;
    for i in 1000..1400 {
        let (user, assistant) = turn(i);
        session.add_turn(&user, &assistant)?;
    }
    let after = gk.table_sizes()?;
    assert_eq!(table(&after, "text_dictionaries").rows, 1, "{after:?}");
    // The last 400 turns took less than a third of what zstd alone made of the first 1,000.
    let last_per_turn =
        (table(&after, "turns").stored_bytes - table(&before, "turns").stored_bytes) as f64 / 400.0;
    assert!(
        last_per_turn * 3.0 < plain_per_turn,
        "with the dictionary {last_per_turn:.0} bytes a turn, without {plain_per_turn:.0}"
    );
    drop(session);
    drop(gk);
    // Reopened: turns from before and after the dictionary read back whole.
    let gk = Gatekeeper::open(&path, Options::default())?;
    check_turns(&gk, "main", 1400)?;
    assert!(gk.verify()?.is_ok());
    Ok(())
}

fn write_log(path: &Path, sessions: usize, per_session: usize) -> std::io::Result<()> {
    let mut text = String::new();
    for s in 0..sessions {
        for t in 0..per_session {
            let (user, assistant) = turn(t);
            let line = serde_json::json!({"session": format!("s{s}"), "user": user, "assistant": assistant});
            text.push_str(&format!("{line}\n"));
        }
    }
    std::fs::write(path, text)
}

/// An index at `dir/index.redb` holding `sessions` sessions of `per_session` turns, imported
/// from one JSONL file.
fn imported(
    dir: &Path,
    sessions: usize,
    per_session: usize,
) -> Result<Gatekeeper, Box<dyn std::error::Error>> {
    let log = dir.join("log.jsonl");
    write_log(&log, sessions, per_session)?;
    let gk = Gatekeeper::open(dir.join("index.redb"), Options::default())?;
    gk.import(&[log], &ImportOptions { format: Format::Jsonl, ..ImportOptions::default() })?;
    Ok(gk)
}

#[test]
fn a_bulk_import_trains_on_its_first_batch_and_later_imports_use_that_dictionary() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = imported(dir.path(), 2, 1000)?;
    let options = ImportOptions { format: Format::Jsonl, ..ImportOptions::default() };
    let tables = gk.table_sizes()?;
    assert_eq!(table(&tables, "text_dictionaries").rows, 1);
    let stored = table(&tables, "turns").stored_bytes as f64;
    let raw = 2.0 * raw_bytes(1000) as f64;
    assert!(stored < 0.25 * raw, "turn rows {stored} bytes for {raw} bytes of text");
    check_turns(&gk, "s0", 1000)?;
    check_turns(&gk, "s1", 1000)?;

    // A second file of other turns, into the same index: compressed with the stored
    // dictionary (a second one would be trained on other text, with other bytes).
    let more = dir.path().join("more.jsonl");
    let mut text = String::new();
    for t in 0..1000 {
        let (user, assistant) = turn(5000 + t * 3);
        text.push_str(&format!(
            "{}\n",
            serde_json::json!({"session": "s2", "user": user, "assistant": assistant})
        ));
    }
    std::fs::write(&more, text)?;
    let before = table(&gk.table_sizes()?, "turns").stored_bytes;
    gk.import(&[more], &options)?;
    let tables = gk.table_sizes()?;
    assert_eq!(table(&tables, "text_dictionaries").rows, 1);
    let added = (table(&tables, "turns").stored_bytes - before) as f64;
    let raw: f64 = (0..1000).map(|t| turn(5000 + t * 3)).map(|(u, a)| (u.len() + a.len()) as f64).sum();
    assert!(added < 0.25 * raw, "the second file's rows {added} bytes for {raw} of text");
    let mut seen = 0;
    gk.session("s2")?.for_each_turn(|stored| {
        let (user, assistant) = turn(5000 + stored.turn_id as usize * 3);
        assert_eq!((stored.user, stored.assistant), (user, assistant));
        seen += 1;
        Ok(())
    })?;
    assert_eq!(seen, 1000);
    Ok(())
}

/// `rebuild` of a format-2 index reads its compressed turns (with their dictionary) and writes
/// them again with a dictionary it trains on them.
#[test]
fn a_rebuild_reads_compressed_turns_and_compresses_them_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    let gk = imported(dir.path(), 2, 1000)?;
    let imported = table(&gk.table_sizes()?, "turns").stored_bytes;
    drop(gk);
    let report = ctxgate::jobs::rebuild(&path, &Options::default())?;
    assert_eq!(report.turns, 2000);
    let gk = Gatekeeper::open(&path, Options::default())?;
    let tables = gk.table_sizes()?;
    assert_eq!(table(&tables, "text_dictionaries").rows, 1);
    let rebuilt = table(&tables, "turns").stored_bytes;
    assert!((rebuilt as f64) < 1.5 * imported as f64, "rebuilt turns {rebuilt} bytes, imported {imported}");
    check_turns(&gk, "s0", 1000)?;
    check_turns(&gk, "s1", 1000)?;
    assert!(gk.verify()?.is_ok());
    Ok(())
}

#[test]
fn a_small_import_trains_no_dictionary_and_still_reads_back() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = imported(dir.path(), 1, 30)?;
    assert_eq!(table(&gk.table_sizes()?, "text_dictionaries").rows, 0);
    check_turns(&gk, "s0", 30)?;
    Ok(())
}

#[test]
fn many_small_files_train_a_dictionary_once_the_index_is_large_enough() -> TestResult {
    // An agent's logs: many files, none with enough text for its first batch to train on.
    let dir = tempfile::tempdir()?;
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs)?;
    for f in 0..24 {
        let mut text = String::new();
        for t in 0..60 {
            let (user, assistant) = turn(t);
            let line = serde_json::json!({"session": format!("f{f}"), "user": user, "assistant": assistant});
            text.push_str(&format!("{line}\n"));
        }
        std::fs::write(logs.join(format!("{f:02}.jsonl")), text)?;
    }
    let path = dir.path().join("index.redb");
    let gk = Gatekeeper::open(&path, Options::default())?;
    let report = gk.import(&[logs], &ImportOptions { format: Format::Jsonl, ..ImportOptions::default() })?;
    assert_eq!(report.new_turns, 24 * 60);
    assert_eq!(table(&gk.table_sizes()?, "text_dictionaries").rows, 1, "trained past 1,024 turns");
    for f in [0, 23] {
        check_turns(&gk, &format!("f{f}"), 60)?;
    }
    assert!(gk.verify()?.is_ok());
    Ok(())
}

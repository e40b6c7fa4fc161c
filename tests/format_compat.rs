//! Opening files that are not this version's index gives a clear error and changes nothing.

use ctxgate::anchor::ANCHOR_RULES_VERSION;
use ctxgate::{Gatekeeper, Options};
use redb::{ReadableDatabase, TableDefinition};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    push_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// The postcard bytes of a META record with the given versions (field order of `MetaRecord`).
fn meta_bytes(magic: &str, format: u64, rules: u64) -> Vec<u8> {
    let mut out = Vec::new();
    push_str(&mut out, magic);
    push_varint(&mut out, format);
    push_varint(&mut out, rules);
    push_str(&mut out, "0.0.0");
    for _ in 0..6 {
        push_varint(&mut out, 0);
    }
    out
}

/// Creates an index, then overwrites its META record.
fn index_with_meta(
    dir: &std::path::Path,
    bytes: &[u8],
) -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    let path = dir.join("index.redb");
    drop(Gatekeeper::open(&path, Options::default())?);
    let db = redb::Database::open(&path)?;
    let txn = db.begin_write()?;
    txn.open_table(META)?.insert("meta", bytes)?;
    txn.commit()?;
    Ok(path)
}

#[test]
fn the_format_written_today_opens() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = index_with_meta(
        dir.path(),
        &meta_bytes("ctxgate-index", ctxgate::store::FORMAT_VERSION.into(), ANCHOR_RULES_VERSION.into()),
    )?;
    Gatekeeper::open(&path, Options::default())?;
    Ok(())
}

#[test]
fn other_anchor_rules_need_a_rebuild() -> TestResult {
    for rules in [0, 1, ANCHOR_RULES_VERSION + 1] {
        let dir = tempfile::tempdir()?;
        let format = ctxgate::store::FORMAT_VERSION.into();
        let path = index_with_meta(dir.path(), &meta_bytes("ctxgate-index", format, rules.into()))?;
        let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
        assert_eq!(err.kind(), "needs_rebuild", "rules {rules}: {err}");
        assert!(err.to_string().contains("ctxgate rebuild"), "{err}");
    }
    Ok(())
}

/// The anchor-rules version in an index's META record (after the magic string and the format
/// version, each of one length or varint byte here).
fn stored_rules(path: &std::path::Path) -> Result<u8, Box<dyn std::error::Error>> {
    let db = redb::Database::open(path)?;
    let txn = db.begin_read()?;
    let table = txn.open_table(META)?;
    let meta = table.get("meta")?.ok_or("no meta")?.value().to_vec();
    assert_eq!(&meta[..14], b"\x0dctxgate-index", "magic");
    Ok(meta[15])
}

/// The format version in an index's META record (after the magic string).
fn stored_format(path: &std::path::Path) -> Result<u8, Box<dyn std::error::Error>> {
    let db = redb::Database::open(path)?;
    let txn = db.begin_read()?;
    let table = txn.open_table(META)?;
    let meta = table.get("meta")?.ok_or("no meta")?.value().to_vec();
    Ok(meta[14])
}

/// Every stored turn of every session, with the session's summary.
fn all_turns(
    gk: &Gatekeeper,
) -> Result<Vec<(ctxgate::SessionInfo, Vec<ctxgate::StoredTurn>)>, ctxgate::Error> {
    let mut out = Vec::new();
    for info in gk.sessions()? {
        let mut turns = Vec::new();
        gk.session(&info.name)?.for_each_turn(|t| {
            turns.push(t);
            Ok(())
        })?;
        out.push((info, turns));
    }
    Ok(out)
}

/// `fixtures/db/format_v1.redb` was written by a build of index format 1, which stored turn text
/// raw (`tools/fixtures/make_format_v1.sh`). Today's build refuses it, naming the rebuild, and
/// changes nothing; `rebuild` brings every turn, gate record and tool call over, as a fresh
/// import of the same files by this build stores them.
#[test]
fn an_index_of_format_1_is_refused_until_rebuilt() -> TestResult {
    refused_until_rebuilt(1)
}

/// `fixtures/db/format_v2.redb` was written by a build of index format 2, whose posting rows each
/// held one session's postings (`tools/fixtures/make_format_v2.sh`): the same as format 1.
#[test]
fn an_index_of_format_2_is_refused_until_rebuilt() -> TestResult {
    refused_until_rebuilt(2)
}

/// `fixtures/db/format_v3.redb` was written by a build of index format 3, whose turn rows had no
/// checksum (`tools/fixtures/make_format_v3.sh`): the same as format 1.
#[test]
fn an_index_of_format_3_is_refused_until_rebuilt() -> TestResult {
    refused_until_rebuilt(3)
}

/// `fixtures/db/format_v4.redb` was written by a build of index format 4, whose posting rows had
/// no checksum (`tools/fixtures/make_format_v4.sh`): the same as format 1.
#[test]
fn an_index_of_format_4_is_refused_until_rebuilt() -> TestResult {
    refused_until_rebuilt(4)
}

fn refused_until_rebuilt(format: u8) -> TestResult {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir()?;
    let name = format!("format_v{format}.redb");
    let path = dir.path().join(&name);
    std::fs::copy(root.join("fixtures/db").join(&name), &path)?;
    assert_eq!(stored_format(&path)?, format);
    let before = std::fs::read(&path)?;
    let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(err.kind(), "needs_rebuild", "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("index format {format}")) && message.contains("ctxgate rebuild"),
        "{message}"
    );
    assert!(std::fs::read(&path)? == before, "a refused file is not modified");
    let read_only = Gatekeeper::open_read_only(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(read_only.kind(), "needs_rebuild", "{read_only}");

    let report = ctxgate::jobs::rebuild(&path, &Options::default())?;
    assert_eq!((report.sessions, report.turns, report.evidence), (2, 27, 0), "{report:?}");
    assert_eq!(u32::from(stored_format(&path)?), ctxgate::store::FORMAT_VERSION);
    let rebuilt = Gatekeeper::open(&path, Options::default())?;
    assert!(rebuilt.verify()?.is_ok());

    let fresh_path = dir.path().join("fresh.redb");
    let fresh = Gatekeeper::open(&fresh_path, Options::default())?;
    let jsonl = ctxgate::ImportOptions { format: ctxgate::Format::Jsonl, ..Default::default() };
    fresh.import(&[root.join("fixtures/example/conversation.jsonl")], &jsonl)?;
    let claude = ctxgate::ImportOptions {
        format: ctxgate::Format::ClaudeCode,
        session: Some("claude-code-session".into()),
        evidence: false,
        ..Default::default()
    };
    fresh.import(&[root.join("fixtures/import/claude-code/session.jsonl")], &claude)?;
    let (old, new) = (all_turns(&rebuilt)?, all_turns(&fresh)?);
    assert_eq!(old.len(), 2);
    for ((old_info, old_turns), (new_info, new_turns)) in old.iter().zip(&new) {
        assert_eq!(old_info.name, new_info.name);
        assert_eq!(old_info.turns, new_info.turns);
        assert_eq!(old_turns, new_turns, "{}", old_info.name);
    }
    let query = "which tests failed after the bump?";
    let session = "claude-code-session";
    assert_eq!(
        rebuilt.session(session)?.select(query)?.blocks,
        fresh.session(session)?.select(query)?.blocks,
        "the rebuilt file selects as the fresh one"
    );
    let tools: usize = new.iter().flat_map(|(_, turns)| turns).map(|t| t.tools.len()).sum();
    assert!(tools >= 8, "the Claude Code session's tool calls came over: {tools}");
    Ok(())
}

/// `fixtures/db/anchor_rules_v1.redb` was written by a build under anchor rules 1
/// (`tools/fixtures/make_anchor_rules_v1.sh`): its postings split `ticket-4242` into `ticket` and
/// `4242`. Today's build refuses it until `rebuild`, which extracts the anchors again.
#[test]
fn an_index_of_anchor_rules_1_is_refused_until_rebuilt() -> TestResult {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/db/anchor_rules_v1.redb");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    std::fs::copy(&fixture, &path)?;
    assert_eq!(stored_rules(&path)?, 1);
    let before = std::fs::read(&path)?;
    let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(err.kind(), "needs_rebuild", "{err}");
    assert!(err.to_string().contains("ctxgate rebuild"), "{err}");
    assert!(std::fs::read(&path)? == before, "a refused file is not modified");

    let report = ctxgate::jobs::rebuild(&path, &Options::default())?;
    assert_eq!((report.sessions, report.turns), (1, 4));
    assert_eq!(u32::from(stored_rules(&path)?), ANCHOR_RULES_VERSION);
    let gk = Gatekeeper::open(&path, Options::default())?;
    assert!(gk.verify()?.is_ok());
    let hits = gk.search("ticket-4242", 10)?;
    let [first, second, ..] = hits.as_slice() else { return Err(format!("{hits:#?}").into()) };
    // Turn 1 holds ticket-4242; turn 2, `host-4242 ticket-6406`, ranked first under rules 1.
    assert_eq!((first.turn_id, second.turn_id), (1, 2), "{hits:#?}");
    assert!(first.score > second.score, "{hits:#?}");
    assert!(first.matched_anchors.iter().any(|a| a == "ticket-4242"), "{hits:#?}");
    Ok(())
}

#[test]
fn a_newer_format_asks_for_an_upgrade() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = index_with_meta(dir.path(), &meta_bytes("ctxgate-index", 99, 1))?;
    let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(err.kind(), "needs_upgrade", "{err}");
    assert!(err.to_string().contains("upgrade ctxgate"), "{err}");
    Ok(())
}

#[test]
fn another_redb_file_is_not_an_index() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&path)?;
        let txn = db.begin_write()?;
        txn.open_table(TableDefinition::<u64, u64>::new("their_table"))?.insert(1, 2)?;
        txn.commit()?;
    }
    let before = std::fs::read(&path)?;
    let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(err.kind(), "not_an_index", "{err}");
    assert!(std::fs::read(&path)? == before, "a refused file is not modified");
    // Still readable as the other program's database.
    let db = redb::Database::open(&path)?;
    let txn = db.begin_read()?;
    assert!(txn.open_table(TableDefinition::<u64, u64>::new("their_table")).is_ok());
    Ok(())
}

#[test]
fn a_text_file_is_not_an_index() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "these are my notes, not a database\n".repeat(200))?;
    let before = std::fs::read(&path)?;
    let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(err.kind(), "not_an_index", "{err}");
    assert!(std::fs::read(&path)? == before, "a refused file is not modified");
    Ok(())
}

#[test]
fn a_missing_directory_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("no/such/dir/index.redb");
    let err = Gatekeeper::open(&path, Options::default()).err().ok_or("must refuse")?;
    assert_eq!(err.kind(), "io");
    assert!(err.to_string().contains("no/such/dir"), "{err}");
    Ok(())
}

/// A table every index has, gone from the file (a damaged table of tables), is damage: reads
/// and writes say so, naming the table and the way out, instead of recreating it empty.
#[test]
fn a_missing_table_is_damage_for_readers_and_writers() -> TestResult {
    for table in ["text_dictionaries", "evidence_refs", "turns"] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("index.redb");
        let gk = Gatekeeper::open(&path, Options::default())?;
        gk.session("s")?.add_turn("redis lock ttl", "use SET NX PX")?;
        drop(gk);
        {
            let db = redb::Database::open(&path)?;
            let txn = db.begin_write()?;
            let deleted = match table {
                "evidence_refs" => txn.delete_table(redb::TableDefinition::<&str, u32>::new(table))?,
                "turns" => txn.delete_table(redb::TableDefinition::<u64, &[u8]>::new(table))?,
                _ => txn.delete_table(redb::TableDefinition::<u32, &[u8]>::new(table))?,
            };
            assert!(deleted, "{table}");
            txn.commit()?;
        }
        let gk = Gatekeeper::open(&path, Options::default())?;
        let read = gk.sessions().err().ok_or("a read must fail")?;
        assert_eq!(read.kind(), "damaged", "{table}: {read}");
        assert!(read.to_string().contains(table), "{read}");
        let write = gk.session("s")?.add_turn("again", "ok").err().ok_or("a write must fail")?;
        assert_eq!(write.kind(), "damaged", "{table}: {write}");
    }
    Ok(())
}

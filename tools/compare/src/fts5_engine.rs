//! SQLite FTS5 (rusqlite, bundled): a contentless FTS5 table of the session and ctxgate's
//! anchors joined by spaces (`unicode61` with `_` as a token character; every character of an
//! anchor that is not a letter, digit or `_`, such as the space of a quoted phrase, becomes
//! `_`, so each anchor is one token), ranked by `bm25` over the anchors column; the turn text in
//! a plain table beside it. WAL journal, `synchronous = FULL`. Session-scoped queries filter in
//! the MATCH expression (`session : s AND anchors : (...)`). Durable add: one transaction per
//! turn.
//!
//! The project of a hook-style session name (`<project>#<id>`) is a column of the FTS5 table as
//! well: the team layout's other-sessions query is one MATCH expression
//! (`project : p AND anchors : (...) NOT session : s`), so FTS5 intersects the project's
//! doclist with the anchors' inside its own index; ranked by `bm25` over the anchors column,
//! the text of the top 3 read from `turns`, as the hook shows it.

use crate::common::{
    Figures, Setup, TOP_K, allocated_bytes, cold_then_warm, disk_bytes, query_anchors, record,
    record_peak_rss, turn_anchors,
};
use anyhow::{Result, bail};
use corpus::timing::time_each;
use rayon::prelude::*;
use rusqlite::{Connection, params};
use std::path::PathBuf;
use std::time::Instant;

/// Rows per transaction of the bulk import.
const BULK_BATCH: u64 = 10_000;

const SCHEMA: &str = "
CREATE TABLE turns(id INTEGER PRIMARY KEY, session TEXT NOT NULL, turn INTEGER NOT NULL,
                   user TEXT NOT NULL, assistant TEXT NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(session, project, anchors, content='',
                                    tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\");
INSERT INTO fts(fts, rank) VALUES('rank', 'bm25(0.0, 0.0, 1.0)');
";

const INSERT_TURN: &str = "INSERT INTO turns(id, session, turn, user, assistant) VALUES (?1, ?2, ?3, ?4, ?5)";
const INSERT_FTS: &str = "INSERT INTO fts(rowid, session, project, anchors) VALUES (?1, ?2, ?3, ?4)";
const SEARCH: &str = "SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rank LIMIT ?2";

fn dir(setup: &Setup) -> PathBuf {
    setup.dir.join("fts5")
}

fn open(setup: &Setup) -> Result<Connection> {
    let conn = Connection::open(dir(setup).join("index.sqlite"))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// An anchor (or session name) as one `unicode61` token.
fn token(text: &str) -> String {
    text.chars().map(|c| if c.is_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

fn anchors_text(user: &str, assistant: &str) -> String {
    let mut text = String::with_capacity(2 * (user.len() + assistant.len()));
    turn_anchors(user, assistant, |anchor| {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&token(anchor));
    });
    text
}

fn insert(conn: &Connection, id: u64, session: &str, turn: u64, user: &str, assistant: &str) -> Result<()> {
    insert_with(conn, id, session, turn, (user, assistant), &anchors_text(user, assistant))
}

/// Inserts a turn whose anchors text is already made.
fn insert_with(
    conn: &Connection,
    id: u64,
    session: &str,
    turn: u64,
    (user, assistant): (&str, &str),
    anchors: &str,
) -> Result<()> {
    let (id, turn) = (i64::try_from(id)?, i64::try_from(turn)?);
    conn.prepare_cached(INSERT_TURN)?.execute(params![id, session, turn, user, assistant])?;
    let project = ctxgate::hook::project_of(session).map(token).unwrap_or_default();
    conn.prepare_cached(INSERT_FTS)?.execute(params![id, token(session), project, anchors])?;
    Ok(())
}

pub fn bulk(setup: &Setup) -> Result<Figures> {
    let dir = dir(setup);
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let conn = open(setup)?;
    conn.execute_batch(SCHEMA)?;
    let mut rows = 0u64;
    conn.execute_batch("BEGIN")?;
    // One connection writes; the anchors (the extraction) are made on the rayon pool ahead of it.
    setup.for_each_chunk(|lines| {
        let anchors: Vec<String> = lines.par_iter().map(|l| anchors_text(&l.user, &l.assistant)).collect();
        for (line, anchors) in lines.iter().zip(&anchors) {
            rows += 1;
            let text = (line.user.as_str(), line.assistant.as_str());
            insert_with(&conn, rows, &line.session, line.turn.unwrap_or_default(), text, anchors)?;
            if rows.is_multiple_of(BULK_BATCH) {
                conn.execute_batch("COMMIT; BEGIN")?;
            }
        }
        Ok(())
    })?;
    conn.execute_batch("COMMIT")?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    conn.close().map_err(|(_, e)| e)?;
    let seconds = started.elapsed().as_secs_f64();
    if rows != setup.turns {
        bail!("indexed {rows} turns, expected {}", setup.turns);
    }
    let mut figures = Figures::new();
    figures.insert("bulk.seconds".into(), seconds);
    figures.insert("bulk.index_bytes".into(), disk_bytes(&dir)? as f64);
    figures.insert("bulk.allocated_bytes".into(), allocated_bytes(&dir)? as f64);
    record_peak_rss(&mut figures, "bulk.peak_rss_kib");
    Ok(figures)
}

/// The MATCH expression of a query: any of its anchors, within `session` if given.
fn expression(query: &str, session: Option<&str>) -> String {
    let anchors: Vec<String> = query_anchors(query).iter().map(|a| format!("\"{}\"", token(a))).collect();
    let anchors = format!("anchors : ({})", anchors.join(" OR "));
    match session {
        Some(session) => format!("session : \"{}\" AND {anchors}", token(session)),
        None => anchors,
    }
}

fn top_k(conn: &Connection, query: &str, session: Option<&str>) -> Result<usize> {
    let mut stmt = conn.prepare_cached(SEARCH)?;
    let mut rows = stmt.query(params![expression(query, session), TOP_K as i64])?;
    let mut found = 0;
    while let Some(row) = rows.next()? {
        let _rowid: i64 = row.get(0)?;
        found += 1;
    }
    Ok(found)
}

pub fn query(setup: &Setup) -> Result<Figures> {
    let queries = setup.queries();
    let long = setup.long_name();
    let mut figures = Figures::new();
    cold_then_warm(&mut figures, "session", &queries, || open(setup), |c, q| top_k(c, q, Some(&long)))?;
    cold_then_warm(&mut figures, "global", &queries, || open(setup), |c, q| top_k(c, q, None))?;
    record_peak_rss(&mut figures, "query.peak_rss_kib");
    Ok(figures)
}

pub fn add(setup: &Setup) -> Result<Figures> {
    let conn = open(setup)?;
    let long = setup.long_name();
    let mut upcoming = setup.upcoming();
    let mut turn = setup.long_turns();
    let mut id = setup.turns;
    let times = time_each(setup.adds, |_| {
        let Some(next) = upcoming.next() else { bail!("the corpus is endless") };
        id += 1;
        conn.execute_batch("BEGIN")?;
        insert(&conn, id, &long, turn, &next.user, &next.assistant)?;
        conn.execute_batch("COMMIT")?;
        turn += 1;
        Ok(())
    })?;
    let mut figures = Figures::new();
    record(&mut figures, "add", &times);
    Ok(figures)
}

/// The other-sessions query: the top rows' text read from `turns` too, as the hook shows it.
const SEARCH_TEXT: &str = "SELECT t.user, t.assistant FROM fts JOIN turns t ON t.id = fts.rowid \
WHERE fts MATCH ?1 ORDER BY rank LIMIT ?2";

/// The team layout's queries: `session` (top 20 in the prompt's session), `others` (top 3 of
/// the project's other sessions, their text read) and `global` (top 20).
pub fn team_query(setup: &Setup, phase: &str) -> Result<Figures> {
    let samples = setup.samples()?;
    let mut figures = Figures::new();
    cold_then_warm(
        &mut figures,
        phase,
        &samples,
        || open(setup),
        |conn, sample| match phase {
            "session" => top_k(conn, &sample.prompt, Some(&sample.session)),
            "global" => top_k(conn, &sample.prompt, None),
            "others" => {
                let expression = format!(
                    "project : \"{}\" AND {} NOT session : \"{}\"",
                    token(&sample.project),
                    expression(&sample.prompt, None),
                    token(&sample.session)
                );
                let mut stmt = conn.prepare_cached(SEARCH_TEXT)?;
                let limit = crate::ctxgate_engine::OTHER_SESSIONS_TOP as i64;
                let mut rows = stmt.query(params![expression, limit])?;
                let mut found = 0;
                while let Some(row) = rows.next()? {
                    let (_user, _assistant): (String, String) = (row.get(0)?, row.get(1)?);
                    found += 1;
                }
                Ok(found)
            }
            other => bail!("unknown query phase {other}"),
        },
    )?;
    record_peak_rss(&mut figures, &format!("{phase}.peak_rss_kib"));
    Ok(figures)
}

//! ctxgate: bulk `Gatekeeper::import` of the canonical JSONL, `select` and its parts, durable
//! `Session::add_turn`.
//!
//! Recall alone has no public entry point in the library, and neither has a query across all
//! sessions. Two stand-ins are timed:
//! - `recall (gate+postings)`: `select_with(as_of = 0)`, as `measure` does: the gate, weighing the
//!   query's anchors and reading and decoding every posting of them in the session, then nothing
//!   (every turn is too new). No scoring, no top-k.
//! - `top-20`: BM25 top-20 over the public store API (`store::View::session_postings`, `df`,
//!   `corpus_stats`), the same work the peers do. A query across all sessions reads each
//!   anchor's postings in one range scan over every session (`View::anchor_postings`).

use crate::common::{
    Figures, Setup, TOP_K, allocated_bytes, cold_then_warm, disk_bytes, query_anchors, record,
    record_peak_rss,
};
use anyhow::{Result, bail};
use corpus::timing::time_each;
use ctxgate::store::{Posting, ReadSource, Store, StoreOptions, View};
use ctxgate::{Format, Gatekeeper, ImportOptions, Options, SelectOptions};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

fn path(setup: &Setup) -> PathBuf {
    setup.dir.join("ctxgate.redb")
}

pub fn bulk(setup: &Setup) -> Result<Figures> {
    let path = path(setup);
    let started = Instant::now();
    let mut gk = Gatekeeper::open(&path, Options::default())?;
    let options = ImportOptions { format: Format::Jsonl, ..ImportOptions::default() };
    let report = gk.import(&[setup.corpus_path()], &options)?;
    gk.fold_pending()?;
    // What `ctxgate import` does when it is done: compact a file a long import left sparse.
    let compacted = gk.compact_if_sparse(ctxgate::jobs::AUTO_COMPACT_MIN_BYTES, &mut |_| {})?;
    drop(gk);
    let seconds = started.elapsed().as_secs_f64();
    if report.new_turns != setup.turns {
        bail!("import added {} turns, expected {}", report.new_turns, setup.turns);
    }
    let mut figures = Figures::new();
    figures.insert("bulk.seconds".into(), seconds);
    figures.insert("bulk.compacted_by_import".into(), if compacted.is_some() { 1.0 } else { 0.0 });
    figures.insert("bulk.index_bytes".into(), disk_bytes(&path)? as f64);
    figures.insert("bulk.allocated_bytes".into(), allocated_bytes(&path)? as f64);
    record_peak_rss(&mut figures, "bulk.peak_rss_kib");
    // Not part of the import: what `ctxgate compact` makes of the file afterwards.
    let compacted = Gatekeeper::open(&path, Options::default())?.compact()?;
    figures.insert("bulk.compacted_bytes".into(), compacted.bytes_after as f64);
    Ok(figures)
}

pub fn query(setup: &Setup) -> Result<Figures> {
    let path = path(setup);
    let queries = setup.queries();
    let long = setup.long_name();
    let mut figures = Figures::new();
    let open = || Ok(Gatekeeper::open(&path, Options::default())?);
    cold_then_warm(&mut figures, "select.session", &queries, open, |gk, q| {
        Ok(gk.session(&long)?.select(q)?.blocks.len())
    })?;
    let as_of_zero = SelectOptions { as_of: Some(0), ..SelectOptions::default() };
    cold_then_warm(&mut figures, "gate_postings.session", &queries, open, |gk, q| {
        let selection = gk.session(&long)?.select_with(q, &as_of_zero)?;
        if !selection.blocks.is_empty() {
            bail!("a selection as of turn 0 has blocks");
        }
        Ok(usize::from(!selection.anchors.is_empty()))
    })?;
    let open_store = || -> Result<Recall> {
        let store = Store::open(&path, &store_options())?;
        let view = store.read()?;
        let long = view.session_by_name(&long)?.map(|(id, _)| id);
        drop(view);
        let Some(long) = long else { bail!("no session {long:?} in the index") };
        Ok(Recall { store, long })
    };
    cold_then_warm(&mut figures, "session", &queries, open_store, |r, q| r.top_k(q, Some(r.long)))?;
    cold_then_warm(&mut figures, "global", &queries, open_store, |r, q| r.top_k(q, None))?;
    cold_then_warm(&mut figures, "scan.global", &queries, open_store, |r, q| r.scan_top_k(q))?;
    record_peak_rss(&mut figures, "query.peak_rss_kib");
    Ok(figures)
}

pub fn add(setup: &Setup) -> Result<Figures> {
    let gk = Gatekeeper::open(path(setup), Options::default())?;
    let session = gk.session(&setup.long_name())?;
    let mut upcoming = setup.upcoming();
    let mut expected = setup.long_turns() as u32;
    let times = time_each(setup.adds, |_| {
        let Some(turn) = upcoming.next() else { bail!("the corpus is endless") };
        let id = session.add_turn(&turn.user, &turn.assistant)?;
        if id != expected {
            bail!("add_turn returned {id}, expected {expected}");
        }
        expected += 1;
        Ok(())
    })?;
    let mut figures = Figures::new();
    record(&mut figures, "add", &times);
    Ok(figures)
}

fn store_options() -> StoreOptions {
    let defaults = Options::default();
    StoreOptions {
        cache_bytes: defaults.cache_bytes,
        busy_timeout: defaults.busy_timeout,
        quick_repair: defaults.quick_repair,
    }
}

/// BM25 top-k over the public store API.
struct Recall {
    store: Store,
    long: u32,
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

impl Recall {
    /// Scores every turn of `session` (or of every session) holding a query anchor; returns
    /// how many of the top [`TOP_K`] it found.
    fn top_k(&self, query: &str, session: Option<u32>) -> Result<usize> {
        let view = self.store.read()?;
        match session {
            Some(_) => bm25_top_k(&view, query, session),
            // The library's own search across sessions (`ctxgate::search`).
            None => Ok(ctxgate::query::search::search(&view, query, TOP_K)?.hits.len()),
        }
    }

    /// BM25 over every posting of every query anchor in every session: what the search
    /// across sessions costs without pruning.
    fn scan_top_k(&self, query: &str) -> Result<usize> {
        bm25_top_k(&self.store.read()?, query, None)
    }
}

/// BM25 over the postings of one session (or of all), through the public store API: every
/// posting of every query anchor is scored.
fn bm25_top_k(view: &View<ReadSource>, query: &str, session: Option<u32>) -> Result<usize> {
    let stats = view.corpus_stats();
    let n = stats.blocks as f64;
    let avg_len = (stats.avg_len_user + stats.avg_len_assistant).max(1.0);
    let mut scores: HashMap<u64, f64> = HashMap::new();
    for anchor in query_anchors(query) {
        let hash = ctxgate::store::anchor_hash(&anchor);
        let df = view.df(hash)?;
        if df == 0 {
            continue;
        }
        // ctxgate's IDF (see measure's postings_read).
        let idf = ((n + 1.0) / (df as f64 + 1.0)).ln() + 1.0;
        let mut emit = |session: u32, p: Posting| {
            let tf = f64::from(p.tf_user + p.tf_assistant);
            let len = f64::from(p.len_user + p.len_assistant);
            let score = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len));
            *scores.entry((u64::from(session) << 32) | u64::from(p.turn)).or_default() += score;
        };
        match session {
            Some(session) => view.session_postings(hash, session, |p| emit(session, p))?,
            // One range scan across sessions: posting keys lead with the anchor.
            None => view.anchor_postings(hash, &mut emit)?,
        }
    }
    let mut ranked: Vec<(u64, f64)> = scores.into_iter().collect();
    let k = TOP_K.min(ranked.len());
    if k > 0 && k < ranked.len() {
        ranked.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
    }
    ranked.truncate(k);
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(ranked.len())
}

/// Turns of other sessions the hook adds to a prompt (`hook::context::OTHER_SESSION_HITS`).
pub const OTHER_SESSIONS_TOP: usize = 3;

/// Hits of the search of the project's other sessions the hook looks through for them
/// (`SEARCH_POOL` there).
const HOOK_SEARCH_POOL: usize = 16;

/// The team layout's queries (`phase`: `session`, `others` or `global`), each kind in a child
/// of its own:
/// - `session`: `Session::select` in the prompt's session;
/// - `others`: what the hook does for the project's other sessions (`hook::context`): the
///   session list, then `Gatekeeper::search_in` those sessions for 16 hits, kept if bearing on
///   the prompt, the first 3. `others.*.hits` is how many it found (of 3);
/// - `global`: the library's search across every session, top 20 (as `query` does).
pub fn team_query(setup: &Setup, phase: &str) -> Result<Figures> {
    let path = path(setup);
    let samples = setup.samples()?;
    let mut figures = Figures::new();
    let open = || Ok(Gatekeeper::open(&path, Options::default())?);
    match phase {
        "session" => cold_then_warm(&mut figures, "session", &samples, open, |gk, s| {
            Ok(gk.session(&s.session)?.select(&s.prompt)?.blocks.len())
        })?,
        "others" => {
            // Counters: the distinct sessions among the hits (the bearing is computed for
            // each), and how many of them are the project's other sessions (all, by now).
            let (mut queries, mut sessions, mut project_sessions) = (0usize, 0usize, 0usize);
            cold_then_warm(&mut figures, "others", &samples, open, |gk, s| {
                let of_project = |name: &str| {
                    name != s.session && ctxgate::hook::project_of(name) == Some(s.project.as_str())
                };
                let listed = gk.sessions()?;
                let names: Vec<&str> =
                    listed.iter().map(|i| i.name.as_str()).filter(|name| of_project(name)).collect();
                let hits = gk.search_in(&s.prompt, HOOK_SEARCH_POOL, &names)?;
                let distinct: HashSet<&str> = hits.iter().map(|h| h.session.as_str()).collect();
                queries += 1;
                sessions += distinct.len();
                project_sessions += distinct.iter().filter(|name| of_project(name)).count();
                let others = hits.iter().filter(|h| of_project(&h.session) && h.bears);
                Ok(others.take(OTHER_SESSIONS_TOP).count())
            })?;
            let per_query = |n: usize| n as f64 / queries.max(1) as f64;
            figures.insert("others.pool_sessions".into(), per_query(sessions));
            figures.insert("others.pool_project_sessions".into(), per_query(project_sessions));
        }
        "global" => {
            let open_store = || -> Result<Store> { Ok(Store::open(&path, &store_options())?) };
            cold_then_warm(&mut figures, "global", &samples, open_store, |store, s| {
                let view = store.read()?;
                Ok(ctxgate::query::search::search(&view, &s.prompt, TOP_K)?.hits.len())
            })?
        }
        other => bail!("unknown query phase {other}"),
    }
    record_peak_rss(&mut figures, &format!("{phase}.peak_rss_kib"));
    Ok(figures)
}

//! Recall across every session: the turns of the whole history that best match a query.
//!
//! `select` answers within one session. Finding which conversation discussed something needs
//! the same lexical score over all of them: DESIGN §3.4's score without its recency term (a
//! turn's age is a notion within its own session),
//!
//! ```text
//! score(b, q) = 1.5·lex(u_b, q) + 0.7·lex(a_b, q) + 1.0·exact(b, q)
//! ```
//!
//! with `lex` and `exact` exactly as in `recall`, framing words left out as `select` does.
//!
//! Evaluation is document at a time: one [`PostingCursor`] per anchor, every list in
//! `(session, turn)` order, so a turn's score is complete when the cursors have passed it and
//! only the best `limit` turns are kept. MaxScore pruning (Turtle and Flood, 1995) skips most
//! of the long lists: anchors are ordered by the most they can add to a score, and once the
//! `limit`-th best score is above what the weakest anchors can add together, a turn holding
//! only those cannot enter the result. Those anchors' lists are then no longer decoded whole,
//! only probed at the turns the other lists hold: a chunk that ends before the probed turn is
//! stepped over by its header (the range scan still visits it, without decoding it).
//! Memory is one decoded chunk per anchor and the best `limit` turns, whatever the history's
//! length. Pending (not yet folded) turns are scored from their forward records.

use crate::anchor;
use crate::query::bearing::Bearing;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use crate::error::Result;
use crate::query::pipeline::framing_mask;
use crate::query::prune;
use crate::query::anchors::{QueryAnchor, QueryAnchors};
use crate::query::recall::{BM25_K1, WEIGHT_ASSISTANT, WEIGHT_EXACT, WEIGHT_USER, bm25};
use crate::store::{CorpusStats, Posting, PostingCursor, Source, View, split_block_key};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A turn found by [`search`].
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Session id.
    pub session: u32,
    /// Turn id within the session.
    pub turn: u32,
    /// The score above.
    pub score: f64,
    /// Query anchors the turn contains (bit `i` = anchor `i` of the query).
    pub matched: u64,
}

#[cfg(any(test, feature = "internals"))]
/// What [`search`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The query's anchors, most discriminative first; bit `i` of [`Hit::matched`] is anchor `i`.
    pub anchors: Vec<QueryAnchor>,
    /// The best turns, best first: score descending, then session and turn ascending.
    pub hits: Vec<Hit>,
}

#[cfg(any(test, feature = "internals"))]
/// The best `limit` turns of every session for the query `text`.
pub fn search<S: Source>(view: &View<S>, text: &str, limit: usize) -> Result<Found> {
    let (query, hits) = rank(view, text, limit, None)?;
    Ok(Found { anchors: query.anchors().to_vec(), hits })
}

/// A turn [`Gatekeeper::search`](crate::Gatekeeper::search) found, ready to show.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct SearchHit {
    /// The session's name.
    pub session: String,
    /// The turn's id within the session.
    pub turn_id: u32,
    /// 1.5 x user-side BM25 + 0.7 x assistant-side BM25 (each normalized to [0, 1]), + 1 when
    /// the turn holds every scored query term (framing words such as "how" are not scored).
    pub score: f64,
    /// The query anchors the turn contains.
    pub matched_anchors: Vec<String>,
    /// The user side, pruned to the sentences with the rarest of those anchors (DESIGN §3.6).
    pub user: String,
    /// The assistant side, pruned alike.
    pub assistant: String,
    /// Whether the turn bears on the query within its session: it holds a query word that its
    /// session uses more often than the rest of the index does, or a combination of them rarer
    /// than chance (`bearing`). A hit that does not shares only everyday words with the query.
    pub bears: bool,
}

/// [`search`], with each hit's session name and pruned text.
/// The best `limit` turns for `text` (of the sessions `within` only, ascending ids, when given),
/// each with its text pruned and whether it bears on the query.
pub(crate) fn search_hits<S: Source>(
    view: &View<S>,
    text: &str,
    limit: usize,
    within: Option<&[u32]>,
) -> Result<Vec<SearchHit>> {
    let (query, hits) = rank(view, text, limit, within)?;
    let mut out = Vec::with_capacity(hits.len());
    let mut bearings: HashMap<u32, Bearing> = HashMap::new();
    let scored = query.full_mask() & !framing_mask(&query, text);
    for hit in hits {
        let record = view.session_record(hit.session)?;
        let turn = view.turn_record(hit.session, hit.turn)?;
        let (Some(record), Some(turn)) = (record, turn) else {
            return Err(crate::store::Error::Corrupt {
                what: format!("turn {}:{} has postings but no record", hit.session, hit.turn),
            }
            .into());
        };
        let bearing = match bearings.entry(hit.session) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(Bearing::of_session(view, hit.session, record.turn_count, &query, scored)?),
        };
        let bears = bearing.bears(view, &query, hit.matched)?;
        let pruned = prune::prune(&turn.user, &turn.assistant, &query, hit.matched);
        let (user, assistant) = pruned.map_or((turn.user, turn.assistant), |p| (p.user, p.assistant));
        out.push(SearchHit {
            session: record.name,
            turn_id: hit.turn,
            score: hit.score,
            matched_anchors: query.texts_of(hit.matched),
            user,
            assistant,
            bears,
        });
    }
    Ok(out)
}

/// The query's anchors and its best `limit` hits, in the sessions `within` (ascending ids) when
/// given.
fn rank<S: Source>(
    view: &View<S>,
    text: &str,
    limit: usize,
    within: Option<&[u32]>,
) -> Result<(QueryAnchors, Vec<Hit>)> {
    let stats = view.corpus_stats();
    let query = QueryAnchors::build(text, &anchor::extract(text), stats.blocks, |h| view.df(h))?;
    let scored = query.full_mask() & !framing_mask(&query, text);
    if limit == 0 || scored == 0 {
        return Ok((query, Vec::new()));
    }
    let scorer = Scorer::new(&query, scored, &stats);
    let mut best = Best::new(limit);
    let mut sums = Sums::new();
    for (session, turn, forward) in view.pending().iter() {
        if within.is_some_and(|within| within.binary_search(&session).is_err()) {
            continue;
        }
        sums.clear();
        for (i, a) in scorer.anchors.iter().enumerate() {
            if let Some(p) = forward.posting(turn, a.hash) {
                sums.add(&scorer, i, &p);
            }
        }
        best.offer(scorer.hit(session, turn, &sums));
    }
    let mut cursors = Vec::with_capacity(scorer.anchors.len());
    for a in &scorer.anchors {
        cursors.push(view.anchor_cursor(a.hash)?);
    }
    evaluate(&scorer, &mut cursors, &mut best, within)?;
    let mut hits = best.into_sorted();
    for hit in &mut hits {
        hit.matched = scorer.query_mask(hit.matched);
    }
    Ok((query, hits))
}

/// Document-at-a-time MaxScore over the cursors (one per [`Scorer::anchors`], in that order),
/// over the turns of the sessions `within` (ascending ids) when given: the cursors seek past
/// the others, so their postings are not decoded.
fn evaluate(
    scorer: &Scorer,
    cursors: &mut [PostingCursor<'_>],
    best: &mut Best,
    within: Option<&[u32]>,
) -> Result<()> {
    let n = cursors.len();
    // Anchors from the least to the most they can add; `prefix[i]` bounds what anchors `0..i`
    // add together.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scorer.max_contribution[a].total_cmp(&scorer.max_contribution[b]).then(a.cmp(&b)));
    let mut prefix = vec![0.0; n + 1];
    for (k, &i) in order.iter().enumerate() {
        prefix[k + 1] = prefix[k] + scorer.max_contribution[i];
    }
    // Anchors `order[..first_essential]` are probed only; a turn must hold one of the others.
    // A turn holding every anchor also gets the exact bonus.
    let bound_of_first = |k: usize| prefix[k] + if k == n { WEIGHT_EXACT } else { 0.0 };
    let mut first_essential = 0;
    let mut sums = Sums::new();
    loop {
        while first_essential < n && best.cannot_enter(bound_of_first(first_essential + 1)) {
            first_essential += 1;
        }
        let Some(key) =
            order[first_essential..].iter().filter_map(|&i| cursors[i].current().map(|(k, _)| k)).min()
        else {
            return Ok(());
        };
        if let Some(within) = within {
            let (session, _) = split_block_key(key);
            if within.binary_search(&session).is_err() {
                // On to the first turn of the next session searched, if any.
                let Some(&next) = within.get(within.partition_point(|&s| s < session)) else {
                    return Ok(());
                };
                for &i in &order[first_essential..] {
                    cursors[i].seek(crate::store::block_key(next, 0))?;
                }
                continue;
            }
        }
        sums.clear();
        for &i in &order[first_essential..] {
            if let Some((k, p)) = cursors[i].current()
                && k == key
            {
                sums.add(scorer, i, p);
                cursors[i].advance()?;
            }
        }
        // The probed anchors, strongest first, while the turn can still enter.
        let mut can_enter = true;
        for k in (0..first_essential).rev() {
            let all_so_far = sums.count == n - k - 1;
            let bound = sums.partial + prefix[k + 1] + if all_so_far { WEIGHT_EXACT } else { 0.0 };
            if best.cannot_enter(bound) {
                can_enter = false;
                break;
            }
            let i = order[k];
            cursors[i].seek(key)?;
            if let Some((at, p)) = cursors[i].current()
                && at == key
            {
                sums.add(scorer, i, p);
            }
        }
        if can_enter {
            let (session, turn) = split_block_key(key);
            best.offer(scorer.hit(session, turn, &sums));
        }
    }
}

/// What scoring needs of the query and the corpus.
struct Scorer {
    /// The scored anchors (framing words left out), in query order.
    anchors: Vec<QueryAnchor>,
    /// Query bit of each scored anchor.
    bits: Vec<u64>,
    /// The most each anchor can add to a score.
    max_contribution: Vec<f64>,
    /// `Σ idf·(k1 + 1)` over the scored anchors: `lex`'s upper bound.
    upper_bound: f64,
    avg_len_user: f64,
    avg_len_assistant: f64,
}

impl Scorer {
    fn new(query: &QueryAnchors, scored: u64, stats: &CorpusStats) -> Self {
        let upper_bound = query.idf_of(scored) * (BM25_K1 + 1.0);
        let (mut anchors, mut bits, mut max_contribution) = (Vec::new(), Vec::new(), Vec::new());
        for (i, a) in query.anchors().iter().enumerate() {
            if scored & (1u64 << i) != 0 {
                // bm25 < idf·(k1 + 1) on each side.
                max_contribution
                    .push((WEIGHT_USER + WEIGHT_ASSISTANT) * a.idf * (BM25_K1 + 1.0) / upper_bound);
                anchors.push(a.clone());
                bits.push(1u64 << i);
            }
        }
        Scorer {
            anchors,
            bits,
            max_contribution,
            upper_bound,
            avg_len_user: stats.avg_len_user,
            avg_len_assistant: stats.avg_len_assistant,
        }
    }

    /// A turn's hit from its per-anchor sums. `matched` is over scored anchors until
    /// [`Scorer::query_mask`] maps it to query bits.
    fn hit(&self, session: u32, turn: u32, sums: &Sums) -> Hit {
        let (mut user, mut assistant) = (0.0, 0.0);
        // Added in anchor order, as `recall::score` does, whatever order the lists were read in.
        let mut bits = sums.matched;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            user += sums.user[i];
            assistant += sums.assistant[i];
            bits &= bits - 1;
        }
        let exact = if sums.count == self.anchors.len() { 1.0 } else { 0.0 };
        let score = WEIGHT_USER * user / self.upper_bound
            + WEIGHT_ASSISTANT * assistant / self.upper_bound
            + WEIGHT_EXACT * exact;
        Hit { session, turn, score, matched: sums.matched }
    }

    fn query_mask(&self, matched: u64) -> u64 {
        self.bits.iter().enumerate().filter(|(i, _)| matched & (1u64 << i) != 0).fold(0, |m, (_, b)| m | b)
    }
}

/// One turn's BM25 per scored anchor and side (at most 64 anchors: query masks are `u64`).
/// Only the entries of `matched` anchors are meaningful, so clearing it is enough to reuse it.
struct Sums {
    user: [f64; 64],
    assistant: [f64; 64],
    matched: u64,
    count: usize,
    /// Running weighted sum, for bounds only.
    partial: f64,
}

impl Sums {
    fn new() -> Self {
        Sums { user: [0.0; 64], assistant: [0.0; 64], matched: 0, count: 0, partial: 0.0 }
    }

    fn clear(&mut self) {
        self.matched = 0;
        self.count = 0;
        self.partial = 0.0;
    }

    fn add(&mut self, scorer: &Scorer, i: usize, p: &Posting) {
        let idf = scorer.anchors[i].idf;
        let user = bm25(idf, p.tf_user, p.len_user, scorer.avg_len_user);
        let assistant = bm25(idf, p.tf_assistant, p.len_assistant, scorer.avg_len_assistant);
        self.user[i] = user;
        self.assistant[i] = assistant;
        self.matched |= 1u64 << i;
        self.count += 1;
        self.partial += (WEIGHT_USER * user + WEIGHT_ASSISTANT * assistant) / scorer.upper_bound;
    }
}

/// The best `limit` hits so far, worst on top.
struct Best {
    limit: usize,
    heap: BinaryHeap<Ranked>,
}

/// A hit ordered so that the heap's top is the one to drop first: the lowest score, and among
/// equal scores the latest block.
struct Ranked(Hit);

impl Ranked {
    fn cmp_rank(&self, other: &Self) -> Ordering {
        // Greater = worse.
        other
            .0
            .score
            .total_cmp(&self.0.score)
            .then((self.0.session, self.0.turn).cmp(&(other.0.session, other.0.turn)))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_rank(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_rank(other)
    }
}

/// Hits [`Best`] makes room for up front.
const MAX_PREALLOCATED: usize = 1024;

/// Scores are sums of a few dozen terms in different orders: bounds get this much slack so
/// rounding never prunes a turn that belongs in the result.
const BOUND_SLACK: f64 = 1e-9;

impl Best {
    fn new(limit: usize) -> Self {
        // `limit` comes from the caller (a tool argument): room for the usual few, grown on need.
        Best { limit, heap: BinaryHeap::with_capacity(limit.min(MAX_PREALLOCATED) + 1) }
    }

    /// True when no turn scoring at most `bound` can enter.
    fn cannot_enter(&self, bound: f64) -> bool {
        self.heap.len() == self.limit
            && self.heap.peek().is_some_and(|worst| bound + BOUND_SLACK < worst.0.score)
    }

    fn offer(&mut self, hit: Hit) {
        if hit.matched == 0 {
            return;
        }
        self.heap.push(Ranked(hit));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    fn into_sorted(self) -> Vec<Hit> {
        // Ascending by "worse" is best first.
        self.heap.into_sorted_vec().into_iter().map(|r| r.0).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::recall::{self, RecallContext};
    use crate::{Gatekeeper, ImportOptions, Options};
    use std::io::Write;

    const WORDS: [&str; 24] = [
        "redis",
        "lock",
        "ttl",
        "kafka",
        "consumer",
        "lag",
        "postgres",
        "index",
        "vacuum",
        "nginx",
        "certificate",
        "renewal",
        "billing",
        "invoice",
        "retry",
        "timeout",
        "asyncio",
        "pool",
        "缓存",
        "过期",
        "数据库",
        "索引",
        "deploy",
        "rollback",
    ];

    /// A deterministic history: `sessions` sessions of `turns` turns from a small vocabulary
    /// with skewed frequencies (some anchors in most turns, some in few), imported in bulk,
    /// then `pending` turns added one at a time so they stay unfolded.
    fn index(sessions: u32, turns: u32, pending: u32) -> (tempfile::TempDir, Gatekeeper) {
        let dir = tempfile::tempdir().unwrap();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut word = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Squaring skews towards the first words.
            let x = (state % 1000) as f64 / 1000.0;
            WORDS[((x * x) * WORDS.len() as f64) as usize]
        };
        let mut text = |n: usize| (0..n).map(|_| word()).collect::<Vec<_>>().join(" ");
        let jsonl = dir.path().join("history.jsonl");
        let mut file = std::fs::File::create(&jsonl).unwrap();
        for s in 0..sessions {
            for t in 0..turns {
                // Now and then a short turn repeating one word: scores close to the bounds
                // pruning relies on, where an unsound bound shows.
                let (user, assistant) = if t % 17 == 5 {
                    let w = text(1);
                    ([w.as_str(); 9].join(" "), format!("{w} {w} {w}"))
                } else {
                    (text(6), text(14))
                };
                let line =
                    serde_json::json!({"session": format!("s{s}"), "user": user, "assistant": assistant});
                writeln!(file, "{line}").unwrap();
            }
        }
        drop(file);
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default()).unwrap();
        gk.import(&[jsonl], &ImportOptions::default()).unwrap();
        for i in 0..pending {
            gk.session(&format!("s{}", i % 3)).unwrap().add_turn(&text(5), &text(9)).unwrap();
        }
        (dir, gk)
    }

    /// Every turn scored, no pruning: what [`search`] must return.
    fn exhaustive<S: Source>(view: &View<S>, text: &str, limit: usize) -> Vec<Hit> {
        let stats = view.corpus_stats();
        let query = QueryAnchors::build(text, &anchor::extract(text), stats.blocks, |h| view.df(h)).unwrap();
        let scored = query.full_mask() & !framing_mask(&query, text);
        let scorer = Scorer::new(&query, scored, &stats);
        let mut turns: std::collections::BTreeMap<(u32, u32), Sums> = Default::default();
        for (i, a) in scorer.anchors.iter().enumerate() {
            view.anchor_postings(a.hash, |session, p| {
                turns.entry((session, p.turn)).or_insert_with(Sums::new).add(&scorer, i, &p);
            })
            .unwrap();
            for (session, turn, forward) in view.pending().iter() {
                if let Some(p) = forward.posting(turn, a.hash) {
                    turns.entry((session, turn)).or_insert_with(Sums::new).add(&scorer, i, &p);
                }
            }
        }
        let mut hits: Vec<Hit> = turns
            .iter()
            .map(|(&(session, turn), sums)| {
                let mut hit = scorer.hit(session, turn, sums);
                hit.matched = scorer.query_mask(hit.matched);
                hit
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then((a.session, a.turn).cmp(&(b.session, b.turn))));
        hits.truncate(limit);
        hits
    }

    const QUERIES: [&str; 6] = [
        "redis lock ttl",
        "why does the kafka consumer lag after a deploy?",
        "certificate renewal",
        "数据库索引过期",
        "billing invoice retry timeout rollback vacuum",
        "asyncio",
    ];

    #[test]
    fn pruned_search_returns_exactly_the_exhaustive_top() {
        // Many one-chunk lists; and few long sessions, whose lists span chunks to step over.
        for (sessions, turns) in [(40, 30), (4, 450)] {
            let (_dir, gk) = index(sessions, turns, 7);
            let view = gk.store().read().unwrap();
            assert!(view.pending().len() == 7, "the added turns stay pending");
            same_as_exhaustive(&view);
        }
    }

    /// Within some sessions, the pruned search returns the exhaustive top of those sessions'
    /// turns: the seeks past the others skip no turn of theirs, pending turns included.
    #[test]
    fn a_search_within_sessions_is_the_exhaustive_top_of_those() {
        for (sessions, turns) in [(40, 30), (4, 450)] {
            let (_dir, gk) = index(sessions, turns, 7);
            let view = gk.store().read().unwrap();
            for within in [vec![0u32], vec![1, 2], (0..sessions).step_by(3).collect(), vec![sessions - 1], vec![]] {
                for query in QUERIES {
                    for limit in [1, 3, 20, 5000] {
                        let (_, found) = rank(&view, query, limit, Some(&within)).unwrap();
                        let mut expected = exhaustive(&view, query, usize::MAX);
                        expected.retain(|h| within.contains(&h.session));
                        expected.truncate(limit);
                        let got: Vec<_> = found.iter().map(|h| (h.session, h.turn, h.matched)).collect();
                        let want: Vec<_> = expected.iter().map(|h| (h.session, h.turn, h.matched)).collect();
                        assert_eq!(got, want, "{query:?} within {within:?} limit {limit}");
                    }
                }
            }
        }
    }

    fn same_as_exhaustive<S: Source>(view: &View<S>) {
        for query in QUERIES {
            for limit in [1, 3, 20, 100, 5000] {
                let found = search(view, query, limit).unwrap();
                let expected = exhaustive(view, query, limit);
                assert!(!expected.is_empty(), "{query:?} finds something");
                assert_eq!(found.hits.len(), expected.len(), "{query:?} limit {limit}");
                for (got, want) in found.hits.iter().zip(&expected) {
                    assert_eq!((got.session, got.turn, got.matched), (want.session, want.turn, want.matched));
                    assert!((got.score - want.score).abs() < 1e-12, "{query:?}: {got:?} vs {want:?}");
                }
            }
        }
    }

    #[test]
    fn scores_are_recall_scores_without_recency() {
        let (_dir, gk) = index(1, 200, 0);
        let view = gk.store().read().unwrap();
        let query_text = "redis lock ttl kafka";
        let found = search(&view, query_text, 1000).unwrap();
        let stats = view.corpus_stats();
        let query =
            QueryAnchors::build(query_text, &anchor::extract(query_text), stats.blocks, |h| view.df(h))
                .unwrap();
        let postings: Vec<Vec<Posting>> = query
            .anchors()
            .iter()
            .map(|a| {
                let mut list = Vec::new();
                view.session_postings_without_lengths(a.hash, 0, &mut list).unwrap();
                list
            })
            .collect();
        let lengths = view.session_lengths(0, 200);
        // Far past the last turn: recency adds nothing.
        let context = RecallContext {
            avg_len_user: stats.avg_len_user,
            avg_len_assistant: stats.avg_len_assistant,
            current_turn: 1_000_000,
        };
        let expected: Vec<recall::Candidate> =
            recall::Ranking::new(recall::score(&query, &postings, &lengths, query.full_mask(), &context, usize::MAX).unwrap())
                .collect();
        assert_eq!(found.hits.len(), expected.len());
        for (hit, candidate) in found.hits.iter().zip(&expected) {
            assert_eq!((hit.turn, hit.matched), (candidate.turn, candidate.matched));
            assert!((hit.score - candidate.score).abs() < 1e-12);
        }
    }

    #[test]
    fn nothing_to_find_is_an_empty_result() {
        let (_dir, gk) = index(3, 10, 0);
        let view = gk.store().read().unwrap();
        assert!(search(&view, "zebra quokka", 20).unwrap().hits.is_empty());
        assert!(search(&view, "redis lock", 0).unwrap().hits.is_empty());
    }
}

//! Evidence recall: the documents that hold the query's most specific anchors.
//!
//! The same shape as turn recall (DESIGN §3.4) on the evidence corpus: BM25 (k1 = 1.2,
//! b = 0.75) with document frequencies and lengths over evidence documents, normalized by its
//! upper bound. A document is a candidate only if it holds a focus anchor: of the query
//! anchors found in evidence, those with an evidence IDF at or above their mean (the rule
//! `pipeline` applies to turns), that are also at least as specific as the mean by the history's
//! IDF. Keys like `rows` or `error`, present in every document, then admit nothing on their
//! own, and neither does a word the conversation uses everywhere.

use crate::anchor;
use crate::error::Result;
use crate::evidence::{self, Document};
use crate::query::idf::idf;
use crate::query::anchors::QueryAnchors;
use crate::query::recall::{BM25_B, BM25_K1};
use crate::store::evidence::EvidenceRecord;
use crate::store::{Source, View};
use crate::types::anchor_hash;
use std::collections::HashMap;

/// Evidence documents offered to the selection per query. A projection costs hundreds of
/// tokens: a handful of candidates is all a budget can hold.
pub const EVIDENCE_RECALL_LIMIT: usize = 5;

/// A recalled document.
pub struct EvidenceCandidate {
    /// Normalized BM25 score in [0, 1].
    pub score: f64,
    /// Query anchors its projection shows: what it covers as a block of the context.
    pub matched: u64,
    /// Its stored record (ref, kind, projection).
    pub record: EvidenceRecord,
}

/// Recall's answer: the candidates, best first, and the evidence focus anchors.
#[derive(Default)]
pub struct EvidenceRecall {
    /// At most [`EVIDENCE_RECALL_LIMIT`] documents, by score then id.
    pub candidates: Vec<EvidenceCandidate>,
    /// Query anchors that must be covered by evidence (bit `i` = anchor `i`).
    pub focus: u64,
}

/// The query anchors a projection shows, read as the index reads a JSON document (keys and
/// values, snake_case keys split). A document is found by everything in it, but as a block of
/// the context it covers only what its projection shows, as a turn covers what its pruned text
/// shows.
fn visible_anchors(query: &QueryAnchors, projection: &str) -> u64 {
    let doc = match serde_json::from_str(projection) {
        Ok(value) => Document::Json(value),
        Err(_) => Document::Text(projection.to_string()),
    };
    let hashes: Vec<u64> = anchor::extract_hashed(&evidence::indexed_text(&doc), anchor_hash)
        .into_iter()
        .map(|a| a.hash)
        .collect();
    query
        .anchors()
        .iter()
        .enumerate()
        .fold(0, |mask, (i, a)| if hashes.binary_search(&a.hash).is_ok() { mask | (1u64 << i) } else { mask })
}

/// The documents visible from `session` (global ones and its own tool output) that hold the
/// query's anchors in `scored`.
pub fn recall<S: Source>(
    view: &View<S>,
    session: u32,
    query: &QueryAnchors,
    scored: u64,
) -> Result<EvidenceRecall> {
    let meta = view.evidence_meta()?;
    if meta.documents == 0 {
        return Ok(EvidenceRecall::default());
    }
    let avg_len = (meta.total_len as f64 / meta.documents as f64).max(1.0);
    let mut weights: Vec<(usize, f64)> = Vec::new();
    let mut docs: HashMap<u32, (f64, u64)> = HashMap::new();
    for (i, anchor) in query.anchors().iter().enumerate() {
        if scored & (1u64 << i) == 0 {
            continue;
        }
        let df = view.evidence_df(anchor.hash)?;
        if df == 0 {
            continue;
        }
        let weight = idf(meta.documents, u64::from(df));
        weights.push((i, weight));
        view.evidence_postings(anchor.hash, |id, tf, len| {
            let tf = f64::from(tf);
            let norm = BM25_K1 * (1.0 - BM25_B + BM25_B * f64::from(len) / avg_len);
            let entry = docs.entry(id).or_default();
            entry.0 += weight * tf * (BM25_K1 + 1.0) / (tf + norm);
            entry.1 |= 1u64 << i;
        })?;
    }
    if weights.is_empty() {
        return Ok(EvidenceRecall::default());
    }
    let mean = weights.iter().map(|w| w.1).sum::<f64>() / weights.len() as f64;
    let focus = weights.iter().filter(|w| w.1 >= mean - 1e-9).fold(0u64, |mask, w| mask | (1u64 << w.0))
        // Also specific by the history's IDF, the scale turns compete on: a word the history
        // uses everywhere (`ms`, `check`) is as weak a lead to a document as to a turn.
        & query.specific(scored);
    let upper: f64 = weights.iter().map(|w| w.1).sum::<f64>() * (BM25_K1 + 1.0);

    // Found by everything in the document; as a block it covers what its projection shows.
    let mut ranked: Vec<(u32, f64)> =
        docs.into_iter().filter(|(_, (_, m))| m & focus != 0).map(|(id, (s, _))| (id, s / upper)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut candidates = Vec::new();
    for (id, score) in ranked {
        if candidates.len() == EVIDENCE_RECALL_LIMIT {
            break;
        }
        let Some(record) = view.evidence_record(id)? else { continue };
        if record.session.is_some_and(|s| s != session) {
            continue;
        }
        let visible = visible_anchors(query, &record.projection);
        candidates.push(EvidenceCandidate { score, matched: visible, record });
    }
    Ok(EvidenceRecall { candidates, focus })
}

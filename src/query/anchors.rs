//! The anchors of a query, weighted by IDF: what the gate, recall, pruning and selection use.
//!
//! Built with index statistics: the CJK n-gram IDF floor of DESIGN §3.1 applies here, the
//! query keeps at most [`MAX_QUERY_ANCHORS`] anchors (most discriminative first), and a query
//! left with none falls back to its first 20 characters as one anchor.

use crate::anchor::{self, AnchorCounts, is_cjk_ngram};
use crate::query::idf::{CJK_NGRAM_MIN_IDF, idf};
use crate::types::anchor_hash;

use serde::Serialize;

/// A long query (a pasted log) keeps its 64 most discriminative anchors: enough to find what it
/// is about, and it bounds the postings a query reads. Anchors are tracked in a `u64` mask.
pub const MAX_QUERY_ANCHORS: usize = 64;

/// One anchor of a query.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct QueryAnchor {
    /// The anchor text.
    pub text: String,
    /// Its IDF in the index.
    pub idf: f64,
    #[serde(skip)]
    pub(crate) hash: u64,
    /// The hashes of the other forms of the word the index holds (`paints`, `painted` of
    /// `paint`), read as this anchor: see [`QueryAnchors::fold_word_forms`].
    #[serde(skip)]
    pub(crate) forms: Vec<u64>,
}

impl QueryAnchor {
    /// The anchor's hash and those of its forms.
    pub fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        std::iter::once(self.hash).chain(self.forms.iter().copied())
    }
}

/// A text's anchors weighted by IDF, all of them (uncapped), sorted by hash: what the gate sums.
/// Built by [`weigh`] alike for a query and for a turn being added, so a replayed decision
/// (`--as-of`) equals the recorded one to the last bit.
pub type GateWeights = Vec<(u64, f64)>;

/// Weights anchors `(hash, is CJK n-gram)` with `df` over `blocks` blocks: the CJK floor, then
/// the 20-character fallback if nothing is left. Returns the weights sorted by hash and the
/// fallback anchor's text if it was used.
pub fn weigh<E>(
    anchors: impl Iterator<Item = (u64, bool)>,
    text: &str,
    blocks: u64,
    mut df: impl FnMut(u64) -> Result<u64, E>,
) -> Result<(GateWeights, Option<String>), E> {
    let mut weights = Vec::with_capacity(anchors.size_hint().0);
    for (hash, cjk_ngram) in anchors {
        let weight = idf(blocks, df(hash)?);
        if !(cjk_ngram && weight < CJK_NGRAM_MIN_IDF) {
            weights.push((hash, weight));
        }
    }
    let mut fallback = None;
    if weights.is_empty()
        && let Some(head) = anchor::fallback_anchor(text)
    {
        let hash = anchor_hash(&head);
        weights.push((hash, idf(blocks, df(hash)?)));
        fallback = Some(head);
    }
    weights.sort_unstable_by_key(|w| w.0);
    Ok((weights, fallback))
}

/// A query's anchors, sorted by IDF (descending, then text); anchor `i` is bit `i` of a mask.
#[derive(Debug, Clone, Default)]
pub struct QueryAnchors {
    anchors: Vec<QueryAnchor>,
    gate_weights: GateWeights,
    /// Hash of the 20-character fallback anchor, if the query fell back to it.
    fallback: Option<u64>,
}

impl QueryAnchors {
    /// Weights `counts` with `df` over `blocks` blocks, applying the floor, fallback and cap.
    pub fn build<E>(
        text: &str,
        counts: &AnchorCounts,
        blocks: u64,
        df: impl FnMut(u64) -> Result<u64, E>,
    ) -> Result<Self, E> {
        let mut by_hash: Vec<(u64, &str)> = counts.anchors().map(|a| (anchor_hash(a), a)).collect();
        by_hash.sort_unstable();
        let (gate_weights, fallback) =
            weigh(by_hash.iter().map(|&(h, a)| (h, is_cjk_ngram(a))), text, blocks, df)?;
        let mut anchors: Vec<QueryAnchor> = gate_weights
            .iter()
            .map(|&(hash, idf)| {
                let text = match by_hash.binary_search_by_key(&hash, |e| e.0) {
                    Ok(i) => by_hash[i].1.to_string(),
                    Err(_) => fallback.clone().unwrap_or_default(),
                };
                QueryAnchor { text, idf, hash, forms: Vec::new() }
            })
            .collect();
        sort_by_specificity(&mut anchors);
        anchors.truncate(MAX_QUERY_ANCHORS);
        let fallback = fallback.map(|head| anchor_hash(&head));
        Ok(Self { anchors, gate_weights, fallback })
    }

    /// Reads each plain word anchor together with the inflected forms of it that the index holds
    /// (`anchor::word_forms`: "when did she paint" finds "I painted"), as a stemming search
    /// engine would, without changing what the index stores: a form's postings are the
    /// anchor's, and its IDF is that of them all (document frequencies summed, at most
    /// `blocks`). The gate's weights are left as they are, so a replayed decision still equals
    /// the recorded one. Anchors are sorted again: call it before any mask is taken. The
    /// anchors `leave` names (framing words, which are not scored) are left as they are.
    pub fn fold_word_forms<E>(
        &mut self,
        blocks: u64,
        leave: impl Fn(u64) -> bool,
        mut df: impl FnMut(u64) -> Result<u64, E>,
    ) -> Result<(), E> {
        for a in &mut self.anchors {
            if Some(a.hash) == self.fallback || leave(a.hash) {
                continue;
            }
            let mut total = 0;
            for form in anchor::word_forms(&a.text) {
                let hash = anchor_hash(&form);
                let count = df(hash)?;
                if count > 0 {
                    a.forms.push(hash);
                    total += count;
                }
            }
            if total > 0 {
                a.idf = idf(blocks, (df(a.hash)? + total).min(blocks));
            }
        }
        sort_by_specificity(&mut self.anchors);
        Ok(())
    }

    /// Every anchor's weight, uncapped, sorted by hash: the gate's input.
    pub fn gate_weights(&self) -> &[(u64, f64)] {
        &self.gate_weights
    }

    /// The anchors, most discriminative first.
    pub fn anchors(&self) -> &[QueryAnchor] {
        &self.anchors
    }

    /// Number of anchors.
    pub fn len(&self) -> usize {
        self.anchors.len()
    }

    /// Whether the query has no anchor (never, once built: a query without one falls back to
    /// its head).
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.anchors.is_empty()
    }

    /// The bit of the 20-character fallback anchor (0 if the query has real anchors): the head
    /// of a query made only of stop and framing words names nothing.
    pub fn fallback_mask(&self) -> u64 {
        self.anchors
            .iter()
            .enumerate()
            .fold(0, |mask, (i, a)| if Some(a.hash) == self.fallback { mask | (1u64 << i) } else { mask })
    }

    /// The mask with every anchor's bit set.
    pub fn full_mask(&self) -> u64 {
        mask_of_len(self.anchors.len())
    }

    /// Sum of IDF over the anchors whose bits are set in `mask`.
    pub fn idf_of(&self, mask: u64) -> f64 {
        self.anchors.iter().enumerate().filter(|(i, _)| mask & (1u64 << i) != 0).map(|(_, a)| a.idf).sum()
    }

    /// Of the anchors in `mask`, those at least as specific as their mean IDF: the rarest say
    /// what a query is about. The mean is a statistic of the query, not a tuned constant.
    pub fn specific(&self, mask: u64) -> u64 {
        let in_mask = || (0..self.anchors.len()).filter(move |&i| mask & (1u64 << i) != 0);
        let count = in_mask().count();
        if count == 0 {
            return 0;
        }
        let mean = in_mask().map(|i| self.anchors[i].idf).sum::<f64>() / count as f64;
        in_mask().filter(|&i| self.anchors[i].idf >= mean - 1e-9).fold(0, |m, i| m | (1u64 << i))
    }

    /// Texts of the anchors whose bits are set in `mask`, in anchor order.
    pub fn texts_of(&self, mask: u64) -> Vec<String> {
        self.anchors
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1u64 << i) != 0)
            .map(|(_, a)| a.text.clone())
            .collect()
    }
}

/// Most discriminative first (highest IDF), ties by text: the order of a query's mask bits.
fn sort_by_specificity(anchors: &mut [QueryAnchor]) {
    anchors.sort_by(|a, b| b.idf.total_cmp(&a.idf).then_with(|| a.text.cmp(&b.text)));
}

/// A mask with the low `len` bits set.
pub fn mask_of_len(len: usize) -> u64 {
    if len >= 64 { u64::MAX } else { (1u64 << len) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn build(text: &str, blocks: u64, dfs: &[(&str, u64)]) -> QueryAnchors {
        let table: HashMap<u64, u64> = dfs.iter().map(|(a, df)| (anchor_hash(a), *df)).collect();
        QueryAnchors::build(text, &anchor::extract(text), blocks, |h| {
            Ok::<_, ()>(table.get(&h).copied().unwrap_or(0))
        })
        .unwrap()
    }

    #[test]
    fn weights_sorts_and_floors() {
        let q = build("redis 分布式", 9, &[("redis", 1), ("分布", 8), ("分布式", 2), ("布式", 0)]);
        let texts: Vec<&str> = q.anchors().iter().map(|a| a.text.as_str()).collect();
        // 分布 (df 8 of 9, idf 1.1) is below the floor; the rest sort by idf.
        assert_eq!(texts, ["布式", "redis", "分布式"]);
        assert!((q.anchors()[1].idf - (5f64.ln() + 1.0)).abs() < 1e-12);
    }

    #[test]
    fn falls_back_to_first_twenty_chars() {
        let q = build("the and of it is was", 5, &[]);
        assert_eq!(q.anchors()[0].text, "the and of it is was");
        assert_eq!(q.len(), 1);
        assert_eq!(q.fallback_mask(), 1);
        assert_eq!(build("redis lock", 5, &[]).fallback_mask(), 0);
        assert_eq!(build("   ", 5, &[]).len(), 0);
    }

    #[test]
    fn floored_only_query_falls_back() {
        let q = build("分布", 3, &[("分布", 3)]);
        // 分布 itself (idf 1.0) is floored; the fallback is the same text, as a phrase.
        assert_eq!(q.len(), 1);
        assert_eq!(q.anchors()[0].text, "分布");
    }

    #[test]
    fn masks() {
        let q = build("alpha beta gamma", 10, &[("alpha", 1), ("beta", 2), ("gamma", 3)]);
        assert_eq!(q.full_mask(), 0b111);
        assert_eq!(q.texts_of(0b101), ["alpha", "gamma"]);
        assert!((q.idf_of(0b011) - (q.anchors()[0].idf + q.anchors()[1].idf)).abs() < 1e-12);
        assert_eq!(mask_of_len(64), u64::MAX);
        // idf: alpha > beta > gamma; their mean lies between alpha and beta.
        assert_eq!(q.specific(0b111), 0b001);
        assert_eq!(q.specific(0b110), 0b010);
        assert_eq!(q.specific(0), 0);
    }
}

//! Minimum-coverage selection (DESIGN §3.5): the fewest tokens that cover the query.
//!
//! Greedy: repeatedly take the block with the largest
//! `gain(b) = Σ idf(t), t ∈ cov(b) \ covered  /  cost(b)^α` (α = 0.8) until the covered IDF
//! reaches 85% of the query's, or nothing more fits. The anchors counted are the query's focus
//! anchors (framing words and common context left out, see `pipeline`). A block that does not fit the remaining
//! budget is skipped; a block with zero gain is never taken. Ties go to the lower turn id.
//! The `fill` policy then spends what is left of the budget (see [`choose`]). A block's cost is
//! what it adds to the prompt: once a taken block shows a time, another block of that time
//! costs its text and `same time` instead of the time again.

mod selection;

pub use selection::{Budget, EmptyBecause, SelectOptions, SelectedBlock, SelectedEvidence, Selection};

use crate::query::anchors::QueryAnchors;

/// DESIGN §3.7: stop once this share of the query's IDF is covered.
pub const COVERAGE_STOP: f64 = 0.85;
/// DESIGN §3.7: cost exponent of the greedy gain.
pub const GREEDY_ALPHA: f64 = 0.8;

pub use crate::options::Policy;


/// A candidate as the greedy sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offer {
    /// Turn id, for ties.
    pub turn: u32,
    /// Token estimate of the pruned block.
    pub tokens: u32,
    /// Query anchors the pruned block contains.
    pub matched: u64,
    /// Of those, the ones the greedy may count for it: all of them, except for a turn from
    /// before the current topic segment on a continue, which covers only what the segment's
    /// turns do not (`pipeline::select`).
    pub covers: u64,
    /// Among the top [`crate::query::recall::RECALL_LIMIT`] recalled (or an evidence projection): the
    /// greedy chooses among these only; `fill` may take any offer.
    pub in_greedy: bool,
    /// Token estimate of the whole, unpruned block (`tokens` if pruning removed nothing).
    pub whole_tokens: u32,
    /// The turn's time, as an id shared by the offers of the same time (`None`: no time).
    pub time: Option<u32>,
    /// What the block costs less once a block of the same time is taken: its label then says
    /// `same time` instead of the time (`prompt::block_labels`). `tokens` count the time.
    pub label_saving: u32,
}

impl Offer {
    /// What the block costs given the times the taken blocks already show.
    fn cost(&self, shown: &[u32]) -> u32 {
        match self.time {
            Some(time) if shown.contains(&time) => self.tokens - self.label_saving,
            _ => self.tokens,
        }
    }
}

/// The times the taken blocks show, in the order taken.
fn show(shown: &mut Vec<u32>, offer: &Offer) {
    if let Some(time) = offer.time
        && !shown.contains(&time)
    {
        shown.push(time);
    }
}

/// One taken block: its index in the offers and the anchors it newly covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// Index into the offers.
    pub offer: usize,
    /// Anchors this block covered first.
    pub newly_covered: u64,
    /// `fill` hands the block over whole, unpruned.
    pub whole: bool,
}

/// Chooses blocks from `offers` (in recall rank order) within `budget` tokens. Coverage and
/// gain count the query anchors in `focus` (the anchors that must be covered, see `pipeline`).
pub fn choose(query: &QueryAnchors, offers: &[Offer], budget: u32, policy: Policy, focus: u64) -> Vec<Pick> {
    let total = query.idf_of(focus);
    let mut picks: Vec<Pick> = Vec::new();
    let mut taken = vec![false; offers.len()];
    // `covered` is what the greedy has counted; `present` what the taken blocks contain, which
    // is what a pick reports (they differ for a block that may not count all it has).
    let (mut covered, mut present, mut used) = (0u64, 0u64, 0u32);
    let mut shown = Vec::new();
    while total > 0.0 && query.idf_of(covered & focus) < COVERAGE_STOP * total {
        let mut best: Option<(f64, usize)> = None;
        for (i, offer) in offers.iter().enumerate() {
            let cost = offer.cost(&shown);
            if taken[i] || !offer.in_greedy || used.saturating_add(cost) > budget {
                continue;
            }
            let gained = query.idf_of(offer.covers & focus & !covered);
            if gained <= 0.0 {
                continue;
            }
            let gain = gained / f64::from(cost.max(1)).powf(GREEDY_ALPHA);
            let better = match best {
                None => true,
                Some((g, j)) => gain > g || (gain == g && offer.turn < offers[j].turn),
            };
            if better {
                best = Some((gain, i));
            }
        }
        let Some((_, i)) = best else { break };
        taken[i] = true;
        used += offers[i].cost(&shown);
        show(&mut shown, &offers[i]);
        picks.push(Pick { offer: i, newly_covered: offers[i].matched & !present, whole: false });
        covered |= offers[i].covers;
        present |= offers[i].matched;
    }
    if policy == Policy::Fill {
        fill(offers, budget, focus, &mut picks, (used, shown), present);
    }
    picks
}

/// `fill`: spends what the greedy left of the budget, in three passes over the offers in rank
/// order. First the pruned offers that hold a focus anchor; then those taken, greedy's picks
/// included, are handed over whole where the rest of the budget allows, best ranked first
/// (the answer is often in the sentence after the one that matched, or in the other speaker's);
/// then the offers that hold only common anchors, pruned, and whole where room is left. A
/// turn that shares only a common word with the query (a name, `feel`) is a weaker lead than
/// any that shares a specific one, whatever their scores: recency and the exact-match bonus
/// can rank it first.
fn fill(
    offers: &[Offer],
    budget: u32,
    focus: u64,
    picks: &mut Vec<Pick>,
    (mut used, mut shown): (u32, Vec<u32>),
    mut present: u64,
) {
    let mut pick_of: Vec<Option<usize>> = vec![None; offers.len()];
    for (k, pick) in picks.iter().enumerate() {
        pick_of[pick.offer] = Some(k);
    }
    let specific = |o: &Offer| o.matched & focus != 0;
    let tiers: [Vec<usize>; 2] = [
        (0..offers.len()).filter(|&i| specific(&offers[i])).collect(),
        (0..offers.len()).filter(|&i| offers[i].matched != 0 && !specific(&offers[i])).collect(),
    ];
    for tier in &tiers {
        for &i in tier {
            let offer = &offers[i];
            let cost = offer.cost(&shown);
            if pick_of[i].is_none() && used.saturating_add(cost) <= budget {
                used += cost;
                show(&mut shown, offer);
                pick_of[i] = Some(picks.len());
                picks.push(Pick { offer: i, newly_covered: offer.matched & !present, whole: false });
                present |= offer.matched;
            }
        }
        for &i in tier {
            let Some(k) = pick_of[i] else { continue };
            let extra = offers[i].whole_tokens.saturating_sub(offers[i].tokens);
            if extra > 0 && used.saturating_add(extra) <= budget {
                used += extra;
                picks[k].whole = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anchor;

    /// Four anchors with idf 4, 3, 2, 1 (total 10): 85% needs 8.5.
    fn query() -> QueryAnchors {
        let text = "aaaa bbbb cccc dddd";
        let dfs = [("aaaa", 4.0), ("bbbb", 3.0), ("cccc", 2.0), ("dddd", 1.0)];
        let n = 1000u64;
        // Choose df so idf is exactly the wanted value: idf = ln((n+1)/(df+1)) + 1.
        let table: std::collections::HashMap<u64, f64> =
            dfs.iter().map(|(t, idf)| (crate::types::anchor_hash(t), *idf)).collect();
        let q = QueryAnchors::build(text, &anchor::extract(text), n, |h| {
            let want = table[&h];
            Ok::<_, ()>((((n as f64 + 1.0) / (want - 1.0).exp()) - 1.0).round() as u64)
        })
        .unwrap();
        assert_eq!(
            q.anchors().iter().map(|a| a.text.as_str()).collect::<Vec<_>>(),
            ["aaaa", "bbbb", "cccc", "dddd"]
        );
        q
    }

    fn offer(turn: u32, tokens: u32, matched: u64) -> Offer {
        Offer {
            turn,
            tokens,
            matched,
            covers: matched,
            in_greedy: true,
            whole_tokens: tokens,
            time: None,
            label_saving: 0,
        }
    }

    fn turns(offers: &[Offer], picks: &[Pick]) -> Vec<u32> {
        picks.iter().map(|p| offers[p.offer].turn).collect()
    }

    #[test]
    fn greedy_rows() {
        let q = query();
        // (offers, budget, policy, expected turns in pick order, why)
        type Row = (Vec<Offer>, u32, Policy, Vec<u32>, &'static str);
        let rows: Vec<Row> = vec![
            (
                vec![offer(1, 10, 0b0011), offer(2, 10, 0b0100), offer(3, 10, 0b1000)],
                100,
                Policy::Minimal,
                vec![1, 2],
                "stops at 85%: 4+3+2 = 9 of 10 covered, the 1-idf block is not needed",
            ),
            (
                vec![offer(1, 100, 0b1111), offer(2, 5, 0b0011), offer(3, 5, 0b0100)],
                1000,
                Policy::Minimal,
                vec![2, 3],
                "α favours small blocks: two cheap ones beat one big one",
            ),
            (
                vec![offer(1, 50, 0b0011), offer(2, 10, 0b0001)],
                20,
                Policy::Minimal,
                vec![2],
                "a block that does not fit is skipped, a smaller one still taken",
            ),
            (
                vec![offer(1, 10, 0b0001), offer(2, 10, 0b0001), offer(3, 10, 0)],
                100,
                Policy::Minimal,
                vec![1],
                "zero gain is never taken, even with budget left",
            ),
            (
                vec![offer(5, 10, 0b0011), offer(4, 10, 0b0011)],
                100,
                Policy::Minimal,
                vec![4],
                "equal gain: the lower turn id wins",
            ),
            (
                vec![offer(1, 10, 0b0001), offer(2, 10, 0b0010), offer(3, 10, 0b0100)],
                25,
                Policy::Minimal,
                vec![1, 2],
                "budget exhausted before coverage",
            ),
            (
                vec![offer(1, 10, 0b1111), offer(2, 10, 0b0001), offer(3, 10, 0), offer(4, 90, 0b0010)],
                30,
                Policy::Fill,
                vec![1, 2],
                "fill spends the rest on anchored blocks that fit, in rank order",
            ),
            (
                vec![offer(1, 10, 0b0001), Offer { in_greedy: false, ..offer(2, 10, 0b0010) }],
                100,
                Policy::Minimal,
                vec![1],
                "the greedy chooses among the top recalled only",
            ),
        ];
        for (offers, budget, policy, expected, why) in rows {
            let picks = choose(&q, &offers, budget, policy, q.full_mask());
            assert_eq!(turns(&offers, &picks), expected, "{why}");
            let used: u32 = picks.iter().map(|p| offers[p.offer].tokens).sum();
            assert!(used <= budget, "{why}: used {used} > budget {budget}");
        }
    }

    #[test]
    fn fill_takes_specific_offers_then_whole_turns_then_common_ones() {
        let q = query();
        let focus = 0b0011;
        let common = |turn, tokens| Offer { in_greedy: false, ..offer(turn, tokens, 0b1100) };
        let specific = |turn, tokens, whole_tokens| Offer {
            in_greedy: false,
            whole_tokens,
            ..offer(turn, tokens, 0b0010)
        };
        // Ranked: a common-only offer first (recency can do that), then two specific ones.
        let offers = [common(1, 10), specific(2, 10, 30), specific(3, 10, 25)];
        let picks = choose(&q, &offers, 50, Policy::Fill, focus);
        let taken: Vec<(u32, bool)> = picks.iter().map(|p| (offers[p.offer].turn, p.whole)).collect();
        // Specific 2 and 3 (20), 2 whole (+20 = 40), 3 whole would need +15: no; common 1 (50).
        assert_eq!(taken, [(2, true), (3, false), (1, false)]);
        let used: u32 = picks
            .iter()
            .map(|p| if p.whole { offers[p.offer].whole_tokens } else { offers[p.offer].tokens })
            .sum();
        assert_eq!(used, 50);
        // With room, the common offer is handed over whole too, after every specific one.
        let roomy = [Offer { whole_tokens: 20, ..common(1, 10) }, specific(2, 10, 30)];
        let picks = choose(&q, &roomy, 1000, Policy::Fill, focus);
        assert!(picks.iter().all(|p| p.whole), "the budget allows every block whole");
        // `minimal` never hands a block over whole.
        assert!(choose(&q, &offers, 1000, Policy::Minimal, focus).iter().all(|p| !p.whole));
    }

    #[test]
    fn fill_keeps_what_the_greedy_chose() {
        let q = query();
        let offers: Vec<Offer> =
            (0..30).map(|t| Offer { in_greedy: t < 20, ..offer(t, 7 + t % 5, 1 << (t % 4)) }).collect();
        for budget in [10, 40, 100, 1000] {
            let minimal = choose(&q, &offers, budget, Policy::Minimal, q.full_mask());
            let fill = choose(&q, &offers, budget, Policy::Fill, q.full_mask());
            assert_eq!(
                &fill[..minimal.len()],
                &minimal[..],
                "budget {budget}: fill starts with minimal's picks"
            );
            let used: u32 = fill
                .iter()
                .map(|p| if p.whole { offers[p.offer].whole_tokens } else { offers[p.offer].tokens })
                .sum();
            assert!(used <= budget, "budget {budget}: used {used}");
        }
    }

    #[test]
    fn newly_covered_is_disjoint() {
        let q = query();
        let offers = [offer(1, 10, 0b0011), offer(2, 10, 0b0110)];
        let picks = choose(&q, &offers, 100, Policy::Minimal, q.full_mask());
        assert_eq!(picks[0].newly_covered, 0b0011);
        assert_eq!(picks[1].newly_covered, 0b0100);
    }

    #[test]
    fn only_focus_anchors_count() {
        let q = query();
        // Focus on `aaaa` and `cccc` (idf 6): a block with only `bbbb` has no gain.
        let offers = [offer(1, 10, 0b0010), offer(2, 10, 0b0001), offer(3, 10, 0b0100)];
        let picks = choose(&q, &offers, 100, Policy::Minimal, 0b0101);
        assert_eq!(turns(&offers, &picks), [2, 3]);
    }

    #[test]
    fn the_greedy_counts_only_what_an_offer_covers() {
        let q = query();
        // Turn 1 is cheaper and has both anchors, but may cover only `bbbb`; turn 5 covers `aaaa`.
        let restricted = Offer { covers: 0b10, ..offer(1, 10, 0b11) };
        let offers = [restricted, offer(5, 40, 0b01)];
        let picks = choose(&q, &offers, 1000, Policy::Minimal, 0b11);
        let taken: Vec<(usize, u64)> = picks.iter().map(|p| (p.offer, p.newly_covered)).collect();
        // the cheap block comes first and reports all it holds; the greedy still takes the one
        // that may cover `aaaa`, which then holds nothing new
        assert_eq!(taken, [(0, 0b11), (1, 0b00)]);
        // `fill` still offers what a block contains
        let alone = [Offer { covers: 0, ..offer(1, 10, 0b11) }];
        assert!(choose(&q, &alone, 1000, Policy::Minimal, 0b11).is_empty());
        assert_eq!(choose(&q, &alone, 1000, Policy::Fill, 0b11).len(), 1);
    }

    #[test]
    fn a_time_already_shown_costs_less() {
        let q = query();
        let timed = |turn, matched| Offer { time: Some(0), label_saving: 6, ..offer(turn, 10, matched) };
        // 20 tokens: the second block of the same time costs 10 - 6 = 4 and fits.
        let offers = [timed(1, 0b0001), timed(2, 0b0010)];
        assert_eq!(turns(&offers, &choose(&q, &offers, 14, Policy::Minimal, q.full_mask())), [1, 2]);
        assert_eq!(turns(&offers, &choose(&q, &offers, 14, Policy::Fill, 0b0001)), [1, 2]);
        // Of another time, it costs 10 and does not.
        let other = [timed(1, 0b0001), Offer { time: Some(1), ..timed(2, 0b0010) }];
        assert_eq!(turns(&other, &choose(&q, &other, 14, Policy::Minimal, q.full_mask())), [1]);
        assert_eq!(turns(&other, &choose(&q, &other, 14, Policy::Fill, 0b0001)), [1]);
    }
}

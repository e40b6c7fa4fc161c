//! The seed's 100-round contamination test again, with everything generated
//! (`tools/eval/src/contamination.rs`): 4 topics × 25 turns whose shared everyday phrasing is
//! made of invented words, none of them in any list of the code. A mechanism that passes here
//! learnt which words identify nothing from the index, not from a list written for the phrasing
//! of `contamination.rs`.
//!
//! Late (the person's earlier conversations are indexed), every combination of script
//! (English-like, Chinese-like), layout (round-robin, runs), policy (`minimal`, `fill`) and
//! budget (300, 4000): no round may select a turn of another topic, neither one whose query
//! names a subject nor a follow-up made of a frame alone; and every round whose query names a
//! subject its topic has mentioned must select a turn of that topic. Early (a fresh index),
//! `fill` may be no worse than `minimal`. `eval --contamination` runs every combination over
//! more seeds and prints the table.

mod common;

use common::contamination::{Case, Layout, Phase, Script, run};
use ctxgate::Policy;

const SEEDS: [u64; 2] = [7, 65_537];

/// Late (the person's earlier conversations indexed): no block of another topic, under either
/// policy and budget, and every known subject found.
fn check(script: Script, layout: Layout) -> Result<(), Box<dyn std::error::Error>> {
    for policy in [Policy::Minimal, Policy::Fill] {
        // Two seeds at the budget where `fill` has the most room to go wrong.
        for (budget, seeds) in [(300, &SEEDS[..1]), (4000, &SEEDS[..])] {
            for &seed in seeds {
                let case = Case { script, layout, phase: Phase::Late, policy, budget, seed };
                let seen = run(&case)?;
                assert!(
                    seen.answerable >= 30,
                    "too few answerable rounds to prove anything: {case:?} {seen:?}"
                );
                assert_eq!(seen.cross_topic, 0, "{case:?}: {seen:#?}");
                assert_eq!(seen.bare_cross_topic, 0, "{case:?}: {seen:#?}");
                if layout == Layout::Runs {
                    assert!(seen.bare_rounds >= 12, "too few follow-ups of a frame alone: {seen:?}");
                }
                assert_eq!(seen.unanswered, 0, "{case:?}: a known subject found nothing: {seen:#?}");
            }
        }
    }
    Ok(())
}

/// Early (a fresh index): with no other conversation to learn the phrasing from, the first
/// reuses of a frame can still draw a turn of another topic (`docs/relevance.md` has the
/// figures). What must hold is that `fill` is no worse than `minimal` there: without a null
/// model it takes only turns that hold a focus anchor, not every turn that shares a word (it
/// took a block of another topic in nearly every round before).
fn check_early(script: Script, layout: Layout) -> Result<(), Box<dyn std::error::Error>> {
    let seed = SEEDS[0];
    let minimal =
        run(&Case { script, layout, phase: Phase::Early, policy: Policy::Minimal, budget: 4000, seed })?;
    let fill = run(&Case { script, layout, phase: Phase::Early, policy: Policy::Fill, budget: 4000, seed })?;
    assert!(
        fill.cross_rounds.len() <= minimal.cross_rounds.len() * 5 / 4 + 2,
        "{script:?}/{layout:?}: fill crossed topics in {} rounds, minimal in {}",
        fill.cross_rounds.len(),
        minimal.cross_rounds.len()
    );
    assert!(minimal.cross_rounds.len() * 3 < minimal.rounds, "{script:?}/{layout:?}: {minimal:#?}");
    Ok(())
}

#[test]
fn latin_round_robin_late() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Latin, Layout::RoundRobin)
}

#[test]
fn latin_runs_late() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Latin, Layout::Runs)
}

#[test]
fn han_round_robin_late() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Han, Layout::RoundRobin)
}

#[test]
fn han_runs_late() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Han, Layout::Runs)
}

#[test]
fn latin_round_robin_early() -> Result<(), Box<dyn std::error::Error>> {
    check_early(Script::Latin, Layout::RoundRobin)
}

#[test]
fn latin_runs_early() -> Result<(), Box<dyn std::error::Error>> {
    check_early(Script::Latin, Layout::Runs)
}

#[test]
fn han_round_robin_early() -> Result<(), Box<dyn std::error::Error>> {
    check_early(Script::Han, Layout::RoundRobin)
}

#[test]
fn han_runs_early() -> Result<(), Box<dyn std::error::Error>> {
    check_early(Script::Han, Layout::Runs)
}

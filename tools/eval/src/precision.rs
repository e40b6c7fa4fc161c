//! Precision on the recall set (the eval-dev README's "Precision" protocol): a hook injects on
//! every prompt, so a history that holds nothing for the prompt must give nothing.
//!
//! Each question of categories 1–4 is asked twice in the same index, `select --as-of` the
//! whole conversation, per policy and budget:
//! - **related**: in its own conversation's session;
//! - **unrelated**: in the session of the next conversation in name order (the last one's go to
//!   the first): other people, whose history cannot hold the answer.
//!
//! Reported: the share of prompts that get anything (a block or an evidence projection), the
//! mean tokens used, and for related prompts turn recall and block precision (selected evidence
//! turns over selected turns, over the prompts that got a block).

use crate::data::{Conversations, RecallTask};
use crate::recall::BUDGETS;
use anyhow::{Context, Result};
use ctxgate::{Gatekeeper, Policy, SelectOptions};
use serde::Serialize;
use std::fmt::Write;

/// The figures of one policy at one budget.
#[derive(Debug, Clone, Serialize)]
pub struct PrecisionRow {
    /// `minimal` or `fill`.
    pub policy: Policy,
    /// Budget in est tokens.
    pub budget: u32,
    /// Questions asked (categories 1–4), each once per side.
    pub questions: usize,
    /// Share of related prompts that got anything.
    pub related_given: f64,
    /// Mean tokens used for related prompts.
    pub related_tokens: f64,
    /// Mean turn recall of related prompts.
    pub related_turn_recall: f64,
    /// Selected evidence turns over selected turns, over the related prompts that got a block.
    pub related_block_precision: f64,
    /// Share of unrelated prompts that got anything.
    pub unrelated_given: f64,
    /// Mean tokens used for unrelated prompts.
    pub unrelated_tokens: f64,
    /// `unrelated_tokens` over `related_tokens`.
    pub token_ratio: f64,
}

#[derive(Default)]
struct Side {
    prompts: usize,
    given: usize,
    tokens: u64,
    recall: f64,
    selected_turns: usize,
    evidence_selected: usize,
}

impl Side {
    fn mean(&self, sum: f64) -> f64 {
        if self.prompts == 0 { 0.0 } else { sum / self.prompts as f64 }
    }
}

/// The session each session's questions are asked in as unrelated prompts: the next in name
/// order, the last one's the first.
fn next_sessions(conversations: &Conversations) -> Vec<(String, String)> {
    let mut names: Vec<&String> = conversations.sessions.keys().collect();
    names.sort();
    (0..names.len()).map(|i| (names[i].clone(), names[(i + 1) % names.len()].clone())).collect()
}

/// Asks every question of categories 1–4 in its own session and in the next one.
pub fn run(
    gatekeeper: &Gatekeeper,
    conversations: &Conversations,
    tasks: &[RecallTask],
) -> Result<Vec<PrecisionRow>> {
    let next = next_sessions(conversations);
    let mut rows = Vec::new();
    for policy in [Policy::Minimal, Policy::Fill] {
        for budget in BUDGETS {
            let (mut related, mut unrelated) = (Side::default(), Side::default());
            for task in tasks.iter().filter(|t| (1..=4).contains(&t.category)) {
                let stranger =
                    &next.iter().find(|(from, _)| *from == task.session).context("session order")?.1;
                for (session, side) in [(&task.session, &mut related), (stranger, &mut unrelated)] {
                    let as_of = conversations.sessions[session].len() as u32;
                    let options = SelectOptions {
                        budget: Some(budget),
                        as_of: Some(as_of),
                        policy: Some(policy),
                        ..SelectOptions::default()
                    };
                    let selection = gatekeeper
                        .session(session)?
                        .select_with(&task.query, &options)
                        .with_context(|| {
                            format!("question {}: select {:?} in session {session:?}", task.qa_id, task.query)
                        })?;
                    side.prompts += 1;
                    side.tokens += u64::from(selection.budget.used);
                    if !selection.blocks.is_empty() || !selection.evidence.is_empty() {
                        side.given += 1;
                    }
                    if session == &task.session {
                        let turns: Vec<u32> = selection.blocks.iter().map(|b| b.turn_id).collect();
                        let hits = task.evidence_turns.iter().filter(|t| turns.contains(t)).count();
                        side.recall += hits as f64 / task.evidence_turns.len() as f64;
                        side.selected_turns += turns.len();
                        side.evidence_selected +=
                            turns.iter().filter(|t| task.evidence_turns.contains(t)).count();
                    }
                }
            }
            let related_tokens = related.mean(related.tokens as f64);
            let unrelated_tokens = unrelated.mean(unrelated.tokens as f64);
            rows.push(PrecisionRow {
                policy,
                budget,
                questions: related.prompts,
                related_given: related.mean(related.given as f64),
                related_tokens,
                related_turn_recall: related.mean(related.recall),
                related_block_precision: if related.selected_turns == 0 {
                    0.0
                } else {
                    related.evidence_selected as f64 / related.selected_turns as f64
                },
                unrelated_given: unrelated.mean(unrelated.given as f64),
                unrelated_tokens,
                token_ratio: if related_tokens == 0.0 { 0.0 } else { unrelated_tokens / related_tokens },
            });
        }
    }
    Ok(rows)
}

/// The rows as a markdown table.
pub fn to_text(rows: &[PrecisionRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| policy | budget | unrelated given | unrelated tokens | related given | related tokens | tokens ratio | related turn recall | block precision |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1}% | {:.0} | {:.1}% | {:.0} | {:.1}% | {:.3} | {:.3} |",
            match r.policy {
                Policy::Minimal => "minimal",
                Policy::Fill => "fill",
            },
            r.budget,
            100.0 * r.unrelated_given,
            r.unrelated_tokens,
            100.0 * r.related_given,
            r.related_tokens,
            100.0 * r.token_ratio,
            r.related_turn_recall,
            r.related_block_precision
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Turn;

    #[test]
    fn each_session_asks_the_next_and_the_last_the_first() {
        let mut conversations = Conversations::default();
        for name in ["conv-30", "conv-26", "conv-41"] {
            conversations
                .sessions
                .insert(name.to_string(), vec![Turn { user: "u".into(), assistant: "a".into(), time: None }]);
        }
        let next = next_sessions(&conversations);
        let pairs: Vec<(&str, &str)> = next.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(pairs, [("conv-26", "conv-30"), ("conv-30", "conv-41"), ("conv-41", "conv-26")]);
    }
}

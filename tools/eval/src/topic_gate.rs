//! ctxgate's own answers: import the set into one fresh index, then ask the gate every task.

use crate::data::{Expected, Task};
use crate::metrics::Confusion;
use anyhow::{Context, Result};
use ctxgate::gate::{NEW_RATIO_SWITCH, OVERLAP_CONTINUE, OVERLAP_SWITCH, REPLY_TO_QUESTION};
use ctxgate::{GateDecision, Gatekeeper, ImportOptions, Topic};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// The gate branch a decision came from, inferred from its numbers (DESIGN §3.2's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Branch {
    /// `overlap > OVERLAP_CONTINUE`.
    ContinueByOverlap,
    /// Not the above, and the query starts with a deictic pattern.
    ContinueByDeictic,
    /// Would switch, but the query answers the question the previous turn ended with.
    ContinueByReply,
    /// `overlap < OVERLAP_SWITCH` and `new_ratio > NEW_RATIO_SWITCH`, no deictic.
    Switch,
    /// Anything else: the middle ground continues.
    ContinueMiddle,
}

impl Branch {
    /// Every branch, in the order they are tried.
    pub const ALL: [Branch; 5] = [
        Branch::ContinueByOverlap,
        Branch::ContinueByDeictic,
        Branch::ContinueByReply,
        Branch::Switch,
        Branch::ContinueMiddle,
    ];

    /// The branch that fired for `decision`.
    pub fn of(decision: &GateDecision) -> Branch {
        if decision.overlap > OVERLAP_CONTINUE {
            Branch::ContinueByOverlap
        } else if decision.deictic == Some(REPLY_TO_QUESTION) {
            Branch::ContinueByReply
        } else if decision.deictic.is_some() {
            Branch::ContinueByDeictic
        } else if decision.overlap < OVERLAP_SWITCH && decision.new_ratio > NEW_RATIO_SWITCH {
            Branch::Switch
        } else {
            Branch::ContinueMiddle
        }
    }

    /// The topic this branch answers.
    pub fn topic(self) -> Topic {
        if self == Branch::Switch { Topic::Switch } else { Topic::Continue }
    }

    /// How the branch is shown in the table.
    pub fn label(self) -> String {
        match self {
            Branch::ContinueByOverlap => format!("continue: overlap > {OVERLAP_CONTINUE:.2}"),
            Branch::ContinueByDeictic => "continue: deictic".to_string(),
            Branch::ContinueByReply => "continue: reply to a question".to_string(),
            Branch::Switch => format!("switch: overlap < {OVERLAP_SWITCH:.2}, new > {NEW_RATIO_SWITCH:.2}"),
            Branch::ContinueMiddle => "continue: middle ground".to_string(),
        }
    }
}

/// The tasks that went through one branch.
#[derive(Debug, Clone, Serialize)]
pub struct BranchStats {
    /// The branch.
    pub branch: Branch,
    /// Tasks decided by it.
    pub tasks: u64,
    /// Of those, tasks expected to switch.
    pub expected_switches: u64,
    /// Share of its tasks the branch answered right; `None` when it decided none.
    pub accuracy: Option<f64>,
}

/// ctxgate's results on one set.
#[derive(Debug)]
pub struct GateRun {
    /// Judgements against the labels.
    pub confusion: Confusion,
    /// Per branch, in [`Branch::ALL`] order.
    pub branches: Vec<BranchStats>,
    /// Decisions whose topic differs from the one its inferred branch gives (0 unless the
    /// gate's rules changed without this tool).
    pub branch_mismatches: u64,
    /// Turns imported.
    pub imported_turns: u64,
    /// Seconds spent importing.
    pub import_seconds: f64,
    /// Seconds spent answering the tasks.
    pub gate_seconds: f64,
}

/// Imports `conversations` into `gatekeeper` (a fresh index) and answers `tasks`.
pub fn run(gatekeeper: &Gatekeeper, conversations: &Path, tasks: &[Task]) -> Result<GateRun> {
    let started = Instant::now();
    let report = gatekeeper
        .import(&[conversations.to_path_buf()], &ImportOptions::default())
        .with_context(|| format!("cannot import {}", conversations.display()))?;
    let import_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let mut confusion = Confusion::default();
    let mut per_branch = [Confusion::default(); Branch::ALL.len()];
    let mut branch_mismatches = 0;
    for task in tasks {
        let decision = gatekeeper
            .session(&task.session)?
            .gate(&task.query, Some(task.upto_turn))
            .with_context(|| format!("gate of session {:?} at turn {}", task.session, task.upto_turn))?;
        let expected_switch = task.expected == Expected::Switch;
        let judged_switch = decision.topic == Topic::Switch;
        confusion.record(expected_switch, judged_switch);
        let branch = Branch::of(&decision);
        if branch.topic() != decision.topic {
            branch_mismatches += 1;
        }
        per_branch[branch as usize].record(expected_switch, judged_switch);
    }
    let gate_seconds = started.elapsed().as_secs_f64();

    let branches = Branch::ALL
        .iter()
        .zip(per_branch)
        .map(|(&branch, c)| BranchStats {
            branch,
            tasks: c.tasks(),
            expected_switches: c.expected_switches(),
            accuracy: c.accuracy(),
        })
        .collect();
    Ok(GateRun {
        confusion,
        branches,
        branch_mismatches,
        imported_turns: report.new_turns,
        import_seconds,
        gate_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(topic: Topic, overlap: f64, new_ratio: f64, deictic: Option<&'static str>) -> GateDecision {
        GateDecision { topic, overlap, new_ratio, deictic }
    }

    #[test]
    fn branches_follow_the_gate_order() {
        assert_eq!(Branch::of(&decision(Topic::Continue, 0.6, 0.4, Some("it"))), Branch::ContinueByOverlap);
        assert_eq!(
            Branch::of(&decision(Topic::Continue, 0.1, 0.9, Some("^这个"))),
            Branch::ContinueByDeictic
        );
        assert_eq!(
            Branch::of(&decision(Topic::Continue, 0.1, 0.9, Some(REPLY_TO_QUESTION))),
            Branch::ContinueByReply
        );
        assert_eq!(Branch::of(&decision(Topic::Switch, 0.1, 0.9, None)), Branch::Switch);
        assert_eq!(Branch::of(&decision(Topic::Continue, 0.3, 0.7, None)), Branch::ContinueMiddle);
        assert_eq!(Branch::of(&decision(Topic::Continue, 0.0, 0.0, None)), Branch::ContinueMiddle);
    }
}

//! Results as tables for a reader or as one JSON document.

use crate::metrics::Summary;
use crate::selection::{Evidence, SelectionRun};
use crate::topic_gate::BranchStats;
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;

/// One method's figures on a set.
#[derive(Debug, Clone, Serialize)]
pub struct MethodResult {
    /// `ctxgate`, `always-continue` or `previous-turn-overlap`.
    pub method: &'static str,
    /// The switch threshold, for the previous-turn baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Its figures.
    #[serde(flatten)]
    pub summary: Summary,
}

/// Everything measured on one set.
#[derive(Debug, Clone, Serialize)]
pub struct SetResult {
    /// The set's name.
    pub name: String,
    /// The conversations file.
    pub conversations: PathBuf,
    /// The tasks file.
    pub tasks_file: PathBuf,
    /// Turns imported into the index.
    pub imported_turns: u64,
    /// Tasks answered.
    pub tasks: u64,
    /// Tasks expected to switch.
    pub switches: u64,
    /// ctxgate first, then the baselines.
    pub methods: Vec<MethodResult>,
    /// ctxgate's tasks per gate branch.
    pub branches: Vec<BranchStats>,
    /// Decisions whose topic differs from their inferred branch's.
    pub branch_mismatches: u64,
    /// Seconds importing the conversations.
    pub import_seconds: f64,
    /// Seconds answering the tasks with ctxgate.
    pub gate_seconds: f64,
    /// Seconds scoring and sweeping the baselines.
    pub baseline_seconds: f64,
    /// Selection figures, with `--selection`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionRun>,
    /// Selection figures with all sessions chained into one, with `--selection`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_selection: Option<SelectionRun>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Per set, in the order run.
    pub sets: Vec<SetResult>,
    /// Wall time of the whole run, reading the data included.
    pub total_seconds: f64,
}

fn figure(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

fn method_label(method: &MethodResult) -> String {
    match method.threshold {
        Some(threshold) => format!("{} (switch < {threshold:.2})", method.method),
        None => method.method.to_string(),
    }
}

impl Report {
    /// The tables for a reader.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for set in &self.sets {
            let _ = writeln!(
                out,
                "== {}: {} tasks, {} switches; {} turns imported in {:.2} s, gate {:.2} s, baselines {:.2} s",
                set.name,
                set.tasks,
                set.switches,
                set.imported_turns,
                set.import_seconds,
                set.gate_seconds,
                set.baseline_seconds
            );
            let _ = writeln!(
                out,
                "{:<38} {:>6} {:>8} {:>7} {:>10} {:>10} {:>12}",
                "method", "tasks", "switches", "BA", "switch P", "switch R", "judged switch"
            );
            for method in &set.methods {
                let s = &method.summary;
                let _ = writeln!(
                    out,
                    "{:<38} {:>6} {:>8} {:>7} {:>10} {:>10} {:>12}",
                    method_label(method),
                    s.tasks,
                    s.switches,
                    figure(s.balanced_accuracy),
                    figure(s.switch_precision),
                    figure(s.switch_recall),
                    figure(s.judged_switch_share)
                );
            }
            let _ = writeln!(out, "ctxgate by gate branch:");
            let _ = writeln!(out, "  {:<36} {:>6} {:>8} {:>9}", "branch", "tasks", "switches", "accuracy");
            for branch in &set.branches {
                let _ = writeln!(
                    out,
                    "  {:<36} {:>6} {:>8} {:>9}",
                    branch.branch.label(),
                    branch.tasks,
                    branch.expected_switches,
                    figure(branch.accuracy)
                );
            }
            if set.branch_mismatches > 0 {
                let _ = writeln!(
                    out,
                    "  warning: {} decisions disagree with their inferred branch (gate rules changed?)",
                    set.branch_mismatches
                );
            }
            if let Some(selection) = &set.selection {
                write_selection(&mut out, "selection", selection);
            }
            if let Some(selection) = &set.long_selection {
                write_selection(&mut out, "selection, all sessions chained into one", selection);
            }
            let _ = writeln!(out);
        }
        if self.sets.len() > 1 {
            let _ = writeln!(out, "== balanced accuracy");
            let methods: Vec<&str> = self.sets[0].methods.iter().map(|m| m.method).collect();
            let _ = write!(out, "{:<20}", "set");
            for method in &methods {
                let _ = write!(out, " {method:>22}");
            }
            let _ = writeln!(out);
            for set in &self.sets {
                let _ = write!(out, "{:<20}", set.name);
                for method in &set.methods {
                    let _ = write!(out, " {:>22}", figure(method.summary.balanced_accuracy));
                }
                let _ = writeln!(out);
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "total time {:.2} s", self.total_seconds);
        out
    }
}

fn write_selection(out: &mut String, title: &str, run: &SelectionRun) {
    let _ = writeln!(out, "{title} ({} tasks; {:.2} s):", run.tasks, run.seconds);
    let _ = writeln!(
        out,
        "  {:<9} {:<15} {:>6} {:>9} {:>13} {:>8} {:>8} {:>9}",
        "evidence", "method", "budget", "recall", "any evidence", "tokens", "tasks", "other dlg"
    );
    for (i, kind) in Evidence::ALL.iter().enumerate() {
        for r in run.results.iter().filter(|r| r.evidence == *kind) {
            let _ = writeln!(
                out,
                "  {:<9} {:<15} {:>6} {:>9} {:>13} {:>8.0} {:>8} {:>9}",
                kind.label(),
                r.method.label(),
                r.budget,
                figure(Some(r.evidence_recall)),
                figure(Some(r.any_evidence)),
                r.tokens,
                run.tasks_with_evidence[i],
                figure(r.other_dialogue_share)
            );
        }
    }
}

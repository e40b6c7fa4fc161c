//! `ctxgate select`: the selection for a query, explained.

use super::{Global, gate, output};
use ctxgate::{Policy, SelectOptions, Selection};
use std::fmt::Write;

/// Arguments of `select`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name
    #[arg(long, short)]
    session: String,
    /// Token budget for the selected turns [default: 4000]
    #[arg(long, value_name = "TOKENS", value_parser = super::budget_range())]
    budget: Option<u32>,
    /// Answer as if only turns 0..N of the session existed (history replay)
    #[arg(long, value_name = "N")]
    as_of: Option<u32>,
    /// minimal: the smallest context covering the query; fill: then spend the rest of the budget
    #[arg(long, value_enum)]
    policy: Option<PolicyArg>,
    /// Leave evidence projections out of the selection
    #[arg(long)]
    no_evidence: bool,
    /// The query (the next user message)
    query: String,
}

/// `--policy` values.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum PolicyArg {
    /// The smallest context that covers the query
    Minimal,
    /// Cover the query, then fill the budget with the next best turns (whole where room is left)
    Fill,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::Minimal => Policy::Minimal,
            PolicyArg::Fill => Policy::Fill,
        }
    }
}

/// Prints the selection.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(args.budget, args.policy.map(Policy::from))?;
    let options = SelectOptions {
        budget: args.budget,
        as_of: args.as_of,
        policy: args.policy.map(Policy::from),
        no_evidence: args.no_evidence,
        tokenizer: None,
    };
    let selection = gatekeeper.session(&args.session)?.select_with(&args.query, &options)?;
    if global.json { output::print_json(&selection) } else { output::print_text(&describe(&selection)) }
}

/// `share` (0..1) in percent, never "-0" (a share of nothing may be -0.0).
fn percent(share: f64) -> f64 {
    share * 100.0 + 0.0
}

fn describe(selection: &Selection) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "gate      {}", gate::describe(&selection.decision));
    let anchors: Vec<String> = selection.anchors.iter().map(|a| format!("{} {:.2}", a.text, a.idf)).collect();
    let _ = writeln!(out, "anchors   {}", anchors.join(", "));
    let _ = writeln!(
        out,
        "budget    {} of {} tokens, coverage {:.0}%, {} block{}, {} evidence",
        selection.budget.used,
        selection.budget.limit,
        percent(selection.coverage),
        selection.blocks.len(),
        if selection.blocks.len() == 1 { "" } else { "s" },
        selection.evidence.len()
    );
    if let Some(why) = &selection.empty_because {
        let _ = writeln!(out, "nothing   {}", why.describe());
    }
    for block in &selection.blocks {
        let _ = writeln!(
            out,
            "\n── {} · score {:.3} · {} tokens · covers {}",
            block.label(),
            block.score,
            block.tokens,
            covers(&block.covered_anchors)
        );
        if !block.user.is_empty() {
            let _ = writeln!(out, "user       {}", block.user);
        }
        if !block.assistant.is_empty() {
            let _ = writeln!(out, "assistant  {}", block.assistant);
        }
    }
    for evidence in &selection.evidence {
        let _ = writeln!(
            out,
            "\n── evidence {} · {} · score {:.3} · {} tokens · covers {}",
            evidence.evidence_ref,
            evidence.kind,
            evidence.score,
            evidence.tokens,
            covers(&evidence.covered_anchors)
        );
        let _ = writeln!(out, "{}", evidence.projection);
    }
    out
}

/// The anchors a block covered first, or `-`.
fn covers(anchors: &[String]) -> String {
    if anchors.is_empty() { "-".to_string() } else { anchors.join(", ") }
}

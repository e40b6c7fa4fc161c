//! `ctxgate gate`: only the topic gate's decision.

use super::{Global, output};
use ctxgate::describe_reference;
use ctxgate::{GateDecision, Topic};
use serde::Serialize;

/// Arguments of `gate`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name
    #[arg(long, short)]
    session: String,
    /// Decide as if only turns 0..N of the session existed (history replay)
    #[arg(long, value_name = "N")]
    as_of: Option<u32>,
    /// The next user message
    query: String,
}

#[derive(Serialize)]
struct Gated<'a> {
    session: &'a str,
    query: &'a str,
    decision: GateDecision,
}

/// Prints the decision.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(None, None)?;
    let decision = gatekeeper.session(&args.session)?.gate(&args.query, args.as_of)?;
    if global.json {
        output::print_json(&Gated { session: &args.session, query: &args.query, decision })
    } else {
        output::print_text(&format!("{}\n", describe(&decision)))
    }
}

/// One line: the decision and its numbers.
pub fn describe(decision: &GateDecision) -> String {
    let topic = match decision.topic {
        Topic::Continue => "continue",
        Topic::Switch => "switch",
    };
    let mut line = format!("{topic}  (overlap {:.2}, new {:.2}", decision.overlap, decision.new_ratio);
    if let Some(pattern) = decision.deictic {
        line.push_str(&format!(", {}", describe_reference(pattern)));
    }
    line.push(')');
    line
}

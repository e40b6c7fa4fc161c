//! `ctxgate prompt`: the prompt text for a query.

use super::select::PolicyArg;
use super::{Global, output};
use ctxgate::{Policy, SelectOptions};
use serde::Serialize;
use std::io::{IsTerminal, Write};

/// Arguments of `prompt`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name
    #[arg(long, short)]
    session: String,
    /// Token budget for the whole prompt (without a system prompt) [default: 4000]
    #[arg(long, value_name = "TOKENS", value_parser = super::budget_range())]
    budget: Option<u32>,
    /// Selection policy (see `ctxgate select --help`)
    #[arg(long, value_enum)]
    policy: Option<PolicyArg>,
    /// Leave evidence projections out of the prompt
    #[arg(long)]
    no_evidence: bool,
    /// The query (the next user message)
    query: String,
}

#[derive(Serialize)]
struct Prompted<'a> {
    session: &'a str,
    query: &'a str,
    prompt: String,
}

/// Prints the prompt.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(args.budget, args.policy.map(Policy::from))?;
    let options = SelectOptions {
        budget: args.budget,
        as_of: None,
        policy: args.policy.map(Policy::from),
        no_evidence: args.no_evidence,
        tokenizer: None,
    };
    let prompt = gatekeeper.session(&args.session)?.build_prompt_with(&args.query, &options)?;
    if global.json {
        output::print_json(&Prompted { session: &args.session, query: &args.query, prompt })
    } else if std::io::stdout().is_terminal() {
        // On a terminal, control characters of logged text are shown harmlessly.
        output::print_text(&prompt)
    } else {
        // Piped to a model or a file: the prompt exactly as it should be sent.
        let mut out = std::io::stdout().lock();
        out.write_all(prompt.as_bytes())?;
        Ok(out.flush()?)
    }
}

//! `ctxgate add`: record one turn.

use super::{Global, output};
use serde::Serialize;

/// Arguments of `add`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name (created on its first turn)
    #[arg(long, short)]
    session: String,
    /// The user's message
    #[arg(long, short, default_value = "")]
    user: String,
    /// The assistant's reply
    #[arg(long, short, default_value = "")]
    assistant: String,
}

#[derive(Serialize)]
struct Added<'a> {
    session: &'a str,
    turn_id: u32,
}

/// Adds the turn and prints its id.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(None, None)?;
    let turn_id = gatekeeper.session(&args.session)?.add_turn(&args.user, &args.assistant)?;
    if global.json {
        output::print_json(&Added { session: &args.session, turn_id })
    } else {
        output::print_text(&format!("{turn_id}\n"))
    }
}

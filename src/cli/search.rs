//! `ctxgate search`: the turns of every session that best match a query.

use super::{Global, output};
use ctxgate::SearchHit;
use serde::Serialize;
use std::fmt::Write;

/// Arguments of `search`.
#[derive(clap::Args)]
pub struct Args {
    /// Turns to show at most
    #[arg(long, short = 'n', value_name = "N", default_value_t = 20)]
    limit: usize,
    /// What to look for
    query: String,
}

#[derive(Serialize)]
struct Found<'a> {
    query: &'a str,
    hits: Vec<SearchHit>,
}

/// Prints the hits, best first.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let hits = global.open(None, None)?.search(&args.query, args.limit)?;
    if global.json {
        return output::print_json(&Found { query: &args.query, hits });
    }
    output::print_text(&describe(&hits))
}

fn describe(hits: &[SearchHit]) -> String {
    let mut out = String::new();
    if hits.is_empty() {
        out.push_str("no turn matches\n");
    }
    for (i, hit) in hits.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "── {} · turn {} · score {:.3} · matches {}",
            hit.session,
            hit.turn_id,
            hit.score,
            hit.matched_anchors.join(", ")
        );
        for (side, text) in [("user", &hit.user), ("assistant", &hit.assistant)] {
            if !text.is_empty() {
                let _ = writeln!(out, "{side:>9}: {text}");
            }
        }
    }
    out
}

//! `ctxgate stats`: counts of what the index holds.

use super::{Global, output};
use serde::Serialize;
use std::fmt::Write;

#[derive(Serialize)]
struct StatsDocument<'a> {
    index: String,
    #[serde(flatten)]
    stats: &'a ctxgate::Stats,
}

/// Prints counts and the file size.
pub fn run(global: &Global) -> anyhow::Result<()> {
    let stats = global.open(None, None)?.stats()?;
    if global.json {
        return output::print_json(&StatsDocument { index: global.db.display().to_string(), stats: &stats });
    }
    let mut out = String::new();
    let _ = writeln!(out, "index      {}", global.db.display());
    let _ = writeln!(out, "sessions   {}", stats.sessions);
    let _ =
        writeln!(out, "turns      {} ({} not yet folded into postings)", stats.turns, stats.pending_turns);
    let _ = writeln!(out, "anchors    {} distinct", stats.anchors);
    let _ = writeln!(out, "postings   {}", stats.postings);
    let _ = writeln!(
        out,
        "file       {:.1} MiB ({} bytes)",
        stats.file_bytes as f64 / 1048576.0,
        stats.file_bytes
    );
    output::print_text(&out)
}

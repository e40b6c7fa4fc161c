//! `ctxgate stats`: counts of what the index holds.

use super::{Global, output};
use ctxgate::TableSize;
use serde::Serialize;
use std::fmt::Write;

/// Options of `ctxgate stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Also show the bytes each table takes (reads every page of the index)
    #[arg(long)]
    tables: bool,
}

#[derive(Serialize)]
struct StatsDocument<'a> {
    index: String,
    #[serde(flatten)]
    stats: &'a ctxgate::Stats,
    #[serde(skip_serializing_if = "Option::is_none")]
    tables: Option<&'a [TableSize]>,
}

/// Prints counts and the file size, and with `--tables` where the bytes are.
pub fn run(global: &Global, args: &StatsArgs) -> anyhow::Result<()> {
    let gk = global.open(None, None)?;
    let stats = gk.stats()?;
    let tables = if args.tables { Some(gk.table_sizes()?) } else { None };
    if global.json {
        let index = global.db.display().to_string();
        return output::print_json(&StatsDocument { index, stats: &stats, tables: tables.as_deref() });
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
    let _ = writeln!(out, "redaction  {}", redaction_line(&stats));
    if let Some(tables) = &tables {
        write_tables(&mut out, tables, stats.turns);
    }
    output::print_text(&out)
}

/// Whether this run redacts, and how the history was written.
fn redaction_line(stats: &ctxgate::Stats) -> String {
    use ctxgate::RedactionHistory as History;
    let now = if stats.redaction { "on" } else { "off (--no-redact)" };
    let history = match stats.history {
        Some(History::Redacted) => "history redacted".to_string(),
        Some(History::Raw) => "history written without redaction: `ctxgate redact` rewrites it".to_string(),
        Some(History::Mixed) => {
            "part of the history written without redaction: `ctxgate redact` rewrites it".to_string()
        }
        None if stats.turns == 0 => "nothing written yet".to_string(),
        None => "history written before redaction was recorded: `ctxgate redact` rewrites it".to_string(),
    };
    match &stats.redaction_rules {
        Some(rules) => format!("{now}; {history} ({rules})"),
        None => format!("{now}; {history}"),
    }
}

/// One line a table: its bytes in all, per turn, and how they split.
fn write_tables(out: &mut String, tables: &[TableSize], turns: u64) {
    let _ = writeln!(
        out,
        "\n{:<18} {:>9} {:>12} {:>9} {:>12} {:>12} {:>12}",
        "table", "rows", "bytes", "per turn", "stored", "metadata", "fragmented"
    );
    for t in tables.iter().filter(|t| t.rows > 0) {
        let per_turn = if turns == 0 { 0.0 } else { t.total_bytes() as f64 / turns as f64 };
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>12} {:>9.1} {:>12} {:>12} {:>12}",
            t.table,
            t.rows,
            t.total_bytes(),
            per_turn,
            t.stored_bytes,
            t.metadata_bytes,
            t.fragmented_bytes
        );
    }
}

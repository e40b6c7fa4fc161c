//! `ctxgate compact`: folds pending turns, packs postings and shrinks the file.

use super::{Global, output};
use std::fmt::Write;

/// The progress line of a compaction.
pub fn progress_line(p: ctxgate::jobs::CompactProgress) -> String {
    let line = match p.phase {
        // The engine's compaction has no count to show.
        ctxgate::jobs::CompactPhase::Compacting => format!("compact: {}", p.phase.name()),
        _ => format!("compact: {} {}/{}", p.phase.name(), p.done, p.total),
    };
    format!("{line:<50}")
}

/// Compacts the index and prints the file size before and after.
pub fn run(global: &Global) -> anyhow::Result<()> {
    let mut gatekeeper = global.open(None, None)?;
    // Progress on stderr when it is a terminal: compacting after a big `forget` takes minutes.
    let report = output::with_progress(progress_line, |progress| gatekeeper.compact_with_progress(progress))?;
    if global.json {
        return output::print_json(&report);
    }
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    let mut out = String::new();
    let _ = writeln!(out, "folded     {} pending turns", report.folded_turns);
    let _ = writeln!(
        out,
        "packed     {} posting lists ({} chunks -> {})",
        report.lists_packed, report.chunks_before, report.chunks_after
    );
    let _ = writeln!(out, "rewrote    {} posting chunks in key order", report.chunks_rewritten);
    let _ = writeln!(
        out,
        "file       {:.1} MiB -> {:.1} MiB ({} -> {} bytes)",
        mib(report.bytes_before),
        mib(report.bytes_after),
        report.bytes_before,
        report.bytes_after
    );
    output::print_text(&out)
}

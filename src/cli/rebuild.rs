//! `ctxgate rebuild`: derives the postings again from the stored turns, into a new file;
//! `ctxgate redact`: the same, with every secret of the turns and the evidence redacted.

use super::{Global, output};
use std::fmt::Write;

/// Rebuilds the index and prints what was copied.
pub fn run(global: &Global) -> anyhow::Result<()> {
    run_job(global, false)
}

/// Rewrites the index and its evidence root without secrets and prints what changed.
pub fn run_redact(global: &Global) -> anyhow::Result<()> {
    run_job(global, true)
}

fn run_job(global: &Global, redact: bool) -> anyhow::Result<()> {
    let busy_timeout = std::time::Duration::try_from_secs_f64(global.busy_timeout)
        .map_err(|_| anyhow::anyhow!("--busy-timeout must be a number of seconds from 0 to 10^19"))?;
    let options = ctxgate::Options { threads: global.threads, busy_timeout, ..ctxgate::Options::default() };
    // Progress on stderr when it is a terminal: a rebuild of a long history takes minutes.
    let started = std::time::Instant::now();
    let report = output::with_progress(
        |p: ctxgate::jobs::RebuildProgress| {
            let rate = p.turns_done as f64 / started.elapsed().as_secs_f64().max(1e-9);
            format!("turns {}/{}  {:.0} turns/s   ", p.turns_done, p.turns_total, rate)
        },
        |progress| match redact {
            true => ctxgate::jobs::redact_with_progress(&global.db, &options, progress),
            false => ctxgate::jobs::rebuild_with_progress(&global.db, &options, progress),
        },
    )?;
    if global.json {
        return output::print_json(&report);
    }
    let mut out = String::new();
    let _ = writeln!(out, "index      {}", global.db.display());
    let _ = writeln!(out, "sessions   {}", report.sessions);
    let _ = writeln!(out, "turns      {}", report.turns);
    let _ = writeln!(out, "anchors    {} distinct", report.anchors);
    let _ = writeln!(out, "postings   {}", report.postings);
    let _ = writeln!(
        out,
        "evidence   {} from their files, {} from their projections (file gone or changed)",
        report.evidence, report.evidence_from_projection
    );
    if redact {
        let _ = writeln!(
            out,
            "redacted   {} turns, {} evidence documents held a secret",
            report.turns_redacted, report.evidence_redacted
        );
    }
    let _ = writeln!(out, "file       {} -> {} bytes", report.bytes_before, report.bytes_after);
    output::print_text(&out)
}

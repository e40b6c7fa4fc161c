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
    let dropped = dropped_error(global, &report);
    if global.json {
        output::print_json(&report)?;
        return dropped.map_or(Ok(()), Err);
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
    for d in &report.dropped {
        let _ = writeln!(out, "dropped    {}: {}", d.record, d.reason);
    }
    output::print_text(&out)?;
    dropped.map_or(Ok(()), Err)
}

/// The error a rebuild that left damaged records out ends with (exit 5, kind `damaged`): the
/// index is rebuilt from every record that verified, and the old file is kept.
fn dropped_error(global: &Global, report: &ctxgate::jobs::RebuildReport) -> Option<anyhow::Error> {
    let first = report.dropped.first()?;
    let kept = report
        .old_file_kept
        .as_ref()
        .map_or(String::new(), |p| format!("; the old file is kept as {}", p.display()));
    Some(
        ctxgate::Error::from(ctxgate::StoreError::RebuiltWithLoss {
            path: global.db.clone(),
            detail: format!(
                "{} could not and were left out (the first: {}: {}){kept}",
                report.dropped.len(),
                first.record,
                first.reason
            ),
        })
        .into(),
    )
}

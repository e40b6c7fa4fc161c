//! `ctxgate verify`: checks the index against its stored turns; exits 1 if anything disagrees.

use super::{Global, output};
use serde::Serialize;
use std::fmt::Write;

/// Options of `ctxgate verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// List the secrets the index and its evidence hold (rule, session, turn, evidence ref;
    /// never the secret), exit 1 if there are any: `ctxgate redact` removes them
    #[arg(long)]
    secrets: bool,
}

#[derive(Serialize)]
struct SecretsDocument<'a> {
    index: String,
    ok: bool,
    findings: &'a [ctxgate::jobs::SecretFinding],
}

#[derive(Serialize)]
struct VerifyDocument<'a> {
    index: String,
    ok: bool,
    #[serde(flatten)]
    report: &'a ctxgate::jobs::VerifyReport,
}

/// Prints what was checked and every inconsistency; an error (exit 1) if there are any.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(None, None)?;
    if args.secrets {
        return secrets(global, &gatekeeper);
    }
    // Progress on stderr when it is a terminal: verifying a long history takes minutes.
    let report = output::with_progress(
        |p: ctxgate::jobs::VerifyProgress| {
            format!("{:<50}", format!("verify: {} {}/{}", p.phase.name(), p.done, p.total))
        },
        |progress| gatekeeper.verify_with_progress(progress),
    )?;
    if global.json {
        output::print_json(&VerifyDocument {
            index: global.db.display().to_string(),
            ok: report.is_ok(),
            report: &report,
        })?;
    } else {
        let mut out = String::new();
        let _ = writeln!(out, "index      {}", global.db.display());
        let _ = writeln!(out, "sessions   {}", report.sessions);
        let _ = writeln!(out, "turns      {} ({} pending)", report.turns, report.pending_turns);
        let _ = writeln!(out, "postings   {} in {} chunks", report.postings, report.chunks);
        let _ = writeln!(out, "anchors    {}", report.anchors);
        for problem in &report.problems {
            let _ = writeln!(out, "problem    {}: {}", problem.key, problem.message);
        }
        if report.problem_count > report.problems.len() as u64 {
            let _ =
                writeln!(out, "problem    ... {} more", report.problem_count - report.problems.len() as u64);
        }
        if report.is_ok() {
            out.push_str("ok: the index agrees with its stored turns\n");
        }
        output::print_text(&out)?;
    }
    if report.is_ok() {
        Ok(())
    } else {
        // An evidence file that changed is no inconsistency of the index: rebuilding it would
        // not bring the file's bytes back.
        let changed_files =
            report.problems.iter().all(|p| p.message.contains("changed since it was indexed"));
        if changed_files && report.problem_count == report.problems.len() as u64 {
            anyhow::bail!(
                "{} evidence documents under the index's root changed since they were indexed: restore them, or run `ctxgate evidence index` to index their new bytes",
                report.problem_count
            )
        }
        anyhow::bail!(
            "{} has {} inconsistencies: run `ctxgate rebuild` to derive it again from the stored turns",
            global.db.display(),
            report.problem_count
        )
    }
}

/// `verify --secrets`: one line a finding, where it is and by which rule.
fn secrets(global: &Global, gatekeeper: &ctxgate::Gatekeeper) -> anyhow::Result<()> {
    let findings = gatekeeper.scan_secrets()?;
    if global.json {
        let index = global.db.display().to_string();
        output::print_json(&SecretsDocument { index, ok: findings.is_empty(), findings: &findings })?;
    } else {
        let mut out = String::new();
        for f in &findings {
            let mut place = Vec::new();
            if let Some(session) = &f.session {
                place.push(format!("session {session:?}"));
            }
            if let Some(turn) = f.turn {
                place.push(format!("turn {turn}"));
            }
            if let Some(reference) = &f.evidence_ref {
                place.push(format!("evidence {reference}"));
            }
            let _ = writeln!(out, "secret     {} in {} ({})", f.rule, place.join(", "), f.field);
        }
        if findings.is_empty() {
            out.push_str("ok: no secret found in the turns, the evidence projections or the documents\n");
        }
        output::print_text(&out)?;
    }
    if findings.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "{} holds {} secrets: run `ctxgate redact` to rewrite the index and its evidence without them",
            global.db.display(),
            findings.len()
        )
    }
}

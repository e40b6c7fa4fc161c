//! `ctxgate export`: a session as canonical JSONL, which `import` reads back unchanged: each
//! tool call carries, as its `result`, the tool output the index stored as evidence of the
//! session, so importing the export into another index stores that evidence again.

use super::Global;
use ctxgate::import::{CanonicalTool, tool_output_ref};
use std::collections::HashSet;
use std::io::Write;

/// Arguments of `export`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name
    #[arg(long, short)]
    session: String,
}

/// Writes one JSON line per turn to stdout.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(None, None)?;
    let session = gatekeeper.session(&args.session)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // The library's callback returns library errors; keep the output error to report it.
    let mut write_error: Option<std::io::Error> = None;
    // The tool outputs stored for this session, by ref (imports name them by session, turn
    // and call: `tool_output_ref`).
    let stored: HashSet<String> = gatekeeper
        .list_evidence()?
        .into_iter()
        .filter(|e| e.session.as_deref() == Some(args.session.as_str()))
        .map(|e| e.evidence_ref)
        .collect();
    // Turns whose record is damaged: left out with a warning, and the export goes on.
    let mut damaged: Vec<(u32, String)> = Vec::new();
    let walked = session.for_each_turn_or_damage(|turn_id, turn| {
        let turn = match turn {
            Ok(turn) => turn,
            Err(e) => {
                log::warn!("turn {turn_id} of session {:?} left out of the export: {e}", args.session);
                damaged.push((turn_id, e.to_string()));
                return Ok(());
            }
        };
        let mut canonical = turn.to_canonical(&args.session);
        for (index, tool) in canonical.tools.iter_mut().enumerate() {
            tool.result = stored_result(&gatekeeper, &stored, &args.session, turn.turn_id, index, tool);
        }
        let mut line = serde_json::to_vec(&canonical)
            .map_err(|e| ctxgate::Error::InvalidInput { what: "turn", reason: e.to_string() })?;
        line.push(b'\n');
        out.write_all(&line).map_err(|e| {
            write_error = Some(e);
            ctxgate::Error::InvalidInput { what: "output", reason: "stdout cannot be written".into() }
        })
    });
    if let Some(e) = write_error {
        return Err(e.into());
    }
    walked?;
    out.flush()?;
    if let Some((_, first)) = damaged.first() {
        let turns: Vec<String> = damaged.iter().map(|(t, _)| t.to_string()).collect();
        return Err(ctxgate::StoreError::Damaged {
            path: global.db.clone(),
            detail: format!(
                "{} turns of session {:?} could not be read and were left out of the export (turns {}; the first: {first})",
                damaged.len(),
                args.session,
                turns.join(", ")
            ),
        }
        .into());
    }
    Ok(())
}

/// The stored output of call `index` of turn `turn`: its evidence file, found under either
/// extension an import gives it (`.json` for a JSON result, `.txt` otherwise). One that is
/// indexed but cannot be read is left out with a warning (the export goes on).
fn stored_result(
    gatekeeper: &ctxgate::Gatekeeper,
    stored: &HashSet<String>,
    session: &str,
    turn: u32,
    index: usize,
    tool: &CanonicalTool,
) -> Option<String> {
    let call_id = tool.call_id.as_deref();
    let reference = ["{}", ""]
        .into_iter()
        .map(|shape| tool_output_ref(session, turn, index, call_id, shape))
        .find(|r| stored.contains(r.as_str()))?;
    let read = gatekeeper.read_evidence(reference.as_str(), None).map_err(|e| e.to_string());
    match read.and_then(|bytes| String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())) {
        Ok(text) => Some(text),
        Err(reason) => {
            log::warn!("{reference}: tool output left out of the export: {reason}");
            None
        }
    }
}

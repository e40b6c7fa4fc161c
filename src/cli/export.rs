//! `ctxgate export`: a session as canonical JSONL, which `import` reads back unchanged.

use super::Global;
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
    let walked = session.for_each_turn(|turn| {
        let mut line = serde_json::to_vec(&turn.to_canonical(&args.session))
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
    Ok(())
}

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
    let mut write_error = None;
    session
        .for_each_turn(|turn| {
            let line = turn.to_canonical(&args.session);
            let written =
                serde_json::to_writer(&mut out, &line).map_err(anyhow::Error::from).and_then(|()| {
                    out.write_all(b"\n")?;
                    Ok(())
                });
            match written {
                Ok(()) => Ok(()),
                Err(e) => {
                    write_error = Some(e);
                    Err(ctxgate::Error::InvalidInput { what: "output", reason: "stdout closed".into() })
                }
            }
        })
        .or_else(|e| match write_error.take() {
            Some(io) => Err(io),
            None => Err(e.into()),
        })?;
    out.flush()?;
    Ok(())
}

//! `ctxgate serve`: the index as an MCP server on stdin/stdout.

use super::Global;
use anyhow::Context;
use ctxgate::server::{Core, SERVER_CACHE_BYTES, serve_stdio};
use ctxgate::{Gatekeeper, Options};

/// Arguments of `serve`.
#[derive(clap::Args)]
pub struct Args {
    /// redb page cache per request, in MiB (the index is opened for each request)
    #[arg(long, value_name = "MIB", default_value_t = SERVER_CACHE_BYTES / (1024 * 1024))]
    cache_mib: usize,
}

/// Serves until the client closes stdin. Logs go to stderr; stdout carries the protocol.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let busy_timeout = std::time::Duration::try_from_secs_f64(global.busy_timeout)
        .map_err(|_| anyhow::anyhow!("--busy-timeout must be a number of seconds from 0 to 10^19"))?;
    let options = Options {
        threads: global.threads,
        busy_timeout,
        cache_bytes: args.cache_mib.saturating_mul(1024 * 1024),
        evidence_root: global.evidence_root.clone(),
        ..Options::default()
    };
    // Fail now, not on the first request, if the file is not a usable index; a busy index is
    // fine (each request waits for it).
    match Gatekeeper::open(&global.db, options.clone()) {
        Ok(gatekeeper) => drop(gatekeeper),
        Err(e) if e.kind() == "busy" => log::info!("{e}; serving anyway"),
        Err(e) => return Err(e.into()),
    }
    log::info!("serving {} over MCP on stdio", global.db.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime
        .block_on(serve_stdio(Core::new(global.db.clone(), options)))
        .map_err(|e| anyhow::anyhow!("MCP server: {e}"))
}

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
    // First, while this process has one thread: opening the index may start a scoring pool.
    one_malloc_arena();
    let busy_timeout = std::time::Duration::try_from_secs_f64(global.busy_timeout)
        .map_err(|_| anyhow::anyhow!("--busy-timeout must be a number of seconds from 0 to 10^19"))?;
    let options = Options {
        threads: global.threads,
        busy_timeout,
        cache_bytes: args.cache_mib.saturating_mul(1024 * 1024),
        evidence_root: global.evidence_root.clone(),
        tokenizer: global.tokenizer.unwrap_or_default(),
        redact: global.redact,
        ..Options::default()
    };
    // Fail now, not on the first request, if the file is not a usable index; a busy index is
    // fine (each request waits for it).
    match Gatekeeper::open(&global.db, options.clone()) {
        Ok(gatekeeper) => drop(gatekeeper),
        Err(e) if e.kind() == ctxgate::ErrorKind::Busy => log::info!("{e}; serving anyway"),
        Err(e) => return Err(e.into()),
    }
    log::info!("serving {} over MCP on stdio", global.db.display());
    // Tool calls run on blocking threads (at most CONCURRENT_CALLS at once), and stdin and
    // stdout take one each: a bounded pool, so that a pipelining client cannot make threads
    // pile up while finished ones are not yet idle.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(ctxgate::server::CONCURRENT_CALLS + 2)
        .build()
        .context("cannot start the async runtime")?;
    runtime
        .block_on(serve_stdio(Core::new(global.db.clone(), options)))
        .map_err(|e| anyhow::anyhow!("MCP server: {e}"))
}

/// Makes glibc serve every thread from one malloc arena.
///
/// By default each thread that allocates (the scoring pool's workers, the runtime's) gets an
/// arena of its own, and each arena keeps what a call freed: over hundreds of calls on a large
/// index the server's resident memory crept from 12 to 20 MiB, more the longer the history. With
/// one arena it stays within a MiB of a short history's (see `docs/compare.md`, "Memory of
/// `select`"). Scoring allocates a few buffers per call, so sharing the arena costs nothing
/// measurable. Other C libraries and platforms are left as they are.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    /// `M_ARENA_MAX` from glibc's `malloc.h`.
    const M_ARENA_MAX: std::ffi::c_int = -8;
    unsafe extern "C" {
        fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
    }
    // SAFETY: `mallopt` only sets an allocator parameter. glibc marks it MT-unsafe (it must not
    // race other allocator calls): `run` calls this first, while the process has one thread.
    if unsafe { mallopt(M_ARENA_MAX, 1) } == 0 {
        log::debug!("mallopt(M_ARENA_MAX, 1) was refused; keeping glibc's default arenas");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}

//! The `ctxgate` binary: parse, run, exit. Everything else is in `cli/` and the library.

mod cli;

/// mimalloc instead of the system allocator: import allocates texts and anchor lists on the
/// rayon pool and frees them on the writing thread, and glibc's per-arena locks made those
/// cross-thread frees a tenth of the import's time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}

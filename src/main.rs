//! The `ctxgate` binary: parse, run, exit. Everything else is in `cli/` and the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

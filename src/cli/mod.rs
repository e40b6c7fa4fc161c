//! Command-line interface: arguments, dispatch, errors and exit codes.
//!
//! Uses only the public library API. Results go to stdout (text for people, or one JSON
//! document with `--json`); diagnostics and errors go to stderr.

mod add;
mod compact;
mod evidence;
mod exit;
mod export;
mod forget;
mod gate;
mod hook;
mod import;
mod output;
mod prompt;
mod rebuild;
mod search;
mod select;
mod serve;
mod sessions;
mod show;
mod stats;
mod sync;
mod verify;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ctxgate::tokens::Tokenizer;
use ctxgate::{Gatekeeper, Options, Policy};
use exit::ExitCode;
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit codes:
  0  success (an empty selection included)
  1  error
  2  usage error
  3  the index needs `ctxgate rebuild` (built by another version's anchor rules or format,
     or the run file of an interrupted import is lost)
  4  the index is busy (another process holds it)
  5  the index file is damaged (a flipped bit, a cut file): `ctxgate rebuild` derives a new
     one from the turns it still holds, else restore it from a backup
  6  no index at the path (error kind `unknown_index`): only `add`, `import`, `evidence put`,
     `evidence index`, `serve` and `sync` create one; check --db, or create it with one of them
  7  an import read every file but some failed (each listed with its error, nothing of it
     written); the other files are imported. Files of a directory that are not logs, and
     links out of it, are skipped (listed), not failures
An internal error (a bug in ctxgate, to report) exits 1 with an error of kind `internal`.";

/// A context gatekeeper for LLM agents: for each query, the past turns it needs, within a
/// token budget, and why. Sparse anchors and IDF only: no embeddings, no LLM calls.
#[derive(Parser)]
#[command(name = "ctxgate", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Index file [default: $CTXGATE_DB, else index.redb in the platform data directory:
    /// ~/.local/share/ctxgate ($XDG_DATA_HOME/ctxgate) on Linux, ~/Library/Application
    /// Support/ctxgate on macOS, %APPDATA%\ctxgate\data on Windows]
    #[arg(long, global = true, env = "CTXGATE_DB", value_name = "PATH")]
    db: Option<PathBuf>,
    /// Evidence root [default: $CTXGATE_EVIDENCE_ROOT, else the one recorded in the index, else
    /// NAME.evidence beside the index file NAME.redb]
    #[arg(long, global = true, env = "CTXGATE_EVIDENCE_ROOT", value_name = "DIR")]
    evidence_root: Option<PathBuf>,
    /// Print JSON for agents and scripts instead of text for people
    #[arg(long, global = true)]
    json: bool,
    /// Threads for scoring (0 = one per core; 1 = none)
    #[arg(long, global = true, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Seconds to wait for another process to release the index
    #[arg(long, global = true, value_name = "SECS", default_value_t = 5.0)]
    busy_timeout: f64,
    /// What budgets count: chars (characters × 1.5) or an OpenAI encoding [default: chars; o200k for `hook`]
    #[arg(long, global = true, env = "CTXGATE_TOKENIZER", value_enum)]
    tokenizer: Option<TokenizerArg>,
    /// More log output on stderr (-v info, -vv debug); CTXGATE_LOG sets it too
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only errors on stderr
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Keep secrets in what is written (API keys, tokens, passwords): by default each is
    /// replaced by [REDACTED:rule-id] before it enters the index or the evidence root
    #[arg(long, global = true, env = "CTXGATE_NO_REDACT")]
    no_redact: bool,
    #[command(subcommand)]
    command: Command,
}

/// `--tokenizer` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum TokenizerArg {
    /// Characters × 1.5, rounded up: an upper bound for most models
    Chars,
    /// OpenAI cl100k_base (GPT-4, GPT-3.5)
    Cl100k,
    /// OpenAI o200k_base (GPT-4o and later)
    O200k,
}

impl From<TokenizerArg> for Tokenizer {
    fn from(t: TokenizerArg) -> Tokenizer {
        match t {
            TokenizerArg::Chars => Tokenizer::Chars,
            TokenizerArg::Cl100k => Tokenizer::Cl100k,
            TokenizerArg::O200k => Tokenizer::O200k,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Record a turn (a user message and the assistant's reply); prints its turn id
    Add(add::Args),
    /// Select the past turns a query needs, within the token budget
    Select(select::Args),
    /// Only the topic gate's decision for a query (continue or switch), with its numbers
    Gate(gate::Args),
    /// The prompt for a query: selected turns and the question, ready to send
    Prompt(prompt::Args),
    /// The turns of every session that best match a query: which conversation discussed it
    Search(search::Args),
    /// Import conversation logs (canonical JSONL, OpenAI, ChatGPT, Claude, Claude Code, Codex, ShareGPT)
    Import(import::Args),
    /// Write a session as canonical JSONL (what `import` reads back unchanged)
    Export(export::Args),
    /// A session's turns in full, with tool activity and the gate's recorded decisions
    Show(show::Args),
    /// List the sessions in the index
    Sessions,
    /// What the index holds: sessions, turns, anchors, postings, file size
    Stats(stats::StatsArgs),
    /// Check that postings, document frequencies and counts agree with the stored turns (exit 1 if not);
    /// with --secrets, list the secrets the index and its evidence hold instead
    Verify(verify::Args),
    /// Delete a session, or every session that ended before a date, with all its postings
    Forget(forget::Args),
    /// Fold pending turns, pack and reorder posting chunks, and give free space back to the file system
    Compact,
    /// Derive every posting and count again from the stored turns, into a new file that replaces the old one
    Rebuild,
    /// Rewrite the index and its evidence root with every secret redacted (as `rebuild`: a new
    /// file that replaces the old one when complete)
    Redact,
    /// Serve the index to agents over the Model Context Protocol (stdio)
    Serve(serve::Args),
    /// Evidence documents: store (printing the projection), index a tree, show, project, list
    Evidence(evidence::Args),
    /// Agent hooks: run as Claude Code's or Codex's hook, install or uninstall them
    Hook(hook::Args),
    /// Share spaces of the index with other machines and a team through PostgreSQL: push and
    /// pull turns, forget what was forgotten (`sync init` creates the tables)
    Sync(sync::Args),
}

/// Options every command shares.
pub struct Global {
    /// The index file.
    pub db: PathBuf,
    /// JSON output.
    pub json: bool,
    threads: usize,
    busy_timeout: f64,
    /// The evidence root, if given.
    pub evidence_root: Option<PathBuf>,
    /// What budgets count, if given: each command has its default (`chars`; the hooks'
    /// [`ctxgate::hook::HOOK_TOKENIZER`]).
    pub tokenizer: Option<Tokenizer>,
    /// How the command uses the index (from [`access`]): [`Global::open`] opens it so.
    access: Access,
    /// Redact secrets in what is written (no `--no-redact`).
    pub redact: bool,
}

/// How a command uses the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only: opened read-only, never created or modified; a missing index is an error.
    Read,
    /// Changes an index that must exist (forget, compact): a missing one is an error, not a
    /// new empty index to change.
    Write,
    /// Writes, and creates the index if there is none (add, import, evidence put and index).
    Create,
}

/// How `command` uses the index.
fn access(command: &Command) -> Access {
    match command {
        Command::Add(_) | Command::Import(_) | Command::Serve(_) => Access::Create,
        Command::Select(_)
        | Command::Gate(_)
        | Command::Prompt(_)
        | Command::Search(_)
        | Command::Export(_)
        | Command::Show(_)
        | Command::Sessions
        | Command::Stats(_)
        | Command::Verify(_) => Access::Read,
        // A hook creates the index itself, so that no error escapes it (`hook` module doc).
        Command::Hook(_) => Access::Read,
        // Rebuild reads the old file read-only and writes a new one (`ctxgate::rebuild`).
        Command::Compact | Command::Rebuild | Command::Redact => Access::Write,
        Command::Forget(args) => forget::access(args),
        Command::Evidence(args) => evidence::access(args),
        Command::Sync(args) => sync::access(args),
    }
}

impl Global {
    /// Opens the index with the global options and `budget`/`policy` defaults.
    pub fn open(&self, budget: Option<u32>, policy: Option<Policy>) -> anyhow::Result<Gatekeeper> {
        let busy_timeout = std::time::Duration::try_from_secs_f64(self.busy_timeout)
            .map_err(|_| anyhow::anyhow!("--busy-timeout must be a number of seconds from 0 to 10^19"))?;
        let mut options = Options {
            threads: self.threads,
            busy_timeout,
            evidence_root: self.evidence_root.clone(),
            tokenizer: self.tokenizer.unwrap_or_default(),
            redact: self.redact,
            ..Options::default()
        };
        if let Some(budget) = budget {
            options.token_budget = budget;
        }
        if let Some(policy) = policy {
            options.policy = policy;
        }
        let gatekeeper = match self.access {
            Access::Read => Gatekeeper::open_read_only(&self.db, options)?,
            Access::Write => {
                // Looked at read-only first, so that a missing index is not created to be changed.
                drop(Gatekeeper::open_read_only(&self.db, options.clone())?);
                Gatekeeper::open(&self.db, options)?
            }
            Access::Create => Gatekeeper::open(&self.db, options)?,
        };
        Ok(gatekeeper)
    }
}

/// `--budget`: a budget of 0 tokens selects nothing, so clap refuses it naming the flag and the
/// range, before the library's check of its option (which names its field, not the flag).
pub fn budget_range() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..)
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { ExitCode::Usage } else { ExitCode::Success };
            let _ = e.print();
            return code.into();
        }
    };
    init_logging(cli.verbose, cli.quiet);
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::Success.into(),
        Err(err) if output::is_broken_pipe(&err) => ExitCode::Success.into(),
        Err(err) => {
            output::print_error(&err, json);
            ExitCode::of(&err).into()
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let access = access(&cli.command);
    let global =
        global(cli.db, cli.json, cli.threads, cli.busy_timeout, cli.evidence_root, cli.tokenizer, access)?;
    let global = Global { redact: !cli.no_redact, ..global };
    let db = global.db.clone();
    // A damaged file can make redb panic anywhere in a command: that is an error naming the
    // file (exit 5), and a panic elsewhere an internal error, never a raw panic (exit 101).
    let result = ctxgate::catch_panic(&db, || dispatch(&global, cli.command));
    let mut err = match result {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(err)) => err,
        Err(err) => anyhow::Error::from(err),
    };
    if let Some(inner) = err.downcast_mut::<ctxgate::Error>() {
        let placeholder = ctxgate::Error::Internal { message: String::new(), location: String::new() };
        let taken = std::mem::replace(inner, placeholder);
        *inner = ctxgate::name_damaged_file(taken, &db);
    }
    Err(err)
}

fn global(
    db: Option<PathBuf>,
    json: bool,
    threads: usize,
    busy_timeout: f64,
    evidence_root: Option<PathBuf>,
    tokenizer: Option<TokenizerArg>,
    access: Access,
) -> anyhow::Result<Global> {
    let db = match db {
        Some(path) => path,
        None => default_db(access)?,
    };
    Ok(Global {
        db,
        json,
        threads,
        busy_timeout,
        evidence_root,
        tokenizer: tokenizer.map(Tokenizer::from),
        access,
        redact: true,
    })
}

fn dispatch(global: &Global, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Add(args) => add::run(global, &args),
        Command::Select(args) => select::run(global, &args),
        Command::Gate(args) => gate::run(global, &args),
        Command::Prompt(args) => prompt::run(global, &args),
        Command::Import(args) => import::run(global, &args),
        Command::Export(args) => export::run(global, &args),
        Command::Show(args) => show::run(global, &args),
        Command::Search(args) => search::run(global, &args),
        Command::Sessions => sessions::run(global),
        Command::Stats(args) => stats::run(global, &args),
        Command::Verify(args) => verify::run(global, &args),
        Command::Forget(args) => forget::run(global, &args),
        Command::Compact => compact::run(global),
        Command::Rebuild => rebuild::run(global),
        Command::Redact => rebuild::run_redact(global),
        Command::Serve(args) => serve::run(global, &args),
        Command::Evidence(args) => evidence::run(global, &args),
        Command::Hook(args) => hook::run(global, args),
        Command::Sync(args) => sync::run(global, &args),
    }
}

/// `index.redb` in the platform data directory; the directory is created only by a command
/// that creates the index (a query on a fresh machine creates nothing).
fn default_db(access: Access) -> anyhow::Result<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "ctxgate")
        .context("cannot find a home directory for the default index: pass --db or set CTXGATE_DB")?;
    let dir = dirs.data_dir();
    if access == Access::Create {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(dir.join("index.redb"))
}

fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        _ => "debug",
    };
    env_logger::Builder::from_env(env_logger::Env::new().filter_or("CTXGATE_LOG", level))
        .format_timestamp(None)
        .format_target(false)
        .init();
}

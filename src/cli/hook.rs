//! `ctxgate hook`: run as an agent's hook (the event on stdin, the context on stdout), and
//! install or remove ctxgate's entries in the agent's settings (docs/hooks.md).
//!
//! A hook never fails the agent: whatever goes wrong (bad input, a busy or damaged index, a
//! missing transcript, the deadline) is written to stderr and to `hook.log` beside the index
//! file, and the hook exits 0 with nothing on stdout.

use super::Global;
use anyhow::Context as _;
use ctxgate::hook::install::{self, Scope};
use ctxgate::hook::{Agent, Context, Event, Given, HOOK_TOKEN_BUDGET};
use ctxgate::{Gatekeeper, Options};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The hook's default deadline, in milliseconds: past it the hook exits with no context.
pub const DEFAULT_DEADLINE_MS: u64 = 2000;

/// The environment variable that sets the deadline (`--deadline-ms` wins).
const DEADLINE_ENV: &str = "CTXGATE_HOOK_DEADLINE_MS";

/// Arguments of `hook`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: HookCommand,
}

#[derive(clap::Subcommand)]
enum HookCommand {
    /// Run as Claude Code's hook: its event JSON on stdin, the context on stdout as its JSON
    ClaudeCode(RunArgs),
    /// Run as Codex's hook: its event JSON on stdin, the context on stdout as its JSON
    Codex(RunArgs),
    /// Add ctxgate's hooks to the agent's settings (merged with what is there; a backup is kept)
    Install(InstallArgs),
    /// Remove ctxgate's hooks from the agent's settings (only ctxgate's; a backup is kept)
    Uninstall(InstallArgs),
    /// Tell whether the agent will run ctxgate's hooks: installed, the program there, and for
    /// Codex whether each is trusted (exit 1 when they will not all run)
    Doctor(SettingsArgs),
}

/// Which agent's settings, and whose: what `install`, `uninstall` and `doctor` act on.
#[derive(clap::Args)]
struct SettingsArgs {
    /// The agent
    #[arg(value_enum)]
    agent: AgentArg,
    /// The project's settings (in the working directory)
    #[arg(long, conflicts_with = "user")]
    project: bool,
    /// The user's settings, for every project (the default)
    #[arg(long)]
    user: bool,
}

impl SettingsArgs {
    fn agent_and_scope(&self) -> (Agent, Scope) {
        (Agent::from(self.agent), if self.project { Scope::Project } else { Scope::User })
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// Milliseconds after which the hook gives up and exits 0 with no context
    /// [default: $CTXGATE_HOOK_DEADLINE_MS, else 2000]
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<String>,
    /// Token budget of the context handed to the agent
    #[arg(long, value_name = "TOKENS", default_value_t = HOOK_TOKEN_BUDGET)]
    budget: u32,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum AgentArg {
    /// Claude Code: .claude/settings.json (--project) or ~/.claude/settings.json (--user)
    ClaudeCode,
    /// Codex: .codex/hooks.json (--project) or ~/.codex/hooks.json (--user)
    Codex,
}

impl From<AgentArg> for Agent {
    fn from(a: AgentArg) -> Agent {
        match a {
            AgentArg::ClaudeCode => Agent::ClaudeCode,
            AgentArg::Codex => Agent::Codex,
        }
    }
}

#[derive(clap::Args)]
struct InstallArgs {
    #[command(flatten)]
    settings: SettingsArgs,
    /// Print the change and write nothing
    #[arg(long)]
    dry_run: bool,
}

/// Runs `hook`.
pub fn run(global: &Global, args: Args) -> anyhow::Result<()> {
    match args.command {
        HookCommand::ClaudeCode(run) => {
            run_hook(global, Agent::ClaudeCode, &run);
            Ok(())
        }
        HookCommand::Codex(run) => {
            run_hook(global, Agent::Codex, &run);
            Ok(())
        }
        HookCommand::Install(args) => change_settings(global, &args, true),
        HookCommand::Uninstall(args) => change_settings(global, &args, false),
        HookCommand::Doctor(args) => doctor(&args),
    }
}

/// The deadline: `--deadline-ms`, else the environment, else the default; a value that is not
/// a number of milliseconds is reported and the default used (the hook must not fail on it).
fn deadline(args: &RunArgs, problems: &mut Vec<String>) -> Duration {
    let given = args.deadline_ms.clone().map(|v| ("--deadline-ms", v)).or_else(|| {
        std::env::var(DEADLINE_ENV).ok().filter(|v| !v.trim().is_empty()).map(|v| (DEADLINE_ENV, v))
    });
    let ms = match given {
        None => DEFAULT_DEADLINE_MS,
        Some((source, value)) => match value.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => ms,
            _ => {
                problems.push(format!(
                    "{source} {value:?} is not a number of milliseconds above 0; using {DEFAULT_DEADLINE_MS}"
                ));
                DEFAULT_DEADLINE_MS
            }
        },
    };
    Duration::from_millis(ms)
}

/// Runs one hook event within the deadline; never fails.
fn run_hook(global: &Global, agent: Agent, args: &RunArgs) {
    let started = Instant::now();
    let mut problems = Vec::new();
    let deadline = deadline(args, &mut problems);
    let log = global.db.parent().map(|dir| dir.join("hook.log"));
    for problem in &problems {
        report(log.as_deref(), agent, None, problem);
    }
    let db = global.db.clone();
    let threads = global.threads;
    let evidence_root = global.evidence_root.clone();
    let redact = global.redact;
    let budget = args.budget.max(1);
    let tokenizer = global.tokenizer.unwrap_or(ctxgate::hook::HOOK_TOKENIZER);
    // The encoding's pattern takes a few milliseconds to compile: beside reading the event,
    // opening the index and importing the transcript, not after them.
    let _ = std::thread::Builder::new().name("tokenizer".into()).spawn(move || tokenizer.load());
    let (sender, receiver) = std::sync::mpsc::channel();
    // The work runs on its own thread so that the hook can give up at the deadline: when this
    // function returns, the process exits and the thread with it (an unfinished write is a
    // transaction never committed; the next open repairs the file).
    let spawned = std::thread::Builder::new().name("hook".into()).spawn(move || {
        let mut event_name = None;
        let result = ctxgate::catch_panic(&db, || {
            let setup = Setup { threads, evidence_root, started, deadline, budget, tokenizer, redact };
            work(&db, agent, setup, &mut event_name)
        });
        let result = match result {
            Ok(result) => result,
            Err(err) => Err(anyhow::Error::from(err)),
        };
        let _ = sender.send((event_name, result));
    });
    if let Err(e) = spawned {
        report(log.as_deref(), agent, None, &format!("cannot start the hook's thread: {e}"));
        return;
    }
    let received = receiver.recv_timeout(deadline);
    if let Ok((Some(event), Ok(_))) = &received
        && matches!(event.as_str(), "Stop" | "SessionEnd")
    {
        background_sync(global, log.as_deref(), agent, event);
    }
    match received {
        Ok((_, Ok(None))) => {}
        Ok((Some(event), Ok(Some((context, given))))) => {
            let printed = match &context {
                Some(context) => print_context(&event, context),
                None => Ok(()),
            };
            match printed {
                Err(e) => {
                    report(log.as_deref(), agent, Some(&event), &format!("cannot print the context: {e}"))
                }
                // Once given, the context is on the session's record, and with no context a
                // compaction's clearing of it is (a failure to write it only means the next
                // event may give some of it again, or hold back some of it).
                Ok(()) => {
                    if let Err(e) = given.save() {
                        report(
                            log.as_deref(),
                            agent,
                            Some(&event),
                            &format!("cannot record the context given: {e}"),
                        );
                    }
                }
            }
        }
        Ok((event, Ok(Some(_)))) => {
            report(log.as_deref(), agent, event.as_deref(), "a record without an event")
        }
        Ok((event, Err(err))) => {
            let err = match err.downcast::<ctxgate::Error>() {
                Ok(e) => anyhow::Error::from(ctxgate::name_damaged_file(e, &global.db)),
                Err(err) => err,
            };
            report(log.as_deref(), agent, event.as_deref(), &format!("{err:#}; no context given"));
        }
        Err(_) => report(
            log.as_deref(),
            agent,
            None,
            &format!(
                "gave up after the deadline of {} ms ({} ms elapsed; --deadline-ms or {DEADLINE_ENV} sets it); no context given",
                deadline.as_millis(),
                started.elapsed().as_millis()
            ),
        ),
    }
}

/// How a hook process opens the index and sizes its context.
struct Setup {
    threads: usize,
    evidence_root: Option<PathBuf>,
    /// When the hook process started: the deadline counts from it.
    started: Instant,
    deadline: Duration,
    budget: u32,
    tokenizer: ctxgate::tokens::Tokenizer,
    redact: bool,
}

/// The share of the deadline past which the hook's import begins no more batches.
const IMPORT_SHARE: f64 = 1.0 / 3.0;

/// The directory of the hooks' records of what each agent session was given.
const GIVEN_DIR: &str = "hook-given";

/// Reads the event, opens the index and handles the event: the context (if any), with the
/// session's record of what it was given, to save; `None` for an event ctxgate does not handle.
fn work(
    db: &Path,
    agent: Agent,
    setup: Setup,
    event_name: &mut Option<String>,
) -> anyhow::Result<Option<(Option<Context>, Given)>> {
    let Setup { threads, evidence_root, started, deadline, budget, tokenizer, redact } = setup;
    let mut input = Vec::new();
    std::io::stdin().lock().read_to_end(&mut input).context("cannot read the event from stdin")?;
    let event = Event::parse(&input)?;
    *event_name = Some(event.hook_event_name.clone());
    if !event.is_handled() {
        return Ok(None);
    }
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Waiting for a busy index past the deadline is pointless (the hook is gone by then): a
    // third of it for each wait, and the transcript's import begins no batch past a third
    // (`IMPORT_SHARE`), so that the last batch, the selection and the output end in time; an
    // import cut short keeps what it wrote, and the next event goes on from there. A process
    // stopped at the deadline would leave its write unfinished, and every later hook would
    // start it again.
    let options = Options {
        threads,
        busy_timeout: deadline / 3,
        evidence_root,
        tokenizer,
        redact,
        ..Options::default()
    };
    let gatekeeper = Gatekeeper::open(db, options)?;
    let mut given = match db.parent() {
        Some(dir) => Given::load(&dir.join(GIVEN_DIR), &event.session_id),
        None => Given::in_memory(),
    };
    let until = started + deadline.mul_f64(IMPORT_SHARE);
    let context = ctxgate::hook::handle(&gatekeeper, agent, &event, budget, &mut given, Some(until))?;
    Ok(Some((context, given)))
}

/// How long a sync a hook starts may run: it is killed then (what it committed stays
/// consistent, and the next sync completes it).
const BACKGROUND_SYNC_SECONDS: &str = "120";

/// After a turn (`Stop`, `SessionEnd`), with `CTXGATE_REMOTE` set, starts `ctxgate sync
/// --if-shared` in the background, in its own process group: the hook returns at once, so the
/// sync never delays the agent (docs/sync.md, "Hooks").
fn background_sync(global: &Global, log: Option<&Path>, agent: Agent, event: &str) {
    if std::env::var_os("CTXGATE_REMOTE").is_none_or(|v| v.is_empty()) {
        return;
    }
    let spawned = std::env::current_exe().and_then(|exe| {
        let mut command = std::process::Command::new(exe);
        command
            .arg("--db")
            .arg(&global.db)
            .args(["-q", "sync", "--if-shared", "--max-seconds", BACKGROUND_SYNC_SECONDS])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command.spawn()
    });
    if let Err(e) = spawned {
        report(log, agent, Some(event), &format!("cannot start the background sync: {e}"));
    }
}

/// Prints the context as the agent reads it ([`ctxgate::hook::output`]); nothing for an event
/// whose output takes none.
fn print_context(event: &str, context: &Context) -> std::io::Result<()> {
    let Some(document) = ctxgate::hook::output(event, context) else { return Ok(()) };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &document)?;
    writeln!(out)?;
    out.flush()
}

/// Writes a problem to stderr and appends it to the log file (whose own failure is ignored:
/// there is nowhere left to report it).
fn report(log: Option<&Path>, agent: Agent, event: Option<&str>, message: &str) {
    let line = format!("ctxgate hook {} {}: {message}", agent.name(), event.unwrap_or("(no event)"));
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(log) = log.filter(|log| log.parent().is_some_and(Path::exists))
        && let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(log)
    {
        let _ = writeln!(file, "{} {line}", jiff::Timestamp::now());
    }
}

/// A path as one shell word.
fn shell_word(path: &Path) -> String {
    let text = path.to_string_lossy();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c)) {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn change_settings(global: &Global, args: &InstallArgs, install: bool) -> anyhow::Result<()> {
    let (agent, scope) = args.settings.agent_and_scope();
    let home = directories::BaseDirs::new()
        .map(|d| d.home_dir().to_path_buf())
        .context("cannot find the home directory: use --project in the project's directory")?;
    let project = std::env::current_dir().context("cannot read the working directory")?;
    let path = install::settings_path(agent, scope, &home, &project);
    let plan = if install {
        let exe = std::env::current_exe().context("cannot find the path of this ctxgate binary")?;
        let db = absolute(&global.db)?;
        let command = format!("{} --db {} hook {}", shell_word(&exe), shell_word(&db), agent.name());
        install::plan_install(agent, &path, &command)?
    } else {
        install::plan_uninstall(agent, &path)?
    };
    let mut out = String::new();
    if plan.changes.is_empty() {
        out.push_str(&match install {
            true => format!(
                "ctxgate's {} hooks are already in {}: nothing written\n",
                agent.name(),
                path.display()
            ),
            false => format!("no ctxgate {} hooks in {}: nothing written\n", agent.name(), path.display()),
        });
        return super::output::print_text(&out);
    }
    let verb = if args.dry_run { "would change" } else { "changed" };
    out.push_str(&format!("{verb} {}:\n", path.display()));
    for change in &plan.changes {
        out.push_str(&format!("  {change}\n"));
    }
    if args.dry_run {
        out.push_str("the file would be (nothing written: --dry-run):\n");
        out.push_str(&plan.after);
        return super::output::print_text(&out);
    }
    let backup = install::apply(&plan)?;
    if let Some(backup) = backup {
        out.push_str(&format!("backup of the file as it was: {}\n", backup.display()));
    }
    if install && agent == Agent::Codex {
        out.push_str(CODEX_TRUST_NOTE);
        out.push('\n');
    }
    if install {
        out.push_str(&format!(
            "turn it off: ctxgate hook uninstall {}{}\n",
            agent.name(),
            if args.settings.project { " --project" } else { "" }
        ));
    }
    super::output::print_text(&out)
}

/// What a Codex user must do once after an install, in one line.
const CODEX_TRUST_NOTE: &str = "Codex runs new or changed hooks only once you trust them: start `codex` in a terminal and trust them at \"Hooks need review\" (or in /hooks); `codex exec` skips untrusted hooks without a word. Check with: ctxgate hook doctor codex";

/// The program a hook command runs: its first shell word, unquoted.
fn program_of(command: &str) -> PathBuf {
    let command = command.trim_start();
    match command.strip_prefix('\'') {
        Some(rest) => PathBuf::from(rest.split('\'').next().unwrap_or_default()),
        None => PathBuf::from(command.split_whitespace().next().unwrap_or_default()),
    }
}

/// Codex's home: `$CODEX_HOME`, else `~/.codex`.
fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join(".codex"), PathBuf::from)
}

fn doctor(args: &SettingsArgs) -> anyhow::Result<()> {
    use ctxgate::hook::install::Trust;
    let (agent, scope) = args.agent_and_scope();
    let home = directories::BaseDirs::new()
        .map(|d| d.home_dir().to_path_buf())
        .context("cannot find the home directory: use --project in the project's directory")?;
    let project = std::env::current_dir().context("cannot read the working directory")?;
    let path = absolute(&install::settings_path(agent, scope, &home, &project))?;
    let found = install::find(agent, &path)?;
    let config = codex_home(&home).join("config.toml");
    let config_text = match agent {
        Agent::Codex => std::fs::read_to_string(&config).ok(),
        Agent::ClaudeCode => None,
    };
    let mut out = format!("ctxgate's {} hooks in {}:\n", agent.name(), path.display());
    let mut problems = 0;
    let mut programs: Vec<PathBuf> = Vec::new();
    for (event, found) in &found {
        let Some(found) = found else {
            problems += 1;
            out.push_str(&format!("  {event}: not installed (ctxgate hook install {})\n", agent.name()));
            continue;
        };
        let program = program_of(&found.command);
        if !programs.contains(&program) {
            programs.push(program);
        }
        let trust = match (agent, &config_text) {
            (Agent::ClaudeCode, _) => String::new(),
            (Agent::Codex, None) => {
                problems += 1;
                format!(", not trusted ({} has no trust recorded: Codex asks \"Hooks need review\")", config.display())
            }
            (Agent::Codex, Some(text)) => match install::codex_trust(text, &install::codex_state_key(&path, found)) {
                Trust::TrustedOnce => ", trusted (Codex keeps a hash of the hook it trusted; whether it is this command's cannot be checked here: after a change Codex asks again)".to_string(),
                Trust::Untrusted => {
                    problems += 1;
                    ", not trusted yet: Codex will not run it until you trust it".to_string()
                }
                Trust::Disabled => {
                    problems += 1;
                    ", turned off in Codex (enabled = false): turn it on in /hooks".to_string()
                }
            },
        };
        out.push_str(&format!("  {event}: installed{trust}\n"));
    }
    for program in &programs {
        if !program.is_file() {
            problems += 1;
            out.push_str(&format!(
                "  the hooks' program {} is not there: install again\n",
                program.display()
            ));
        }
    }
    match agent {
        Agent::Codex if problems > 0 => out.push_str(CODEX_TRUST_NOTE),
        Agent::Codex => out.push_str("Codex will run them."),
        Agent::ClaudeCode if problems == 0 => out.push_str(
            "Claude Code will run them (it reads hooks when a session starts: a running session may need /hooks to see a change).",
        ),
        Agent::ClaudeCode => {}
    }
    out.push('\n');
    super::output::print_text(&out)?;
    if problems > 0 {
        anyhow::bail!("{problems} of ctxgate's {} hooks will not run as they are", agent.name());
    }
    Ok(())
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir().context("cannot read the working directory")?.join(path))
}

//! `ctxgate sync`: share spaces of the index through PostgreSQL (`docs/sync.md`).

use super::{Access, Global, output};
use ctxgate::sync::{self, SyncError, SyncOptions};
use std::fmt::Write;
use std::path::PathBuf;

/// Arguments of `sync`: a subcommand, or none to sync.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

/// The remote, as every subcommand that talks to it takes it.
#[derive(clap::Args)]
struct Remote {
    /// The PostgreSQL database: postgres://USER@HOST:PORT/DATABASE (TLS required unless
    /// ?sslmode=disable or prefer; the password from PGPASSWORD or ~/.pgpass, never stored)
    #[arg(long, env = "CTXGATE_REMOTE", hide_env_values = true, value_name = "URL")]
    remote: Option<String>,
}

impl Remote {
    fn url(&self) -> anyhow::Result<&str> {
        self.remote.as_deref().ok_or_else(|| {
            anyhow::anyhow!("no remote: pass --remote postgres://USER@HOST/DATABASE or set CTXGATE_REMOTE")
        })
    }
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    remote: Remote,
    /// Only this space (repeatable) [default: every shared space]
    #[arg(long, value_name = "NAME")]
    space: Vec<String>,
    /// Push even though the index holds text written without secret redaction (--no-redact)
    #[arg(long)]
    allow_unredacted: bool,
    /// Do nothing, successfully, when no space is shared (for hooks and timers)
    #[arg(long)]
    if_shared: bool,
    /// Stop after this many seconds, exiting 1: what was committed stays consistent and the
    /// next sync completes it
    #[arg(long, value_name = "SECS")]
    max_seconds: Option<f64>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create the remote tables and row-level security policies (again: changes nothing)
    Init {
        #[command(flatten)]
        remote: Remote,
        /// Print the SQL for a DBA instead of running it
        #[arg(long)]
        print_sql: bool,
    },
    /// Let a database role read and write a space (and no other, unless granted too)
    Grant {
        #[command(flatten)]
        remote: Remote,
        /// The space
        #[arg(long, value_name = "NAME")]
        space: String,
        /// The role (it must exist: CREATE ROLE ... LOGIN)
        #[arg(long, value_name = "ROLE")]
        role: String,
        /// Print the SQL instead of running it
        #[arg(long)]
        print_sql: bool,
    },
    /// Share a space from this index: a project's sessions, or with --all every session
    Share {
        /// The space's name, the same on every machine
        #[arg(long, value_name = "NAME")]
        space: String,
        /// The project's directory on this machine (its sessions are named DIR#ID by the hooks)
        #[arg(long, value_name = "DIR", required_unless_present = "all", conflicts_with = "all")]
        project: Option<PathBuf>,
        /// Share every session of the index, under its own name
        #[arg(long)]
        all: bool,
    },
    /// Stop sharing a space (nothing is deleted, here or remotely)
    Unshare {
        /// The space
        #[arg(long, value_name = "NAME")]
        space: String,
    },
    /// The shared spaces, their projects and pending tombstones
    Status,
}

/// How the command uses the index.
pub fn access(args: &Args) -> Access {
    match args.command {
        None | Some(Command::Share { .. }) | Some(Command::Unshare { .. }) => Access::Create,
        Some(Command::Status) | Some(Command::Init { .. }) | Some(Command::Grant { .. }) => Access::Read,
    }
}

/// Runs `sync` or its subcommand.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    match &args.command {
        None => run_sync(global, &args.run),
        Some(Command::Init { remote, print_sql: true }) => {
            let _ = remote;
            output::print_text(sync::SCHEMA)
        }
        Some(Command::Init { remote, print_sql: false }) => {
            let url = remote.url()?;
            sync::init(url).map_err(into_anyhow)?;
            done(global, &format!("the remote at {} is ready for ctxgate sync\n", sync::redact_password(url)))
        }
        Some(Command::Grant { remote, space, role, print_sql: true }) => {
            let _ = remote;
            output::print_text(&sync::grant_sql(space, role))
        }
        Some(Command::Grant { remote, space, role, print_sql: false }) => {
            sync::grant(remote.url()?, space, role).map_err(into_anyhow)?;
            done(global, &format!("role {role} may read and write space {space}\n"))
        }
        Some(Command::Share { space, project, all: _ }) => {
            let gk = global.open(None, None)?;
            let project = match project {
                Some(dir) => Some(project_dir(dir)?),
                None => None,
            };
            sync::share(&gk, space, project.as_deref()).map_err(into_anyhow)?;
            let what = match &project {
                Some(p) => format!("the sessions of {p}"),
                None => "every session of the index".to_string(),
            };
            done(global, &format!("space {space} shares {what}\n"))
        }
        Some(Command::Unshare { space }) => {
            let gk = global.open(None, None)?;
            if !sync::unshare(&gk, space).map_err(into_anyhow)? {
                anyhow::bail!(
                    "space {space:?} is not shared here (`ctxgate sync status` lists the shared ones)"
                );
            }
            done(global, &format!("space {space} is no longer shared\n"))
        }
        Some(Command::Status) => {
            let gk = global.open(None, None)?;
            let state = sync::state::load(&gk).map_err(into_anyhow)?;
            if global.json {
                return output::print_json(&state);
            }
            let mut out = String::new();
            for (name, space) in &state.spaces {
                let what = space.project.as_deref().unwrap_or("(every session)");
                let _ = writeln!(out, "{name:<20} {what}  ({} sessions synced)", space.synced.len());
            }
            if state.spaces.is_empty() {
                out.push_str("nothing is shared: `ctxgate sync share --space NAME --project DIR`\n");
            }
            for t in &state.tombstones {
                let _ = writeln!(out, "tombstone to push: {} in {}", t.session, t.space);
            }
            output::print_text(&out)
        }
    }
}

/// A project's key as the hooks name it: the directory made absolute, as an agent's `cwd`.
fn project_dir(dir: &std::path::Path) -> anyhow::Result<String> {
    let absolute = std::path::absolute(dir)?;
    absolute
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("{}: the project directory must be UTF-8", dir.display()))
}

fn run_sync(global: &Global, args: &RunArgs) -> anyhow::Result<()> {
    if let Some(seconds) = args.max_seconds {
        let limit = std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|_| anyhow::anyhow!("--max-seconds must be a number of seconds"))?;
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            log::error!("sync stopped after --max-seconds {seconds}: run it again to complete it");
            std::process::exit(1);
        });
    }
    if args.if_shared {
        let shared = match ctxgate::Gatekeeper::open_read_only(&global.db, ctxgate::Options::default()) {
            Ok(gk) => !sync::state::load(&gk).map_err(into_anyhow)?.spaces.is_empty(),
            Err(_) => false,
        };
        if !shared {
            return Ok(());
        }
    }
    let url = args.remote.url()?;
    let gk = global.open(None, None)?;
    let options = SyncOptions { spaces: args.space.clone(), allow_unredacted: args.allow_unredacted };
    let report = sync::sync(&gk, url, &options).map_err(into_anyhow)?;
    if global.json {
        return output::print_json(&report);
    }
    let mut out = String::new();
    for s in &report.spaces {
        let _ = writeln!(
            out,
            "{}: pushed {} turns ({} sessions), pulled {} turns ({} sessions), forgot {} here and {} remotely, refused {}",
            s.space,
            s.pushed_turns,
            s.pushed_sessions,
            s.pulled_turns,
            s.pulled_sessions,
            s.forgotten,
            s.tombstones_pushed,
            s.refused.len()
        );
        for r in &s.refused {
            let _ = writeln!(out, "  refused {}: {}", r.session, r.reason);
        }
    }
    output::print_text(&out)
}

fn done(global: &Global, text: &str) -> anyhow::Result<()> {
    match global.json {
        true => output::print_json(&serde_json::json!({ "ok": true })),
        false => output::print_text(text),
    }
}

/// Index errors keep their kind (and exit code); the others are messages.
pub(super) fn into_anyhow(e: SyncError) -> anyhow::Error {
    match e {
        SyncError::Index(e) => e.into(),
        e => anyhow::anyhow!(e.to_string()),
    }
}

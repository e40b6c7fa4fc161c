//! `ctxgate add`: record one turn.

use super::{Global, output};
use anyhow::Context;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Arguments of `add`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name (created on its first turn)
    #[arg(long, short)]
    session: String,
    /// The user's message
    #[arg(long, short, default_value = "", conflicts_with = "user_file")]
    user: String,
    /// The assistant's reply
    #[arg(long, short, default_value = "", conflicts_with = "assistant_file")]
    assistant: String,
    /// Read the user's message from a file (`-` for stdin): for texts too long for an argument
    #[arg(long, value_name = "PATH")]
    user_file: Option<PathBuf>,
    /// Read the assistant's reply from a file (`-` for stdin)
    #[arg(long, value_name = "PATH")]
    assistant_file: Option<PathBuf>,
}

#[derive(Serialize)]
struct Added<'a> {
    session: &'a str,
    turn_id: u32,
}

/// Adds the turn and prints its id.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    if args
        .user_file
        .as_deref()
        .zip(args.assistant_file.as_deref())
        .is_some_and(|(u, a)| is_stdin(u) && is_stdin(a))
    {
        anyhow::bail!("only one of --user-file and --assistant-file can read stdin");
    }
    let user = text(&args.user, args.user_file.as_deref())?;
    let assistant = text(&args.assistant, args.assistant_file.as_deref())?;
    let gatekeeper = global.open(None, None)?;
    let turn_id = gatekeeper.session(&args.session)?.add_turn(&user, &assistant)?;
    if global.json {
        output::print_json(&Added { session: &args.session, turn_id })
    } else {
        output::print_text(&format!("{turn_id}\n"))
    }
}

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The argument's text, or the file's (or stdin's) when a file is given. A file is read up to
/// one byte past [`ctxgate::MAX_TEXT_BYTES`]: a larger one is refused unread.
fn text(argument: &str, file: Option<&Path>) -> anyhow::Result<String> {
    let limit = ctxgate::MAX_TEXT_BYTES as u64 + 1;
    let mut text = String::new();
    match file {
        None => return Ok(argument.to_string()),
        Some(path) if is_stdin(path) => {
            std::io::stdin()
                .take(limit)
                .read_to_string(&mut text)
                .context("cannot read stdin as UTF-8 text")?;
        }
        Some(path) => {
            let file =
                std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
            file.take(limit)
                .read_to_string(&mut text)
                .with_context(|| format!("cannot read {} as UTF-8 text", path.display()))?;
        }
    }
    if text.len() as u64 >= limit {
        return Err(ctxgate::Error::InvalidInput {
            what: "turn text",
            reason: format!(
                "{} holds more than the limit of {} bytes (8 MiB) a text: split the turn",
                file.map_or("the file".into(), |p| p.display().to_string()),
                ctxgate::MAX_TEXT_BYTES
            ),
        }
        .into());
    }
    Ok(text)
}

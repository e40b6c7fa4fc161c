//! Output: human text or JSON on stdout, errors on stderr.
//!
//! JSON is one document per command with a `schema_version` (currently 1); changes are
//! additive only. Errors with `--json` are one line on stderr: `{"error": {"kind", "message"}}`,
//! where `kind` is stable (`bad_input`, `unknown_session`, `needs_rebuild`, `busy`, ...).

use serde::Serialize;
use std::io::{IsTerminal, Write};

/// Version of the JSON documents the CLI prints.
pub const SCHEMA_VERSION: u32 = 1;

/// Prints `value` as one JSON document with `schema_version` added.
pub fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    let mut document = serde_json::to_value(value)?;
    if let Some(object) = document.as_object_mut() {
        object.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &document)?;
    writeln!(out)?;
    Ok(())
}

/// Runs `job` with a progress callback that, when stderr is a terminal, rewrites one stderr
/// line with `line(report)`, and ends that line when the job returns. Long jobs (import,
/// rebuild, verify, compact) show their progress this way; pipes and files get none.
pub fn with_progress<P, T>(
    line: impl Fn(P) -> String + Send,
    job: impl FnOnce(&mut (dyn FnMut(P) + Send)) -> T,
) -> T {
    let show = std::io::stderr().is_terminal();
    let mut progress = move |report: P| {
        if show {
            eprint!("\r{}", line(report));
            let _ = std::io::stderr().flush();
        }
    };
    let result = job(&mut progress);
    if show {
        eprintln!();
    }
    result
}

/// Prints text for people, with control characters of logged text made harmless.
pub fn print_text(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(sanitize_for_terminal(text).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// An error of the library with advice in the CLI's terms, a flag to pass: the library's
/// messages name no flag. Its kind and exit code are the library error's.
#[derive(Debug)]
pub struct Hinted {
    /// The error.
    pub error: ctxgate::Error,
    /// What to do, after the error and its causes.
    pub hint: &'static str,
}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)?;
        let mut cause = std::error::Error::source(&self.error);
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        write!(f, "; {}", self.hint)
    }
}

impl std::error::Error for Hinted {}

/// The library error of `err`, hinted or not.
pub fn library_error(err: &anyhow::Error) -> Option<&ctxgate::Error> {
    err.downcast_ref::<ctxgate::Error>().or_else(|| err.downcast_ref::<Hinted>().map(|h| &h.error))
}

/// Prints an error to stderr, as text or as one JSON line.
pub fn print_error(err: &anyhow::Error, json: bool) {
    let kind = match library_error(err) {
        Some(e) => e.kind().as_str(),
        None if err.downcast_ref::<super::exit::ImportIncomplete>().is_some() => {
            super::exit::ImportIncomplete::KIND
        }
        None => "error",
    };
    let message = format!("{err:#}");
    if json {
        let line = serde_json::json!({ "error": { "kind": kind, "message": message } });
        eprintln!("{line}");
    } else {
        eprintln!("ctxgate: error: {}", sanitize_for_terminal(&message));
    }
}

/// True if writing stdout failed because the reader went away (`ctxgate ... | head`).
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|e| e.io_error_kind())
                .is_some_and(|kind| kind == std::io::ErrorKind::BrokenPipe)
    })
}

/// Replaces control characters other than `\n` and `\t` with U+FFFD, so logged text shown on a
/// terminal cannot carry escape sequences.
pub fn sanitize_for_terminal(text: &str) -> String {
    text.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { '\u{FFFD}' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_replaces_escapes() {
        assert_eq!(sanitize_for_terminal("a\u{1b}[31mb\nc"), "a\u{FFFD}[31mb\nc");
    }
}

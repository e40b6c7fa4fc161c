//! Exit codes, in one place (documented in `--help`).

use ctxgate::{Error, ErrorKind};

/// The process exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Success, an empty selection included.
    Success = 0,
    /// Any error not listed below.
    Error = 1,
    /// Bad command-line usage (clap).
    Usage = 2,
    /// The index must be rebuilt.
    NeedsRebuild = 3,
    /// Another process holds the index.
    Busy = 4,
    /// The index file is damaged.
    Damaged = 5,
    /// No index at the path, for a command that does not create one.
    UnknownIndex = 6,
    /// An import went through every file but some failed (the others are imported).
    ImportIncomplete = 7,
}

/// An import that read every file but could not import some: its report lists each with its
/// error, and the other files are imported. Exits [`ExitCode::ImportIncomplete`].
#[derive(Debug)]
pub struct ImportIncomplete(pub String);

impl std::fmt::Display for ImportIncomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImportIncomplete {}

impl ImportIncomplete {
    /// The `kind` of its `--json` error.
    pub const KIND: &'static str = "import_incomplete";
}

impl ExitCode {
    /// The exit code for an error.
    pub fn of(err: &anyhow::Error) -> ExitCode {
        if err.downcast_ref::<ImportIncomplete>().is_some() {
            return ExitCode::ImportIncomplete;
        }
        match super::output::library_error(err).map(Error::kind) {
            Some(ErrorKind::NeedsRebuild) => ExitCode::NeedsRebuild,
            Some(ErrorKind::Busy) => ExitCode::Busy,
            Some(ErrorKind::Damaged) => ExitCode::Damaged,
            Some(ErrorKind::UnknownIndex) => ExitCode::UnknownIndex,
            _ => ExitCode::Error,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

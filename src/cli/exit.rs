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
}

impl ExitCode {
    /// The exit code for an error.
    pub fn of(err: &anyhow::Error) -> ExitCode {
        match err.downcast_ref::<Error>().map(Error::kind) {
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

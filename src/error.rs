//! The crate's error type: one variant per layer, and the caller's mistakes.

use crate::store;

/// Everything that can go wrong in ctxgate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The index file.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A conversation log being imported.
    #[error(transparent)]
    Import(#[from] crate::import::Error),
    /// A log's history of a session differs from what the index holds for it.
    #[error("{}: session {session:?}: turn {turn} differs from the index's turn {turn}; the file is not the same conversation grown: import it with another --session", .path.display())]
    Conflict {
        /// The file.
        path: std::path::PathBuf,
        /// The session.
        session: String,
        /// The first differing turn.
        turn: u32,
    },
    /// An argument the caller passed is not acceptable.
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// Which argument.
        what: &'static str,
        /// Why, and what would be accepted.
        reason: String,
    },
    /// An [`crate::Options`] field is out of range.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The field.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// An evidence ref that is not acceptable (absolute, `..`, a link out of the root).
    #[error("{0}")]
    BadRef(String),
    /// Evidence that cannot be stored, found or read.
    #[error("{0}")]
    Evidence(String),
    /// A projection spec that cannot be used.
    #[error(transparent)]
    Spec(#[from] crate::evidence::SpecError),
    /// A panic inside ctxgate (not inside redb, which panics on a damaged file): a bug.
    #[error(
        "internal error: {message} (at {location}); this is a bug in ctxgate: please report it with the command that caused it"
    )]
    Internal {
        /// The panic's message.
        message: String,
        /// Where it was raised (file:line:column).
        location: String,
    },
    /// No session has this name.
    #[error("no session named {name:?}: `ctxgate sessions` lists them")]
    UnknownSession {
        /// The name asked for.
        name: String,
    },
}

impl Error {
    /// A stable snake_case name for the kind of error, for agents to branch on.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Store(e) => e.kind(),
            Error::Import(crate::import::Error::Io { .. }) => "io",
            Error::Import(crate::import::Error::UnknownFormat { .. }) => "unknown_format",
            Error::Conflict { .. } => "conflict",
            Error::Import(_) => "bad_log",
            Error::InvalidInput { .. } => "bad_input",
            Error::InvalidOption { .. } => "invalid_option",
            Error::UnknownSession { .. } => "unknown_session",
            Error::BadRef(_) => "bad_ref",
            Error::Evidence(_) => "evidence",
            Error::Spec(_) => "bad_spec",
            Error::Internal { .. } => "internal",
        }
    }
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<crate::evidence::RefError> for Error {
    fn from(e: crate::evidence::RefError) -> Self {
        Error::BadRef(e.to_string())
    }
}

impl From<crate::evidence::RootError> for Error {
    fn from(e: crate::evidence::RootError) -> Self {
        match e {
            crate::evidence::RootError::Refused { .. } => Error::BadRef(e.to_string()),
            _ => Error::Evidence(e.to_string()),
        }
    }
}

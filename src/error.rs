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
    /// Another writer added turns to a session while an import was writing it.
    #[error("{}: session {session:?} has {found} turns where this import expected {expected}: another writer added to it while the import ran; nothing of the batch was written: import the file again", .path.display())]
    Raced {
        /// The file.
        path: std::path::PathBuf,
        /// The session.
        session: String,
        /// Turns the import expected the session to have.
        expected: u32,
        /// Turns it had.
        found: u32,
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
    /// An evidence document whose file no longer has the bytes it was indexed with.
    #[error("{0}")]
    EvidenceChanged(String),
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
    /// The kind of error, for callers to branch on ([`ErrorKind::as_str`] is its stable name).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Import(crate::import::Error::Io { .. }) => ErrorKind::Io,
            Error::Import(crate::import::Error::UnknownFormat { .. }) => ErrorKind::UnknownFormat,
            Error::Conflict { .. } | Error::Raced { .. } => ErrorKind::Conflict,
            Error::Import(_) => ErrorKind::BadLog,
            Error::InvalidInput { .. } => ErrorKind::BadInput,
            Error::InvalidOption { .. } => ErrorKind::InvalidOption,
            Error::UnknownSession { .. } => ErrorKind::UnknownSession,
            Error::BadRef(_) => ErrorKind::BadRef,
            Error::Evidence(_) => ErrorKind::Evidence,
            Error::EvidenceChanged(_) => ErrorKind::EvidenceChanged,
            Error::Spec(_) => ErrorKind::BadSpec,
            Error::Internal { .. } => ErrorKind::Internal,
        }
    }
}

/// What kind of error an [`Error`] is. Each has a stable snake_case name ([`as_str`](Self::as_str),
/// also its `Display`): the `kind` of the CLI's `--json` errors and of the server's tool errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A file could not be read or written.
    Io,
    /// The file is not a ctxgate index.
    NotAnIndex,
    /// No index at the path, and the command does not create one.
    UnknownIndex,
    /// A write to an index opened read-only.
    ReadOnly,
    /// The index was written by a newer ctxgate.
    NeedsUpgrade,
    /// The index must be rebuilt (`ctxgate rebuild`).
    NeedsRebuild,
    /// Another process holds the index.
    Busy,
    /// A record of the index does not decode.
    Corrupt,
    /// The index file is damaged (redb found a bad page).
    Damaged,
    /// Another error from the database engine.
    Database,
    /// A log's format could not be recognised.
    UnknownFormat,
    /// A log's history differs from the index's for its session.
    Conflict,
    /// A log record is malformed.
    BadLog,
    /// An argument is not acceptable.
    BadInput,
    /// An option is out of range.
    InvalidOption,
    /// No session has the name.
    UnknownSession,
    /// An evidence ref is not acceptable.
    BadRef,
    /// Evidence that cannot be stored, found or read.
    Evidence,
    /// An evidence document's file changed since it was indexed (restore it, or index it again).
    EvidenceChanged,
    /// A projection spec that cannot be used.
    BadSpec,
    /// A bug in ctxgate.
    Internal,
}

impl ErrorKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::NotAnIndex => "not_an_index",
            ErrorKind::UnknownIndex => "unknown_index",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::NeedsUpgrade => "needs_upgrade",
            ErrorKind::NeedsRebuild => "needs_rebuild",
            ErrorKind::Busy => "busy",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Damaged => "damaged",
            ErrorKind::Database => "database",
            ErrorKind::UnknownFormat => "unknown_format",
            ErrorKind::Conflict => "conflict",
            ErrorKind::BadLog => "bad_log",
            ErrorKind::BadInput => "bad_input",
            ErrorKind::InvalidOption => "invalid_option",
            ErrorKind::UnknownSession => "unknown_session",
            ErrorKind::BadRef => "bad_ref",
            ErrorKind::Evidence => "evidence",
            ErrorKind::EvidenceChanged => "evidence_changed",
            ErrorKind::BadSpec => "bad_spec",
            ErrorKind::Internal => "internal",
        }
    }
}

/// Compares with a stable name (`kind == "busy"`).
impl PartialEq<&str> for ErrorKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// An internal invariant that does not hold: a bug in ctxgate, not a problem of the
    /// caller's input or of the file.
    #[track_caller]
    pub(crate) fn bug(message: impl Into<String>) -> Self {
        Error::Internal { message: message.into(), location: std::panic::Location::caller().to_string() }
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
            crate::evidence::RootError::TooLarge { .. } => {
                Error::InvalidInput { what: "evidence document", reason: e.to_string() }
            }
            _ => Error::Evidence(e.to_string()),
        }
    }
}

//! The crate's error type: one variant per layer, and the caller's mistakes.

pub use crate::error_kind::ErrorKind;
use crate::store;
use std::path::Path;

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
    /// A session was forgotten while an import was writing it: the forget wins, and the
    /// import does not store the session again.
    #[error("{}: session {session:?} was forgotten while this import wrote it: the forget stands and the import stopped there; import the file again to store the session anew", .path.display())]
    Forgotten {
        /// The file.
        path: std::path::PathBuf,
        /// The session.
        session: String,
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
    #[error(transparent)]
    Evidence(#[from] crate::evidence::error::EvidenceError),
    /// An evidence document whose file no longer has the bytes it was indexed with.
    #[error("{0}")]
    EvidenceChanged(String),
    /// A projection spec that cannot be used.
    #[error(transparent)]
    Spec(#[from] crate::evidence::spec::SpecError),
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
            Error::Conflict { .. } | Error::Raced { .. } | Error::Forgotten { .. } => ErrorKind::Conflict,
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

impl From<crate::evidence::reference::RefError> for Error {
    fn from(e: crate::evidence::reference::RefError) -> Self {
        Error::BadRef(e.to_string())
    }
}

impl From<crate::evidence::root::RootError> for Error {
    fn from(e: crate::evidence::root::RootError) -> Self {
        match e {
            crate::evidence::root::RootError::Refused { .. } => Error::BadRef(e.to_string()),
            crate::evidence::root::RootError::TooLarge { .. } => {
                Error::InvalidInput { what: "evidence document", reason: e.to_string() }
            }
            other => Error::Evidence(crate::evidence::error::EvidenceError::Root(other)),
        }
    }
}

/// Runs `f` on the index at `path`, so that a damaged file is an error: a panic raised inside
/// redb becomes a `damaged` error ([`store::Error::Damaged`]), any other panic
/// [`Error::Internal`], and an error of `f` that says the file is damaged is returned as
/// `damaged` naming `path`.
///
/// The CLI and `ctxgate serve` run every command and tool call through this. A library user
/// reading an index that may be damaged wraps its calls the same way, and drops the
/// [`crate::Gatekeeper`] after a `damaged` error: redb's state after a panic is not worth
/// trusting.
///
/// # Errors
/// `f`'s errors, and the two above.
pub fn catch_damage<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_panic(path, f).and_then(|result| result).map_err(|err| name_damaged_file(err, path))
}

/// Runs `f`, turning a panic into an error as [`catch_damage`] does, but leaves `f`'s own
/// result alone (for callers whose errors are not [`Error`]; see [`name_damaged_file`]).
///
/// # Errors
/// `damaged` ([`store::Error::Damaged`]) for a panic raised inside redb, [`Error::Internal`]
/// for any other panic.
pub fn catch_panic<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T> {
    store::catch_reported(path, f).map_err(|panicked| match panicked {
        store::Panicked::InRedb(damaged) => damaged.into(),
        store::Panicked::Other { message, location } => Error::Internal { message, location },
    })
}

/// `err` naming `path` if it says the index file is damaged (a record that does not decode, a
/// redb `Corrupted` storage error), as `damaged` ([`store::Error::Damaged`]); any other error
/// as it is.
pub fn name_damaged_file(err: Error, path: &Path) -> Error {
    match err {
        Error::Store(store) => Error::Store(store.naming_damaged_file(path)),
        other => other,
    }
}

impl From<crate::postings::Error> for Error {
    fn from(e: crate::postings::Error) -> Self {
        Error::Store(e.into())
    }
}

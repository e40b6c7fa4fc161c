//! Errors of the postings: a row or run that does not decode, a run file gone or damaged, and
//! the engine's. The store turns each into its own error of the same kind and message.

use std::path::PathBuf;

/// An error reading or writing posting lists and runs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A stored row does not decode.
    #[error("corrupt index record: {what}")]
    Corrupt {
        /// What, and why.
        what: String,
    },
    /// A run file could not be read or written.
    #[error("cannot access {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The run file of an interrupted import is gone.
    #[error("{} is missing", .path.display())]
    RunsMissing {
        /// The run file.
        path: PathBuf,
    },
    /// The run file of an interrupted import does not hold what the index recorded of it.
    #[error("{} is damaged (run {run}: {what})", .path.display())]
    RunsDamaged {
        /// The run file.
        path: PathBuf,
        /// The run that does not read back.
        run: u32,
        /// What is wrong with it.
        what: String,
    },
    /// The database engine failed.
    #[error("index database error")]
    Database(#[source] redb::Error),
    /// An invariant the callers broke.
    #[error("internal error at {location}: {message}")]
    Internal {
        /// What does not hold.
        message: String,
        /// Where.
        location: String,
    },
}

/// `From` each of redb's errors for `$error`, an error with a `Database(redb::Error)` variant
/// (this module's, and the store's).
macro_rules! from_redb {
    ($error:ty) => {
        $crate::postings::from_redb!($error: redb::Error, redb::DatabaseError, redb::TransactionError,
            redb::TableError, redb::StorageError, redb::CommitError, redb::CursorError);
    };
    ($error:ty: $($t:ty),*) => {$(
        impl From<$t> for $error {
            fn from(e: $t) -> Self {
                Self::Database(e.into())
            }
        }
    )*};
}
pub(crate) use from_redb;

from_redb!(Error);

/// A record that failed to decode.
pub(crate) fn corrupt(what: impl std::fmt::Display, cause: impl std::fmt::Display) -> Error {
    Error::Corrupt { what: format!("{what}: {cause}") }
}

//! Errors of the storage layer: opening, version checks, busy files, corrupt records.

use std::path::PathBuf;
use std::time::Duration;

/// An error from the index file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The directory that should hold the index does not exist.
    #[error("directory {} does not exist: create it, or pass another --db", .path.display())]
    MissingDirectory {
        /// The missing directory.
        path: PathBuf,
    },
    /// No index at the path (no file, or an empty one), for an open that must not create one.
    #[error("no index at {}: create it with `ctxgate import` or `ctxgate add` first, or pass the --db of an existing index", .path.display())]
    UnknownIndex {
        /// The path.
        path: PathBuf,
    },
    /// A write to an index opened read-only.
    #[error("{} is open read-only: open it with `Gatekeeper::open` to write", .path.display())]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// The file exists but is not a ctxgate index.
    #[error("{} is not a ctxgate index: pass the path of an index, or a new file to create one", .path.display())]
    NotAnIndex {
        /// The file.
        path: PathBuf,
    },
    /// The path names something other than a regular file (a FIFO, a device, a socket).
    #[error("{} is not a regular file: pass the path of an index file, or of a new file to create one", .path.display())]
    NotARegularFile {
        /// The path.
        path: PathBuf,
    },
    /// The file was written by a newer ctxgate.
    #[error("{} has index format {found}, newer than this ctxgate supports ({supported}): upgrade ctxgate", .path.display())]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Format version in the file.
        found: u32,
        /// Newest format this build reads.
        supported: u32,
    },
    /// The file's format or anchor rules are older than this build's.
    #[error("{} was built with index format {found_format} and anchor rules {found_rules}; this ctxgate uses format {format} and rules {rules}: run `ctxgate rebuild`", .path.display())]
    NeedsRebuild {
        /// The file.
        path: PathBuf,
        /// Format version in the file.
        found_format: u32,
        /// Anchor-rules version in the file.
        found_rules: u32,
        /// This build's format version.
        format: u32,
        /// This build's anchor-rules version.
        rules: u32,
    },
    /// Another writer held the index's write lock (or, for a maintenance job, the index) past
    /// the busy timeout.
    #[error("{} is busy: another process is writing it or running a job on it (waited {:.1} s): retry, or wait longer (--busy-timeout)", .path.display(), .waited.as_secs_f64())]
    Busy {
        /// The file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },
    /// An import is writing the index and the job needs it whole.
    #[error("an import into {} is running: its turns are not in the posting lists yet; retry once it has finished", .path.display())]
    ImportRunning {
        /// The index.
        path: PathBuf,
    },
    /// A stored record does not decode.
    #[error("corrupt index record: {what}; run `ctxgate verify` and `ctxgate rebuild`")]
    Corrupt {
        /// Which record.
        what: String,
    },
    /// The index file could not be read or written.
    #[error("cannot access {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The run file of an interrupted import, which the index records runs in, is gone.
    #[error("{} is missing: it holds the postings of an import that was interrupted; put it back beside the index, or run `ctxgate rebuild` to derive them again from the stored turns", .path.display())]
    RunsMissing {
        /// The run file.
        path: PathBuf,
    },
    /// The index file is damaged (a flipped bit, a cut file): the database engine found a page
    /// it cannot read, or a record does not decode.
    #[error("{} is damaged: {detail}; run `ctxgate rebuild`, which derives a new index from the turns the file still holds (then `ctxgate verify` checks it), or if that fails too, restore the file from a backup", .path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// A damaged file that `rebuild` cannot read either (its repair fails).
    #[error("{} is damaged beyond what `ctxgate rebuild` can read: {detail}; restore the file from a backup, or import the logs it came from into a new index (the file is left as it was)", .path.display())]
    Unrecoverable {
        /// The file.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// `rebuild` left out records of a damaged file that could not be read: the new index holds
    /// every other one.
    #[error("{} was rebuilt from every record that could be read, but {detail}: those records are not in the index; import the logs they came from again, or restore them from a backup", .path.display())]
    RebuiltWithLoss {
        /// The index.
        path: PathBuf,
        /// What was left out, and where the old file is kept.
        detail: String,
    },
    /// The file system's locks do not keep one process out while another holds them: sharing
    /// the index there would corrupt it, so it is not written.
    #[error("{} is on a file system whose file locks do not hold (a lock one handle holds does not keep another out): processes sharing the index there would write over each other and damage it, so ctxgate does not write it; put the index on a local file system (--db or CTXGATE_DB)", .path.display())]
    LocksDoNotHold {
        /// The index.
        path: PathBuf,
    },
    /// The run file of an interrupted import does not hold what the index recorded of it.
    /// `verify` cannot help (opening the index merges the runs first); `rebuild` reads only the
    /// stored turns.
    #[error("{} is damaged (run {run}: {what}): it holds the postings of an import that was interrupted; run `ctxgate rebuild` to derive them again from the stored turns", .path.display())]
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
    /// An invariant of the storage code does not hold: a bug in ctxgate, not a damaged file.
    #[error(
        "internal error: {message} (at {location}); this is a bug in ctxgate: please report it with the command that caused it"
    )]
    Internal {
        /// What does not hold.
        message: String,
        /// Where it was found (file:line:column).
        location: String,
    },
}

impl Error {
    /// A stable name for the kind of error, for agents to branch on.
    pub fn kind(&self) -> crate::error_kind::ErrorKind {
        use crate::error_kind::ErrorKind;
        match self {
            Error::MissingDirectory { .. } | Error::Io { .. } | Error::LocksDoNotHold { .. } => ErrorKind::Io,
            Error::NotAnIndex { .. } | Error::NotARegularFile { .. } => ErrorKind::NotAnIndex,
            Error::TooNew { .. } => ErrorKind::NeedsUpgrade,
            Error::NeedsRebuild { .. } | Error::RunsMissing { .. } | Error::RunsDamaged { .. } => {
                ErrorKind::NeedsRebuild
            }
            Error::Busy { .. } | Error::ImportRunning { .. } => ErrorKind::Busy,
            Error::UnknownIndex { .. } => ErrorKind::UnknownIndex,
            Error::ReadOnly { .. } => ErrorKind::ReadOnly,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Damaged { .. } | Error::RebuiltWithLoss { .. } | Error::Unrecoverable { .. } => {
                ErrorKind::Damaged
            }
            // A write the file system refused (a full disk): what to do is about the disk.
            Error::Database(redb::Error::Io(_)) => ErrorKind::Io,
            Error::Database(_) => ErrorKind::Database,
            Error::Internal { .. } => ErrorKind::Internal,
        }
    }

    /// Whether this is a write the file system refused (a full disk, a read-only file system,
    /// a quota), not a problem of the file.
    pub(crate) fn is_write_failure(&self) -> bool {
        let io = match self {
            Error::Io { source, .. } => Some(source),
            Error::Database(redb::Error::Io(e)) => Some(e),
            _ => None,
        };
        io.is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull
                    | std::io::ErrorKind::QuotaExceeded
                    | std::io::ErrorKind::ReadOnlyFilesystem
                    | std::io::ErrorKind::PermissionDenied
            )
        })
    }

    /// An invariant of the storage code that does not hold (its callers broke it).
    #[track_caller]
    pub(crate) fn bug(message: impl Into<String>) -> Self {
        Error::Internal { message: message.into(), location: std::panic::Location::caller().to_string() }
    }
}

impl From<crate::postings::Error> for Error {
    /// The postings' error as the store's of the same kind and message.
    fn from(e: crate::postings::Error) -> Self {
        use crate::postings::Error as P;
        match e {
            P::Corrupt { what } => Error::Corrupt { what },
            P::Io { path, source } => Error::Io { path, source },
            P::RunsMissing { path } => Error::RunsMissing { path },
            P::RunsDamaged { path, run, what } => Error::RunsDamaged { path, run, what },
            P::Database(e) => Error::Database(e),
            P::Internal { message, location } => Error::Internal { message, location },
        }
    }
}

crate::postings::from_redb!(Error);

/// A record that failed to decode.
pub(crate) fn corrupt(what: impl std::fmt::Display, cause: impl std::fmt::Display) -> Error {
    Error::Corrupt { what: format!("{what}: {cause}") }
}

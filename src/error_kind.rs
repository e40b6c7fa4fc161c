//! `ErrorKind`: the stable names errors are branched on, shared by every component's errors.

/// What kind of error a [`crate::Error`] is. Each has a stable snake_case name ([`as_str`](Self::as_str),
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

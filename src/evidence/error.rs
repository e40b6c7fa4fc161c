//! `EvidenceError`: why evidence cannot be stored, found or read, by case.

use super::root::RootError;
use std::path::PathBuf;

/// Why evidence cannot be stored, found or read ([`crate::Error::Evidence`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// The index's documents are under another root than the one asked for.
    #[error("the index's evidence is under {recorded}, not {}: use that root, or `ctxgate evidence forget` what is indexed first", .requested.display())]
    OtherRoot {
        /// The root the index records.
        recorded: String,
        /// The root asked for.
        requested: PathBuf,
    },
    /// The tree to index is not a directory.
    #[error("{}: not a directory", .path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A pointer into a document that is not JSON.
    #[error("{reference} is not a JSON document: read it whole, without a pointer")]
    NotJson {
        /// The document's ref.
        reference: String,
    },
    /// A JSON pointer that does not parse.
    #[error("{0}")]
    BadPointer(String),
    /// A JSON pointer that leads nowhere in the document.
    #[error("{reference} has nothing at pointer {pointer:?}")]
    NothingAtPointer {
        /// The document's ref.
        reference: String,
        /// The pointer.
        pointer: String,
    },
    /// A document that cannot be projected with the spec given (a kind it lacks).
    #[error("{0}")]
    Projection(String),
    /// A JSON value that cannot be written.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A path that cannot be made absolute.
    #[error("{}: {cause}", .path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// A file under the root that cannot be read or written.
    #[error(transparent)]
    Root(RootError),
}

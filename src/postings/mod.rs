//! The posting lists (DESIGN §3.4, §6): a log-structured subsystem under the store.
//!
//! - [`codec`]: a posting, and rows and chunks of them, encoded;
//! - [`keys`]: the keys of rows, blocks and runs;
//! - [`lists`], [`cursor`]: writing an anchor's list, and reading it back in order;
//! - [`norms`]: block lengths, for BM25's length normalization;
//! - [`grouped`], [`sorted`]: a batch's postings grouped by anchor, and sorted inserts;
//! - [`runs`], [`run_file`]: an import's postings written as sorted runs beside the index,
//!   merged into the lists when it ends (or when the next writer opens a killed one's).
//!
//! It knows the tables it is handed and nothing above: the store opens them in its
//! transactions and turns this module's [`Error`] into its own.

pub(crate) mod codec;
pub(crate) mod cursor;
mod error;
pub(crate) mod grouped;
pub(crate) mod keys;
pub(crate) mod lists;
pub(crate) mod norms;
pub(crate) mod run_file;
pub(crate) mod runs;
pub(crate) mod sorted;

pub use error::Error;
pub(crate) use error::{corrupt, from_redb};

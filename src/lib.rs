//! ctxgate: a persistent context gatekeeper for LLM agents.
//!
//! It keeps long conversation histories in an on-disk index (one redb file) and, for every new
//! query, hands the model only what that query needs inside a token budget: the right past
//! turns, pruned to the right sentences. Sparse lexical statistics only (anchors and IDF): no
//! embeddings, no LLM calls, and every choice can be explained.
//!
//! ```
//! use ctxgate::{Gatekeeper, Options};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
//! let s = gk.session("demo")?;
//! s.add_turn("How do I expire a Redis lock?", "Set a TTL with SET key value NX PX 30000.")?;
//! s.add_turn("What about asyncio timeouts?", "Wrap the call in asyncio.wait_for.")?;
//! let selection = s.select("Redis lock TTL renewal")?;
//! assert_eq!(selection.blocks[0].turn_id, 0);
//! let prompt = s.build_prompt("Redis lock TTL renewal")?;
//! assert!(prompt.contains("Redis lock"));
//! # Ok(()) }
//! ```
//!
//! # The API
//! - [`Gatekeeper`] (one index file) and [`Session`] (one conversation in it): add turns, gate,
//!   select, build prompts, search, import logs, store and project evidence, run the jobs.
//! - [`Selection`] and its parts: what a query gets, and why.
//! - [`import`]: the log parsers on their own (log bytes in, conversations out).
//! - [`evidence`]: evidence refs, projection specs and projections, pure.
//! - [`jobs`]: the reports of `verify`, `rebuild`, `compact` and `forget`.
//! - [`hook`]: what the agent hooks (`ctxgate hook claude-code|codex`) do with an event, and
//!   their settings.
//! - [`tokens`]: the token estimator, replaceable by a real tokenizer.
//! - `server` (feature `server`): the MCP server.
//! - `sync` (feature `sync`): the history shared through PostgreSQL (`ctxgate sync`).
//!
//! The algorithm's modules and the index (`anchor`, `gate`, `query`, `store`, `text`) are
//! public only with the `internals` feature, for this repository's benches, tools and tests.
//! `docs/ARCHITECTURE.md` maps them; `docs/DESIGN.md` is the specification (the `DESIGN §N`
//! of code comments).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::dbg_macro, clippy::print_stdout, clippy::print_stderr)]

mod error;
mod error_kind;
/// Modules public only with the `internals` feature (for this repository's benches, tools and
/// tests); without it some of their items are used only there.
macro_rules! internal_modules {
    ($($name:ident),*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}
internal_modules!(anchor, gate, query, store, text);
pub mod evidence;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gatekeeper;
pub mod hook;
pub mod import;
mod index;
pub mod jobs;
pub mod limits;
mod names;
mod options;
mod postings;
pub mod redact;
#[cfg(feature = "server")]
pub mod server;
mod session;
#[cfg(feature = "sync")]
pub mod sync;
pub mod tokens;
mod types;
mod write;

pub use error::{Error, ErrorKind, Result, catch_damage, catch_panic, name_damaged_file};
pub use evidence::{EvidenceIndexReport, EvidenceInfo, EvidenceOptions, SkippedFile};
pub use gate::{GateDecision, Topic, describe_reference};
pub use gatekeeper::{Gatekeeper, ReadCache, SessionInfo, Stats};
pub use import::Format;
pub use options::{DEFAULT_TOKEN_BUDGET, Options};
pub use query::anchors::QueryAnchor;
pub use query::history::{RecordedGate, StoredTurn, ToolInfo};
pub use query::prompt;
pub use query::search::SearchHit;
pub use query::select::{
    Budget, EmptyBecause, Policy, SelectOptions, SelectedBlock, SelectedEvidence, Selection,
};
pub use session::{MAX_TEXT_BYTES, Session};
pub use store::redaction::History as RedactionHistory;
pub use store::{Error as StoreError, TableSize};
pub use types::TurnId;
pub use write::{
    BATCH_TURNS, DEFAULT_IMPORT_MEMORY, FileReport, FileStatus, ImportOptions, ImportProgress, ImportReport,
    SessionReport,
};

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
//! # Modules
//! - [`anchor`]: text → anchors with term frequencies (DESIGN §3.1).
//! - `query`, `idf`: the query's anchors weighted by IDF.
//! - [`gate`]: topic gate and content-word filter (§3.2, §3.3).
//! - `recall`, `prune`, `select`: scoring, sentence pruning, minimum coverage (§3.4–§3.6).
//! - `store`: the redb index, log-structured postings (§6).
//! - [`Gatekeeper`], [`Session`]: the public facade.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::dbg_macro, clippy::print_stdout, clippy::print_stderr)]

pub mod anchor;
mod error;
pub mod evidence;
mod evidence_recall;
mod evidence_store;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
mod gatekeeper;
mod history;
mod idf;
pub mod import;
pub mod jobs;
mod pipeline;
mod prompt;
mod prune;
mod query;
mod recall;
pub mod search;
mod segment;
mod select;
pub mod server;
mod session;
pub mod store;
pub mod text;
pub mod tokens;
mod write;

pub use error::{Error, Result};
pub use evidence_store::{EvidenceIndexReport, EvidenceInfo, EvidenceOptions, SkippedFile};
pub use gate::{GateDecision, Topic};
pub use gatekeeper::{DEFAULT_TOKEN_BUDGET, Gatekeeper, Options, SessionInfo, Stats};
pub use history::{RecordedGate, StoredTurn, ToolInfo};
pub use import::Format;
pub use query::QueryAnchor;
pub use search::SearchHit;
pub use select::Policy;
pub use session::{
    Budget, MAX_TEXT_BYTES, SelectOptions, SelectedBlock, SelectedEvidence, Selection, Session, TurnId,
};
pub use write::{BATCH_TURNS, FileReport, ImportOptions, ImportProgress, ImportReport, SessionReport};

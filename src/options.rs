//! `Options`: how an index is opened and used, and the selection `Policy` they default to.

use crate::tokens::Tokenizer;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// DESIGN §3.7: default token budget.
pub const DEFAULT_TOKEN_BUDGET: u32 = 4000;

/// Most scoring threads accepted: more only costs start-up time on any real machine.
pub const MAX_THREADS: usize = 256;

/// How to open and use an index.
#[derive(Debug, Clone)]
pub struct Options {
    /// Token budget of a selection. Default 4000 (DESIGN §3.7).
    pub token_budget: u32,
    /// Selection policy. Default [`Policy::Minimal`].
    pub policy: Policy,
    /// Threads for parallel scoring: 0 = one per core (the default), 1 = inline.
    pub threads: usize,
    /// redb page cache in bytes. Default 64 MiB.
    pub cache_bytes: usize,
    /// How long to wait for another process to release the index. Default 5 s.
    pub busy_timeout: Duration,
    /// No effect since every open shares the file in redb's multi-writer mode (docs/DESIGN.md
    /// §6.10), which saves the allocator state with every commit: reopening after a crash is
    /// always quick, and a commit is always two fsyncs. Kept so that code setting it builds.
    pub quick_repair: bool,
    /// Where evidence documents are stored (DESIGN §4). Default: the root recorded in the
    /// index, or else a directory beside the index file named after it (`x.redb` →
    /// `x.evidence`).
    pub evidence_root: Option<PathBuf>,
    /// What the budget counts (DESIGN §3.5). Default [`Tokenizer::Chars`], the seed's
    /// `chars × 1.5`; [`crate::Gatekeeper::set_token_estimator`] replaces it.
    pub tokenizer: Tokenizer,
    /// Whether secrets are redacted where text enters the index and the evidence root
    /// ([`crate::redact`], `docs/secrets.md`). Default true; false keeps the raw history
    /// (`--no-redact`), and the index records that it holds text written without it.
    pub redact: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            token_budget: DEFAULT_TOKEN_BUDGET,
            policy: Policy::Minimal,
            threads: 0,
            cache_bytes: 64 * 1024 * 1024,
            busy_timeout: Duration::from_secs(5),
            quick_repair: false,
            evidence_root: None,
            tokenizer: Tokenizer::Chars,
            redact: true,
        }
    }
}

/// How much of the budget a selection may spend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// The smallest context that covers the query (the greedy alone). The default.
    #[default]
    Minimal,
    /// The greedy, then the rest of the budget spent past the top 20: turns with a specific
    /// anchor, then those turns whole where room is left, then turns with common anchors only.
    Fill,
}

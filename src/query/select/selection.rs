//! What a selection returns: the chosen blocks and evidence, the budget they used and why they
//! were chosen, and the per-call options that shape it.

use crate::gate::GateDecision;
use crate::query::anchors::QueryAnchor;
use crate::query::select::Policy;
use crate::tokens::Tokenizer;
use crate::types::TurnId;
use serde::Serialize;

/// Per-call overrides of [`crate::Options`] for a selection.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectOptions {
    /// Token budget (default: `Options::token_budget`).
    pub budget: Option<u32>,
    /// Answer as if only turns `0..as_of` existed (default: all turns).
    pub as_of: Option<u32>,
    /// Selection policy (default: `Options::policy`).
    pub policy: Option<Policy>,
    /// Leave evidence projections out (default: offer them, DESIGN §4).
    pub no_evidence: bool,
    /// What the budget counts (default: `Options::tokenizer`, or the estimator set with
    /// `Gatekeeper::set_token_estimator`).
    pub tokenizer: Option<Tokenizer>,
}

/// The budget of a selection and what it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Budget {
    /// The token budget.
    pub limit: u32,
    /// Tokens of the selected blocks and projections, in the call's tokenizer; never above
    /// `limit`.
    pub used: u32,
}

/// One selected block: a past turn, pruned to what the query needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct SelectedBlock {
    /// The turn's id in its session.
    pub turn_id: TurnId,
    /// The kept user sentences.
    pub user: String,
    /// The kept assistant sentences.
    pub assistant: String,
    /// The recall score (DESIGN §3.4).
    pub score: f64,
    /// Query anchors this block covered first.
    pub covered_anchors: Vec<String>,
    /// When the turn was said, as its source wrote it; absent when the source gave no time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Tokens of `user`, `assistant` and the label's time part, in the call's tokenizer: the
    /// time, or `same time` when the block before it has the same time (`prompt::BlockLabels`).
    pub tokens: u32,
}

impl SelectedBlock {
    /// The block's label on its own (the CLI's listing): `turn N`, then ` · TIME` when the turn
    /// has a time. Prompts and hook context label a run of blocks of one time with
    /// `prompt::BlockLabels`, which says `same time` after the first.
    pub fn label(&self) -> String {
        format!(
            "turn {}{}",
            self.turn_id,
            self.time.as_deref().map(crate::query::prompt::time_label).unwrap_or_default()
        )
    }
}

/// One selected evidence projection (DESIGN §4).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct SelectedEvidence {
    /// Where the full document is, relative to the evidence root (`read_evidence` reads it).
    pub evidence_ref: String,
    /// Its kind.
    pub kind: String,
    /// The evidence recall score.
    pub score: f64,
    /// Query anchors it covered first.
    pub covered_anchors: Vec<String>,
    /// Tokens of the projection (compact JSON), in the call's tokenizer.
    pub tokens: u32,
    /// The projection: facts (exact values by JSON pointer) and omitted parts, or a small
    /// document whole as `content`; known unknowns, blocked decisions, claim constraints, agent
    /// space. Empty lists are left out.
    #[cfg_attr(feature = "server", schemars(with = "crate::evidence::Projection"))]
    pub projection: serde_json::Value,
}

/// What ctxgate selected for a query, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Selection {
    /// The session asked about.
    pub session: String,
    /// The query.
    pub query: String,
    /// The gate's decision.
    pub decision: GateDecision,
    /// The query's anchors with their IDF, most discriminative first.
    pub anchors: Vec<QueryAnchor>,
    /// The policy used.
    pub policy: Policy,
    /// Budget and use.
    pub budget: Budget,
    /// Covered share of the query's IDF, in [0, 1].
    pub coverage: f64,
    /// Selected past turns, in chronological order: the context to use.
    pub blocks: Vec<SelectedBlock>,
    /// Selected evidence projections (exact facts of tool output kept on disk), in the order
    /// they were chosen; what they omit can be read by their ref.
    pub evidence: Vec<SelectedEvidence>,
    /// Why nothing was selected, when nothing was: the history holds nothing for the query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_because: Option<EmptyBecause>,
}

/// Why a selection is empty. A hook injects on every prompt, so saying nothing is an answer,
/// and it comes with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum EmptyBecause {
    /// The session has no turns before the query.
    NoHistory,
    /// No turn of the history holds any of the query's words (framing words aside).
    NothingShared,
    /// What the history shares with the query is everyday phrasing, learnt from the index's
    /// other sessions.
    OnlyPhrasing {
        /// The words shared.
        shared: Vec<String>,
    },
    /// The words the history shares with the query are no more frequent here than in the rest
    /// of the index, and no turn holds a combination of them rarer than chance.
    NotSpecific {
        /// The words shared.
        shared: Vec<String>,
    },
    /// Turns share specific words with the query, but none passed the content-word filter or
    /// fit the budget.
    NoneFits,
}

impl EmptyBecause {
    /// One line for a reader.
    pub fn describe(&self) -> String {
        match self {
            EmptyBecause::NoHistory => "the session has no earlier turns".to_string(),
            EmptyBecause::NothingShared => "no earlier turn holds any of the query's words".to_string(),
            EmptyBecause::OnlyPhrasing { shared } => {
                format!("the history shares only everyday phrasing with the query ({})", shared.join(", "))
            }
            EmptyBecause::NotSpecific { shared } => format!(
                "the words the history shares with the query ({}) are no more frequent here than elsewhere in the index",
                shared.join(", ")
            ),
            EmptyBecause::NoneFits => {
                "no turn with the query's specific words passed the content filter or fit the budget"
                    .to_string()
            }
        }
    }
}

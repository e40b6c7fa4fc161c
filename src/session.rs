//! `Session`: add turns, gate, select and build prompts for one named conversation.

use crate::error::{Error, Result};
use crate::gate::GateDecision;
use crate::gatekeeper::SessionInfo;
use crate::index::Index;
use crate::query::gate_view::{self, SessionRef};
use crate::query::history::{self, StoredTurn};
use crate::query::pipeline::{self, SelectParams};
use crate::query::prompt;
use crate::query::select::{Budget, SelectOptions, SelectedBlock, SelectedEvidence, Selection};
use crate::redact::redact_within;
use crate::tokens::TokenEstimator;
use crate::write::turn::{self, Postings, PreparedTurn};

pub use crate::types::TurnId;
use std::borrow::Cow;

pub use crate::limits::MAX_TEXT_BYTES;

/// A named session of a [`crate::Gatekeeper`]. Cheap: holds the name, not a transaction.
pub struct Session<'g> {
    index: &'g Index,
    name: String,
}

impl<'g> Session<'g> {
    pub(crate) fn new(index: &'g Index, name: String) -> Self {
        Self { index, name }
    }

    /// The session's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Records a turn (creating the session on its first turn) and returns its id, from 0.
    ///
    /// The turn, its gate decision and the session's new segment state are one durable
    /// transaction. A turn whose estimate exceeds the token budget is stored with a warning.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if both texts are blank or one is over [`MAX_TEXT_BYTES`].
    pub fn add_turn(&self, user: &str, assistant: &str) -> Result<TurnId> {
        check_text("user text", user)?;
        check_text("assistant text", assistant)?;
        if user.trim().is_empty() && assistant.trim().is_empty() {
            return Err(Error::InvalidInput {
                what: "turn",
                reason: "both the user and the assistant text are empty".into(),
            });
        }
        let estimator = self.index.estimator();
        let tokens = estimator.estimate(user).saturating_add(estimator.estimate(assistant));
        let (user, assistant) = match self.index.options().redact {
            true => (redact_within(user, MAX_TEXT_BYTES), redact_within(assistant, MAX_TEXT_BYTES)),
            false => (Cow::Borrowed(user), Cow::Borrowed(assistant)),
        };
        let prepared = PreparedTurn::new(user.into_owned(), assistant.into_owned(), None, Vec::new());
        let turn = self.index.store().write(|view| -> Result<TurnId> {
            view.note_text_written(self.index.options().redact)?;
            let (id, mut record) = turn::session_for_write(view, &self.name)?;
            let (turn, _) = turn::append_turn(view, id, &mut record, prepared, Postings::Logged)?;
            view.put_session(id, &record)?;
            view.fold_if_due()?;
            Ok(turn)
        })?;
        let budget = self.index.options().token_budget;
        if tokens > budget {
            log::warn!("turn {turn} of {:?} is ~{tokens} tokens, over the {budget}-token budget", self.name);
        }
        Ok(turn)
    }

    /// The session's summary.
    pub fn info(&self) -> Result<SessionInfo> {
        history::info(self.index, &self.name).map(SessionInfo::from)
    }

    /// A stored turn, whole; `None` past the last turn.
    pub fn turn(&self, turn_id: TurnId) -> Result<Option<StoredTurn>> {
        history::turn(self.index, &self.name, turn_id)
    }

    /// Calls `each` with every stored turn in order, reading a bounded number at a time.
    pub fn for_each_turn(&self, mut each: impl FnMut(StoredTurn) -> Result<()>) -> Result<()> {
        history::for_each_turn(self.index, &self.name, |_, turn| each(turn?))
    }

    /// Calls `each` with every turn in order, or, for a turn whose record is damaged (does not
    /// decode or verify, kind `corrupt`), with that error: a caller that can go on past it
    /// (`export`) does. Other errors end the walk.
    pub fn for_each_turn_or_damage(
        &self,
        each: impl FnMut(TurnId, Result<StoredTurn>) -> Result<()>,
    ) -> Result<()> {
        history::for_each_turn(self.index, &self.name, each)
    }

    /// The gate's decision for `query` as the next user message (after turns `0..as_of`).
    pub fn gate(&self, query: &str, as_of: Option<u32>) -> Result<GateDecision> {
        check_query(query)?;
        let view = self.index.store().read()?;
        let (id, record) = self.lookup(&view)?;
        let as_of = resolve_as_of(as_of, record.turn_count)?;
        let session = SessionRef { id, record: &record };
        Ok(self.index.in_pool(|| gate_view::gate(&view, Some(&session), as_of, query))?.decision)
    }

    /// Selects context for `query` with the gatekeeper's default options.
    pub fn select(&self, query: &str) -> Result<Selection> {
        self.select_with(query, &SelectOptions::default())
    }

    /// Selects context for `query`: gate, recall, filter, prune, greedy coverage.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::InvalidInput`] for a blank query or an `as_of`
    /// beyond the session's turns.
    pub fn select_with(&self, query: &str, options: &SelectOptions) -> Result<Selection> {
        self.select_inner(query, options, (0, 0))
    }

    fn select_inner(&self, query: &str, options: &SelectOptions, overhead: (u32, u32)) -> Result<Selection> {
        check_query(query)?;
        let defaults = self.index.options();
        let budget = options.budget.unwrap_or(defaults.token_budget);
        let policy = options.policy.unwrap_or(defaults.policy);
        let view = self.index.store().read()?;
        let (id, record) = self.lookup(&view)?;
        let as_of = resolve_as_of(options.as_of, record.turn_count)?;
        let session = SessionRef { id, record: &record };
        let params = SelectParams {
            as_of,
            budget,
            block_overhead: overhead.0,
            policy,
            evidence: !options.no_evidence,
            evidence_overhead: overhead.1,
            estimator: self.estimator(options),
        };
        let outcome = self.index.in_pool(|| pipeline::select(&view, &session, query, &params))?;
        let total = outcome.query.idf_of(outcome.query.full_mask());
        // `+ 0.0`: a sum of no f64 is -0.0, which printed as "-0%" (issue 23).
        let coverage = if total > 0.0 { outcome.query.idf_of(outcome.covered) / total + 0.0 } else { 0.0 };
        let blocks = outcome
            .blocks
            .into_iter()
            .map(|b| SelectedBlock {
                turn_id: b.turn,
                covered_anchors: outcome.query.texts_of(b.newly_covered),
                user: b.user,
                assistant: b.assistant,
                score: b.score,
                time: b.time,
                tokens: b.tokens,
            })
            .collect();
        let evidence = outcome
            .evidence
            .into_iter()
            .map(|e| SelectedEvidence {
                evidence_ref: e.reference,
                kind: e.kind,
                score: e.score,
                covered_anchors: outcome.query.texts_of(e.newly_covered),
                tokens: e.tokens,
                // Stored by `put_evidence` from a serialized projection: it parses.
                projection: serde_json::from_str(&e.projection).unwrap_or(serde_json::Value::Null),
            })
            .collect();
        Ok(Selection {
            session: self.name.clone(),
            query: query.to_string(),
            decision: outcome.decision,
            anchors: outcome.query.anchors().to_vec(),
            policy,
            budget: Budget { limit: budget, used: outcome.used_tokens },
            coverage,
            blocks,
            evidence,
            empty_because: outcome.empty_because,
        })
    }

    /// The prompt for `query` with the gatekeeper's default options.
    pub fn build_prompt(&self, query: &str) -> Result<String> {
        self.build_prompt_with(query, &SelectOptions::default())
    }

    /// The prompt text for `query`: selected turns and the question, within the budget
    /// (the framing and the question count against it too), counted by the call's tokenizer.
    pub fn build_prompt_with(&self, query: &str, options: &SelectOptions) -> Result<String> {
        check_query(query)?;
        let estimator = self.estimator(options);
        let budget = options.budget.unwrap_or(self.index.options().token_budget);
        let question_only = estimator.estimate(&prompt::render_question(query));
        if question_only > budget {
            return Err(Error::InvalidInput {
                what: "budget",
                reason: format!("the question alone is ~{question_only} tokens, over the budget of {budget}"),
            });
        }
        let reserved = estimator.estimate(&prompt::framing(query));
        let overhead = estimator.estimate(&prompt::block_framing(u32::MAX));
        let evidence_overhead = estimator.estimate(&prompt::evidence_framing());
        let mut blocks_budget = budget.saturating_sub(reserved);
        loop {
            let options = SelectOptions { budget: Some(blocks_budget), ..*options };
            let selection = self.select_inner(query, &options, (overhead, evidence_overhead))?;
            let text = prompt::render(&selection, query);
            // The parts' counts add up to at least the whole's for `chars`, so it always fits;
            // a BPE encoding may merge across a part's edge either way. Over the budget, select
            // again with the excess taken off: the selection shrinks until it fits, at worst to
            // the question alone, which fits (checked above).
            let tokens = estimator.estimate(&text);
            if tokens <= budget || (selection.blocks.is_empty() && selection.evidence.is_empty()) {
                return Ok(text);
            }
            if blocks_budget == 0 {
                return Ok(prompt::render_question(query));
            }
            log::debug!("prompt of {tokens} tokens over the budget of {budget}: selecting again");
            blocks_budget = blocks_budget.saturating_sub(tokens - budget);
        }
    }

    /// The estimator a call counts with: its own tokenizer, else the gatekeeper's.
    fn estimator<'a>(&'a self, options: &'a SelectOptions) -> &'a dyn TokenEstimator {
        match &options.tokenizer {
            Some(tokenizer) => tokenizer,
            None => self.index.estimator(),
        }
    }

    fn lookup<S: crate::store::Source>(
        &self,
        view: &crate::store::View<S>,
    ) -> Result<(u32, crate::store::records::SessionRecord)> {
        view.session_by_name(&self.name)?.ok_or_else(|| Error::UnknownSession { name: self.name.clone() })
    }
}

fn resolve_as_of(as_of: Option<u32>, turns: u32) -> Result<u32> {
    match as_of {
        None => Ok(turns),
        Some(n) if n <= turns => Ok(n),
        Some(n) => Err(Error::InvalidInput {
            what: "--as-of",
            reason: format!("{n} is beyond the session's {turns} turns"),
        }),
    }
}

fn check_text(what: &'static str, text: &str) -> Result<()> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(Error::InvalidInput {
            what,
            reason: format!("{} bytes is over the limit of {MAX_TEXT_BYTES}", text.len()),
        });
    }
    Ok(())
}

pub(crate) fn check_query(query: &str) -> Result<()> {
    check_text("query", query)?;
    if query.trim().is_empty() {
        return Err(Error::InvalidInput { what: "query", reason: "it is empty".into() });
    }
    Ok(())
}

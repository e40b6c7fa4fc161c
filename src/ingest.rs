//! Adding turns to a session inside a write transaction: the one path every writer takes
//! (`Session::add_turn` one at a time, `import` in batches).
//!
//! Anchor extraction is pure and done before the transaction (in parallel for a batch); inside
//! it, each turn is gated against the history before it, stored with its decision, and moves
//! the session's topic segment and digest on.

use crate::anchor::{self, HashedAnchor};
use crate::error::{Error, Result};
use crate::gate::Topic;
use crate::pipeline::{self, GateFilter, SessionRef};
use crate::store::records::{ForwardRecord, GateRecord, SessionRecord, ToolRecord, TurnRecord, next_digest};
use crate::store::{View, WriteSource, anchor_hash};

/// A turn ready to be written: its text and what extraction found in it.
pub struct PreparedTurn {
    /// The user's text.
    pub user: String,
    /// The assistant's text.
    pub assistant: String,
    /// Timestamp from the source.
    pub time: Option<String>,
    /// Tool calls of the turn.
    pub tools: Vec<ToolRecord>,
    user_anchors: Vec<HashedAnchor>,
    gate_filter: GateFilter,
    forward: ForwardRecord,
}

impl PreparedTurn {
    /// Extracts the anchors of a turn and what the gate leaves out of the user's (pure; call it
    /// in parallel for a batch).
    pub fn new(user: String, assistant: String, time: Option<String>, tools: Vec<ToolRecord>) -> Self {
        let anchor::UserAnchors { anchors: user_anchors, framing, trigrams } =
            anchor::extract_user(&user, anchor_hash);
        let assistant_anchors = anchor::extract_hashed(&assistant, anchor_hash);
        let forward = pipeline::forward_record(&user_anchors, &assistant_anchors);
        let gate_filter = GateFilter::from_parts(framing, trigrams);
        PreparedTurn { user, assistant, time, tools, user_anchors, gate_filter, forward }
    }

    /// The turn's anchors, merged over both sides.
    pub fn anchors(&self) -> &ForwardRecord {
        &self.forward
    }

    /// For each anchor of the user text (the gate's, in their order), its index among
    /// [`anchors`](Self::anchors)' entries.
    pub fn gate_anchor_entries(&self) -> impl ExactSizeIterator<Item = Option<usize>> + '_ {
        self.user_anchors.iter().map(|a| self.forward.entries.binary_search_by_key(&a.hash, |e| e.0).ok())
    }
}

/// The session named `name`, created if it does not exist.
pub fn session_for_write(view: &mut View<WriteSource<'_>>, name: &str) -> Result<(u32, SessionRecord)> {
    Ok(match view.session_by_name(name)? {
        Some(found) => found,
        None => view.create_session(name)?,
    })
}

/// Appends `turn` to the session `(id, record)` and returns its turn id. The caller stores the
/// updated `record` (once per batch) and folds pending postings when it sees fit.
pub fn append_turn(
    view: &mut View<WriteSource<'_>>,
    id: u32,
    record: &mut SessionRecord,
    turn: PreparedTurn,
) -> Result<u32> {
    append(view, id, record, turn, Pending::Logged, None)
}

/// [`append_turn`] for a bulk writer: the turn's anchors are not written as a `pending` row
/// but folded into the postings before this transaction commits (`View::put_turn_to_fold`).
/// Readers see the same index either way. The turn's texts and anchor lists are handed back
/// instead of freed here: a bulk writer frees them when no other thread is allocating
/// (see `import::writer`), with the turn's id.
pub fn append_turn_to_fold(
    view: &mut View<WriteSource<'_>>,
    id: u32,
    record: &mut SessionRecord,
    turn: PreparedTurn,
    earlier: &EarlierInBatch<'_>,
) -> Result<(u32, Spent)> {
    let mut spent = Spent::default();
    let turn_id = append(view, id, record, turn, Pending::FoldInTransaction(earlier), Some(&mut spent))?;
    Ok((turn_id, spent))
}

/// How many turns of a bulk batch, added before the one being added, have each anchor: the
/// part of a document frequency that the write view does not count for such turns (see
/// `View::put_turn_to_fold`). The writer counts them as it groups the batch.
pub struct EarlierInBatch<'b> {
    /// One count per anchor of the turn's user text, in the order of
    /// [`PreparedTurn::gate_anchor_entries`]; `u32::MAX` for one it has no entry of.
    pub gate_anchors: &'b [u32],
    /// The count of any hash (the gate's fallback anchor is not among the turn's anchors).
    pub other: &'b dyn Fn(u64) -> u64,
}

/// What adding a turn used and no longer needs.
#[derive(Default)]
pub struct Spent {
    _record: Option<TurnRecord>,
    _anchors: Vec<HashedAnchor>,
    _filter: Option<GateFilter>,
}

/// Where a new turn's anchors go until they are folded.
enum Pending<'a, 'b> {
    /// A `pending` row, folded when [`crate::store::FOLD_BATCH`] turns wait.
    Logged,
    /// Memory only: folded in this transaction, with the batch's own counts.
    FoldInTransaction(&'a EarlierInBatch<'b>),
}

fn append(
    view: &mut View<WriteSource<'_>>,
    id: u32,
    record: &mut SessionRecord,
    turn: PreparedTurn,
    pending: Pending<'_, '_>,
    spent: Option<&mut Spent>,
) -> Result<u32> {
    let turn_id = record.turn_count;
    let next = turn_id.checked_add(1).ok_or_else(|| Error::InvalidInput {
        what: "turn",
        reason: "the session has the maximum number of turns".into(),
    })?;
    let session = SessionRef { id, record };
    let (text, anchors, filter) = (&turn.user, &turn.user_anchors, &turn.gate_filter);
    let decision = match &pending {
        Pending::Logged => {
            pipeline::gate_hashed(view, &session, turn_id, text, anchors, filter, |hash| Ok(view.df(hash)?))?
        }
        Pending::FoldInTransaction(earlier) => {
            if earlier.gate_anchors.len() != anchors.len() {
                return Err(Error::InvalidInput {
                    what: "batch",
                    reason: "counts of another turn's anchors".into(),
                });
            }
            // The gate asks for its anchors' frequencies in their order, then maybe for its
            // fallback anchor's: the counts are read in step, without a search of the turn's
            // entries (which another thread wrote, so each probe missed the cache). A hash
            // out of step is counted from the batch.
            let mut in_step = anchors.iter().zip(earlier.gate_anchors);
            let df = |hash| {
                let count = match in_step.next() {
                    Some((anchor, &count)) if anchor.hash == hash && count != u32::MAX => u64::from(count),
                    _ => (earlier.other)(hash),
                };
                Ok(view.folded_df(hash)? + count)
            };
            pipeline::gate_hashed(view, &session, turn_id, text, anchors, filter, df)?
        }
    };
    let switch = decision.topic == Topic::Switch;
    let segment_start = if switch { turn_id } else { record.segment_start };
    let stored = TurnRecord {
        user: turn.user,
        assistant: turn.assistant,
        gate: GateRecord {
            switch,
            overlap: decision.overlap as f32,
            new_ratio: decision.new_ratio as f32,
            deictic: decision.deictic.map(str::to_string),
        },
        segment_start,
        time: turn.time,
        tools: turn.tools,
    };
    record.digest = next_digest(record.digest, &stored.user, &stored.assistant);
    if let Some(time) = &stored.time {
        if record.time_start.is_none() {
            record.time_start = Some(time.clone());
        }
        record.time_end = Some(time.clone());
    }
    match pending {
        Pending::Logged => view.put_turn(id, turn_id, &stored, turn.forward)?,
        Pending::FoldInTransaction(_) => view.put_turn_to_fold(id, turn_id, &stored, turn.forward)?,
    }
    record.turn_count = next;
    record.segment_start = segment_start;
    if let Some(spent) = spent {
        *spent =
            Spent { _record: Some(stored), _anchors: turn.user_anchors, _filter: Some(turn.gate_filter) };
    }
    Ok(turn_id)
}

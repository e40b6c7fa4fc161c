//! Adding turns to a session inside a write transaction: the one path every writer takes
//! (`Session::add_turn` one at a time, an import in batches through [`super::batch`]); the
//! two differ only in where a new turn's postings wait until they are folded ([`Postings`]).
//!
//! Anchor extraction is pure and done before the transaction (in parallel for a batch); inside
//! it, each turn is gated against the history before it, stored with its decision, and moves
//! the session's topic segment and digest on.

use crate::anchor::{self, HashedAnchor};
use crate::error::{Error, Result};
use crate::gate::Topic;
use crate::query::gate_view::{self, GateFilter, SessionRef};
use crate::store::records::{ForwardRecord, GateRecord, SessionRecord, ToolRecord, TurnRecord, next_digest};
use crate::store::turn_text::EncodedText;
use crate::store::{PendingRow, View, WriteSource};
use crate::types::anchor_hash;
use std::cmp::Ordering;

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
    /// The turn's text compressed for its row, if done ahead of the write (a bulk import
    /// compresses a batch in parallel).
    pub text: Option<EncodedText>,
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
        let forward = forward_record(&user_anchors, &assistant_anchors);
        let gate_filter = GateFilter::from_parts(framing, trigrams);
        PreparedTurn { user, assistant, time, tools, text: None, user_anchors, gate_filter, forward }
    }

    /// Bytes it holds on the heap: its texts, its anchors and its gate filter.
    pub fn heap_bytes(&self) -> usize {
        let tools: usize = (self.tools.iter())
            .map(|t| {
                t.name.capacity() + t.call_id.as_ref().map_or(0, String::capacity) + t.arguments.capacity()
            })
            .sum();
        self.user.capacity()
            + self.assistant.capacity()
            + self.time.as_ref().map_or(0, String::capacity)
            + self.tools.capacity() * size_of::<ToolRecord>()
            + tools
            + self.text.as_ref().map_or(0, EncodedText::heap_bytes)
            + self.user_anchors.capacity() * size_of::<HashedAnchor>()
            + self.gate_filter.heap_bytes()
            + self.forward.entries.capacity() * size_of::<(u64, u32, u32)>()
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

/// Appends `turn` to the session `(id, record)` and returns its turn id, with what the turn's
/// texts and anchor lists no longer need: a bulk writer frees them when no other thread is
/// allocating (see [`super::batch`]). The caller stores the updated `record` (once per batch)
/// and folds pending postings when it sees fit. Readers see the same index whichever
/// [`Postings`] the turn takes.
pub fn append_turn(
    view: &mut View<WriteSource<'_>>,
    id: u32,
    record: &mut SessionRecord,
    turn: PreparedTurn,
    postings: Postings<'_, '_>,
) -> Result<(u32, Spent)> {
    let turn_id = record.turn_count;
    let next = turn_id.checked_add(1).ok_or_else(|| Error::InvalidInput {
        what: "turn",
        reason: "the session has the maximum number of turns".into(),
    })?;
    let session = SessionRef { id, record };
    let (text, anchors, filter) = (&turn.user, &turn.user_anchors, &turn.gate_filter);
    let decision = match &postings {
        Postings::Logged => {
            gate_view::gate_hashed(view, &session, turn_id, text, anchors, filter, |hash| Ok(view.df(hash)?))?
        }
        Postings::FoldInTransaction(earlier) => {
            if earlier.gate_anchors.len() != anchors.len() {
                return Err(Error::bug("a turn of a batch was given the counts of another turn's anchors"));
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
            gate_view::gate_hashed(view, &session, turn_id, text, anchors, filter, df)?
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
    let row = match postings {
        Postings::Logged => PendingRow::Logged,
        Postings::FoldInTransaction(_) => PendingRow::FoldInTransaction,
    };
    view.put_turn(id, turn_id, &stored, turn.text, turn.forward, row)?;
    record.turn_count = next;
    record.segment_start = segment_start;
    let spent = Spent { _record: Some(stored), _anchors: turn.user_anchors, _filter: Some(turn.gate_filter) };
    Ok((turn_id, spent))
}

/// How many turns of a bulk batch, added before the one being added, have each anchor: the
/// part of a document frequency that the write view does not count for such turns (see
/// `PendingRow::FoldInTransaction`). The writer counts them as it groups the batch.
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

/// Where a new turn's postings wait until they are folded.
pub enum Postings<'a, 'b> {
    /// A `pending` row, folded when [`crate::store::FOLD_BATCH`] turns wait (one turn at a
    /// time: the document frequencies come from the view).
    Logged,
    /// Memory only: folded in this transaction, with the batch's own counts.
    FoldInTransaction(&'a EarlierInBatch<'b>),
}

/// Anchors of a new turn as a forward record: per-side tf merged by anchor hash.
pub fn forward_record(user: &[HashedAnchor], assistant: &[HashedAnchor]) -> ForwardRecord {
    // Both sides are sorted by hash: merge them. By index: the compiler keeps two indices in
    // registers, where two peekable iterators went through memory at every step.
    let mut entries: Vec<(u64, u32, u32)> = Vec::with_capacity(user.len() + assistant.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(u), Some(a)) = (user.get(i), assistant.get(j)) {
        entries.push(match u.hash.cmp(&a.hash) {
            Ordering::Less => (u.hash, u.tf, 0),
            Ordering::Greater => (a.hash, 0, a.tf),
            Ordering::Equal => (u.hash, u.tf, a.tf),
        });
        i += usize::from(u.hash <= a.hash);
        j += usize::from(a.hash <= u.hash);
    }
    entries.extend(user.get(i..).unwrap_or_default().iter().map(|u| (u.hash, u.tf, 0)));
    entries.extend(assistant.get(j..).unwrap_or_default().iter().map(|a| (a.hash, 0, a.tf)));
    let total = |side: &[HashedAnchor]| side.iter().map(|a| a.tf).sum();
    ForwardRecord { len_user: total(user), len_assistant: total(assistant), entries }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn forward_record_adds_up_both_sides() {
        let user = anchor::extract_hashed("Redis lock: redis SETNX with a TTL, 分布式锁", anchor_hash);
        let assistant =
            anchor::extract_hashed("a redis lock needs a lease; 分布式 lease renewal", anchor_hash);
        let mut expected: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
        for a in &user {
            expected.entry(a.hash).or_default().0 += a.tf;
        }
        for a in &assistant {
            expected.entry(a.hash).or_default().1 += a.tf;
        }
        let record = forward_record(&user, &assistant);
        let entries: Vec<(u64, u32, u32)> = expected.into_iter().map(|(h, (u, a))| (h, u, a)).collect();
        assert_eq!(record.entries, entries, "one entry per anchor of either side, ascending hash");
        let total = |side: &[HashedAnchor]| side.iter().map(|a| a.tf).sum::<u32>();
        assert_eq!((record.len_user, record.len_assistant), (total(&user), total(&assistant)));
        assert_eq!(forward_record(&[], &assistant).entries.len(), assistant.len());
    }
}

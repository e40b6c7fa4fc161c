//! A query's anchors in one session's history: their posting lists, which recall scores, and
//! how many of the session's turns hold each, which the gate's decisions weigh.
//!
//! In a long history the lists are 100k postings each, read on the rayon pool one anchor a
//! task, and a word's forms are merged list by list in one pass. The postings come without
//! their turns' side lengths: recall looks those up for the turns it scores only
//! ([`Lists::lengths`]).

use crate::error::Result;
use crate::query::anchors::{QueryAnchor, QueryAnchors};
use crate::query::gate_view::SessionRef;
use crate::store::{SessionLengths, Source, View};
use crate::types::Posting;
use rayon::prelude::*;

/// A query's postings in a session's history, and how many of the session's turns hold each
/// anchor.
pub struct Lists<'v, S: Source> {
    /// Per query anchor: its postings in the history (`0..as_of`), in turn order, with no side
    /// lengths (0).
    pub history: Vec<Vec<Posting>>,
    /// The side lengths of the session's turns.
    pub lengths: SessionLengths<'v, S::Norms>,
    /// Per query anchor: turns of the whole session that hold it (a query `as_of` an earlier
    /// turn has not seen the later ones).
    pub in_session: Vec<usize>,
}

/// The postings of each query anchor in `wanted` (others get an empty list) in the session's
/// turns `0..as_of`, folded and pending. An anchor's postings are those of all its forms, one
/// per turn.
pub fn read<'v, S: Source>(
    view: &'v View<S>,
    session: &SessionRef<'_>,
    query: &QueryAnchors,
    wanted: u64,
    as_of: u32,
) -> Result<Lists<'v, S>>
where
    View<S>: Sync,
{
    let rooms = rooms(view, session, query, wanted)?;
    let read = |(anchor, &room): (&QueryAnchor, &usize)| -> Result<(Vec<Posting>, usize)> {
        if room == 0 {
            return Ok((Vec::new(), 0));
        }
        let mut list = anchor_postings(view, session.id, anchor, room)?;
        let in_session = list.len();
        list.truncate(list.partition_point(|p| p.turn < as_of));
        Ok((list, in_session))
    };
    // One anchor a task when the lists are long (a long history's are 100k postings, each
    // decoded); short ones cost less than handing them out.
    let read: Vec<(Vec<Posting>, usize)> = if rooms.iter().sum::<usize>() >= MIN_PARALLEL_POSTINGS {
        query.anchors().par_iter().zip(&rooms).map(read).collect::<Result<_>>()?
    } else {
        query.anchors().iter().zip(&rooms).map(read).collect::<Result<_>>()?
    };
    let (history, in_session) = read.into_iter().unzip();
    let lengths = view.session_lengths(session.id, session.record.turn_count);
    Ok(Lists { history, lengths, in_session })
}

/// The most postings each list may hold (0 for an anchor not `wanted`): the session holds at
/// most one posting a turn of each form, and the index at most its document frequency.
fn rooms<S: Source>(
    view: &View<S>,
    session: &SessionRef<'_>,
    query: &QueryAnchors,
    wanted: u64,
) -> Result<Vec<usize>> {
    let mut rooms = Vec::with_capacity(query.len());
    for (i, anchor) in query.anchors().iter().enumerate() {
        let mut room = 0u64;
        if wanted & (1u64 << i) != 0 {
            for hash in anchor.hashes() {
                room += view.df(hash)?.min(u64::from(session.record.turn_count));
            }
        }
        rooms.push(usize::try_from(room).unwrap_or(usize::MAX));
    }
    Ok(rooms)
}

/// Postings, at most, below which a query's lists are read one after the other: tens of
/// microseconds of decoding, the cost of handing them to the pool's threads.
const MIN_PARALLEL_POSTINGS: usize = 16_384;

/// The anchor's postings in the whole session, folded and pending, its forms merged; `room`
/// (from [`rooms`]) sizes the first form's list at once, which growing step by step copies
/// twice over. Other forms are rarely in the session: each is read into a list of its own.
fn anchor_postings<S: Source>(
    view: &View<S>,
    session: u32,
    anchor: &QueryAnchor,
    room: usize,
) -> Result<Vec<Posting>> {
    let mut merged = Vec::with_capacity(room);
    let mut form = Vec::new();
    for (k, hash) in anchor.hashes().enumerate() {
        let list = if k == 0 { &mut merged } else { &mut form };
        list.clear();
        view.session_postings_without_lengths(hash, session, list)?;
        if k > 0 && !form.is_empty() {
            merged = if merged.is_empty() { std::mem::take(&mut form) } else { merge_forms(&merged, &form) };
        }
    }
    Ok(merged)
}

/// Two forms' postings (each in turn order) as one list: in turn order, one per turn, the
/// counts of a turn's forms added up (lengths, where a posting has them, are its turn's: the
/// same in each).
fn merge_forms(a: &[Posting], b: &[Posting]) -> Vec<Posting> {
    let mut merged = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (p, q) = (&a[i], &b[j]);
        if p.turn < q.turn {
            merged.push(*p);
            i += 1;
        } else if q.turn < p.turn {
            merged.push(*q);
            j += 1;
        } else {
            merged.push(Posting::new(
                p.turn,
                p.tf_user + q.tf_user,
                p.tf_assistant + q.tf_assistant,
                p.len_user.max(q.len_user),
                p.len_assistant.max(q.len_assistant),
            ));
            (i, j) = (i + 1, j + 1);
        }
    }
    merged.extend_from_slice(&a[i..]);
    merged.extend_from_slice(&b[j..]);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_merge_into_one_posting_a_turn() {
        let a = [Posting::new(1, 1, 0, 5, 0), Posting::new(4, 0, 2, 0, 9), Posting::new(9, 1, 1, 3, 4)];
        let b = [Posting::new(0, 0, 1, 0, 7), Posting::new(4, 1, 1, 6, 9), Posting::new(12, 2, 0, 8, 0)];
        let merged = merge_forms(&a, &b);
        let turns: Vec<u32> = merged.iter().map(|p| p.turn).collect();
        assert_eq!(turns, [0, 1, 4, 9, 12]);
        // Turn 4 holds both forms: counts added, each side's length the one that has it.
        assert_eq!(merged[2], Posting::new(4, 1, 3, 6, 9));
        assert_eq!(merge_forms(&b, &a), merged, "the order of forms does not matter");
        assert_eq!(merge_forms(&a, &[]), a);
    }
}

//! `PostingCursor`: one anchor's folded postings over every session, in block-key order, for
//! document-at-a-time evaluation.
//!
//! Posting keys lead with the anchor, then the session and turn of each row's first posting,
//! so one range scan reads an anchor's whole list in `(session, turn)` order. The cursor
//! decodes one row at a time, and [`PostingCursor::seek`] steps over every row whose next row
//! starts at or before the target without decoding it: a reader that only probes a long list
//! at a few turns decodes the rows it lands in; the range scan still visits the others.

use super::codec::{self, Posting};
use super::keys::{block_key, split_posting_key};
use super::norms::Norms;
use super::{Error, corrupt};

type Row<'v> = (redb::AccessGuard<'v, u128>, redb::AccessGuard<'v, &'static [u8]>);

/// A position in one anchor's folded postings.
pub struct PostingCursor<'v> {
    rows: redb::Range<'v, u128, &'static [u8]>,
    /// The row after the decoded one, read ahead: where the decoded one ends.
    next: Option<Row<'v>>,
    /// The decoded row: block keys and postings (empty once the list is exhausted).
    postings: Vec<(u64, Posting)>,
    /// Index of the current posting in `postings`.
    at: usize,
    norms: Norms<'v>,
}

impl<'v> PostingCursor<'v> {
    /// A cursor on the first posting of the range `rows` reads.
    pub(crate) fn new(
        mut rows: redb::Range<'v, u128, &'static [u8]>,
        norms: Norms<'v>,
    ) -> Result<Self, Error> {
        let next = rows.next().transpose()?;
        let mut cursor = PostingCursor { rows, next, postings: Vec::new(), at: 0, norms };
        cursor.load(0)?;
        Ok(cursor)
    }

    /// The current posting and its block key, or `None` when the list is exhausted.
    pub fn current(&self) -> Option<(u64, &Posting)> {
        self.postings.get(self.at).map(|(key, p)| (*key, p))
    }

    /// Moves to the next posting.
    pub fn advance(&mut self) -> Result<(), Error> {
        self.at += 1;
        if self.at >= self.postings.len() {
            self.load(0)?;
        }
        Ok(())
    }

    /// Moves to the first posting whose block key is `target` or later.
    pub fn seek(&mut self, target: u64) -> Result<(), Error> {
        let Some(&(last, _)) = self.postings.last() else { return Ok(()) };
        if last >= target {
            let start = self.at;
            self.at = start + self.postings[start..].partition_point(|(key, _)| *key < target);
            return Ok(());
        }
        self.load(target)
    }

    /// Decodes the next row that holds a posting at `target` or later, positioned on it;
    /// empties the cursor when there is none.
    fn load(&mut self, target: u64) -> Result<(), Error> {
        self.postings.clear();
        self.at = 0;
        while let Some((key, value)) = self.next.take() {
            self.next = self.rows.next().transpose()?;
            // Every posting of this row comes before the next row's first.
            if let Some((next_key, _)) = &self.next {
                let (_, session, turn) = split_posting_key(next_key.value());
                if block_key(session, turn) <= target {
                    continue;
                }
            }
            let (hash, session, turn) = split_posting_key(key.value());
            let postings = &mut self.postings;
            codec::decode_row(hash, (session, turn), value.value(), |s, p| {
                postings.push((block_key(s, p.turn), p))
            })
            .map_err(|e| corrupt(format!("posting row {session}/{turn}"), e))?;
            self.at = self.postings.partition_point(|(key, _)| *key < target);
            if self.at < self.postings.len() {
                for (key, p) in &mut self.postings[self.at..] {
                    self.norms.fill((*key >> 32) as u32, p)?;
                }
                return Ok(());
            }
            self.postings.clear();
            self.at = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// These tests write through the store, whose error this module's turns into.
    type Error = crate::store::Error;
    use super::super::grouped::NewBlock;
    use super::super::lists::AnchorWriter;
    use super::super::norms;
    use super::*;
    use crate::store::{Store, StoreOptions};

    /// An anchor's postings in sessions 0, 2 and 5 (rows of one session and rows spanning two)
    /// and another anchor's, written as the fold writes them.
    fn store() -> (tempfile::TempDir, Store, Vec<(u64, Posting)>) {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            cache_bytes: 1 << 20,
            busy_timeout: std::time::Duration::from_secs(1),
            quick_repair: false,
        };
        let store = Store::open(&dir.path().join("index.redb"), &options).unwrap();
        let mut expected = Vec::new();
        store
            .write(|view| -> Result<(), Error> {
                for (session, turns) in [(0u32, 700u32), (2, 300), (5, 129)] {
                    // Two turns of every three, so lists have gaps and chunks end on varied turns.
                    let list: Vec<Posting> = (0..turns)
                        .filter(|t| t % 3 != 1)
                        .map(|turn| Posting {
                            turn,
                            tf_user: 1,
                            tf_assistant: turn % 4,
                            len_user: 5,
                            len_assistant: if turn % 4 == 0 { 0 } else { 9 },
                        })
                        .collect();
                    let table = &mut view.tables.postings;
                    let mut writer = AnchorWriter::new(7);
                    writer.append(table, session, list.iter().copied())?;
                    writer.finish(table)?;
                    expected.extend(list.iter().map(|p| (block_key(session, p.turn), *p)));
                    let mut other = AnchorWriter::new(8);
                    other.append(table, session, [Posting { turn: 1, ..list[0] }])?;
                    other.finish(table)?;
                    let blocks: Vec<NewBlock> = (0..turns)
                        .map(|turn| NewBlock { key: block_key(session, turn), len_user: 5, len_assistant: 9 })
                        .collect();
                    norms::put(&mut view.tables.norms, &blocks)?;
                }
                Ok(())
            })
            .unwrap();
        (dir, store, expected)
    }

    #[test]
    fn advancing_reads_the_whole_list_in_order() {
        let (_dir, store, expected) = store();
        let view = store.read().unwrap();
        let mut cursor = view.anchor_cursor(7).unwrap();
        let mut got = Vec::new();
        while let Some((key, p)) = cursor.current() {
            got.push((key, *p));
            cursor.advance().unwrap();
        }
        assert_eq!(got, expected);
        assert!(view.anchor_cursor(9).unwrap().current().is_none(), "an anchor without postings");
    }

    #[test]
    fn seek_lands_on_the_first_posting_at_or_after_the_target() {
        let (_dir, store, expected) = store();
        let view = store.read().unwrap();
        // Targets inside chunks, on chunk ends and starts, between sessions, past the end, and
        // behind the cursor (which does not move it back).
        let mut targets: Vec<u64> = expected.iter().map(|(k, _)| *k).collect();
        targets.extend([block_key(1, 0), block_key(3, 7), block_key(5, 129), block_key(9, 0)]);
        for (step, &first) in targets.iter().enumerate().step_by(7) {
            let mut cursor = view.anchor_cursor(7).unwrap();
            for target in [first, first.saturating_sub(1), first + 1, targets[(step * 31) % targets.len()]] {
                let before = cursor.current().map(|(k, _)| k);
                cursor.seek(target).unwrap();
                let want = expected.iter().find(|(k, _)| *k >= target.max(before.unwrap_or(0)));
                let got = cursor.current().map(|(k, p)| (k, *p));
                assert_eq!(got, want.copied(), "seek {target:x} from {before:x?}");
                if got.is_none() {
                    break;
                }
            }
        }
    }
}

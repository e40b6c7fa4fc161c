//! `PostingCursor`: one anchor's folded postings over every session, in block-key order, for
//! document-at-a-time evaluation.
//!
//! Posting keys lead with the anchor, then the session, then the chunk number, so one range
//! scan reads an anchor's whole list in `(session, turn)` order. The cursor decodes one chunk
//! at a time, and [`PostingCursor::seek`] steps over every chunk whose header says it ends
//! before the target without decoding it: a reader that only probes a long list at a few turns
//! decodes the chunks it lands in; the range scan still visits the others, reading two
//! varints of each.

use super::error::{Error, corrupt};
use super::keys::{block_key, split_posting_key};
use super::postings::{self, Posting};

/// A position in one anchor's folded postings.
pub struct PostingCursor<'v> {
    chunks: redb::Range<'v, u128, &'static [u8]>,
    /// Session of the decoded chunk.
    session: u32,
    /// The decoded chunk (empty once the list is exhausted).
    postings: Vec<Posting>,
    /// Index of the current posting in `postings`.
    at: usize,
}

impl<'v> PostingCursor<'v> {
    /// A cursor on the first posting of the range `chunks` reads.
    pub(super) fn new(chunks: redb::Range<'v, u128, &'static [u8]>) -> Result<Self, Error> {
        let mut cursor = PostingCursor { chunks, session: 0, postings: Vec::new(), at: 0 };
        cursor.load(0)?;
        Ok(cursor)
    }

    /// The current posting and its block key, or `None` when the list is exhausted.
    pub fn current(&self) -> Option<(u64, &Posting)> {
        self.postings.get(self.at).map(|p| (block_key(self.session, p.turn), p))
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
        let Some(last) = self.postings.last() else { return Ok(()) };
        if block_key(self.session, last.turn) >= target {
            let start = self.at;
            self.at =
                start + self.postings[start..].partition_point(|p| block_key(self.session, p.turn) < target);
            return Ok(());
        }
        self.load(target)
    }

    /// Decodes the next chunk that holds a posting at `target` or later, positioned on it;
    /// empties the cursor when there is none.
    fn load(&mut self, target: u64) -> Result<(), Error> {
        self.postings.clear();
        self.at = 0;
        for entry in self.chunks.by_ref() {
            let (key, value) = entry?;
            let (_, session, chunk) = split_posting_key(key.value());
            let bytes = value.value();
            let what = || format!("posting chunk {chunk} of session {session}");
            let (_, last_turn) = postings::header(bytes).map_err(|e| corrupt(what(), e))?;
            if block_key(session, last_turn) < target {
                continue;
            }
            self.session = session;
            postings::decode(bytes, |p| self.postings.push(p)).map_err(|e| corrupt(what(), e))?;
            self.at = self.postings.partition_point(|p| block_key(session, p.turn) < target);
            if self.at < self.postings.len() {
                return Ok(());
            }
            // An empty chunk (never written, but not corrupt either): read on.
            self.postings.clear();
            self.at = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::posting_key;
    use super::super::{Store, StoreOptions};
    use super::*;

    /// An anchor's postings in sessions 0, 2 and 5 (4, 2 and 1 chunks) and another anchor's,
    /// written as the fold writes them.
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
                    for (no, chunk) in postings::encode_list(list.iter()).unwrap().iter().enumerate() {
                        view.tables.postings.insert(posting_key(7, session, no as u32), chunk.as_slice())?;
                    }
                    expected.extend(list.iter().map(|p| (block_key(session, p.turn), *p)));
                    let other = postings::encode_list([Posting { turn: 1, ..list[0] }].iter()).unwrap();
                    view.tables.postings.insert(posting_key(8, session, 0), other[0].as_slice())?;
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

//! `PostingCursor`: one anchor's folded postings over every session, in block-key order, for
//! document-at-a-time evaluation.
//!
//! Posting keys lead with the anchor, then the session, then the chunk number, so one range
//! scan reads an anchor's whole list in `(session, turn)` order. The cursor decodes one chunk
//! at a time, and [`PostingCursor::seek`] steps over every chunk whose header says it ends
//! before the target without decoding it: a reader that only probes a long list at a few turns
//! pays for the chunks it lands in, not for the list.

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
            // A header that overstates the chunk's last turn: read on rather than stop early.
            self.postings.clear();
            self.at = 0;
        }
        Ok(())
    }
}

//! Whole-table walkers for `verify` and `rebuild`, and the folded statistics they check.

use super::*;

/// The statistics of folded blocks as `meta` records them (what `verify` checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldedTotals {
    /// Folded blocks (N less the pending ones).
    pub blocks: u64,
    /// Sum of user-side lengths.
    pub len_user: u64,
    /// Sum of assistant-side lengths.
    pub len_assistant: u64,
    /// Postings in posting chunks.
    pub postings: u64,
}

impl<S: Source> View<S> {
    /// The folded statistics stored in `meta`.
    pub fn folded_totals(&self) -> FoldedTotals {
        FoldedTotals {
            blocks: self.meta.folded_blocks,
            len_user: self.meta.folded_len_user,
            len_assistant: self.meta.folded_len_assistant,
            postings: self.meta.folded_postings,
        }
    }

    /// Calls `f` with every `sessions` row: its id and the record, or why it does not decode.
    pub fn for_each_session_row(
        &self,
        mut f: impl FnMut(u32, Result<SessionRecord, Error>),
    ) -> Result<(), Error> {
        for entry in self.tables.sessions.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            f(id, super::super::records::decode_session_row(id, value.value(), true));
        }
        Ok(())
    }

    /// Calls `f` with every `session_names` row: name and id.
    pub fn for_each_name(&self, mut f: impl FnMut(&str, u32)) -> Result<(), Error> {
        for entry in self.tables.names.iter()? {
            let (key, value) = entry?;
            f(key.value(), value.value());
        }
        Ok(())
    }

    /// Calls `f` with every stored turn in block-key order: session, turn, and the record or
    /// why it does not decode. `f` returns false to stop. Not for a write view with turns
    /// waiting for their fold ([`PendingRow::FoldInTransaction`]): their rows are not stored yet.
    pub fn for_each_turn_row(
        &self,
        mut f: impl FnMut(u32, u32, Result<TurnRecord, Error>) -> bool,
    ) -> Result<(), Error> {
        debug_assert!(self.unlogged.is_empty(), "turn rows wait for their fold");
        for entry in self.tables.turns.iter()? {
            let (key, value) = entry?;
            let (session, turn) = split_block_key(key.value());
            let record = self.decode_turn(session, turn, value.value());
            if !f(session, turn, record) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with every posting row in key order: anchor hash, the row's key (session and
    /// turn of its first posting) and the encoded bytes ([`super::postings::decode_row`]). `f`
    /// returns false to stop.
    pub fn for_each_row(&self, mut f: impl FnMut(u64, (u32, u32), &[u8]) -> bool) -> Result<(), Error> {
        for entry in self.tables.postings.iter()? {
            let (key, value) = entry?;
            let (hash, session, turn) = keys::split_posting_key(key.value());
            if !f(hash, (session, turn), value.value()) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with every `terms` row: anchor hash and folded document frequency.
    pub fn for_each_term(&self, mut f: impl FnMut(u64, u64)) -> Result<(), Error> {
        for entry in self.tables.terms.iter()? {
            let (key, value) = entry?;
            f(key.value(), value.value());
        }
        Ok(())
    }
}

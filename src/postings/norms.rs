//! Side-length norms of folded turns, stored once a turn instead of in every posting.
//!
//! BM25 normalizes a side's term frequency by that side's length. A turn has ~120 postings, and
//! format 2 repeated its length norm in each (a byte a posting, a third of the postings table).
//! The `norms` table keeps two norm bytes a turn ([`super::codec::encode_norm`]: user, then
//! assistant), [`ROW_TURNS`] turns to a row keyed by the block key of the row's first turn, as
//! search engines keep field norms in a column beside their postings. A global search fills
//! each posting's lengths as it decodes the list ([`Norms::fill`]: one lookup a row). A
//! session's recall does not: it scores a block of turns at a time, the rows line up with its
//! blocks, and it looks up the lengths of the turns it scores only ([`SessionLengths`]), each
//! row read once by whichever thread first asks.

use super::codec::{Posting, decode_norm, encode_norm};
use super::grouped::NewBlock;
use super::keys::{block_key, split_block_key};
use super::{Error, corrupt};
use redb::{AccessGuard, ReadableTable, Table};
use std::sync::OnceLock;

/// Turns a row holds: 8 KiB of norms.
pub const ROW_TURNS: u32 = 4096;

/// The key of the row that holds `turn`'s norms.
pub fn row_key(session: u32, turn: u32) -> u64 {
    block_key(session, turn - turn % ROW_TURNS)
}

/// Stores the norms of `blocks` (each session's consecutive, in turn order), each written at
/// its turn's place in its row: a row grows as its session does.
pub(crate) fn put(table: &mut Table<'_, u64, &'static [u8]>, blocks: &[NewBlock]) -> Result<(), Error> {
    let mut row: Vec<u8> = Vec::new();
    for group in blocks.chunk_by(|a, b| row_of(a.key) == row_of(b.key)) {
        let key = row_of(group[0].key);
        row.clear();
        if let Some(stored) = table.get(key)? {
            row.extend_from_slice(stored.value());
        }
        for block in group {
            let at = 2 * (split_block_key(block.key).1 % ROW_TURNS) as usize;
            if row.len() < at + 2 {
                row.resize(at + 2, 0);
            }
            row[at] = encode_norm(block.len_user);
            row[at + 1] = encode_norm(block.len_assistant);
        }
        table.insert(key, row.as_slice())?;
    }
    Ok(())
}

fn row_of(key: u64) -> u64 {
    let (session, turn) = split_block_key(key);
    row_key(session, turn)
}

/// Reads norm rows by key: a `norms` table of a read snapshot or of a write transaction.
pub trait NormRows {
    /// The row stored under `key`, if any, read in place (no copy: a long session's list
    /// reads all its rows).
    fn row(&self, key: u64) -> Result<Option<AccessGuard<'_, &'static [u8]>>, Error>;
}

impl<T: ReadableTable<u64, &'static [u8]>> NormRows for T {
    fn row(&self, key: u64) -> Result<Option<AccessGuard<'_, &'static [u8]>>, Error> {
        Ok(self.get(key)?)
    }
}

/// The side lengths of one session's turns as norm bytes (two a turn: user, then assistant;
/// [`decode_norm`]), for recall to look up block by block as it scores: folded turns' from
/// the `norms` table, each row read once whichever thread asks first (a long history's rows
/// are 1 MiB), pending turns' from their forward records.
pub struct SessionLengths<'v, T: ?Sized> {
    table: &'v T,
    session: u32,
    /// By row index (turn / [`ROW_TURNS`]): the row's bytes once read.
    rows: Vec<OnceLock<Box<[u8]>>>,
    /// The first pending turn, and the norms of the turns from it on (a turn with no pending
    /// record, none of whose postings are pending either, has zeros).
    pending_start: u32,
    pending: Vec<u8>,
}

impl<'v, T: NormRows + ?Sized> SessionLengths<'v, T> {
    /// The lengths of `session`'s first `turns` turns: folded ones read from `table` when first
    /// asked for, pending ones given as `(turn, user length, assistant length)`, ascending. A
    /// session's pending turns follow each other; past a gap, or at `turns`, the rest are left
    /// out (a damaged index), and scoring a posting of theirs is an error.
    pub fn new(
        table: &'v T,
        session: u32,
        turns: u32,
        pending: impl IntoIterator<Item = (u32, u32, u32)>,
    ) -> Self {
        let rows = (0..turns.div_ceil(ROW_TURNS)).map(|_| OnceLock::new()).collect();
        let mut pending = pending.into_iter().peekable();
        let pending_start = pending.peek().map_or(u32::MAX, |p| p.0);
        let mut norms = Vec::new();
        for (next, (turn, user, assistant)) in (pending_start..turns).zip(pending) {
            if turn != next {
                break;
            }
            norms.extend([encode_norm(user), encode_norm(assistant)]);
        }
        SessionLengths { table, session, rows, pending_start, pending: norms }
    }

    /// The norms of the block of [`ROW_TURNS`] turns that starts at `low` (a multiple of it).
    pub fn block(&self, low: u32) -> Result<BlockNorms<'_>, Error> {
        debug_assert!(low.is_multiple_of(ROW_TURNS));
        let (folded, pending_from, pending) = if self.pending_start >= low.saturating_add(ROW_TURNS) {
            (self.row(low)?, ROW_TURNS as usize, &[][..])
        } else if self.pending_start <= low {
            let from = 2 * (low - self.pending_start) as usize;
            (&[][..], 0, self.pending.get(from..).unwrap_or(&[]))
        } else {
            (self.row(low)?, (self.pending_start - low) as usize, &self.pending[..])
        };
        Ok(BlockNorms { session: self.session, low, folded, pending_from, pending })
    }

    /// The row that starts at turn `start`, from the table the first time (empty if none is
    /// stored, or past the session's turns).
    fn row(&self, start: u32) -> Result<&[u8], Error> {
        let Some(slot) = self.rows.get((start / ROW_TURNS) as usize) else { return Ok(&[]) };
        if let Some(row) = slot.get() {
            return Ok(row);
        }
        let bytes =
            self.table.row(block_key(self.session, start))?.map_or_else(Box::default, |r| r.value().into());
        // Another thread may have read it meanwhile: the same bytes.
        Ok(slot.get_or_init(|| bytes))
    }
}

/// The norms of one block of [`ROW_TURNS`] turns ([`SessionLengths::block`]).
pub struct BlockNorms<'a> {
    session: u32,
    low: u32,
    /// From the block's first turn: its row in the `norms` table (folded turns).
    folded: &'a [u8],
    /// From the block's `pending_from`th turn on: the pending turns'.
    pending_from: usize,
    pending: &'a [u8],
}

impl<'a> BlockNorms<'a> {
    #[cfg(test)]
    /// Norms of turns `low..`, two bytes a turn: folded turns' from `folded` (from `low` on),
    /// pending turns' from `pending` (from `low + pending_from` on).
    pub fn new(session: u32, low: u32, folded: &'a [u8], pending_from: usize, pending: &'a [u8]) -> Self {
        BlockNorms { session, low, folded, pending_from, pending }
    }

    /// The norm bytes `(user, assistant)` of the block's `k`th turn, if the index has them.
    #[inline]
    pub fn get(&self, k: usize) -> Option<(u8, u8)> {
        let pair = match self.folded.get(2 * k..2 * k + 2) {
            Some(pair) => pair,
            None => {
                let at = 2 * k.checked_sub(self.pending_from)?;
                self.pending.get(at..at + 2)?
            }
        };
        Some((pair[0], pair[1]))
    }

    /// The turns of the block (offsets from its first) with no norms: past the folded row and
    /// before the pending turns, and past both. A sound index has norms for every turn up to
    /// its last; checking a block's postings against these before scoring any makes a damaged
    /// index an error whichever turns pruning passes over.
    pub fn gaps(&self) -> [std::ops::Range<usize>; 2] {
        let folded = self.folded.len() / 2;
        let pending_end = self.pending_from + self.pending.len() / 2;
        [folded..self.pending_from.max(folded), folded.max(pending_end)..usize::MAX]
    }

    #[cfg(test)]
    /// The side lengths `(user, assistant)` of the block's `k`th turn, if the index has them.
    pub fn lengths(&self, k: usize) -> Option<(u32, u32)> {
        self.get(k).map(|(user, assistant)| (decode_norm(user), decode_norm(assistant)))
    }

    /// The error for the block's `k`th turn when it has no lengths: a damaged index.
    #[cold]
    pub fn missing(&self, k: usize) -> Error {
        let turn = self.low as usize + k;
        corrupt(format!("norms of turn {}:{turn}", self.session), "a folded turn with no stored lengths")
    }
}

/// Fills postings' side lengths from the `norms` table, keeping the last row read.
pub struct Norms<'v> {
    table: &'v dyn NormRows,
    /// Session and first turn of the current row, which holds its turns up to `end`.
    session: u32,
    start: u32,
    end: u32,
    row: Vec<u8>,
}

impl<'v> Norms<'v> {
    /// A reader of `table`.
    pub fn new(table: &'v dyn NormRows) -> Self {
        Norms { table, session: 0, start: 0, end: 0, row: Vec::new() }
    }

    /// Sets the lengths of `posting`, a folded posting of `session`: a side without the anchor
    /// has length 0, as BM25 scores it 0 whatever its length.
    #[inline]
    pub fn fill(&mut self, session: u32, posting: &mut Posting) -> Result<(), Error> {
        let turn = posting.turn;
        if session != self.session || turn < self.start || turn >= self.end {
            self.load(session, turn)?;
        }
        let at = 2 * (turn - self.start) as usize;
        let (user, assistant) = (self.row[at], self.row[at + 1]);
        posting.len_user = if posting.tf_user == 0 { 0 } else { decode_norm(user) };
        posting.len_assistant = if posting.tf_assistant == 0 { 0 } else { decode_norm(assistant) };
        Ok(())
    }

    /// [`Norms::fill`] for each of `postings`, all of `session`.
    pub fn fill_all(&mut self, session: u32, postings: &mut [Posting]) -> Result<(), Error> {
        postings.iter_mut().try_for_each(|p| self.fill(session, p))
    }

    /// Reads the row that holds `turn`'s norms; an error if it does not.
    #[cold]
    fn load(&mut self, session: u32, turn: u32) -> Result<(), Error> {
        let start = turn - turn % ROW_TURNS;
        self.row.clear();
        if let Some(row) = self.table.row(block_key(session, start))? {
            self.row.extend_from_slice(row.value());
        }
        // Whole pairs only: a damaged row's odd byte is not read.
        let turns = (self.row.len() / 2) as u32;
        (self.session, self.start, self.end) = (session, start, start + turns);
        if turn >= self.end {
            self.end = start;
            return Err(corrupt(
                format!("norms of turn {session}:{turn}"),
                "a folded turn with no stored lengths",
            ));
        }
        Ok(())
    }
}

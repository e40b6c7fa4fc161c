//! Side-length norms of folded turns, stored once a turn instead of in every posting.
//!
//! BM25 normalizes a side's term frequency by that side's length. A turn has ~120 postings, and
//! format 2 repeated its length norm in each (a byte a posting, a third of the postings table).
//! The `norms` table keeps two norm bytes a turn ([`super::postings::encode_norm`]: user, then
//! assistant), [`ROW_TURNS`] turns to a row keyed by the block key of the row's first turn, as
//! search engines keep field norms in a column beside their postings. Decoding a posting list
//! fills each posting's lengths from the rows its turns fall in ([`Norms::fill`]): one lookup
//! a row, so a list of 500k turns costs ~120 lookups.

use super::error::{Error, corrupt};
use super::grouped::NewBlock;
use super::keys::{block_key, split_block_key};
use super::postings::{Posting, decode_norm, encode_norm};
use redb::{AccessGuard, ReadableTable, Table};

/// Turns a row holds: 8 KiB of norms.
pub const ROW_TURNS: u32 = 4096;

/// The key of the row that holds `turn`'s norms.
pub fn row_key(session: u32, turn: u32) -> u64 {
    block_key(session, turn - turn % ROW_TURNS)
}

/// Stores the norms of `blocks` (each session's consecutive, in turn order), each written at
/// its turn's place in its row: a row grows as its session does.
pub(super) fn put(table: &mut Table<'_, u64, &'static [u8]>, blocks: &[NewBlock]) -> Result<(), Error> {
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

/// Fills postings' side lengths from the `norms` table, keeping the last row read.
pub struct Norms<'v> {
    table: &'v dyn NormRows,
    /// Session and first turn of the row in `row`; `row` holds its turns up to `end`.
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
            return Err(corrupt(format!("norms of turn {session}:{turn}"), "a folded turn with no stored lengths"));
        }
        Ok(())
    }
}

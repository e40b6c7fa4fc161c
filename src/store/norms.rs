//! Side-length norms of folded turns, stored once a turn instead of in every posting.
//!
//! BM25 normalizes a side's term frequency by that side's length. A turn has ~120 postings, and
//! format 2 repeated its length norm in each (a byte a posting, a third of the postings table).
//! The `norms` table keeps two norm bytes a turn ([`super::postings::encode_norm`]: user, then
//! assistant), [`ROW_TURNS`] turns to a row keyed by the block key of the row's first turn, as
//! search engines keep field norms in a column beside their postings. Decoding a posting list
//! fills each posting's lengths from the rows its turns fall in ([`Norms::fill`]): one lookup
//! a row, so a list of 500k turns costs ~120 lookups. The lists of one query, read on several
//! threads, share the rows they read ([`SessionNorms`]) rather than each copying them.

use super::error::{Error, corrupt};
use super::grouped::NewBlock;
use super::keys::{block_key, split_block_key};
use super::postings::{Posting, decode_norm, encode_norm};
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

/// One session's norm rows, each read once and then shared: the lists of one query, decoded
/// on several threads, fill their postings from the same rows (a long history's are 1 MiB,
/// which each list copied for itself).
pub struct SessionNorms {
    session: u32,
    /// By row index (turn / [`ROW_TURNS`]): the row's bytes once read.
    rows: Vec<OnceLock<Box<[u8]>>>,
}

impl SessionNorms {
    /// Room for the rows of `session`'s first `turns` turns, each read when first asked for.
    pub fn new(session: u32, turns: u32) -> Self {
        let rows = (0..turns.div_ceil(ROW_TURNS)).map(|_| OnceLock::new()).collect();
        SessionNorms { session, rows }
    }

    /// The row that starts at turn `start`, from `table` the first time (empty if none is
    /// stored); `None` past the session's turns.
    fn row(&self, table: &dyn NormRows, start: u32) -> Result<Option<&[u8]>, Error> {
        let Some(slot) = self.rows.get((start / ROW_TURNS) as usize) else { return Ok(None) };
        if let Some(row) = slot.get() {
            return Ok(Some(row));
        }
        let bytes = table.row(block_key(self.session, start))?.map_or_else(Box::default, |r| r.value().into());
        // Another thread may have read it meanwhile: the same bytes.
        Ok(Some(slot.get_or_init(|| bytes)))
    }
}

/// Fills postings' side lengths from the `norms` table, keeping the last row read.
pub struct Norms<'v> {
    table: &'v dyn NormRows,
    /// Rows shared with other readers of the same session, read from there rather than copied.
    shared: Option<&'v SessionNorms>,
    /// Session and first turn of the current row, which holds its turns up to `end`: in
    /// `shared_row` if shared, in `row` if not.
    session: u32,
    start: u32,
    end: u32,
    row: Vec<u8>,
    shared_row: Option<&'v [u8]>,
}

impl<'v> Norms<'v> {
    /// A reader of `table`.
    pub fn new(table: &'v dyn NormRows) -> Self {
        Norms { table, shared: None, session: 0, start: 0, end: 0, row: Vec::new(), shared_row: None }
    }

    /// A reader of `table` that takes its session's rows from `shared`.
    pub fn sharing(table: &'v dyn NormRows, shared: &'v SessionNorms) -> Self {
        Norms { shared: Some(shared), ..Norms::new(table) }
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
        let row = self.shared_row.unwrap_or(&self.row);
        let (user, assistant) = (row[at], row[at + 1]);
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
        self.shared_row = None;
        if let Some(shared) = self.shared.filter(|s| s.session == session)
            && let Some(row) = shared.row(self.table, start)?
        {
            self.shared_row = Some(row);
        } else if let Some(row) = self.table.row(block_key(session, start))? {
            self.row.extend_from_slice(row.value());
        }
        // Whole pairs only: a damaged row's odd byte is not read.
        let turns = (self.shared_row.unwrap_or(&self.row).len() / 2) as u32;
        (self.session, self.start, self.end) = (session, start, start + turns);
        if turn >= self.end {
            self.end = start;
            return Err(corrupt(format!("norms of turn {session}:{turn}"), "a folded turn with no stored lengths"));
        }
        Ok(())
    }
}

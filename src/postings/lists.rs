//! Writing one anchor's postings into the `postings` table, row by row.
//!
//! A row holds up to [`ROW_CAPACITY`] postings of one anchor, from one session or several
//! consecutive ones ([`super::codec::encode_row`]), keyed by its first posting
//! `(anchor, session, turn)`. Most lists of an anchor in a session are a few postings long; one
//! row per list cost a 16-byte key and redb's entry overhead for ~9 postings (format 2). Rows
//! that span sessions hold ~128.
//!
//! Every writer (the fold, the merge of an import's runs, packing, forgetting) goes through
//! [`AnchorWriter`], which appends each session's new postings after the ones stored.

use super::codec::{self, Posting, ROW_CAPACITY};
use super::keys;
use super::{Error, corrupt};
use redb::{ReadableTable, Table};

/// The `postings` table of a write transaction.
pub(crate) type PostingsTable<'t> = Table<'t, u128, &'static [u8]>;

/// Appends postings to one anchor's rows, session by session in ascending order.
pub(crate) struct AnchorWriter {
    hash: u64,
    /// The open row, not stored yet: `(session, posting)` in order. Its key is its first
    /// posting's (a stored row it continues keeps its key: appends never come before it).
    open: Vec<(u32, Posting)>,
    /// Whether a stored row was looked for since the last flush.
    loaded: bool,
    /// Key of the first stored row after the open one (`None`: none): a session whose postings
    /// all come before it continues the open row without a lookup.
    next_stored: Option<u128>,
    /// Rows stored.
    rows: u64,
    encoded: Vec<u8>,
}

impl AnchorWriter {
    /// A writer for the anchor `hash`.
    pub fn new(hash: u64) -> Self {
        AnchorWriter {
            hash,
            open: Vec::new(),
            loaded: false,
            next_stored: None,
            rows: 0,
            encoded: Vec::new(),
        }
    }

    /// Appends `list` (ascending turns, each after every stored turn of `session` for this
    /// anchor) to the anchor's postings in `session`. Sessions come in ascending order
    /// between [`finish`](Self::finish)es.
    pub fn append(
        &mut self,
        table: &mut PostingsTable<'_>,
        session: u32,
        list: impl IntoIterator<Item = Posting>,
    ) -> Result<(), Error> {
        let end = keys::posting_key(self.hash, session, u32::MAX);
        let continues = self.loaded
            && self.next_stored.is_none_or(|next| next > end)
            && self.open.last().is_none_or(|&(s, _)| s <= session);
        if !continues {
            self.flush(table)?;
            self.load(table, session)?;
        }
        for posting in list {
            if self.open.last().is_some_and(|&(s, p)| (s, p.turn) >= (session, posting.turn)) {
                // Rejects out-of-order input (STYLE §5).
                return Err(corrupt(
                    format!("posting list {:x}/{session}", self.hash),
                    format!("turn {} appended after a later one", posting.turn),
                ));
            }
            self.open.push((session, posting));
            if self.open.len() > ROW_CAPACITY {
                self.store(table, ROW_CAPACITY)?;
            }
        }
        Ok(())
    }

    /// Stores the open row. The writer can go on (a lookup comes first).
    pub fn finish(&mut self, table: &mut PostingsTable<'_>) -> Result<(), Error> {
        self.flush(table)
    }

    /// The anchor written.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Rows stored so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn flush(&mut self, table: &mut PostingsTable<'_>) -> Result<(), Error> {
        while !self.open.is_empty() {
            self.store(table, ROW_CAPACITY)?;
        }
        self.loaded = false;
        Ok(())
    }

    /// Opens the stored row that `session`'s postings go after: the last row that starts at
    /// or before the session's end. A row that also holds later sessions is split there, its
    /// later part stored as a row of its own.
    fn load(&mut self, table: &mut PostingsTable<'_>, session: u32) -> Result<(), Error> {
        let end = keys::posting_key(self.hash, session, u32::MAX);
        let start = keys::posting_key(self.hash, 0, 0);
        let found = match table.range(start..=end)?.next_back() {
            Some(entry) => {
                let (key, value) = entry?;
                Some((key.value(), value.value().to_vec()))
            }
            None => None,
        };
        self.next_stored = None;
        if let Some((key, row)) = found {
            let (_, s, t) = keys::split_posting_key(key);
            codec::decode_row(self.hash, (s, t), &row, |s, p| self.open.push((s, p)))
                .map_err(|e| corrupt(format!("posting row {:x}/{s}/{t}", self.hash), e))?;
            let later = self.open.partition_point(|&(s, _)| s <= session);
            if later < self.open.len() {
                let rest: Vec<(u32, Posting)> = self.open.split_off(later);
                self.next_stored = Some(self.insert(table, &rest)?);
            }
        }
        if self.next_stored.is_none() {
            let anchor_end = keys::posting_key(self.hash, u32::MAX, u32::MAX);
            if end < anchor_end
                && let Some(entry) = table.range(end + 1..=anchor_end)?.next()
            {
                self.next_stored = Some(entry?.0.value());
            }
        }
        self.loaded = true;
        Ok(())
    }

    /// Stores the first `count` postings of the open row (or all, if fewer) as a row.
    fn store(&mut self, table: &mut PostingsTable<'_>, count: usize) -> Result<(), Error> {
        let count = count.min(self.open.len());
        let row: Vec<(u32, Posting)> = self.open.drain(..count).collect();
        self.insert(table, &row)?;
        Ok(())
    }

    /// Stores `entries` as one row; returns its key.
    fn insert(&mut self, table: &mut PostingsTable<'_>, entries: &[(u32, Posting)]) -> Result<u128, Error> {
        let (session, first) = entries[0];
        let key = keys::posting_key(self.hash, session, first.turn);
        self.encoded.clear();
        codec::encode_row(self.hash, entries, &mut self.encoded);
        table.insert(key, self.encoded.as_slice())?;
        self.rows += 1;
        Ok(key)
    }
}

/// Stores `entries` (`(session, posting)` in order, none stored yet for this anchor in their
/// span) as full rows of the anchor `hash`; returns the number of rows.
pub(crate) fn store_rows(
    table: &mut PostingsTable<'_>,
    hash: u64,
    entries: &[(u32, Posting)],
) -> Result<u64, Error> {
    if !entries.is_sorted_by(|a, b| (a.0, a.1.turn) < (b.0, b.1.turn)) {
        return Err(corrupt(format!("posting rows of {hash:x}"), "postings out of order"));
    }
    let mut writer = AnchorWriter::new(hash);
    for row in entries.chunks(ROW_CAPACITY) {
        writer.insert(table, row)?;
    }
    Ok(writer.rows())
}

//! Writing one anchor's posting list in one session into the `postings` table, chunk by chunk.
//!
//! The fold (appending a batch to each list's tail) and the packing of loose chunks write
//! through [`ListWriter`], which fills chunks to [`super::postings::CHUNK_CAPACITY`] and numbers them
//! from 0 without gaps. (The merge of an import's runs stores the runs' chunks as they are.)

use super::error::{Error, corrupt};
use super::keys;
use super::postings::{ChunkBuilder, Posting};
use redb::{ReadableTable, Table};

/// The `postings` table of a write transaction.
pub(super) type PostingsTable<'t> = Table<'t, u128, &'static [u8]>;

/// Appends postings, in turn order, to one list.
pub(super) struct ListWriter {
    hash: u64,
    session: u32,
    chunk_no: u32,
    chunk: ChunkBuilder,
}

impl ListWriter {
    /// A list with no chunk yet (the caller knows the session has none for this anchor).
    pub fn new(hash: u64, session: u32) -> Self {
        ListWriter { hash, session, chunk_no: 0, chunk: ChunkBuilder::new() }
    }

    /// Continues the list's stored tail chunk, or starts the list if it has none.
    pub fn continuing(table: &PostingsTable<'_>, hash: u64, session: u32) -> Result<Self, Error> {
        let Some(entry) = table.range(keys::list_range(hash, session))?.next_back() else {
            return Ok(Self::new(hash, session));
        };
        let (key, tail) = entry?;
        let (_, _, chunk_no) = keys::split_posting_key(key.value());
        let chunk = ChunkBuilder::from_chunk(tail.value())
            .map_err(|e| corrupt(format!("posting chunk {hash:x}/{session}/{chunk_no}"), e))?;
        Ok(ListWriter { hash, session, chunk_no, chunk })
    }

    /// Appends a posting after every one in the list, storing the chunk it fills.
    pub fn push(&mut self, table: &mut PostingsTable<'_>, posting: &Posting) -> Result<(), Error> {
        if self.chunk.is_full() {
            self.store(table)?;
            self.chunk_no += 1;
            self.chunk = ChunkBuilder::new();
        }
        // Rejects out-of-order input (STYLE §5).
        self.chunk.push(posting).map_err(|e| {
            corrupt(format!("posting chunk {:x}/{}/{}", self.hash, self.session, self.chunk_no), e)
        })
    }

    /// Chunks the list has once finished (counting the stored ones it continues).
    pub fn chunks(&self) -> u64 {
        u64::from(self.chunk_no) + u64::from(!self.chunk.is_empty())
    }

    /// Stores the last chunk, if the list has any posting.
    pub fn finish(self, table: &mut PostingsTable<'_>) -> Result<(), Error> {
        if self.chunk.is_empty() { Ok(()) } else { self.store(table) }
    }

    fn store(&self, table: &mut PostingsTable<'_>) -> Result<(), Error> {
        let key = keys::posting_key(self.hash, self.session, self.chunk_no);
        table.insert(key, self.chunk.finish().as_slice())?;
        Ok(())
    }
}

//! `compact`: folds pending turns, packs posting chunks, and gives free pages back.

use crate::error::Result;
use crate::gatekeeper::Gatekeeper;
use serde::Serialize;

/// What [`Gatekeeper::compact`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CompactReport {
    /// File size before, in bytes.
    pub bytes_before: u64,
    /// File size after, in bytes.
    pub bytes_after: u64,
    /// Pending turns folded into postings first.
    pub folded_turns: u64,
    /// Posting lists whose chunks were packed.
    pub lists_packed: u64,
    /// Chunks of those lists before packing.
    pub chunks_before: u64,
    /// Chunks of those lists after packing.
    pub chunks_after: u64,
}

impl Gatekeeper {
    /// Folds pending turns, rewrites posting lists whose chunks are not full (full chunks,
    /// numbered from 0), then compacts the file so free pages (after `forget`) are returned
    /// to the file system. Answers are the same before and after.
    ///
    /// # Errors
    /// Store errors; the engine's compaction fails if another handle has a transaction open.
    pub fn compact(&mut self) -> Result<CompactReport> {
        let bytes_before = self.store().file_size()?;
        let (folded_turns, (lists_packed, chunks_before, chunks_after)) =
            self.store().write(|view| -> Result<_> {
                let folded = view.pending().len() as u64;
                view.fold()?;
                Ok((folded, view.pack_postings()?))
            })?;
        // redb compacts in steps; a few calls take the free pages left after a big delete.
        for _ in 0..8 {
            if !self.store_mut().compact()? {
                break;
            }
        }
        let bytes_after = self.store().file_size()?;
        log::info!("compacted {} from {bytes_before} to {bytes_after} bytes", self.path().display());
        Ok(CompactReport {
            bytes_before,
            bytes_after,
            folded_turns,
            lists_packed,
            chunks_before,
            chunks_after,
        })
    }
}

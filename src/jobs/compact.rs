//! `compact`: folds pending turns, packs posting chunks, and gives free pages back.

use super::progress_due;
use crate::error::Result;
use crate::index::Index;
use serde::Serialize;

/// What [`crate::Gatekeeper::compact`] did.
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
    /// Posting chunks rewritten in key order (all of them).
    pub chunks_rewritten: u64,
}

/// A phase of [`crate::Gatekeeper::compact`], in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CompactPhase {
    /// Pending turns folded into postings, in one step: `done` is 0, then all of them.
    Folding,
    /// Posting lists whose chunks are not full rewritten as full chunks.
    Packing,
    /// Every posting chunk copied into a new table in key order, which replaces the old one
    /// (counts chunks).
    Ordering,
    /// The engine's compaction of the file. It reports nothing while it works, so this phase
    /// is reported once, as it starts, with `done` and `total` 0.
    Compacting,
}

impl CompactPhase {
    /// What the phase does, for a progress display.
    pub fn name(self) -> &'static str {
        match self {
            CompactPhase::Folding => "folding pending turns",
            CompactPhase::Packing => "packing posting lists",
            CompactPhase::Ordering => "rewriting posting chunks in key order",
            CompactPhase::Compacting => "compacting the file",
        }
    }
}

/// How far [`crate::Gatekeeper::compact_with_progress`] has got. Folding counts pending turns,
/// packing counts posting lists to rewrite (found by one read pass before the first report);
/// each is reported at its start (`done` 0), every 1,024 lists, and at its end
/// (`done == total`; a phase with nothing to do only at its start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactProgress {
    /// The phase running.
    pub phase: CompactPhase,
    /// Items of the phase done so far.
    pub done: u64,
    /// Items the phase has to do.
    pub total: u64,
}

/// Share of the file on disk that is not data, at which [`crate::Gatekeeper::compact_if_sparse`]
/// compacts: a third of the file after a long import (1M generated turns), 4% after an import
/// of 100k turns, whose runs are merged once.
const SPARSE_SHARE: f64 = 0.25;

/// Bytes a compaction must give back for `ctxgate import` to run one: a small index is mostly
/// redb's own pages, sparse by share but with nothing a user would miss, and a compaction
/// needs the index to itself. Its long imports reach this (1M generated turns leave 145 MiB).
pub const AUTO_COMPACT_MIN_BYTES: u64 = 32 << 20;

/// [`crate::Gatekeeper::compact`].
pub(crate) fn compact(index: &mut Index) -> Result<CompactReport> {
    compact_with_progress(index, &mut |_| {})
}

/// [`crate::Gatekeeper::compact_with_progress`].
pub(crate) fn compact_with_progress(
    index: &mut Index,
    progress: &mut dyn FnMut(CompactProgress),
) -> Result<CompactReport> {
    index.check_writable()?;
    let lock = crate::store::IndexLock::exclusive(index.store().path(), index.options().busy_timeout)?;
    compact_locked(index, &lock, progress)
}

/// [`crate::Gatekeeper::compact_if_sparse`].
pub(crate) fn compact_if_sparse(
    index: &mut Index,
    min_bytes: u64,
    progress: &mut dyn FnMut(CompactProgress),
) -> Result<Option<CompactReport>> {
    index.check_writable()?;
    let (on_disk, data) = index.store().disk_and_data_bytes()?;
    log::debug!("{}: {on_disk} bytes on disk, {data} of data", index.store().path().display());
    let sparse = on_disk.saturating_sub(data);
    if sparse < min_bytes || (sparse as f64) < SPARSE_SHARE * on_disk as f64 {
        return Ok(None);
    }
    let Some(lock) = crate::store::IndexLock::try_exclusive(index.store().path())? else { return Ok(None) };
    match compact_locked(index, &lock, progress) {
        Ok(report) => Ok(Some(report)),
        Err(e) if e.kind() == crate::ErrorKind::Busy => {
            log::info!("not compacted: another process is using {}", index.store().path().display());
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The work of [`crate::Gatekeeper::compact_with_progress`], under the job lock `lock`.
pub(crate) fn compact_locked(
    index: &mut Index,
    lock: &crate::store::IndexLock,
    progress: &mut dyn FnMut(CompactProgress),
) -> Result<CompactReport> {
    // Holding the lock, runs left are an interrupted import's: their postings go first.
    index.store().merge_interrupted_runs(Some(lock))?;
    let mut report_progress = |phase, done, total| progress(CompactProgress { phase, done, total });
    let bytes_before = index.store().file_size()?;
    let (folded_turns, (lists_packed, chunks_before, chunks_after)) =
        index.store().write(|view| -> Result<_> {
            let folded = view.pending().len() as u64;
            report_progress(CompactPhase::Folding, 0, folded);
            view.fold()?;
            if folded > 0 {
                report_progress(CompactPhase::Folding, folded, folded);
            }
            let packed = view.pack_postings_with_progress(&mut |done, total| {
                if done == total || progress_due(done, total) {
                    report_progress(CompactPhase::Packing, done, total);
                }
            })?;
            Ok((folded, packed))
        })?;
    let chunks_rewritten = index.store().rewrite_postings_in_key_order(&mut |done, total| {
        if done == total || progress_due(done, total) {
            report_progress(CompactPhase::Ordering, done, total);
        }
    })?;
    report_progress(CompactPhase::Compacting, 0, 0);
    // redb compacts in steps; a few calls take the free pages left after a big delete.
    let timeout = index.options().busy_timeout;
    for _ in 0..8 {
        if !index.store_mut().compact(timeout)? {
            break;
        }
    }
    let bytes_after = index.store().file_size()?;
    log::info!("compacted {} from {bytes_before} to {bytes_after} bytes", index.store().path().display());
    Ok(CompactReport {
        bytes_before,
        bytes_after,
        folded_turns,
        lists_packed,
        chunks_before,
        chunks_after,
        chunks_rewritten,
    })
}

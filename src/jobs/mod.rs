//! Offline maintenance jobs over the whole index: [`verify`](crate::Gatekeeper::verify),
//! [`forget`](crate::Gatekeeper::forget_session), [`compact`](crate::Gatekeeper::compact) and
//! [`rebuild`].
//!
//! A crash leaves the index as it was before or after each of a job's transactions, never
//! between: `forget` is one transaction, `compact` a few and the engine's compaction, and
//! `rebuild` writes a new file that replaces the old one only when complete. `rebuild` and
//! `compact` are exclusive per index (`INDEX.lock`).
//! The jobs re-derive a turn's anchors from its stored text exactly as adding it did.

pub(crate) mod compact;
pub(crate) mod forget;
mod rebuild;
pub(crate) mod secrets;
pub(crate) mod verify;

pub use compact::{AUTO_COMPACT_MIN_BYTES, CompactPhase, CompactProgress, CompactReport};
pub use forget::ForgetReport;
pub use rebuild::{
    DroppedRecord, RebuildProgress, RebuildReport, rebuild, rebuild_scratch_files, rebuild_with_progress,
    redact_with_progress,
};
pub use secrets::SecretFinding;
pub use verify::{MAX_PROBLEMS, Problem, VerifyPhase, VerifyProgress, VerifyReport};

use crate::anchor;

use crate::store::records::ForwardRecord;
use crate::types::anchor_hash;

/// Items (turns, chunks, lists, ...) between two progress reports within a phase: often
/// enough for a display to move, rarely enough that reporting costs nothing next to the work.
pub(crate) const PROGRESS_EVERY: u64 = 1024;

/// Whether `done` items into a phase of `total` is due a report. A phase's start and end are
/// reported apart from this, so it is false at `total`.
pub(crate) fn progress_due(done: u64, total: u64) -> bool {
    done.is_multiple_of(PROGRESS_EVERY) && done < total
}

/// The anchors of a turn, derived from its text as the write path does when the turn is added.
pub(crate) fn derive_forward(user: &str, assistant: &str) -> ForwardRecord {
    let user_anchors = anchor::extract_hashed(user, anchor_hash);
    let assistant_anchors = anchor::extract_hashed(assistant, anchor_hash);
    crate::write::turn::forward_record(&user_anchors, &assistant_anchors)
}

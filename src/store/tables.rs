//! The table definitions. The layout of each key and value is in the `store` module doc.

use redb::TableDefinition;

/// `"meta"` -> postcard [`super::records::MetaRecord`].
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Session name -> session id.
pub const SESSION_NAMES: TableDefinition<&str, u32> = TableDefinition::new("session_names");
/// Session id -> postcard [`super::records::SessionRecord`].
pub const SESSIONS: TableDefinition<u32, &[u8]> = TableDefinition::new("sessions");
/// Block key -> a turn's row ([`super::turn_text`]): what the gate said, then the compressed text.
pub const TURNS: TableDefinition<u64, &[u8]> = TableDefinition::new("turns");
/// Dictionary id -> the hash of a zstd dictionary trained on turn text, then its bytes
/// ([`super::turn_text::TextDictionary::row`]). Never changed once written: rows name the
/// dictionary they were compressed with.
pub const TEXT_DICTIONARIES: TableDefinition<u32, &[u8]> = TableDefinition::new("text_dictionaries");
/// Block key -> postcard [`super::records::ForwardRecord`] of a turn whose postings are not
/// folded yet (the durable delta log).
pub const PENDING: TableDefinition<u64, &[u8]> = TableDefinition::new("pending");
/// Anchor hash -> document frequency over folded blocks.
pub const TERMS: TableDefinition<u64, u64> = TableDefinition::new("terms");
/// Posting key -> posting chunk ([`super::postings`]).
pub const POSTINGS: TableDefinition<u128, &[u8]> = TableDefinition::new("postings");
/// Block key of a turn whose number is a multiple of [`super::norms::ROW_TURNS`] -> two norm
/// bytes (user, assistant side length) for each folded turn from there on ([`super::norms`]).
pub const NORMS: TableDefinition<u64, &[u8]> = TableDefinition::new("norms");
/// Scratch copy of [`POSTINGS`] while [`super::Store::rewrite_postings_in_key_order`] runs;
/// renamed to `postings` in the same transaction, so a committed file never holds it.
pub const POSTINGS_REWRITE: TableDefinition<u128, &[u8]> = TableDefinition::new("postings_rewrite");
pub(crate) use crate::postings::runs::RUNS;
/// Run id -> `(offset, length, checksum)` of an import batch's run in the index's run file
/// ([`super::run_file`]). Empty outside an import.
pub const RUN_FILES: TableDefinition<u32, (u64, u64, u64)> = TableDefinition::new("posting_run_files");
/// Evidence id -> postcard [`super::evidence::EvidenceRecord`].
pub const EVIDENCE: TableDefinition<u32, &[u8]> = TableDefinition::new("evidence");
/// Evidence ref -> evidence id.
pub const EVIDENCE_REFS: TableDefinition<&str, u32> = TableDefinition::new("evidence_refs");
/// `(anchor hash, evidence id)` -> (term frequency in that document, its length in anchors).
pub const EVIDENCE_POSTINGS: TableDefinition<(u64, u32), (u32, u32)> =
    TableDefinition::new("evidence_postings");
/// Anchor hash -> number of evidence documents holding it.
pub const EVIDENCE_TERMS: TableDefinition<u64, u32> = TableDefinition::new("evidence_terms");
/// Log file (its absolute path's bytes) -> where its next import may start reading
/// (`crate::write::resume`, which owns the value's encoding). A cache: a missing or stale row
/// only means the file is read whole. Created by the first write that needs it.
pub const IMPORT_CHECKPOINTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("import_checkpoints");

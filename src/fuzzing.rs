//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`; not part of the API).
//!
//! Thin wrappers over the crate's internal parsers and decoders, each taking the bytes or the
//! text a file or the index could hold. They return what the targets check: a decoded value
//! re-encoded, a parse result. The public parsers (`anchor`, `evidence`, `import::detect`) are
//! fuzzed through the public API directly.

use crate::import::turns::{ParsedFile, ParsedTurn};
use crate::import::{CanonicalLine, Format, ToolOutput};

use crate::postings::codec::{self, ChunkBuilder};
use crate::store::evidence::{EvidenceMeta, EvidenceRecord};
use crate::store::records::{ForwardRecord, MetaRecord, SessionRecord, TurnRecord};
use crate::store::turn_text;
use crate::types::Posting;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// The path named in parse errors.
const PATH: &str = "fuzz-input";

/// Parses `text` (a whole file) as `format` with that format's parser, as `ctxgate import`
/// does for every format but JSONL (which it streams, see [`jsonl_check_line`]).
pub fn import_parse(
    format: Format,
    text: &str,
    skip_invalid: bool,
) -> Result<ParsedFile, crate::import::Error> {
    crate::import::formats::parse(format, Path::new(PATH), text, skip_invalid)
}

/// The tool results import stores as evidence for `turns` of `session`.
pub fn tool_outputs(session: &str, first_turn: u32, turns: &[ParsedTurn]) -> Vec<ToolOutput> {
    crate::import::tool_evidence::outputs_of(session, first_turn, turns)
}

/// Checks one canonical JSONL line as the streaming import does: `(session, turn, user,
/// assistant)` of the line, or the error message.
pub fn jsonl_check_line(raw: &str) -> Result<(String, Option<u64>, String, String), String> {
    crate::import::jsonl::check_line(Path::new(PATH), 1, raw)
        .map(|l| (l.session.into_owned(), l.turn, l.user.into_owned(), l.assistant.into_owned()))
        .map_err(|e| e.to_string())
}

/// Parses one canonical JSONL line as the whole-file parser does.
pub fn jsonl_parse_line(raw: &str) -> Result<CanonicalLine, String> {
    crate::import::jsonl::parse_line(Path::new(PATH), 1, raw).map_err(|e| e.to_string())
}

/// Decodes a posting chunk (the byte offset of the damage on error).
pub fn decode_postings(bytes: &[u8]) -> Result<Vec<Posting>, usize> {
    let mut out = Vec::new();
    postings::decode(bytes, |p| out.push(p)).map_err(|e| e.offset)?;
    Ok(out)
}

/// A chunk's header `(count, last_turn)`, as cursors read it to step over the chunk.
pub fn posting_header(bytes: &[u8]) -> Result<(u32, u32), usize> {
    postings::header(bytes).map_err(|e| e.offset)
}

/// Appends `postings` to the chunk `chunk` (empty: a new chunk) as a fold does, and returns
/// the encoded chunk.
pub fn extend_chunk(chunk: &[u8], postings: &[Posting]) -> Result<Vec<u8>, usize> {
    let mut builder = if chunk.is_empty() {
        ChunkBuilder::new()
    } else {
        ChunkBuilder::from_chunk(chunk).map_err(|e| e.offset)?
    };
    for p in postings {
        builder.push(p).map_err(|e| e.offset)?;
    }
    let bytes = builder.finish();
    debug_assert_eq!(bytes.len(), builder.encoded_len());
    Ok(bytes)
}

/// The length a side length is stored as (one-byte norm, decoded).
pub fn quantize_len(len: u32) -> u32 {
    postings::quantize_len(len)
}

/// A record type of the index (`store::records`, `store::evidence`), stored as postcard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// The META table's record.
    Meta,
    /// A session.
    Session,
    /// A stored turn.
    Turn,
    /// A turn's forward index entry (its anchors).
    Forward,
    /// The evidence totals.
    EvidenceMeta,
    /// One evidence document.
    Evidence,
}

impl Record {
    /// Every record type.
    pub const ALL: [Record; 6] = [
        Record::Meta,
        Record::Session,
        Record::Turn,
        Record::Forward,
        Record::EvidenceMeta,
        Record::Evidence,
    ];
}

/// Decodes `bytes` as a record of type `record` as the index reads it, and returns the
/// record encoded again (`None` if the bytes are not such a record).
pub fn decode_record(record: Record, bytes: &[u8]) -> Option<Vec<u8>> {
    fn again<T: Serialize + DeserializeOwned>(bytes: &[u8], inspect: impl FnOnce(&T)) -> Option<Vec<u8>> {
        let value: T = postcard::from_bytes(bytes).ok()?;
        inspect(&value);
        Some(postcard::to_allocvec(&value).expect("a decoded record encodes"))
    }
    match record {
        Record::Meta => again::<MetaRecord>(bytes, |_| {}),
        Record::Session => again::<SessionRecord>(bytes, |_| {}),
        Record::Turn => {
            // A `turns` row: decoded as the index reads it (no dictionary: a row that names one
            // is an error), encoded again without one.
            let mut no_dictionary = |_| Ok(None);
            let record: TurnRecord =
                turn_text::Decoders::default().decode(0, bytes, String::new, &mut no_dictionary).ok()?;
            let body = turn_text::body(&record.user, &record.assistant, &record.time, &record.tools);
            Some(
                turn_text::row(0, &record, &turn_text::compress(body, None), None)
                    .expect("a decoded turn encodes"),
            )
        }
        Record::Forward => again::<ForwardRecord>(bytes, |f| {
            // Readers look anchors up in it by binary search, trusting its order.
            for &(hash, _, _) in f.entries.iter().take(16) {
                let _ = f.posting(0, hash);
            }
        }),
        Record::EvidenceMeta => again::<EvidenceMeta>(bytes, |_| {}),
        Record::Evidence => again::<EvidenceRecord>(bytes, |e| {
            let _ = e.len();
        }),
    }
}

/// Seconds since the Unix epoch of a timestamp as `forget --before` and imported session
/// times are read.
pub fn parse_time(text: &str) -> Option<f64> {
    crate::jobs::forget::parse_time(text)
}

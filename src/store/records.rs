//! Records stored as postcard values. Every change to a field here bumps
//! [`super::format::FORMAT_VERSION`] and its golden test in this file.

use super::postings::{Posting, quantize_len};
use serde::{Deserialize, Serialize};

/// Index-wide metadata: what wrote the file, and the statistics of folded blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaRecord {
    /// Always [`super::format::MAGIC`]: tells a ctxgate index from another redb file.
    pub magic: String,
    /// On-disk format version.
    pub format_version: u32,
    /// Anchor rules the postings were built with.
    pub anchor_rules_version: u32,
    /// Version of the ctxgate that last wrote the file.
    pub writer_version: String,
    /// Next session id to hand out.
    pub next_session_id: u32,
    /// Blocks whose postings are folded (N, less the pending ones).
    pub folded_blocks: u64,
    /// Sum of user-side lengths over folded blocks (BM25 average length).
    pub folded_len_user: u64,
    /// Sum of assistant-side lengths over folded blocks.
    pub folded_len_assistant: u64,
    /// Postings in posting chunks (one per anchor per folded block).
    pub folded_postings: u64,
}

/// One session: its name, size and topic-segment state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session's name.
    pub name: String,
    /// Number of turns; the next turn id.
    pub turn_count: u32,
    /// First turn of the current topic segment (DESIGN §3.2).
    pub segment_start: u32,
    /// Digest of every turn's text in order ([`next_digest`]): tells a log that grew from one
    /// that changed, without reading the stored turns.
    pub digest: u64,
    /// Where the session came from (a log file), if imported.
    pub source: Option<String>,
    /// Title from the source, if any.
    pub title: Option<String>,
    /// Timestamp of the first turn, as the source wrote it.
    pub time_start: Option<String>,
    /// Timestamp of the last turn, as the source wrote it.
    pub time_end: Option<String>,
}

impl SessionRecord {
    /// A session with no turns.
    pub fn new(name: &str) -> Self {
        SessionRecord {
            name: name.to_string(),
            turn_count: 0,
            segment_start: 0,
            digest: 0,
            source: None,
            title: None,
            time_start: None,
            time_end: None,
        }
    }
}

/// A `sessions` row (format 4): postcard [`SessionRecord`], then a checksum: the low 32 bits of
/// XXH3-64 of the record seeded with the session id. A damaged record (a turn count one bit
/// off would hide turns) is an error, never a session served with other values.
pub fn session_row(id: u32, record: &SessionRecord) -> Result<Vec<u8>, super::Error> {
    let mut row = postcard::to_allocvec(record).map_err(|e| super::error::corrupt(format!("session {id}"), e))?;
    let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&row, u64::from(id)) as u32;
    row.extend_from_slice(&sum.to_le_bytes());
    Ok(row)
}

/// The record a `sessions` row of session `id` holds, checked against its checksum (formats
/// before 4 have none: `checked` false).
pub fn decode_session_row(id: u32, row: &[u8], checked: bool) -> Result<SessionRecord, super::Error> {
    let damaged = |e: &dyn std::fmt::Display| super::error::corrupt(format!("session {id}"), e);
    let record = if checked {
        let (record, sum) = row.split_last_chunk::<4>().ok_or_else(|| damaged(&"the row is cut short"))?;
        if xxhash_rust::xxh3::xxh3_64_with_seed(record, u64::from(id)) as u32 != u32::from_le_bytes(*sum) {
            return Err(damaged(&"its checksum does not match: the row is damaged"));
        }
        record
    } else {
        row
    };
    postcard::from_bytes(record).map_err(|e| damaged(&e))
}

/// The session digest after one more turn.
pub fn next_digest(digest: u64, user: &str, assistant: &str) -> u64 {
    // Streamed: the same hash as of the concatenated bytes, without copying the texts.
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&digest.to_le_bytes());
    hasher.update(&(user.len() as u64).to_le_bytes());
    hasher.update(user.as_bytes());
    hasher.update(&(assistant.len() as u64).to_le_bytes());
    hasher.update(assistant.as_bytes());
    hasher.digest()
}

/// What the gate decided when a turn was added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRecord {
    /// True if the turn's user text switched topic (it starts a segment).
    pub switch: bool,
    /// The overlap ratio.
    pub overlap: f32,
    /// The new-anchor ratio.
    pub new_ratio: f32,
    /// The deictic pattern that matched, or `reply to a question`, if any (`GateDecision::deictic`).
    pub deictic: Option<String>,
}

/// A tool call made during a turn (kept out of the turn text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// Tool name.
    pub name: String,
    /// The call id from the log, if any.
    pub call_id: Option<String>,
    /// The call's arguments as the log wrote them.
    pub arguments: String,
    /// Size of the tool's result in bytes.
    pub result_bytes: u64,
}

/// One turn: raw text, the gate decision made when it was added, its segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The user's text, unchanged.
    pub user: String,
    /// The assistant's text, unchanged.
    pub assistant: String,
    /// The gate decision for the user text against the history before it.
    pub gate: GateRecord,
    /// First turn of the topic segment this turn belongs to.
    pub segment_start: u32,
    /// Timestamp from the source, as written there.
    pub time: Option<String>,
    /// Tool calls of the turn.
    pub tools: Vec<ToolRecord>,
}

/// A turn's anchors: `(anchor hash, tf user, tf assistant)` sorted by hash, and side lengths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardRecord {
    /// Anchor occurrences in the user text.
    pub len_user: u32,
    /// Anchor occurrences in the assistant text.
    pub len_assistant: u32,
    /// One entry per distinct anchor, ascending hash.
    pub entries: Vec<(u64, u32, u32)>,
}

impl ForwardRecord {
    /// The entry for `hash`, if the turn has that anchor.
    pub fn get(&self, hash: u64) -> Option<(u32, u32)> {
        self.entries
            .binary_search_by_key(&hash, |e| e.0)
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|e| (e.1, e.2))
    }

    /// The turn's posting for `hash`, if it has that anchor, as folding will store it: side
    /// lengths quantized to their norms, so folding changes no score of a pending turn.
    pub fn posting(&self, turn: u32, hash: u64) -> Option<Posting> {
        self.get(hash).map(|(tf_user, tf_assistant)| {
            Posting::new(turn, tf_user, tf_assistant, quantize_len(self.len_user), quantize_len(self.len_assistant))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_the_hash_of_the_framed_texts() {
        // Stored in every session: the value must not change with how it is computed.
        for (digest, user, assistant) in
            [(0u64, "", ""), (7, "redis lock", "use SETNX"), (u64::MAX, "分布式锁", &*"x".repeat(5000))]
        {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&digest.to_le_bytes());
            bytes.extend_from_slice(&(user.len() as u64).to_le_bytes());
            bytes.extend_from_slice(user.as_bytes());
            bytes.extend_from_slice(&(assistant.len() as u64).to_le_bytes());
            bytes.extend_from_slice(assistant.as_bytes());
            assert_eq!(next_digest(digest, user, assistant), xxhash_rust::xxh3::xxh3_64(&bytes));
        }
    }

    /// Golden bytes: if this fails, the on-disk format changed: bump FORMAT_VERSION.
    #[test]
    fn forward_record_bytes_are_stable() {
        let record =
            ForwardRecord { len_user: 3, len_assistant: 300, entries: vec![(1, 2, 0), (u64::MAX, 0, 1)] };
        let bytes = postcard::to_allocvec(&record).unwrap();
        assert_eq!(bytes, [3, 172, 2, 2, 1, 2, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 1, 0, 1]);
        assert_eq!(postcard::from_bytes::<ForwardRecord>(&bytes).unwrap(), record);
    }

    #[test]
    fn session_record_bytes_are_stable() {
        let record = SessionRecord { turn_count: 2, segment_start: 1, digest: 3, ..SessionRecord::new("s") };
        assert_eq!(postcard::to_allocvec(&record).unwrap(), [1, b's', 2, 1, 3, 0, 0, 0, 0]);
    }

    #[test]
    fn digest_depends_on_order_and_boundaries() {
        let ab = next_digest(next_digest(0, "a", "b"), "c", "d");
        assert_ne!(ab, next_digest(next_digest(0, "c", "d"), "a", "b"));
        assert_ne!(next_digest(0, "ab", ""), next_digest(0, "a", "b"));
    }

    #[test]
    fn session_rows_are_checked() {
        let record = SessionRecord { turn_count: 887, ..SessionRecord::new("work") };
        let row = session_row(3, &record).unwrap();
        assert_eq!(decode_session_row(3, &row, true).unwrap(), record);
        for at in 0..row.len() * 8 {
            let mut flipped = row.clone();
            flipped[at / 8] ^= 1 << (at % 8);
            assert!(decode_session_row(3, &flipped, true).is_err(), "bit {at}");
        }
        assert!(decode_session_row(4, &row, true).is_err(), "under another id");
        let old = postcard::to_allocvec(&record).unwrap();
        assert_eq!(decode_session_row(3, &old, false).unwrap(), record, "format 3 rows have no checksum");
    }
}

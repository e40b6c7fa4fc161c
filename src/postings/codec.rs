//! Postings, delta + varint encoded: rows of the `postings` table, and chunks of an import's
//! run file.
//!
//! A posting is a turn id and the anchor's term frequency on each side of that turn:
//! ```text
//! posting = varint (turn_delta << 2 | kind) | [tf]
//! kind    = 0: tf (0, 1) | 1: tf (1, 0) | 2: tf (0, 2) | 3: tf follows
//! tf      = u8 (tf_user << 4 | tf_assistant), when both are below 15
//!         | 0xFF varint tf_user varint tf_assistant
//! ```
//! The three commonest term-frequency pairs ride in the delta's varint: measured on the
//! generated 100k corpus, 67% of postings are (0, 1), 24% (1, 0), 4% (0, 2), and 83% of deltas
//! are below 32, so most postings take one byte. The first posting's delta is its turn id.
//! Side lengths (BM25's document lengths) are not in postings: they are per turn, stored once
//! a turn in the `norms` table ([`super::norms`]) as one-byte norms ([`encode_norm`]: exact
//! below 16, then 3 mantissa bits, ~12% steps), as search engines store field norms. Decoded
//! postings have lengths 0 until filled from there. (Format 2 kept a norm in every posting,
//! a third of the postings table; format 1 also a tf byte and both norms always.)
//!
//! A *row* ([`encode_row`]) holds up to [`ROW_CAPACITY`] postings of one anchor, one segment
//! per session. A *chunk* (run files) holds one session's postings:
//! ```text
//! chunk = varint count | varint last_turn | posting*
//! ```
//! Decoding never trusts the bytes: corrupt input is an error, not a panic.

/// Postings per chunk of a run file.
pub const CHUNK_CAPACITY: u32 = 128;

pub use crate::types::Posting;

/// A chunk's bytes could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("posting chunk is corrupt at byte {offset}")]
pub struct CorruptChunk {
    /// Byte offset where decoding failed.
    pub offset: usize,
}

/// Encodes postings (ascending, distinct turns) as one chunk in one go: the reference the
/// tests hold [`ChunkBuilder`] to.
#[cfg(test)]
pub fn encode(postings: &[Posting]) -> Vec<u8> {
    let mut body = Vec::with_capacity(postings.len() * 6);
    let mut previous = 0;
    for (i, p) in postings.iter().enumerate() {
        let delta = if i == 0 { p.turn } else { p.turn - previous };
        encode_posting(&mut body, delta, p);
        previous = p.turn;
    }
    with_header(postings.len() as u32, previous, &body)
}

/// Builds a chunk by appending postings in turn order.
#[derive(Debug, Default)]
pub struct ChunkBuilder {
    count: u32,
    last_turn: u32,
    body: Vec<u8>,
}

impl ChunkBuilder {
    /// An empty chunk.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty chunk with room for `bytes` of encoded postings.
    #[cfg(test)]
    pub fn with_capacity(bytes: usize) -> Self {
        ChunkBuilder { body: Vec::with_capacity(bytes), ..Self::default() }
    }

    /// Empties the chunk, keeping its buffer for the next one.
    pub fn clear(&mut self) {
        self.count = 0;
        self.last_turn = 0;
        self.body.clear();
    }

    /// True when the chunk holds [`CHUNK_CAPACITY`] postings.
    #[cfg(test)]
    pub fn is_full(&self) -> bool {
        self.count >= CHUNK_CAPACITY
    }

    /// Appends a posting whose turn is after every turn in the chunk.
    pub fn push(&mut self, posting: &Posting) -> Result<(), CorruptChunk> {
        if self.count > 0 && posting.turn <= self.last_turn {
            return Err(CorruptChunk { offset: 0 });
        }
        let delta = if self.count == 0 { posting.turn } else { posting.turn - self.last_turn };
        encode_posting(&mut self.body, delta, posting);
        self.count += 1;
        self.last_turn = posting.turn;
        Ok(())
    }

    /// The encoded chunk.
    #[cfg(test)]
    pub fn finish(&self) -> Vec<u8> {
        with_header(self.count, self.last_turn, &self.body)
    }

    /// The encoded chunk's length in bytes.
    pub fn encoded_len(&self) -> usize {
        varint_len(self.count) + varint_len(self.last_turn) + self.body.len()
    }

    /// Appends the encoded chunk to `out`.
    pub fn finish_into(&self, out: &mut Vec<u8>) {
        write_varint(out, self.count);
        write_varint(out, self.last_turn);
        out.extend_from_slice(&self.body);
    }
}

/// The chunks of a new list of postings in turn order: full chunks of [`CHUNK_CAPACITY`], then
/// the rest. No chunk for an empty list. The reference the tests hold the writers to.
#[cfg(test)]
pub fn encode_list<'p>(
    list: impl ExactSizeIterator<Item = &'p Posting>,
) -> Result<Vec<Vec<u8>>, CorruptChunk> {
    let mut chunks = Vec::with_capacity(list.len().div_ceil(CHUNK_CAPACITY as usize));
    // About five bytes a posting: the body of a chunk rarely grows.
    let body_capacity = |left: usize| left.min(CHUNK_CAPACITY as usize) * 5;
    let mut left = list.len();
    let mut chunk = ChunkBuilder::with_capacity(body_capacity(left));
    for posting in list {
        if chunk.is_full() {
            chunks.push(chunk.finish());
            chunk = ChunkBuilder::with_capacity(body_capacity(left));
        }
        chunk.push(posting)?;
        left -= 1;
    }
    if chunk.count > 0 {
        chunks.push(chunk.finish());
    }
    Ok(chunks)
}

/// Decodes a chunk, calling `emit` for each posting in turn order.
pub fn decode(chunk: &[u8], mut emit: impl FnMut(Posting)) -> Result<(), CorruptChunk> {
    let mut reader = Reader::new(chunk);
    let count = reader.varint()?;
    let last_turn = reader.varint()?;
    let turn = decode_postings(&mut reader, count, &mut emit)?;
    if reader.offset != chunk.len() {
        return Err(CorruptChunk { offset: reader.offset });
    }
    // The header must be the truth: a builder continues a chunk by it.
    if count > 0 && turn != last_turn {
        return Err(CorruptChunk { offset: 0 });
    }
    Ok(())
}

/// Decodes `count` postings from `reader` (the first delta is the turn itself); returns the
/// last turn (0 for none). A delta of 0 after the first is an error: the turns ascend strictly,
/// checked as they are decoded rather than in a pass after.
#[inline]
fn decode_postings(
    reader: &mut Reader<'_>,
    count: u32,
    emit: &mut impl FnMut(Posting),
) -> Result<u32, CorruptChunk> {
    let bytes = reader.bytes;
    let mut turn = 0u32;
    // The least delta the next posting may have: any for the first, then 1.
    let mut least = 0u32;
    for _ in 0..count {
        // Most postings are one byte: a small delta and a common pair.
        let at = reader.offset;
        if let Some(&head) = bytes.get(at)
            && head < 0x80
            && u64::from(head & 3) != KIND_TF_FOLLOWS
        {
            reader.offset = at + 1;
            let delta = u32::from(head >> 2);
            if delta < least {
                return Err(CorruptChunk { offset: at });
            }
            least = 1;
            turn = turn.checked_add(delta).ok_or(CorruptChunk { offset: at })?;
            let (tf_user, tf_assistant) = COMMON_PAIRS[usize::from(head & 3)];
            emit(Posting { turn, tf_user, tf_assistant, len_user: 0, len_assistant: 0 });
            continue;
        }
        let head = reader.varint35()?;
        let delta = u32::try_from(head >> 2).map_err(|_| CorruptChunk { offset: reader.offset })?;
        if delta < least {
            return Err(CorruptChunk { offset: at });
        }
        least = 1;
        turn = turn.checked_add(delta).ok_or(CorruptChunk { offset: reader.offset })?;
        let (tf_user, tf_assistant) = match head & 3 {
            KIND_ASSISTANT_1 => (0, 1),
            KIND_USER_1 => (1, 0),
            KIND_ASSISTANT_2 => (0, 2),
            _ => match reader.byte()? {
                TF_ESCAPE => (reader.varint()?, reader.varint()?),
                tf => (u32::from(tf >> 4), u32::from(tf & 0xF)),
            },
        };
        emit(Posting { turn, tf_user, tf_assistant, len_user: 0, len_assistant: 0 });
    }
    Ok(turn)
}

/// Postings per row of the `postings` table: a row keeps well inside one 4 KiB page.
pub const ROW_CAPACITY: usize = CHUNK_CAPACITY as usize;

/// Bytes of a row's checksum, after its segments.
const ROW_CHECKSUM: usize = 4;

/// The checksum of a row of the anchor `anchor` stored under `key` (its first posting's session
/// and turn) whose segments are `body`: seeded with the whole key, so a row read under another
/// key (a flipped bit in a key) fails it as a flipped bit in the row does.
fn row_checksum(anchor: u64, key: (u32, u32), body: &[u8]) -> [u8; ROW_CHECKSUM] {
    let seed = anchor ^ ((u64::from(key.0) << 32) | u64::from(key.1)).rotate_left(29);
    (xxhash_rust::xxh3::xxh3_64_with_seed(body, seed) as u32).to_le_bytes()
}

/// The segments of a row of `anchor` stored under `key`, once its checksum matched.
fn checked_segments(anchor: u64, key: (u32, u32), row: &[u8]) -> Result<&[u8], CorruptChunk> {
    let end = row.len().checked_sub(ROW_CHECKSUM).ok_or(CorruptChunk { offset: 0 })?;
    let (body, checksum) = row.split_at(end);
    if checksum != row_checksum(anchor, key, body) {
        return Err(CorruptChunk { offset: end });
    }
    Ok(body)
}

/// Encodes one row of the `postings` table of the anchor `anchor`: `entries` (`(session,
/// posting)`, ascending by session then turn, not empty) as segments, one per session, then a
/// checksum of them seeded with the row's key:
/// ```text
/// row     = segment+ | u32 checksum
/// segment = varint session_delta | varint count | posting{count}
/// ```
/// The first segment's session delta is 0: its session is the row key's. Each segment's first
/// posting delta is its turn. Appends to `out`.
pub fn encode_row(anchor: u64, entries: &[(u32, Posting)], out: &mut Vec<u8>) {
    let start = out.len();
    let key = entries.first().map_or((0, 0), |(session, p)| (*session, p.turn));
    let mut previous_session = entries.first().map_or(0, |e| e.0);
    for segment in entries.chunk_by(|a, b| a.0 == b.0) {
        let session = segment[0].0;
        write_varint(out, session - previous_session);
        write_varint(out, segment.len() as u32);
        let mut previous_turn = 0;
        for (_, p) in segment {
            encode_posting(out, p.turn - previous_turn, p);
            previous_turn = p.turn;
        }
        previous_session = session;
    }
    let checksum = row_checksum(anchor, key, &out[start..]);
    out.extend_from_slice(&checksum);
}

/// Decodes a row of the anchor `anchor` stored under the key `(session, first_turn)` (its first
/// posting), calling `emit(session, posting)` for each posting in `(session, turn)` order.
/// Checks the row's checksum, that the key is the row's first posting and that the order is
/// strict.
pub fn decode_row(
    anchor: u64,
    key: (u32, u32),
    row: &[u8],
    mut emit: impl FnMut(u32, Posting),
) -> Result<(), CorruptChunk> {
    decode_row_until(anchor, key, row, u32::MAX, &mut emit)
}

/// Like [`decode_row`], for the postings of sessions up to `last_session` only: stops at the
/// first segment after it.
pub fn decode_row_until(
    anchor: u64,
    key: (u32, u32),
    row: &[u8],
    last_session: u32,
    emit: &mut impl FnMut(u32, Posting),
) -> Result<(), CorruptChunk> {
    // Streamed, checked as it goes: no buffer a call (a global search decodes a row a call).
    for_each_segment(anchor, key, row, last_session, |session, reader, count, first_turn| {
        // Decoding checks the order; the segment's first posting must be the key's.
        let mut first = true;
        let mut keyed = true;
        decode_postings(reader, count, &mut |p: Posting| {
            keyed &= !first || first_turn.is_none_or(|turn| p.turn == turn);
            first = false;
            emit(session, p);
        })?;
        if keyed { Ok(()) } else { Err(CorruptChunk { offset: 0 }) }
    })
}

/// Appends to `out` the postings of `session` in a row stored under `key` (lengths 0, in turn
/// order), with the checks of [`decode_row`] on the row up to that session's segment (on an
/// error, `out` may hold part of the row). Reads a long history's lists: one tight loop a
/// segment, no call a posting.
pub fn decode_row_session(
    anchor: u64,
    key: (u32, u32),
    row: &[u8],
    session: u32,
    out: &mut Vec<Posting>,
) -> Result<(), CorruptChunk> {
    for_each_segment(anchor, key, row, session, |s, reader, count, first_turn| {
        let start = out.len();
        decode_segment(reader, count, first_turn, out)?;
        if s != session {
            out.truncate(start);
        }
        Ok(())
    })
}

/// Walks the segments of a row of `anchor` stored under `key` up to `last_session`, once its
/// checksum matched:
/// `segment(session, reader, count, first_turn)` reads a segment's `count` postings, the first
/// of which must be `first_turn` when given (the row's first posting is its key's).
fn for_each_segment(
    anchor: u64,
    key: (u32, u32),
    row: &[u8],
    last_session: u32,
    mut segment: impl FnMut(u32, &mut Reader<'_>, u32, Option<u32>) -> Result<(), CorruptChunk>,
) -> Result<(), CorruptChunk> {
    let mut reader = Reader::new(checked_segments(anchor, key, row)?);
    let mut session = key.0;
    let mut first = true;
    while !reader.is_done() {
        let at = reader.offset;
        let delta = reader.varint()?;
        if first != (delta == 0) {
            return Err(CorruptChunk { offset: at });
        }
        session = session.checked_add(delta).ok_or(CorruptChunk { offset: at })?;
        if session > last_session {
            return Ok(());
        }
        let count = reader.varint()?;
        if count == 0 {
            return Err(CorruptChunk { offset: at });
        }
        segment(session, &mut reader, count, first.then_some(key.1))
            .map_err(|e| CorruptChunk { offset: e.offset.max(at) })?;
        first = false;
    }
    if first {
        return Err(CorruptChunk { offset: 0 });
    }
    Ok(())
}

/// Appends a segment's `count` postings to `out` (in strict turn order, as decoding checks),
/// then checks that they start at `first_turn` when given.
fn decode_segment(
    reader: &mut Reader<'_>,
    count: u32,
    first_turn: Option<u32>,
    out: &mut Vec<Posting>,
) -> Result<(), CorruptChunk> {
    let at = reader.offset;
    let start = out.len();
    // A posting takes a byte at least: a damaged count reserves no more than the row holds.
    out.reserve((count as usize).min(reader.bytes.len() - reader.offset));
    decode_postings(reader, count, &mut |p| out.push(p))?;
    let keyed = first_turn.is_none_or(|turn| out.get(start).map(|p| p.turn) == Some(turn));
    if !keyed {
        return Err(CorruptChunk { offset: at });
    }
    Ok(())
}

/// Postings in a row (decoding it all).
pub fn row_len(anchor: u64, key: (u32, u32), row: &[u8]) -> Result<u64, CorruptChunk> {
    let mut n = 0u64;
    decode_row(anchor, key, row, |_, _| n += 1)?;
    Ok(n)
}

fn encode_posting(out: &mut Vec<u8>, delta: u32, p: &Posting) {
    // Staged on the stack and appended at once: one capacity check a posting instead of one a
    // byte. At most three varints and three bytes.
    let mut bytes = [0u8; 18];
    let kind = match (p.tf_user, p.tf_assistant) {
        (0, 1) => KIND_ASSISTANT_1,
        (1, 0) => KIND_USER_1,
        (0, 2) => KIND_ASSISTANT_2,
        _ => KIND_TF_FOLLOWS,
    };
    let mut at = put_varint(&mut bytes, 0, (u64::from(delta) << 2) | kind);
    if kind == KIND_TF_FOLLOWS {
        if p.tf_user < 15 && p.tf_assistant < 15 {
            bytes[at] = ((p.tf_user << 4) | p.tf_assistant) as u8;
            at += 1;
        } else {
            bytes[at] = TF_ESCAPE;
            at = put_varint(&mut bytes, at + 1, u64::from(p.tf_user));
            at = put_varint(&mut bytes, at, u64::from(p.tf_assistant));
        }
    }
    // All of it, then back to the end: a copy of fixed length is two moves, where one of the
    // encoded length was a call to `memcpy`.
    let end = out.len() + at;
    out.extend_from_slice(&bytes);
    out.truncate(end);
}

/// Writes `value` (at most 35 bits) as a varint into `bytes` at `at`; returns where it ends.
fn put_varint(bytes: &mut [u8; 18], mut at: usize, mut value: u64) -> usize {
    while value >= 0x80 {
        bytes[at] = (value as u8) | 0x80;
        value >>= 7;
        at += 1;
    }
    bytes[at] = value as u8;
    at + 1
}

const TF_ESCAPE: u8 = 0xFF;

/// The pairs of the kinds below [`KIND_TF_FOLLOWS`], by kind: one side has the anchor.
const COMMON_PAIRS: [(u32, u32); 3] = [(0, 1), (1, 0), (0, 2)];

/// The term-frequency pairs a posting's first varint carries (module doc).
const KIND_ASSISTANT_1: u64 = 0;
const KIND_USER_1: u64 = 1;
const KIND_ASSISTANT_2: u64 = 2;
const KIND_TF_FOLLOWS: u64 = 3;

/// One byte for a side length: exact below 16, then `(8 + mantissa) << (exponent - 3)`.
/// Monotonic; every `u32` fits (the largest byte is 239).
pub fn encode_norm(len: u32) -> u8 {
    if len < 16 {
        return len as u8;
    }
    let exponent = 31 - len.leading_zeros(); // >= 4
    let mantissa = (len >> (exponent - 3)) & 0x7;
    (16 + (exponent - 4) * 8 + mantissa) as u8
}

/// The length a norm byte stands for (the smallest length with that byte).
pub fn decode_norm(norm: u8) -> u32 {
    NORMS[usize::from(norm)]
}

/// [`norm_length`] of every byte: decoding reads two norms per posting.
const NORMS: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = norm_length(i as u32);
        i += 1;
    }
    table
};

/// The length norm byte `norm` stands for. Bytes above 239 (never written) decode as if the
/// pattern went on, saturating instead of overflowing.
const fn norm_length(norm: u32) -> u32 {
    if norm < 16 {
        return norm;
    }
    let exponent = (norm - 16) / 8 + 4;
    let mantissa = (norm - 16) % 8;
    let shift = exponent - 3;
    if shift >= 29 { u32::MAX } else { (8 + mantissa) << shift }
}

/// A length as postings store it: what scoring of folded and pending turns both use.
pub fn quantize_len(len: u32) -> u32 {
    decode_norm(encode_norm(len))
}

#[cfg(test)]
fn with_header(count: u32, last_turn: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    write_varint(&mut out, count);
    write_varint(&mut out, last_turn);
    out.extend_from_slice(body);
    out
}

/// Bytes of `value` as a LEB128 varint.
fn varint_len(value: u32) -> usize {
    (32 - (value | 1).leading_zeros()).div_ceil(7) as usize
}

/// LEB128 unsigned varint.
pub fn write_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A bounds-checked reader over encoded bytes.
pub struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the first byte.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, offset: 0 }
    }

    /// Reads one LEB128 varint of at most 32 bits.
    pub fn varint(&mut self) -> Result<u32, CorruptChunk> {
        let value = self.varint35()?;
        u32::try_from(value).map_err(|_| CorruptChunk { offset: self.offset })
    }

    /// Reads one LEB128 varint of at most five bytes (35 bits).
    #[inline]
    fn varint35(&mut self) -> Result<u64, CorruptChunk> {
        // Most postings' first varint is one byte: no loop for it.
        if let Some(&byte) = self.bytes.get(self.offset)
            && byte < 0x80
        {
            self.offset += 1;
            return Ok(u64::from(byte));
        }
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let byte = *self.bytes.get(self.offset).ok_or(CorruptChunk { offset: self.offset })?;
            self.offset += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CorruptChunk { offset: self.offset })
    }

    /// Reads one byte.
    pub fn byte(&mut self) -> Result<u8, CorruptChunk> {
        let byte = *self.bytes.get(self.offset).ok_or(CorruptChunk { offset: self.offset })?;
        self.offset += 1;
        Ok(byte)
    }

    /// Reads `len` bytes.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], CorruptChunk> {
        let end = self.offset.checked_add(len).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or(CorruptChunk { offset: self.offset })?;
        let taken = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(taken)
    }

    /// Bytes read so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// True when every byte is read.
    pub fn is_done(&self) -> bool {
        self.offset >= self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A posting as decoding gives it: lengths come from the `norms` table.
    fn posting(turn: u32, tf_user: u32) -> Posting {
        Posting::new(turn, tf_user, 1, 0, 0)
    }

    fn decode_all(chunk: &[u8]) -> Vec<Posting> {
        let mut out = Vec::new();
        decode(chunk, |p| out.push(p)).unwrap();
        out
    }

    /// The anchor of the rows in these tests.
    const ANCHOR: u64 = 0xa5c4_0e11;

    fn row_of(entries: &[(u32, Posting)]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_row(ANCHOR, entries, &mut out);
        out
    }

    /// `segments` as a row stored under `key`: with the checksum that makes it read, so that
    /// what is tested is what the segments say.
    fn sealed(key: (u32, u32), segments: &[u8]) -> Vec<u8> {
        let mut row = segments.to_vec();
        row.extend_from_slice(&row_checksum(ANCHOR, key, segments));
        row
    }

    fn decode_row_all(key: (u32, u32), row: &[u8]) -> Result<Vec<(u32, Posting)>, CorruptChunk> {
        let mut out = Vec::new();
        decode_row(ANCHOR, key, row, |s, p| out.push((s, p)))?;
        Ok(out)
    }

    #[test]
    fn push_equals_encode() {
        let postings: Vec<Posting> = [3, 4, 90, 1000, 70_000].iter().map(|&t| posting(t, t % 3)).collect();
        let mut builder = ChunkBuilder::new();
        for p in &postings {
            builder.push(p).unwrap();
        }
        assert_eq!(builder.finish(), encode(&postings));
        assert_eq!(decode_all(&builder.finish()), postings);
        assert!(builder.push(&posting(70_000, 1)).is_err(), "turns must increase");
    }

    #[test]
    fn lists_are_split_into_full_chunks() {
        let list: Vec<Posting> = (0..300).map(|t| posting(t * 3, 1)).collect();
        let chunks = encode_list(list.iter()).expect("turns ascend");
        let sizes: Vec<usize> = chunks
            .iter()
            .map(|c| {
                let mut n = 0;
                decode(c, |_| n += 1).expect("valid chunk");
                n
            })
            .collect();
        assert_eq!(sizes, [128, 128, 44]);
        let mut decoded = Vec::new();
        for chunk in &chunks {
            decode(chunk, |p| decoded.push(p)).expect("valid chunk");
        }
        assert_eq!(decoded, list);
        assert!(encode_list([].iter()).expect("empty").is_empty());
        let unordered = [posting(5, 1), posting(5, 1)];
        assert!(encode_list(unordered.iter()).is_err(), "turns must ascend");
    }

    /// Golden bytes: if this fails, the on-disk format changed: bump FORMAT_VERSION.
    #[test]
    fn a_posting_stores_no_length() {
        let postings =
            [Posting::new(3, 2, 0, 40, 500), Posting::new(5, 0, 1, 40, 480), Posting::new(9, 1, 1, 7, 20)];
        let chunk = encode(&postings);
        // count, last turn | delta and kind "tf follows", tf | delta and kind (0, 1) | delta and
        // kind "tf follows", tf.
        assert_eq!(chunk, [3, 9, 3 << 2 | 3, 0x20, 2 << 2, 4 << 2 | 3, 0x11]);
        // The commonest pairs take one byte.
        let common = [Posting::new(1, 0, 1, 0, 30), Posting::new(2, 1, 0, 5, 0), Posting::new(3, 0, 2, 0, 9)];
        assert_eq!(encode(&common), [3, 3, 1 << 2, 1 << 2 | 1, 1 << 2 | 2]);
        let decoded = decode_all(&chunk);
        assert!(decoded.iter().all(|p| (p.len_user, p.len_assistant) == (0, 0)), "lengths are not stored");
        let tfs: Vec<(u32, u32, u32)> = decoded.iter().map(|p| (p.turn, p.tf_user, p.tf_assistant)).collect();
        assert_eq!(tfs, [(3, 2, 0), (5, 0, 1), (9, 1, 1)]);
    }

    /// Golden bytes of a row that spans sessions: if this fails, bump FORMAT_VERSION.
    #[test]
    fn a_row_holds_a_segment_per_session() {
        let entries = [(4, posting(7, 0)), (4, posting(9, 0)), (6, posting(2, 1))];
        let row = row_of(&entries);
        // session delta 0, two postings (turn 7, then +2, both (0, 1)) | session delta 2, one
        // posting (turn 2, tf follows) | the checksum.
        assert_eq!(row, sealed((4, 7), &[0, 2, 7 << 2, 2 << 2, 2, 1, 2 << 2 | 3, 0x11]));
        assert_eq!(row.len(), 8 + ROW_CHECKSUM);
        assert_eq!(decode_row_all((4, 7), &row), Ok(entries.to_vec()));
        // Only sessions up to 4.
        let mut upto = Vec::new();
        assert!(decode_row_until(ANCHOR, (4, 7), &row, 4, &mut |s, p| upto.push((s, p))).is_ok());
        assert_eq!(upto, entries[..2]);
        assert_eq!(row_len(ANCHOR, (4, 7), &row), Ok(3));
        // One session's postings, appended to what the list holds.
        let mut list = vec![posting(1, 1)];
        assert!(decode_row_session(ANCHOR, (4, 7), &row, 6, &mut list).is_ok());
        assert_eq!(list, [posting(1, 1), entries[2].1]);
        list.clear();
        assert!(decode_row_session(ANCHOR, (4, 7), &row, 5, &mut list).is_ok());
        assert!(list.is_empty(), "no segment of session 5");
    }

    #[test]
    fn a_row_must_agree_with_its_key() {
        let segments = [0, 1, 7 << 2, 2, 1, 2 << 2 | 3, 0x11];
        let session =
            |key: (u32, u32), row: &[u8], of: u32| decode_row_session(ANCHOR, key, row, of, &mut Vec::new());
        assert!(decode_row_all((4, 8), &sealed((4, 8), &segments)).is_err(), "first turn is not the key's");
        assert!(session((4, 8), &sealed((4, 8), &segments), 6).is_err(), "first turn is not the key's");
        assert!(
            decode_row_all((3, 7), &sealed((3, 7), &segments)).is_ok(),
            "the key's session is where deltas start"
        );
        assert!(decode_row_all((4, 7), &sealed((4, 7), &[])).is_err(), "a row without segments");
        // A second segment of the same session, and an empty segment.
        assert!(
            decode_row_all((4, 7), &sealed((4, 7), &[0, 1, 7 << 2 | 3, 0x01, 0, 1, 9 << 2 | 3, 0x01]))
                .is_err()
        );
        assert!(decode_row_all((4, 7), &sealed((4, 7), &[0, 0])).is_err());
        // Turns that do not increase within a segment.
        let unordered = sealed((4, 7), &[0, 2, 7 << 2 | 3, 0x01, 3, 0x01]);
        assert!(decode_row_all((4, 7), &unordered).is_err());
        assert!(session((4, 7), &unordered, 4).is_err());
        // The same in one-byte postings, and a first turn of 0 (a delta of 0 that is fine).
        assert!(session((4, 7), &sealed((4, 7), &[0, 2, 7 << 2, 1]), 4).is_err());
        assert!(decode_row_all((4, 7), &sealed((4, 7), &[0, 2, 7 << 2, 1])).is_err());
        assert_eq!(decode_row_all((4, 0), &sealed((4, 0), &[0, 2, 0, 1 << 2 | 1])).map(|l| l.len()), Ok(2));
        // A segment that claims four billion postings: an error, and room for no more than
        // the row's bytes.
        let mut list = Vec::new();
        let huge = sealed((4, 7), &[0, 0xff, 0xff, 0xff, 0xff, 0x0f, 7 << 2]);
        assert!(decode_row_session(ANCHOR, (4, 7), &huge, 4, &mut list).is_err());
        assert!(list.capacity() < 64, "{}", list.capacity());
    }

    /// The checksum: a row read under another key (a flipped bit in the key, another anchor) or
    /// with any byte changed, cut or extended is an error, never other postings.
    #[test]
    fn a_row_that_is_not_as_written_is_an_error() {
        let row = row_of(&[(4, posting(7, 0)), (4, posting(9, 0)), (6, posting(2, 1))]);
        assert!(decode_row_all((4, 7), &row).is_ok());
        for key in [(5, 7), (4, 6), (4 ^ 1 << 20, 7)] {
            assert!(decode_row_all(key, &row).is_err(), "{key:?}");
        }
        let mut other_anchor = Vec::new();
        assert!(decode_row(ANCHOR ^ 1, (4, 7), &row, |s, p| other_anchor.push((s, p))).is_err());
        assert!(other_anchor.is_empty());
        for at in 0..row.len() {
            for bit in 0..8 {
                let mut flipped = row.clone();
                flipped[at] ^= 1 << bit;
                assert!(decode_row_all((4, 7), &flipped).is_err(), "bit {bit} of byte {at}");
            }
        }
        for cut in 0..row.len() {
            assert!(decode_row_all((4, 7), &row[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = row.clone();
        longer.push(0);
        assert!(decode_row_all((4, 7), &longer).is_err());
    }

    #[test]
    fn corrupt_bytes_are_errors() {
        let chunk = encode(&[posting(1, 1), posting(5, 2)]);
        for cut in 0..chunk.len() {
            assert!(decode(&chunk[..cut], |_| {}).is_err(), "truncated at {cut}");
        }
        assert!(decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff], |_| {}).is_err());
        let mut trailing = chunk.clone();
        trailing.push(0);
        assert!(decode(&trailing, |_| {}).is_err());
        // A turn repeated: count 2, last turn 5, deltas 5 and 0.
        assert!(decode(&[2, 5, 5 << 2, 0], |_| {}).is_err());
        // A header whose last turn is not the body's.
        let mut understated = chunk.clone();
        understated[1] = 4;
        assert!(decode(&understated, |_| {}).is_err());
    }

    #[test]
    fn norms_are_monotonic_and_close() {
        let mut previous = 0;
        for len in (0..100_000u32).chain([u32::MAX / 2, u32::MAX]) {
            let norm = encode_norm(len);
            assert!(norm >= previous, "norm of {len} went down");
            previous = norm;
            let back = decode_norm(norm);
            assert!(back <= len && (len - back) as f64 <= len as f64 / 8.0 + 1.0, "{len} -> {back}");
            assert_eq!(quantize_len(back), back, "decoded lengths are fixed points");
        }
        assert_eq!((0..16).map(quantize_len).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
        // Bytes never written (above 239) still decode, monotonically, without overflow.
        let decoded: Vec<u32> = (0..=255u8).map(decode_norm).collect();
        assert!(decoded.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(decode_norm(239), 15 << 28);
    }

    #[test]
    fn the_widest_postings_round_trip() -> Result<(), CorruptChunk> {
        // Five-byte varints everywhere a varint goes: the longest a posting encodes to.
        let wide = |turn| Posting {
            turn,
            tf_user: u32::MAX,
            tf_assistant: u32::MAX - 1,
            len_user: 0,
            len_assistant: 0,
        };
        let postings = [wide(1 << 28), wide(u32::MAX)];
        assert_eq!(decode_all(&encode(&postings)), postings);
        let mut chunk = ChunkBuilder::new();
        chunk.push(&wide(5))?;
        chunk.clear();
        for p in &postings {
            chunk.push(p)?;
        }
        assert_eq!(chunk.finish(), encode(&postings), "a cleared builder starts a new chunk");
        let entries = [(0, wide(1 << 28)), (u32::MAX, wide(u32::MAX))];
        assert_eq!(decode_row_all((0, 1 << 28), &row_of(&entries)), Ok(entries.to_vec()));
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip(deltas in proptest::collection::vec((1u32..5000, 0u32..3, 0u32..50, 0u32..50), 1..300)) {
            let (mut session, mut turn) = (0, 0);
            let entries: Vec<(u32, Posting)> = deltas.iter().enumerate().map(|(i, &(d, next_session, tu, ta))| {
                if i > 0 && next_session > 0 {
                    session += next_session;
                    turn = d - 1;
                } else {
                    turn = if i == 0 { d - 1 } else { turn + d };
                }
                (session, Posting::new(turn, tu, ta, 0, 0))
            }).collect();
            let postings: Vec<Posting> = entries.iter().filter(|e| e.0 == 0).map(|e| e.1).collect();
            prop_assert_eq!(decode_all(&encode(&postings)), postings);
            let key = (entries[0].0, entries[0].1.turn);
            let row = row_of(&entries);
            for session in [key.0, entries[entries.len() / 2].0, entries[entries.len() - 1].0] {
                let mut list = Vec::new();
                prop_assert_eq!(decode_row_session(ANCHOR, key, &row, session, &mut list), Ok(()));
                let expected: Vec<Posting> = entries.iter().filter(|e| e.0 == session).map(|e| e.1).collect();
                prop_assert_eq!(list, expected);
            }
            prop_assert_eq!(decode_row_all(key, &row), Ok(entries));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes, |_| {});
            let _ = decode_row_all((1, 2), &bytes);
            let _ = decode_row_session(ANCHOR, (1, 2), &bytes, 3, &mut Vec::new());
            // Past the checksum: the segments' own checks.
            let _ = decode_row_all((1, 2), &sealed((1, 2), &bytes));
            let _ = decode_row_session(ANCHOR, (1, 2), &sealed((1, 2), &bytes), 3, &mut Vec::new());
        }
    }
}

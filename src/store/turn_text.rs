//! The rows of `turns` (format 2): what the gate said, raw, then the turn's text compressed;
//! since format 4, a checksum at the end.
//!
//! ```text
//! row      = postcard TurnHead | varint codec | body | checksum
//! codec    = 0: body is postcard TurnBody
//!          | 1: body is a zstd frame of postcard TurnBody
//!          | 2 + k: the same, compressed with text dictionary k (table `text_dictionaries`)
//! checksum = u32 LE: the low 32 bits of XXH3-64 of the row before it, seeded with the block key
//! ```
//!
//! The checksum makes every damaged row an error naming its turn, never a turn served with
//! other text: a flipped bit in raw text still decodes, and one in a zstd frame may too. Seeded
//! with the key, it also catches a damaged key: a row found under another key than its own.
//! Turns are short (a few hundred bytes), and zstd alone barely compresses one (~0.7 of raw);
//! a dictionary trained on the index's own turns brings real chats to ~0.5 and generated ones
//! to ~0.15, while a turn stays one row: an add writes one record, a read decompresses one
//! turn (~1 µs). Measured against blocks of turns in `tools/compare --bin codecs`
//! (docs/compare.md). Dictionaries are never changed once stored: a row names the one it was
//! compressed with, so a dictionary trained later never breaks an older row.

use super::error::{Error, corrupt};
use super::records::{GateRecord, ToolRecord, TurnRecord};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::Arc;

/// zstd level: the codec measurement's choice (level 9 compressed turns 2–4% better at a third
/// of the speed).
const LEVEL: i32 = 3;

/// Turn text a dictionary is trained on, at least: below it, zstd alone.
pub const TRAIN_MIN_BYTES: usize = 256 << 10;

/// Turn text sampled to train a dictionary: training takes ~50 ms for 1 MiB, and more text
/// hardly changes the ratio (measured: 4 MiB gave 0.165 of raw against 1 MiB's 0.181, taking
/// four times as long).
pub const TRAIN_SAMPLE_BYTES: usize = 1 << 20;

/// Turn text read from an index to sample from: four samples' worth, so that the sample is
/// spread over more turns than it holds.
pub const TRAIN_READ_BYTES: usize = 4 * TRAIN_SAMPLE_BYTES;

/// Largest dictionary: zstd's recommended size; a smaller one for a small sample, which could
/// not fill it (about one byte of dictionary for 16 of text).
const MAX_DICTIONARY_BYTES: usize = 64 << 10;

/// Largest text a row may claim to hold when decompressed: a damaged row is an error, never a
/// huge allocation. Far above the largest turn accepted now ([`crate::limits::MAX_TURN_BYTES`]):
/// versions before the limit stored turns of any size (34 MB ones were seen), and a turn that
/// was stored must read back. It used to be 32 MiB, which made such turns unreadable.
const MAX_BODY_BYTES: u64 = 1 << 30;

/// What the gate decided when the turn was added, and its segment: stored uncompressed, and
/// written by the one writer (the gate needs the history), where the body is compressed
/// before, in parallel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TurnHead {
    gate: GateRecord,
    segment_start: u32,
}

/// The turn's text: compressed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TurnBody {
    user: String,
    assistant: String,
    time: Option<String>,
    tools: Vec<ToolRecord>,
}

/// Borrowed [`TurnBody`]: encodes the same bytes without copying the texts.
#[derive(Serialize)]
struct TurnBodyRef<'a> {
    user: &'a str,
    assistant: &'a str,
    time: &'a Option<String>,
    tools: &'a [ToolRecord],
}

/// A zstd dictionary trained on turn text. Identified by the hash of its bytes until a writer
/// stores it and it gets its id in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDictionary {
    hash: u64,
    bytes: Arc<[u8]>,
}

impl TextDictionary {
    /// A dictionary of these bytes.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        TextDictionary { hash: xxhash_rust::xxh3::xxh3_64(bytes), bytes: bytes.into() }
    }

    /// A `text_dictionaries` row: the hash of the bytes (8 bytes, little-endian), then the
    /// bytes. The hash is checked on every read: a damaged dictionary would otherwise change
    /// the text of every turn compressed with it, silently.
    pub fn row(&self) -> Vec<u8> {
        let mut row = Vec::with_capacity(8 + self.bytes.len());
        row.extend_from_slice(&self.hash.to_le_bytes());
        row.extend_from_slice(&self.bytes);
        row
    }

    /// The dictionary a `text_dictionaries` row holds, checked against its hash.
    pub fn from_row(id: u32, row: &[u8]) -> Result<Self, Error> {
        let damaged = || corrupt(format!("text dictionary {id}"), "its bytes do not match their hash");
        let (hash, bytes) = row.split_first_chunk::<8>().ok_or_else(damaged)?;
        let dictionary = Self::from_bytes(bytes);
        if dictionary.hash != u64::from_le_bytes(*hash) {
            return Err(damaged());
        }
        Ok(dictionary)
    }

    /// The hash a `text_dictionaries` row names, without reading the rest.
    pub fn hash_of_row(row: &[u8]) -> Option<u64> {
        row.first_chunk::<8>().map(|h| u64::from_le_bytes(*h))
    }

    /// Trains a dictionary on turn bodies ([`body_sample`]); `None` below [`TRAIN_MIN_BYTES`]
    /// or if zstd finds nothing to learn.
    pub fn train(samples: &[Vec<u8>]) -> Option<Self> {
        let total: usize = samples.iter().map(Vec::len).sum();
        if total < TRAIN_MIN_BYTES {
            return None;
        }
        let size = (total / 16).min(MAX_DICTIONARY_BYTES);
        match zstd::dict::from_samples(samples, size) {
            Ok(bytes) => Some(Self::from_bytes(&bytes)),
            Err(e) => {
                log::debug!("no text dictionary from {total} bytes of turns: {e}");
                None
            }
        }
    }

    /// Trains a dictionary on about [`TRAIN_SAMPLE_BYTES`] of `bodies`, evenly spaced
    /// ([`sample`], then [`TextDictionary::train`]).
    pub fn train_on(bodies: &[Vec<u8>]) -> Option<Self> {
        Self::train(&sample(bodies.iter().map(Vec::as_slice)))
    }

    /// The dictionary's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The hash of its bytes.
    pub fn hash(&self) -> u64 {
        self.hash
    }
}

/// Picks evenly spaced turns' bodies, about [`TRAIN_SAMPLE_BYTES`] of them, from `bodies`.
pub fn sample<'a>(bodies: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Vec<Vec<u8>> {
    let total: usize = bodies.clone().map(<[u8]>::len).sum();
    let stride = total.div_ceil(TRAIN_SAMPLE_BYTES).max(1);
    bodies.step_by(stride).map(<[u8]>::to_vec).collect()
}

/// A turn's text, encoded (and compressed) before its row is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedText {
    /// Hash of the dictionary it was compressed with, if any.
    dictionary: Option<u64>,
    compressed: bool,
    bytes: Vec<u8>,
}

impl EncodedText {
    /// Bytes it holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// The hash of the dictionary the text needs, if any.
    pub fn dictionary(&self) -> Option<u64> {
        self.dictionary
    }

    /// Encoded bytes.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// The uncompressed body of a turn: what [`TextDictionary::train`] learns from.
pub fn body(user: &str, assistant: &str, time: &Option<String>, tools: &[ToolRecord]) -> Vec<u8> {
    let capacity = user.len() + assistant.len() + 16;
    postcard::to_extend(&TurnBodyRef { user, assistant, time, tools }, Vec::with_capacity(capacity))
        .expect("a turn body always encodes")
}

thread_local! {
    /// This thread's compressor, with the dictionary (by hash) it was made with: making one
    /// loads the dictionary (~0.2–0.5 ms), so a bulk import's threads make one each.
    static COMPRESSOR: RefCell<Option<(Option<u64>, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
}

/// Compresses a turn body (from [`body`]) with `dictionary`; keeps it raw when compression
/// does not make it smaller.
pub fn compress(body: Vec<u8>, dictionary: Option<&TextDictionary>) -> EncodedText {
    let wanted = dictionary.map(TextDictionary::hash);
    let compressed = COMPRESSOR.with(|cell| -> std::io::Result<Vec<u8>> {
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(hash, _)| *hash != wanted) {
            let mut compressor = match dictionary {
                Some(d) => zstd::bulk::Compressor::with_dictionary(LEVEL, d.bytes())?,
                None => zstd::bulk::Compressor::new(LEVEL)?,
            };
            // The row names its dictionary; the frame need not.
            compressor.set_parameter(zstd::stream::raw::CParameter::DictIdFlag(false))?;
            *cell = Some((wanted, compressor));
        }
        let (_, compressor) = cell.as_mut().expect("made above");
        compressor.compress(&body)
    });
    match compressed {
        Ok(bytes) if bytes.len() < body.len() => EncodedText { dictionary: wanted, compressed: true, bytes },
        Ok(_) => EncodedText { dictionary: None, compressed: false, bytes: body },
        Err(e) => {
            log::warn!("turn text stored uncompressed: zstd failed: {e}");
            EncodedText { dictionary: None, compressed: false, bytes: body }
        }
    }
}

/// The checksum that ends the row of block `key` whose other bytes are `bytes`.
fn checksum(key: u64, bytes: &[u8]) -> u32 {
    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, key) as u32
}

/// A `turns` row for block `key`: `record`'s gate and segment, then `text` (its text,
/// encoded), whose dictionary has id `dictionary_id` in the file, then the checksum.
pub fn row(key: u64, record: &TurnRecord, text: &EncodedText, dictionary_id: Option<u32>) -> Result<Vec<u8>, Error> {
    let head = TurnHead { gate: record.gate.clone(), segment_start: record.segment_start };
    let mut out = postcard::to_extend(&head, Vec::with_capacity(text.bytes.len() + 28))
        .map_err(|e| corrupt("turn head", e))?;
    let codec = match (text.compressed, text.dictionary, dictionary_id) {
        (false, _, _) => 0,
        (true, None, _) => 1,
        (true, Some(_), Some(id)) => id.checked_add(2).ok_or_else(|| corrupt("text dictionary", "id too large"))?,
        (true, Some(_), None) => return Err(Error::bug("a turn's text dictionary has no id in the file")),
    };
    super::postings::write_varint(&mut out, codec);
    out.extend_from_slice(&text.bytes);
    let sum = checksum(key, &out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(out)
}

/// Decompressors by dictionary id, made as rows need them: making one costs ~10 µs, and ~15 µs
/// more to load a dictionary, against ~1 µs to decompress a turn.
#[derive(Default)]
pub struct Decoders {
    plain: Option<zstd::bulk::Decompressor<'static>>,
    with_dictionary: Vec<(u32, zstd::bulk::Decompressor<'static>)>,
    /// Rows of formats 2 and 3 end without a checksum (read only to rebuild them).
    unchecked: bool,
}

/// Reads text dictionary `id` from the file (checked: [`TextDictionary::from_row`]).
pub type LoadDictionary<'a> = &'a mut dyn FnMut(u32) -> Result<Option<TextDictionary>, Error>;

impl Decoders {
    /// Decoders of the rows of formats 2 and 3, which have no checksum.
    pub fn unchecked() -> Self {
        Decoders { unchecked: true, ..Decoders::default() }
    }

    /// Decodes the `turns` row of block `key`, checking its checksum; `what` names the turn in
    /// errors, `load` reads a dictionary the row needs that no decoder has yet.
    pub fn decode(
        &mut self,
        key: u64,
        row: &[u8],
        what: impl Fn() -> String,
        load: LoadDictionary<'_>,
    ) -> Result<TurnRecord, Error> {
        let damaged = |e: &dyn std::fmt::Display| corrupt(what(), e);
        let row = if self.unchecked {
            row
        } else {
            let (row, sum) = row.split_last_chunk::<4>().ok_or_else(|| damaged(&"the row is cut short"))?;
            if checksum(key, row) != u32::from_le_bytes(*sum) {
                return Err(damaged(&"its checksum does not match: the row is damaged"));
            }
            row
        };
        let (head, rest): (TurnHead, &[u8]) = postcard::take_from_bytes(row).map_err(|e| damaged(&e))?;
        let mut reader = super::postings::Reader::new(rest);
        let codec = reader.varint().map_err(|e| damaged(&e))?;
        let body = &rest[reader.offset()..];
        let decompressed;
        let body = match codec {
            0 => body,
            _ => {
                let decompressor = self.decompressor(codec - 1, load).map_err(|e| damaged(&e))?;
                let size = zstd::zstd_safe::get_frame_content_size(body)
                    .ok()
                    .flatten()
                    .filter(|&size| size <= MAX_BODY_BYTES)
                    .ok_or_else(|| damaged(&"no size (or a size over 1 GiB) in its zstd frame"))?;
                decompressed = decompressor.decompress(body, size as usize).map_err(|e| damaged(&e))?;
                &decompressed
            }
        };
        let body: TurnBody = postcard::from_bytes(body).map_err(|e| damaged(&e))?;
        Ok(TurnRecord {
            user: body.user,
            assistant: body.assistant,
            gate: head.gate,
            segment_start: head.segment_start,
            time: body.time,
            tools: body.tools,
        })
    }

    /// The decompressor of `dictionary` (0: none; k + 1: dictionary k).
    fn decompressor(
        &mut self,
        dictionary: u32,
        load: LoadDictionary<'_>,
    ) -> Result<&mut zstd::bulk::Decompressor<'static>, String> {
        let Some(id) = dictionary.checked_sub(1) else {
            if self.plain.is_none() {
                self.plain = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
            }
            return Ok(self.plain.as_mut().expect("made above"));
        };
        let at = match self.with_dictionary.iter().position(|(d, _)| *d == id) {
            Some(at) => at,
            None => {
                let dictionary = load(id)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("its text dictionary {id} is not in the index"))?;
                let decompressor =
                    zstd::bulk::Decompressor::with_dictionary(dictionary.bytes()).map_err(|e| e.to_string())?;
                self.with_dictionary.push((id, decompressor));
                self.with_dictionary.len() - 1
            }
        };
        Ok(&mut self.with_dictionary[at].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(user: &str, assistant: &str) -> TurnRecord {
        TurnRecord {
            user: user.into(),
            assistant: assistant.into(),
            gate: GateRecord { switch: true, overlap: 0.25, new_ratio: 0.5, deictic: Some("this".into()) },
            segment_start: 7,
            time: Some("2026-12-03T10:00:00Z".into()),
            tools: vec![ToolRecord {
                name: "Bash".into(),
                call_id: Some("c1".into()),
                arguments: "{\"command\":\"ls\"}".into(),
                result_bytes: 12,
            }],
        }
    }

    fn encoded(r: &TurnRecord, dictionary: Option<&TextDictionary>) -> EncodedText {
        compress(body(&r.user, &r.assistant, &r.time, &r.tools), dictionary)
    }

    const KEY: u64 = 7 << 32 | 3;

    fn no_dictionaries(_: u32) -> Result<Option<TextDictionary>, Error> {
        Ok(None)
    }

    fn decode(decoders: &mut Decoders, row: &[u8]) -> Result<TurnRecord, Error> {
        decoders.decode(KEY, row, || "turn 0:0".into(), &mut no_dictionaries)
    }

    /// Turns that share most of their phrasing, as one log's do.
    fn turns(n: usize) -> Vec<TurnRecord> {
        (0..n)
            .map(|i| {
                record(
                    &format!("How do I configure the connection pool of service {i} for peak load?"),
                    &format!(
                        "Set max_connections to {} and the idle timeout to {} seconds; then watch \
                         the p99 latency of service {i} on the dashboard for a day before you raise it.",
                        i % 97,
                        i % 13
                    ),
                )
            })
            .collect()
    }

    #[test]
    fn rows_round_trip_with_and_without_compression() {
        let mut decoders = Decoders::default();
        let long = "the pool size and the timeout ".repeat(40);
        for r in [record("", ""), record("short", "x"), record(&long, &long), record("分布式锁", &long)] {
            let text = encoded(&r, None);
            let row = row(KEY, &r, &text, None).unwrap();
            assert_eq!(decode(&mut decoders, &row).unwrap(), r);
        }
        // The long text compresses; the short one is kept raw (codec 0).
        assert!(encoded(&record(&long, &long), None).compressed);
        assert!(!encoded(&record("short", "x"), None).compressed);
    }

    #[test]
    fn a_dictionary_trained_on_turns_shrinks_them_and_is_needed_to_read_them() {
        let turns = turns(4000);
        let bodies: Vec<Vec<u8>> = turns.iter().map(|r| body(&r.user, &r.assistant, &r.time, &r.tools)).collect();
        let raw: usize = bodies.iter().map(Vec::len).sum();
        let samples = sample(bodies.iter().map(Vec::as_slice));
        assert!(samples.iter().map(Vec::len).sum::<usize>() <= TRAIN_SAMPLE_BYTES + bodies[0].len());
        let dictionary = TextDictionary::train(&samples).expect("enough text to train on");
        let plain: usize = turns.iter().map(|r| encoded(r, None).len()).sum();
        let with: usize = turns.iter().map(|r| encoded(r, Some(&dictionary)).len()).sum();
        assert!(with * 2 < plain, "dictionary {with} bytes against zstd alone {plain} (raw {raw})");

        let stored = dictionary.row();
        let mut loads = 0;
        let mut load = |id| {
            loads += 1;
            (id == 3).then(|| TextDictionary::from_row(id, &stored)).transpose()
        };
        let mut decoders = Decoders::default();
        for r in &turns[..50] {
            let row = row(KEY, r, &encoded(r, Some(&dictionary)), Some(3)).unwrap();
            assert_eq!(decoders.decode(KEY, &row, String::new, &mut load).unwrap(), *r);
        }
        assert_eq!(loads, 1, "a dictionary is loaded once per decoder set");

        // A row that names a dictionary the file lacks is an error, not a panic.
        let row = row(KEY, &turns[0], &encoded(&turns[0], Some(&dictionary)), Some(4)).unwrap();
        let err = decode(&mut Decoders::default(), &row).unwrap_err();
        assert!(err.to_string().contains("text dictionary 4"), "{err}");
        // Nor without an id to name it by.
        assert!(super::row(KEY, &turns[0], &encoded(&turns[0], Some(&dictionary)), None).is_err());
        // A dictionary row with a byte changed is refused, not used.
        let mut damaged = dictionary.row();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        let err = TextDictionary::from_row(3, &damaged).unwrap_err();
        assert!(err.to_string().contains("text dictionary 3"), "{err}");
        assert!(TextDictionary::from_row(3, &damaged[..5]).is_err());
        assert_eq!(TextDictionary::from_row(3, &dictionary.row()).unwrap(), dictionary);
    }

    #[test]
    fn too_little_text_trains_no_dictionary() {
        let bodies: Vec<Vec<u8>> = turns(20).iter().map(|r| body(&r.user, &r.assistant, &r.time, &r.tools)).collect();
        assert!(TextDictionary::train(&bodies).is_none());
    }

    #[test]
    fn damaged_rows_are_errors() {
        let r = record(&"pool timeout ".repeat(50), "ok");
        let good = row(KEY, &r, &encoded(&r, None), None).unwrap();
        let mut decoders = Decoders::default();
        for cut in 0..good.len() {
            assert!(decode(&mut decoders, &good[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..good.len() {
            for bit in 0..8 {
                let mut flipped = good.clone();
                flipped[at] ^= 1 << bit;
                let err = decode(&mut decoders, &flipped).expect_err("a flipped bit is an error");
                assert!(err.to_string().contains("turn 0:0"), "{err}");
            }
        }
        // Found under another key (a damaged key): an error too.
        for bit in 0..64 {
            let err = decoders.decode(KEY ^ (1 << bit), &good, || "turn 0:0".into(), &mut no_dictionaries);
            assert!(err.is_err(), "key bit {bit}");
        }
        // A raw row of format 3 (no checksum) reads with the unchecked decoders.
        let raw = row(KEY, &r, &encoded(&r, None), None).unwrap();
        let legacy = &raw[..raw.len() - 4];
        assert_eq!(Decoders::unchecked().decode(0, legacy, String::new, &mut no_dictionaries).unwrap(), r);
    }

    /// A turn larger than today's limit, as versions before it stored (34 MB bricked its
    /// session: reads refused frames over 32 MiB), reads back.
    #[test]
    fn a_turn_stored_before_the_limit_reads_back() {
        let r = record(&"lease renewal ".repeat(34_000_000 / 14), "ok");
        let text = encoded(&r, None);
        assert!(text.compressed);
        let row = row(KEY, &r, &text, None).unwrap();
        assert_eq!(decode(&mut Decoders::default(), &row).unwrap(), r);
    }

    /// Golden bytes: if this fails, the on-disk format changed: bump FORMAT_VERSION.
    #[test]
    fn row_bytes_are_stable() {
        let r = TurnRecord {
            user: "hi".into(),
            assistant: "yo".into(),
            gate: GateRecord { switch: false, overlap: 0.0, new_ratio: 0.0, deictic: None },
            segment_start: 1,
            time: None,
            tools: vec![],
        };
        let row = row(KEY, &r, &encoded(&r, None), None).unwrap();
        let (body, sum) = row.split_last_chunk::<4>().unwrap();
        assert_eq!(body, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, b'h', b'i', 2, b'y', b'o', 0, 0]);
        assert_eq!(*sum, (xxhash_rust::xxh3::xxh3_64_with_seed(body, KEY) as u32).to_le_bytes());
    }
}

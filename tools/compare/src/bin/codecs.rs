//! `codecs FILE.jsonl...`: how small turn text gets under each codec and block size, and what
//! reading one turn back costs: the measurement the compressed turn store is chosen by (issue
//! 26). Each file is canonical JSONL (`session`, `user`, `assistant`); turns are kept in file
//! order and grouped into blocks of consecutive turns, as an index stores a session's turns.
//!
//! ```text
//! cargo run --release -p compare --bin codecs -- ../shared/eval-dev/recall/conversations.jsonl
//! ```
//!
//! Per configuration: bytes per turn (the compressed blocks plus a 4-byte length per turn to
//! find a turn in its block), the ratio to the raw text, the time to compress everything, and
//! the time to read one turn at random (decompress its block, slice the turn). A dictionary
//! (zstd's, trained on the first 10% of the turns, at most 100 KiB) is counted once in the
//! bytes.

use anyhow::{Context, Result, bail};
use std::io::BufRead;
use std::time::Instant;

#[derive(Clone, Copy)]
enum Codec {
    Zstd(i32),
    ZstdDict(i32),
    Lz4,
}

impl Codec {
    fn name(self) -> String {
        match self {
            Codec::Zstd(level) => format!("zstd -{level}"),
            Codec::ZstdDict(level) => format!("zstd -{level} + dictionary"),
            Codec::Lz4 => "lz4_flex".into(),
        }
    }
}

fn turns_of(path: &str) -> Result<Vec<String>> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {path}"))?;
    let mut turns = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let value: serde_json::Value = serde_json::from_str(&line?)?;
        let side = |key: &str| value.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        turns.push(format!("{}\n\n{}", side("user"), side("assistant")));
    }
    Ok(turns)
}

/// The blocks of `turns`, `size` consecutive turns each, as one byte string per block.
fn blocks(turns: &[String], size: usize) -> Vec<Vec<u8>> {
    turns.chunks(size).map(|chunk| chunk.concat().into_bytes()).collect()
}

struct Measured {
    bytes: usize,
    compress_s: f64,
    read_us: f64,
}

fn measure(codec: Codec, turns: &[String], size: usize, dictionary: &[u8]) -> Result<Measured> {
    let raw = blocks(turns, size);
    let started = Instant::now();
    let packed: Vec<Vec<u8>> = match codec {
        Codec::Zstd(level) => raw.iter().map(|b| zstd::bulk::compress(b, level)).collect::<Result<_, _>>()?,
        Codec::ZstdDict(level) => {
            let mut compressor = zstd::bulk::Compressor::with_dictionary(level, dictionary)?;
            raw.iter().map(|b| compressor.compress(b)).collect::<Result<_, _>>()?
        }
        Codec::Lz4 => raw.iter().map(|b| lz4_flex::compress_prepend_size(b)).collect(),
    };
    let compress_s = started.elapsed().as_secs_f64();
    let mut bytes: usize = packed.iter().map(Vec::len).sum::<usize>() + 4 * turns.len();
    if matches!(codec, Codec::ZstdDict(_)) {
        bytes += dictionary.len();
    }
    // One turn at a time, in a fixed pseudo-random order: each read decompresses its block.
    let reads = 2000.min(turns.len());
    let mut decompressor = match codec {
        Codec::ZstdDict(_) => zstd::bulk::Decompressor::with_dictionary(dictionary)?,
        _ => zstd::bulk::Decompressor::new()?,
    };
    let mut at = 7usize;
    let mut checksum = 0usize;
    let started = Instant::now();
    for _ in 0..reads {
        at = (at * 1_103_515_245 + 12_345) % turns.len();
        let block = at / size;
        let capacity = raw[block].len();
        let text = match codec {
            Codec::Lz4 => lz4_flex::decompress_size_prepended(&packed[block])?,
            _ => decompressor.decompress(&packed[block], capacity)?,
        };
        if text.len() != capacity {
            bail!("block {block} came back with {} bytes, not {capacity}", text.len());
        }
        checksum += text[text.len() / 2] as usize;
    }
    let read_us = started.elapsed().as_secs_f64() * 1e6 / reads as f64;
    std::hint::black_box(checksum);
    Ok(Measured { bytes, compress_s, read_us })
}

fn main() -> Result<()> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        bail!("usage: codecs FILE.jsonl... (canonical JSONL: session, user, assistant)");
    }
    for file in files {
        let turns = turns_of(&file)?;
        if turns.len() < 20 {
            bail!("{file}: {} turns, too few to measure", turns.len());
        }
        let raw: usize = turns.iter().map(String::len).sum();
        let sample: Vec<&[u8]> = turns[..turns.len() / 10].iter().map(|t| t.as_bytes()).collect();
        let sample_bytes: usize = sample.iter().map(|s| s.len()).sum();
        let dictionary = zstd::dict::from_samples(&sample, (100 << 10).min(sample_bytes / 4).max(1024))?;
        println!(
            "## {file}: {} turns, {:.0} raw bytes per turn, dictionary {} bytes\n",
            turns.len(),
            raw as f64 / turns.len() as f64,
            dictionary.len()
        );
        println!("| codec | turns per block | bytes per turn | of raw | compress MB/s | read one turn, µs |");
        println!("|---|---:|---:|---:|---:|---:|");
        for codec in [Codec::Lz4, Codec::Zstd(1), Codec::Zstd(3), Codec::Zstd(9), Codec::ZstdDict(3)] {
            for size in [1, 4, 16, 64] {
                let m = measure(codec, &turns, size, &dictionary)?;
                println!(
                    "| {} | {size} | {:.0} | {:.2} | {:.0} | {:.1} |",
                    codec.name(),
                    m.bytes as f64 / turns.len() as f64,
                    m.bytes as f64 / raw as f64,
                    raw as f64 / 1e6 / m.compress_s,
                    m.read_us
                );
            }
        }
        println!();
    }
    Ok(())
}

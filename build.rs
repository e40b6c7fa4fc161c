//! Writes the tables `--tokenizer cl100k|o200k` counts with, as byte arrays the program
//! includes and reads where they lie (`src/tokens/counting.rs`).
//!
//! `bpe-openai` deserializes every table of an encoding on first use (o200k: 32 MB, ~40 ms),
//! and even the five that counting (`BytePairEncoding::count`, the backtracking encoder) reads
//! cost a hook — a process per prompt — most of its CPU time: the 200,000 merges go into a hash
//! map, insert by insert. This script takes the crate's own tables and writes those five in a
//! form that needs no load: fixed-size little-endian entries indexed by token, the merges sorted
//! for a binary search, the token automaton serialized. `src/tokens.rs` checks the counts
//! against the crate's full encodings.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// `bpe::byte_pair_encoding::BytePairEncoding` field by field, as its derived serde writes it
/// (read back from postcard). The versions are pinned (`=`) in Cargo.toml: a change in the
/// crate's layout fails this build (or the count test in `src/tokens.rs`) instead of writing
/// the wrong table.
#[derive(Serialize, Deserialize)]
struct Tables {
    all_tokens: Vec<u8>,
    token_starts: Vec<u32>,
    bytes_hash_to_token: HashMap<u32, u32>,
    split_table: Vec<(u32, u32)>,
    pair_lookup: HashMap<(u32, u32), u32>,
    longest_searcher: serde_bytes::ByteBuf,
    overlapping_searcher: serde_bytes::ByteBuf,
    overlapping_searcher_rev: serde_bytes::ByteBuf,
    next_prefix_match: Vec<u32>,
    hash_factor: u64,
}

/// The tables counting reads, as byte arrays the program uses where they lie (`include_bytes!`,
/// `src/tokens/counting.rs`): nothing to deserialize or insert when a process starts, and only
/// the pages a count touches are ever read. Numbers are u32 little-endian unless said.
///
/// - `NAME.bytes`, `NAME.starts`: every token's bytes, one after the other, and where each
///   starts (one more entry than tokens: the end);
/// - `NAME.sorted`: the tokens in the order of their bytes, and `NAME.buckets`: for each two
///   bytes `b0 b1` (65,536, then the end), the first place in that order whose token starts
///   with them or after (a one-byte token counts as `b0 0`): the longest token a text starts
///   with is a binary search within its first two bytes' bucket away;
/// - `NAME.split`: each token's two halves (the merge that made it);
/// - `NAME.prefix`: each token's longest proper prefix that is a token (u32::MAX for none);
/// - `NAME.pairs`: the merges sorted by `(left, right)`, each as `right` then the merged token,
///   and `NAME.lefts`: for each token (then the end), where its merges as `left` begin.
fn write_static(out: &Path, name: &str, tables: &Tables) {
    let write = |ext: &str, bytes: Vec<u8>| {
        std::fs::write(out.join(format!("{name}.{ext}")), bytes).expect("OUT_DIR is writable");
    };
    let le = |words: &mut dyn Iterator<Item = u32>| -> Vec<u8> { words.flat_map(u32::to_le_bytes).collect() };
    let starts = &tables.token_starts;
    let token = |id: u32| &tables.all_tokens[starts[id as usize] as usize..starts[id as usize + 1] as usize];
    write("bytes", tables.all_tokens.clone());
    write("starts", le(&mut starts.iter().copied()));
    let mut sorted: Vec<u32> =
        (0..u32::try_from(starts.len() - 1).expect("fewer than 2^32 tokens")).collect();
    sorted.sort_unstable_by(|&a, &b| token(a).cmp(token(b)));
    let key = |id: u32| {
        let bytes = token(id);
        usize::from(bytes[0]) * 256 + bytes.get(1).copied().map_or(0, usize::from)
    };
    let buckets = (0..=65_536).map(|k| {
        let first = sorted.partition_point(|&id| key(id) < k);
        u32::try_from(first).expect("fewer than 2^32 tokens")
    });
    write("buckets", le(&mut buckets.into_iter()));
    write("sorted", le(&mut sorted.iter().copied()));
    write("split", le(&mut tables.split_table.iter().flat_map(|&(a, b)| [a, b])));
    write("prefix", le(&mut tables.next_prefix_match.iter().copied()));
    let mut pairs: Vec<(u32, u32, u32)> = tables.pair_lookup.iter().map(|(&(a, b), &c)| (a, b, c)).collect();
    pairs.sort_unstable();
    let lefts = (0..starts.len()).map(|token| {
        let first = pairs.partition_point(|&(left, _, _)| (left as usize) < token);
        u32::try_from(first).expect("fewer than 2^32 pairs")
    });
    write("lefts", le(&mut lefts.into_iter()));
    write("pairs", le(&mut pairs.iter().flat_map(|&(_, right, merged)| [right, merged])));
}

fn main() {
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    for (name, encoding) in [("cl100k", bpe_openai::cl100k_base()), ("o200k", bpe_openai::o200k_base())] {
        let full = postcard::to_allocvec(&encoding.bpe).expect("the encoding serializes");
        let tables: Tables = postcard::from_bytes(&full).expect("bpe's layout is the one above");
        write_static(Path::new(&out), name, &tables);
    }
    println!("cargo::rerun-if-changed=build.rs");
}

//! Writes the OpenAI encodings in the form `--tokenizer cl100k|o200k` loads: only what counting
//! needs.
//!
//! `bpe-openai` deserializes every table of an encoding on first use (o200k: 32 MB, ~40 ms),
//! although counting (`BytePairEncoding::count`, the backtracking encoder) reads only five of
//! them. A hook is a process per prompt, so that load is on every prompt's path. This script takes
//! the crate's own tables and blanks the ones counting never reads — the decoding bytes, the
//! token-by-hash map and the two overlapping automata (replaced by a valid one-pattern automaton)
//! — which leaves a third of the bytes and a third of the load. `src/tokens.rs` checks the
//! counts against the crate's full encodings.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// `bpe::byte_pair_encoding::BytePairEncoding` field by field, as its derived serde writes it.
/// The versions are pinned (`=`) in Cargo.toml: a change in the crate's layout fails this build
/// (or the count test in `src/tokens.rs`) instead of loading the wrong table. The tables are
/// written with postcard, which reads back faster than the crate's MessagePack (~13 against
/// ~18 ms for o200k).
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

fn main() {
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let placeholder = daachorse::DoubleArrayAhoCorasick::<u32>::with_values([(b"\0", 0u32)])
        .expect("a one-pattern automaton builds")
        .serialize();
    for (name, encoding) in [("cl100k", bpe_openai::cl100k_base()), ("o200k", bpe_openai::o200k_base())] {
        let full = postcard::to_allocvec(&encoding.bpe).expect("the encoding serializes");
        let mut tables: Tables = postcard::from_bytes(&full).expect("bpe's layout is the one above");
        tables.all_tokens = Vec::new();
        tables.bytes_hash_to_token = HashMap::new();
        tables.overlapping_searcher = serde_bytes::ByteBuf::from(placeholder.clone());
        tables.overlapping_searcher_rev = serde_bytes::ByteBuf::from(placeholder.clone());
        let counting = postcard::to_allocvec(&tables).expect("the tables serialize");
        std::fs::write(Path::new(&out).join(format!("{name}.counting")), counting)
            .expect("OUT_DIR is writable");
    }
    println!("cargo::rerun-if-changed=build.rs");
}

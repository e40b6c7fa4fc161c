//! Ordered key encodings: the only place that packs ids into keys.
//!
//! Integers are packed most-significant first, so numeric order is the order a range scan
//! reads: a session's turns are one contiguous range of [`block_key`]s, and an anchor's
//! posting rows are one contiguous range of [`posting_key`]s in `(session, turn)` order.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by anchor hashes, which are already uniformly distributed: hashing them again
/// (SipHash) was a measurable share of a bulk import.
pub type IdentityHashMap<K, V> = HashMap<K, V, BuildHasherDefault<IdentityHasher>>;

/// Passes a `u64` key through unchanged.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are expected; fold anything else in deterministically.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// `session << 32 | turn`: one turn of one session (a block).
pub fn block_key(session: u32, turn: u32) -> u64 {
    (u64::from(session) << 32) | u64::from(turn)
}

/// Splits a [`block_key`] into `(session, turn)`.
pub fn split_block_key(key: u64) -> (u32, u32) {
    ((key >> 32) as u32, key as u32)
}

/// `anchor_hash << 64 | session << 32 | turn`: the row of an anchor's postings that starts at
/// that turn of that session (`super::lists`).
pub fn posting_key(anchor_hash: u64, session: u32, chunk: u32) -> u128 {
    (u128::from(anchor_hash) << 64) | (u128::from(session) << 32) | u128::from(chunk)
}

/// Splits a [`posting_key`] into `(anchor_hash, session, chunk)`.
pub fn split_posting_key(key: u128) -> (u64, u32, u32) {
    ((key >> 64) as u64, (key >> 32) as u32, key as u32)
}

/// Every [`posting_key`] of one anchor, in every session.
pub fn anchor_range(anchor_hash: u64) -> std::ops::RangeInclusive<u128> {
    posting_key(anchor_hash, 0, 0)..=posting_key(anchor_hash, u32::MAX, u32::MAX)
}

/// `run << 64 | anchor_hash`: one anchor's postings in one run of an import (see
/// [`super::runs`]). A run's keys ascend in the order a fold writes them.
pub fn run_key(run: u32, anchor_hash: u64) -> u128 {
    (u128::from(run) << 64) | u128::from(anchor_hash)
}

/// Splits a [`run_key`] into `(run, anchor_hash)`.
pub fn split_run_key(key: u128) -> (u32, u64) {
    ((key >> 64) as u32, key as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_order() {
        assert_eq!(split_block_key(block_key(7, 42)), (7, 42));
        assert!(block_key(1, u32::MAX) < block_key(2, 0));
        assert_eq!(split_posting_key(posting_key(9, 3, 5)), (9, 3, 5));
        assert!(posting_key(9, 3, u32::MAX) < posting_key(9, 4, 0));
        assert!(posting_key(9, u32::MAX, u32::MAX) < posting_key(10, 0, 0));
        assert_eq!(split_run_key(run_key(2, u64::MAX)), (2, u64::MAX));
        assert!(run_key(1, u64::MAX) < run_key(2, 0));
    }
}

//! The pending (not yet folded) turns of a view, decoded in memory once per view, and the
//! store's cache of the last ones decoded.

use super::*;
use std::sync::Arc;

/// The pending (not yet folded) turns, decoded once per view.
#[derive(Debug, Default, Clone)]
pub struct PendingBlocks {
    /// `(block key, anchors)` in block-key order.
    pub(super) blocks: Vec<(u64, ForwardRecord)>,
    /// Pending turns per anchor, while every block was counted in (see
    /// [`add_uncounted`](Self::add_uncounted)).
    pub(super) df: IdentityHashMap<u64, u32>,
    /// Set once a block was added without counting: `df` is empty and unused from then on.
    pub(super) uncounted: bool,
    pub(super) len_user: u64,
    pub(super) len_assistant: u64,
    pub(super) postings: u64,
}

impl PendingBlocks {
    pub(super) fn add(&mut self, key: u64, forward: ForwardRecord) {
        if !self.uncounted {
            for &(hash, _, _) in &forward.entries {
                *self.df.entry(hash).or_default() += 1;
            }
        }
        self.insert(key, forward);
    }

    /// [`add`](Self::add) without counting the turn per anchor: a bulk writer counts its batch
    /// itself as it groups it (`Grouped::counting`), and a hash map update per posting was about
    /// a twentieth of its thread's time (`perf`, 400k turns). Frequencies of pending turns are
    /// counted from the blocks from then on, which only a caller other than the gate pays for.
    pub(super) fn add_uncounted(&mut self, key: u64, forward: ForwardRecord) {
        if !self.uncounted {
            self.uncounted = true;
            self.df = IdentityHashMap::default();
        }
        self.insert(key, forward);
    }

    pub(super) fn insert(&mut self, key: u64, forward: ForwardRecord) {
        self.len_user += u64::from(forward.len_user);
        self.len_assistant += u64::from(forward.len_assistant);
        self.postings += forward.entries.len() as u64;
        if self.blocks.last().is_none_or(|(last, _)| *last < key) {
            self.blocks.push((key, forward));
        } else {
            let at = self.blocks.partition_point(|(k, _)| *k < key);
            self.blocks.insert(at, (key, forward));
        }
    }

    /// Takes the turns of `keys` (ascending) out, leaving the others; `None` unless every key
    /// is a pending turn. The rest counts its frequencies from its blocks.
    pub(super) fn split_off(&mut self, keys: &[u64]) -> Option<PendingBlocks> {
        let mut taken = PendingBlocks { uncounted: true, ..PendingBlocks::default() };
        let mut rest = PendingBlocks { uncounted: true, ..PendingBlocks::default() };
        let mut keys = keys.iter().peekable();
        for (key, forward) in std::mem::take(&mut self.blocks) {
            if keys.next_if_eq(&&key).is_some() {
                taken.insert(key, forward);
            } else {
                rest.insert(key, forward);
            }
        }
        let all_found = keys.next().is_none();
        *self = rest;
        all_found.then_some(taken)
    }

    /// Pending turns with the anchor `hash`.
    pub(super) fn df(&self, hash: u64) -> u64 {
        if self.uncounted {
            self.blocks.iter().filter(|(_, f)| f.get(hash).is_some()).count() as u64
        } else {
            self.df.get(&hash).copied().map_or(0, u64::from)
        }
    }

    /// The distinct anchors of the pending turns.
    pub(super) fn anchors(&self) -> Vec<u64> {
        if self.uncounted {
            let mut hashes: Vec<u64> =
                self.blocks.iter().flat_map(|(_, f)| f.entries.iter().map(|e| e.0)).collect();
            hashes.sort_unstable();
            hashes.dedup();
            hashes
        } else {
            self.df.keys().copied().collect()
        }
    }

    /// Number of pending turns.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True if every turn is folded.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The pending turns of `session`, in turn order.
    pub fn of_session(&self, session: u32) -> impl Iterator<Item = (u32, &ForwardRecord)> {
        let start = self.blocks.partition_point(|(k, _)| *k < block_key(session, 0));
        self.blocks[start..]
            .iter()
            .map(|(k, f)| (split_block_key(*k), f))
            .take_while(move |((s, _), _)| *s == session)
            .map(|((_, t), f)| (t, f))
    }

    /// The anchors of one pending turn.
    pub fn get(&self, session: u32, turn: u32) -> Option<&ForwardRecord> {
        let key = block_key(session, turn);
        self.blocks.binary_search_by_key(&key, |(k, _)| *k).ok().map(|i| &self.blocks[i].1)
    }
}

impl PendingBlocks {
    /// Every pending turn as `(session, turn, anchors)`, in block-key order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, &ForwardRecord)> {
        self.blocks.iter().map(|(k, f)| {
            let (s, t) = split_block_key(*k);
            (s, t, f)
        })
    }
}

/// The fingerprint of one `pending` row: the sum of these over the rows identifies the table's
/// content (rows have distinct keys), and can be kept up to date as rows are added.
pub(super) fn row_fingerprint(key: u64, bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, key)
}

/// The pending turns a store decoded last, by the fingerprint of the `pending` table they
/// came from. Decoding them (up to [`FOLD_BATCH`] turns of anchors, each counted per anchor)
/// was a seventh of a one-turn add; hashing the rows to find whether they changed is a
/// fraction of that. Any process may have changed the table since: the fingerprint is taken
/// from the table itself at every open, so a stale entry is only a miss.
#[derive(Debug, Default)]
pub struct PendingCache {
    last: Mutex<Option<(u64, Arc<PendingBlocks>)>>,
    /// Tables decoded because the last blocks kept were not theirs (what the tests observe).
    #[cfg(test)]
    misses: std::sync::atomic::AtomicU64,
}

impl PendingCache {
    /// The blocks decoded from a table whose fingerprint was `fingerprint`, if they are the
    /// last ones kept.
    pub(super) fn get(&self, fingerprint: u64) -> Option<Arc<PendingBlocks>> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let hit = last.as_ref().filter(|(f, _)| *f == fingerprint).map(|(_, blocks)| Arc::clone(blocks));
        #[cfg(test)]
        if hit.is_none() {
            self.misses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        hit
    }

    /// How many views decoded the table themselves.
    #[cfg(test)]
    pub(crate) fn misses(&self) -> u64 {
        self.misses.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keeps `blocks`, the content of a table whose fingerprint is `fingerprint`.
    pub(crate) fn put(&self, fingerprint: u64, blocks: Arc<PendingBlocks>) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((fingerprint, blocks));
    }
}

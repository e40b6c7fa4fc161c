//! The postings of a set of new turns, grouped by anchor: the order a fold writes them in.
//!
//! A fold appends to each anchor's list in each session, so it needs the new postings grouped
//! by anchor and, within an anchor, in session and turn order. Grouping is pure work on the
//! turns' anchors: a bulk writer groups its next batch while the current one is written, so
//! the writer only walks the groups.

use super::codec::Posting;
use super::keys::{IdentityHashMap, split_block_key};
use super::{Error, corrupt};

/// One new posting: its block (an index into the fold's [`NewBlock`] table) and its term
/// frequencies. Its anchor is its group's: twelve bytes, where a bulk batch has 1.6M of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NewPosting {
    /// Index of its block in the block table.
    pub block: u32,
    /// Term frequency in the user text.
    pub tf_user: u32,
    /// Term frequency in the assistant text.
    pub tf_assistant: u32,
}

/// A block of a fold: its key and side lengths. In a block table, each session's blocks are
/// consecutive and in turn order, so sorting postings by block sorts each anchor's postings by
/// session and turn ([`crate::store::View::fold_grouped`] checks it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NewBlock {
    /// `session << 32 | turn`.
    pub key: u64,
    /// Anchor occurrences in the user text.
    pub len_user: u32,
    /// Anchor occurrences in the assistant text.
    pub len_assistant: u32,
}

/// New postings grouped by anchor (in hash order), each group in block order.
#[derive(Debug, Default)]
pub struct Grouped {
    /// Each anchor's hash and where its group ends in `postings`, ascending by hash.
    anchors: Vec<(u64, usize)>,
    postings: Vec<NewPosting>,
}

impl Grouped {
    /// Groups the postings of `turns`, given in block order with each turn's `(hash, tf user,
    /// tf assistant)` entries, by a counting sort ([`counting`](Self::counting)).
    pub fn by_anchor(turns: &[&[(u64, u32, u32)]]) -> Self {
        let in_block_order: Vec<u32> = (0..turns.len() as u32).collect();
        Self::counting(turns, &in_block_order).0
    }

    /// Groups the postings of `turns`, given in any order: `in_block_order` lists the turns'
    /// indices in block order (a permutation of `0..turns.len()`), so the block of `turns[i]` is
    /// the position of `i` in it. Also returns, for each entry of each turn in the order given
    /// (`turns[0]`'s first), how many of the turns given before it have its anchor: what a bulk
    /// writer's gate counts of the batch written before each turn.
    ///
    /// Each posting's hash is looked up once, to number the batch's anchors densely; counting,
    /// ordering and placing the postings then index arrays by that number. Linear in the
    /// postings: a comparison sort of a bulk batch's 1.6M postings cost three times as much as
    /// a counting sort through a hash map, and the second hash lookup of each posting, which
    /// this replaces, was half of that.
    pub fn counting(turns: &[&[(u64, u32, u32)]], in_block_order: &[u32]) -> (Self, Vec<u32>) {
        let total = turns.iter().map(|entries| entries.len()).sum();
        // Dense anchor numbers, in order of first appearance; each posting's number, and where
        // each turn's postings start.
        let mut number: IdentityHashMap<u64, u32> = IdentityHashMap::default();
        let mut hashes: Vec<u64> = Vec::new();
        let mut counts: Vec<u32> = Vec::new();
        let mut numbers: Vec<u32> = Vec::with_capacity(total);
        let mut earlier: Vec<u32> = Vec::with_capacity(total);
        let mut starts: Vec<usize> = Vec::with_capacity(turns.len() + 1);
        for entries in turns {
            starts.push(numbers.len());
            for &(hash, _, _) in *entries {
                let n = *number.entry(hash).or_insert_with(|| {
                    hashes.push(hash);
                    counts.push(0);
                    // Fewer anchors than postings, which a `Vec` holds.
                    (hashes.len() - 1) as u32
                });
                let count = &mut counts[n as usize];
                earlier.push(*count);
                *count += 1;
                numbers.push(n);
            }
        }
        starts.push(numbers.len());
        drop(number);
        // Groups in hash order: where each anchor's postings start.
        let mut by_hash: Vec<u32> = (0..hashes.len() as u32).collect();
        by_hash.sort_unstable_by_key(|&n| hashes[n as usize]);
        let mut next = vec![0usize; hashes.len()];
        let mut anchors = Vec::with_capacity(hashes.len());
        let mut end = 0;
        for &n in &by_hash {
            next[n as usize] = end;
            end += counts[n as usize] as usize;
            anchors.push((hashes[n as usize], end));
        }
        let mut postings = vec![NewPosting::default(); end];
        for (block, &i) in (0u32..).zip(in_block_order) {
            let i = i as usize;
            for (&(_, tf_user, tf_assistant), &n) in turns[i].iter().zip(&numbers[starts[i]..starts[i + 1]]) {
                // `next[n]` stays below the group's end: the group has a slot for each posting.
                let slot = &mut next[n as usize];
                postings[*slot] = NewPosting { block, tf_user, tf_assistant };
                *slot += 1;
            }
        }
        (Grouped { anchors, postings }, earlier)
    }

    /// Bytes it holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.anchors.capacity() * size_of::<(u64, usize)>()
            + self.postings.capacity() * size_of::<NewPosting>()
    }

    /// The postings of `hash`, in block order; empty if it has none.
    pub fn group(&self, hash: u64) -> &[NewPosting] {
        match self.anchors.binary_search_by_key(&hash, |&(h, _)| h) {
            Ok(i) => {
                let start = if i == 0 { 0 } else { self.anchors[i - 1].1 };
                &self.postings[start..self.anchors[i].1]
            }
            Err(_) => &[],
        }
    }

    /// Number of distinct anchors.
    pub fn anchors(&self) -> usize {
        self.anchors.len()
    }

    /// Number of postings.
    pub fn len(&self) -> usize {
        self.postings.len()
    }

    #[cfg(test)]
    /// True when there are no postings.
    pub fn is_empty(&self) -> bool {
        self.postings.is_empty()
    }

    /// Each anchor's postings, in hash order.
    pub fn groups(&self) -> impl Iterator<Item = (u64, &[NewPosting])> {
        let starts = std::iter::once(0).chain(self.anchors.iter().map(|&(_, end)| end));
        self.anchors.iter().zip(starts).map(|(&(hash, end), start)| (hash, &self.postings[start..end]))
    }
}

/// Calls `f(session, list)` for each session's postings in `group`, in order, collected in
/// `list` (a buffer the caller reuses); returns the number of lists. Each session's postings
/// are consecutive in a group: the block table's order.
pub(crate) fn for_each_list(
    group: &[NewPosting],
    blocks: &[NewBlock],
    list: &mut Vec<Posting>,
    mut f: impl FnMut(u32, &[Posting]) -> Result<(), Error>,
) -> Result<usize, Error> {
    let posting_of = |p: &NewPosting| {
        let block =
            blocks.get(p.block as usize).ok_or_else(|| corrupt("fold input", "a block out of range"))?;
        let (session, turn) = split_block_key(block.key);
        let (tf_user, tf_assistant) = (p.tf_user, p.tf_assistant);
        let (len_user, len_assistant) = (block.len_user, block.len_assistant);
        Ok::<_, Error>((session, Posting::new(turn, tf_user, tf_assistant, len_user, len_assistant)))
    };
    let mut lists = 0;
    let mut postings = group.iter();
    let mut next = postings.next().map(posting_of).transpose()?;
    while let Some((session, first)) = next {
        list.clear();
        list.push(first);
        next = None;
        for p in postings.by_ref() {
            let (s, posting) = posting_of(p)?;
            if s != session {
                next = Some((s, posting));
                break;
            }
            list.push(posting);
        }
        f(session, list)?;
        lists += 1;
    }
    Ok(lists)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_by_hash_then_block() {
        let blocks: [&[(u64, u32, u32)]; 3] =
            [&[(3, 1, 0), (9, 2, 1)], &[(3, 4, 0)], &[(5, 1, 1), (9, 0, 7)]];
        let grouped = Grouped::by_anchor(&blocks);
        type Group = (u64, Vec<(u32, u32, u32)>);
        let groups: Vec<Group> = grouped
            .groups()
            .map(|(h, g)| (h, g.iter().map(|p| (p.block, p.tf_user, p.tf_assistant)).collect()))
            .collect();
        assert_eq!(
            groups,
            [(3, vec![(0, 1, 0), (1, 4, 0)]), (5, vec![(2, 1, 1)]), (9, vec![(0, 2, 1), (2, 0, 7)])]
        );
        assert_eq!(grouped.len(), 5);
        assert!(Grouped::by_anchor(&[]).is_empty());
    }

    #[test]
    fn groups_match_a_sorted_map_of_the_postings() {
        // Turns of up to 40 anchors out of 300, each turn's entries ascending (as extraction
        // gives them); hashes spread over the whole u64 range.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let vocabulary: Vec<u64> = (0..300).map(|_| next()).collect();
        let turns: Vec<Vec<(u64, u32, u32)>> = (0..500)
            .map(|_| {
                let mut entries: Vec<(u64, u32, u32)> = (0..next() % 40)
                    .map(|_| (vocabulary[(next() % 300) as usize], (next() % 3) as u32, (next() % 5) as u32))
                    .collect();
                entries.sort_unstable_by_key(|e| e.0);
                entries.dedup_by_key(|e| e.0);
                entries
            })
            .collect();
        let mut expected: std::collections::BTreeMap<u64, Vec<NewPosting>> = Default::default();
        for (block, entries) in (0u32..).zip(&turns) {
            for &(hash, tf_user, tf_assistant) in entries {
                expected.entry(hash).or_default().push(NewPosting { block, tf_user, tf_assistant });
            }
        }
        let slices: Vec<&[(u64, u32, u32)]> = turns.iter().map(|t| &t[..]).collect();
        let grouped = Grouped::by_anchor(&slices);
        let groups: Vec<(u64, Vec<NewPosting>)> = grouped.groups().map(|(h, g)| (h, g.to_vec())).collect();
        assert_eq!(groups, expected.into_iter().collect::<Vec<_>>());
        assert_eq!(grouped.len(), turns.iter().map(Vec::len).sum::<usize>());

        // The same turns given in another order: every third first, then the rest.
        let given: Vec<u32> =
            (0..500u32).filter(|i| i % 3 == 0).chain((0..500).filter(|i| i % 3 != 0)).collect();
        let given_turns: Vec<&[(u64, u32, u32)]> = given.iter().map(|&b| &turns[b as usize][..]).collect();
        // Turn `b` (in block order) is given at the position of `b` in `given`.
        let mut in_block_order = vec![0u32; given.len()];
        for (position, &b) in (0u32..).zip(&given) {
            in_block_order[b as usize] = position;
        }
        let (counted, earlier) = Grouped::counting(&given_turns, &in_block_order);
        let counted_groups: Vec<(u64, Vec<NewPosting>)> =
            counted.groups().map(|(h, g)| (h, g.to_vec())).collect();
        assert_eq!(counted_groups, groups, "the blocks are the block order's, whatever order turns come in");
        let mut expected_earlier = Vec::new();
        for (position, entries) in given_turns.iter().enumerate() {
            for &(hash, _, _) in *entries {
                let before = given_turns[..position].iter().filter(|t| t.iter().any(|e| e.0 == hash)).count();
                expected_earlier.push(before as u32);
            }
        }
        assert_eq!(earlier, expected_earlier);
        for (hash, group) in &groups {
            assert_eq!(counted.group(*hash), &group[..]);
        }
        assert!(
            (0u64..).find(|h| !vocabulary.contains(h)).is_some_and(|absent| counted.group(absent).is_empty())
        );
        assert_eq!(counted.anchors(), groups.len());
    }
}

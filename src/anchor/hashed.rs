//! [`extract_hashed`](super::extract_hashed) and [`extract_user`](super::extract_user): the
//! anchors of a text as the index stores them, from one scan of the text and one of its quotes.
//!
//! Every occurrence is hashed where it is found, into one list per kind: words and phrases,
//! CJK n-grams. Each list is counted on its own ([`count`], which sorts most texts' lists by
//! bucket) and the two counts are merged: sorting two short lists of hashes costs less than
//! one long list of pairs. A user message's framing n-grams reuse the hashes of the n-grams
//! they are.

use super::{HashedAnchor, UserAnchors, cjk, framing, quoted, sorted_set, stopwords, word};

/// The hashes of a text's anchor occurrences, by kind.
pub struct Hits<'t, H> {
    text: &'t str,
    hash: &'t H,
    lower: word::Lowercase,
    /// Words longer than this are in no list asked about.
    longest_listed: usize,
    /// Words and quoted phrases.
    words: Vec<u64>,
    /// CJK 2- and 3-grams.
    ngrams: Vec<u64>,
    /// What the gate leaves out, for a user message only.
    user: Option<User>,
}

/// What the gate leaves out of a user message, beside its anchors.
#[derive(Default)]
struct User {
    /// Framing words and n-grams ([`super::framing_hashes`]).
    framing: Vec<u64>,
    /// CJK 3-grams ([`super::cjk_trigram_hashes`]).
    trigrams: Vec<u64>,
    runs: framing::RunFraming,
}

impl<'t, H: Fn(&str) -> u64> Hits<'t, H> {
    /// The hits of `text`, with its framing hashes if `user`.
    pub fn collect(text: &'t str, hash: &'t H, user: bool) -> Self {
        let mut hits = Hits {
            text,
            hash,
            lower: word::Lowercase::default(),
            longest_listed: if user { framing::LONGEST_ENGLISH } else { stopwords::LONGEST },
            // About one word per five bytes of prose: one allocation for most texts.
            words: Vec::with_capacity(text.len() / 5 + 4),
            ngrams: Vec::new(),
            user: user.then(User::default),
        };
        word::scan(text, &mut hits);
        quoted::for_each_phrase(text, |p| {
            // No phrase is an n-gram (those are not repeated as phrases), but say so by its kind.
            let list = if cjk::is_ngram(&p) { &mut hits.ngrams } else { &mut hits.words };
            list.push(hash(&p));
        });
        hits
    }

    /// The anchors.
    pub fn into_anchors(mut self) -> Vec<HashedAnchor> {
        merge_counts(count(&mut self.words, false), count(&mut self.ngrams, true))
    }

    /// The anchors and the gate's lists.
    pub fn into_user(mut self) -> UserAnchors {
        let User { framing, trigrams, .. } = self.user.take().unwrap_or_default();
        let anchors = merge_counts(count(&mut self.words, false), count(&mut self.ngrams, true));
        UserAnchors { anchors, framing: sorted_set(framing), trigrams: sorted_set(trigrams) }
    }
}

impl<H: Fn(&str) -> u64> word::Visitor for Hits<'_, H> {
    fn word_run(&mut self, run: word::WordRun<'_>) {
        let Some(word) = self.lower.word(run) else { return };
        // One lookup for both lists, skipped for words longer than any in them; a stop word is
        // neither an anchor nor framing.
        let listed = if word.len() <= self.longest_listed { word::listed(word) } else { 0 };
        if listed & word::STOP != 0 {
            return;
        }
        let h = (self.hash)(word);
        self.words.push(h);
        if let Some(user) = &mut self.user
            && listed & word::FRAMING != 0
        {
            user.framing.push(h);
        }
    }

    fn cjk_run(&mut self, run: &cjk::Run) {
        let (text, hash) = (self.text, self.hash);
        if self.ngrams.capacity() == 0 {
            // At most one n-gram of each size per character.
            self.ngrams.reserve(2 * cjk::chars_room(text.len() - run.start));
        }
        let bigrams_from = self.ngrams.len();
        let ngrams = &mut self.ngrams;
        run.for_each_ngram(text, 2, |g| ngrams.push(hash(g)));
        let trigrams_from = ngrams.len();
        run.for_each_ngram(text, 3, |g| ngrams.push(hash(g)));
        let Some(user) = &mut self.user else { return };
        if user.trigrams.capacity() == 0 {
            user.trigrams.reserve(cjk::chars_room(text.len() - run.start));
            user.framing.reserve(2 * cjk::chars_room(text.len() - run.start));
        }
        let bigrams = &self.ngrams[bigrams_from..trigrams_from];
        let trigrams = &self.ngrams[trigrams_from..];
        user.trigrams.extend_from_slice(trigrams);
        let framing = &mut user.framing;
        user.runs.for_each_hash(text, run, [bigrams, trigrams], hash, |h| framing.push(h));
    }
}

/// Anchors of one kind with their term frequencies, sorted by hash, from the hashes of their
/// occurrences (which it may reorder).
fn count(hashes: &mut [u64], cjk_ngram: bool) -> Vec<HashedAnchor> {
    if !(BUCKETS_FROM..=BUCKETS_UP_TO).contains(&hashes.len()) {
        hashes.sort_unstable();
        let mut anchors: Vec<HashedAnchor> = Vec::with_capacity(hashes.len());
        for &hash in &*hashes {
            match anchors.last_mut() {
                Some(last) if last.hash == hash => last.tf += 1,
                _ => anchors.push(HashedAnchor { hash, tf: 1, cjk_ngram }),
            }
        }
        return anchors;
    }
    let mut anchors = bucket_sorted(hashes, cjk_ngram);
    anchors.dedup_by(|next, kept| {
        let same = next.hash == kept.hash;
        if same {
            kept.tf += next.tf;
        }
        same
    });
    anchors
}

/// Lists this short are sorted by comparisons, longer ones by [`bucket_sorted`].
const BUCKETS_FROM: usize = 64;
/// Longer lists fill the 256 buckets so much that ordering within them costs more than a
/// comparison sort.
const BUCKETS_UP_TO: usize = 4096;

/// One anchor per hash of `hashes`, sorted by hash.
///
/// Hashes are uniform, so one pass that puts each in place by its top byte leaves only
/// neighbours out of order, for an insertion sort to finish: about twice as fast as a
/// comparison sort for the few hundred hashes of a text, and sorting was the largest cost of
/// counting them. At most [`BUCKETS_UP_TO`] hashes, so that bucket offsets fit in `u16`.
fn bucket_sorted(hashes: &[u64], cjk_ngram: bool) -> Vec<HashedAnchor> {
    let anchor = |hash| HashedAnchor { hash, tf: 1, cjk_ngram };
    let bucket = |hash: u64| (hash >> 56) as usize;
    // `next[b]`: where the next hash of bucket `b` goes.
    let mut next = [0u16; 257];
    for &h in hashes {
        next[bucket(h) + 1] += 1;
    }
    for b in 1..next.len() {
        next[b] += next[b - 1];
    }
    let mut anchors = vec![anchor(0); hashes.len()];
    for &h in hashes {
        let slot = &mut next[bucket(h)];
        anchors[usize::from(*slot)] = anchor(h);
        *slot += 1;
    }
    insertion_sort(&mut anchors);
    anchors
}

/// Sorts `anchors` by hash; fast when each is near its place.
fn insertion_sort(anchors: &mut [HashedAnchor]) {
    for i in 1..anchors.len() {
        let moving = anchors[i];
        let mut j = i;
        while j > 0 && anchors[j - 1].hash > moving.hash {
            anchors[j] = anchors[j - 1];
            j -= 1;
        }
        anchors[j] = moving;
    }
}

/// Two lists of anchors sorted by hash as one. Lists of different kinds share no anchor; a
/// hash in both (a collision) adds up its term frequencies, as counting all hashes together
/// would.
fn merge_counts(a: Vec<HashedAnchor>, b: Vec<HashedAnchor>) -> Vec<HashedAnchor> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) {
        if x.hash < y.hash {
            out.push(x);
            i += 1;
        } else if y.hash < x.hash {
            out.push(y);
            j += 1;
        } else {
            out.push(HashedAnchor { tf: x.tf + y.tf, ..x });
            (i, j) = (i + 1, j + 1);
        }
    }
    out.extend_from_slice(a.get(i..).unwrap_or_default());
    out.extend_from_slice(b.get(j..).unwrap_or_default());
    out
}

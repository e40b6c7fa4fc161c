//! Anchor extraction (DESIGN §3.1) on any text: the hashed extractions the index uses must
//! agree with the text extraction they are defined by.
#![no_main]

use ctxgate::anchor::{self, HashedAnchor, UserAnchors};
use ctxgate::store::anchor_hash;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let counts = anchor::extract(text);
    let mut expected: Vec<HashedAnchor> = counts
        .entries()
        .iter()
        .map(|(a, tf)| HashedAnchor { hash: anchor_hash(a), tf: *tf, cjk_ngram: anchor::is_cjk_ngram(a) })
        .collect();
    expected.sort_unstable_by_key(|a| a.hash);
    assert_eq!(counts.total(), counts.entries().iter().map(|(_, tf)| tf).sum::<u32>());
    assert_eq!(anchor::extract_hashed(text, anchor_hash), expected);
    let user = UserAnchors {
        anchors: expected,
        framing: anchor::framing_hashes(text, anchor_hash),
        trigrams: anchor::cjk_trigram_hashes(text, anchor_hash),
    };
    assert_eq!(anchor::extract_user(text, anchor_hash), user);
    anchor::for_each_single_anchor(text, true, |a| assert!(!a.is_empty()));
    let _ = anchor::fallback_anchor(text);
});

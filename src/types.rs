//! Types shared below the index and the algorithms: the id of an anchor, which both compute,
//! the posting, which storage decodes and recall scores, and the turn id.

use xxhash_rust::xxh3::xxh3_64;

/// A turn id: the position of a turn in its session, from 0.
pub type TurnId = u32;

/// The stable 64-bit id of an anchor (XXH3-64 of its UTF-8 text).
///
/// Postings and document frequencies are keyed by it, so a query looks an anchor up without a
/// dictionary. With 10^7 distinct anchors the chance of any collision is ~3·10^-6; a collision
/// would merge two anchors' statistics, never corrupt the file.
pub fn anchor_hash(anchor: &str) -> u64 {
    xxh3_64(anchor.as_bytes())
}

/// One occurrence of an anchor in a block: where, how often per side, and the sides' lengths
/// (as decoded from their one-byte norms, so quantized). A side's length is 0 where the
/// anchor does not occur in it ([`Posting::new`]): BM25 never reads it there, and posting
/// chunks do not store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    /// Turn id within the session.
    pub turn: u32,
    /// Term frequency in the user text.
    pub tf_user: u32,
    /// Term frequency in the assistant text.
    pub tf_assistant: u32,
    /// Anchor occurrences in the user text (BM25 document length).
    pub len_user: u32,
    /// Anchor occurrences in the assistant text.
    pub len_assistant: u32,
}

impl Posting {
    /// A posting with each side's length kept only where the anchor occurs in that side.
    pub fn new(turn: u32, tf_user: u32, tf_assistant: u32, len_user: u32, len_assistant: u32) -> Self {
        Posting {
            turn,
            tf_user,
            tf_assistant,
            len_user: if tf_user == 0 { 0 } else { len_user },
            len_assistant: if tf_assistant == 0 { 0 } else { len_assistant },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_hash_is_stable() {
        // Stored on disk: this value must never change without a FORMAT_VERSION bump.
        assert_eq!(anchor_hash("redis"), xxh3_64(b"redis"));
        assert_ne!(anchor_hash("redis"), anchor_hash("Redis"));
    }
}

//! Posting chunks (`store::postings`): any bytes decode or fail without a panic, and postings
//! encoded by the chunk builder (in one go or continued, as a fold extends a list's tail
//! chunk) decode to what was pushed.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use ctxgate::fuzzing;
use ctxgate::store::Posting;
use libfuzzer_sys::fuzz_target;

/// Postings of ascending turns: each turn is the previous one plus `gap + 1`.
#[derive(Debug, Arbitrary)]
struct Pushed {
    first_turn: u32,
    postings: Vec<(u16, u32, u32, u32, u32)>,
    /// How many postings the first encoding holds; the rest continue its chunk.
    split: u8,
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        decode_any(rest);
    } else if let Ok(pushed) = Pushed::arbitrary_take_rest(Unstructured::new(rest)) {
        round_trip(&pushed);
    }
});

fn decode_any(bytes: &[u8]) {
    let header = fuzzing::posting_header(bytes);
    let Ok(postings) = fuzzing::decode_postings(bytes) else { return };
    // Readers step over a chunk by its header: a chunk that decodes must have a true one.
    let (count, last_turn) = header.expect("a chunk that decodes has a header");
    assert_eq!(count as usize, postings.len());
    if let Some(last) = postings.last() {
        assert_eq!(last.turn, last_turn);
    }
    // Continuing a decoded chunk with a later turn keeps every posting.
    if let Some(next) = postings.last().map_or(Some(0), |p| p.turn.checked_add(1)) {
        let p = Posting { turn: next, tf_user: 1, tf_assistant: 0, len_user: 1, len_assistant: 0 };
        if let Ok(extended) = fuzzing::extend_chunk(bytes, &[p]) {
            let again = fuzzing::decode_postings(&extended).expect("an extended chunk decodes");
            assert_eq!(again.len(), postings.len() + 1);
            assert_eq!(&again[..postings.len()], &postings[..]);
            assert_eq!(again.last(), Some(&p));
        }
    }
}

fn round_trip(pushed: &Pushed) {
    let mut postings = Vec::with_capacity(pushed.postings.len());
    let mut turn = pushed.first_turn;
    for (i, &(gap, tf_user, tf_assistant, len_user, len_assistant)) in pushed.postings.iter().enumerate() {
        if i > 0 {
            let Some(next) = turn.checked_add(u32::from(gap) + 1) else { break };
            turn = next;
        }
        // As the index makes them: a side without the anchor has no length.
        postings.push(Posting::new(turn, tf_user, tf_assistant, len_user, len_assistant));
    }
    let split = usize::from(pushed.split).min(postings.len());
    let first = fuzzing::extend_chunk(&[], &postings[..split]).expect("ascending postings encode");
    let chunk = if split == 0 {
        fuzzing::extend_chunk(&[], &postings)
    } else {
        fuzzing::extend_chunk(&first, &postings[split..])
    }
    .expect("ascending postings continue a chunk");
    let decoded = fuzzing::decode_postings(&chunk).expect("an encoded chunk decodes");
    let stored: Vec<Posting> = postings
        .iter()
        .map(|p| {
            Posting::new(p.turn, p.tf_user, p.tf_assistant, fuzzing::quantize_len(p.len_user), fuzzing::quantize_len(p.len_assistant))
        })
        .collect();
    assert_eq!(decoded, stored);
    assert_eq!(
        fuzzing::posting_header(&chunk),
        Ok((postings.len() as u32, postings.last().map_or(0, |p| p.turn)))
    );
}

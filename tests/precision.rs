//! Precision: a history that holds nothing for a prompt gives nothing, and says why.
//!
//! Several people's conversations share everyday words (invented here, in no list of the code)
//! and each has its own names and subjects. A question about one conversation's people, asked
//! in another's session, must select nothing, with `empty_because`; asked in its own session it
//! must find its turns. The cross-session search marks which hits bear on the query.

mod common;

use common::Rng;
use ctxgate::{EmptyBecause, Gatekeeper, Options, Policy, SelectOptions};

/// A word of `words`, at random.
fn pick<'a>(rng: &mut Rng, words: &'a [String]) -> &'a str {
    &words[rng.below(words.len())]
}

/// An invented word: consonant-vowel syllables, never an English word of the lists.
fn invented(rng: &mut Rng, syllables: usize) -> String {
    const C: &[u8] = b"bdfgklmnprstvz";
    const V: &[u8] = b"aeiou";
    (0..syllables)
        .flat_map(|_| {
            let c = C[(rng.next() % C.len() as u64) as usize] as char;
            let v = V[(rng.next() % V.len() as u64) as usize] as char;
            [c, v]
        })
        .collect()
}

struct Person {
    name: String,
    subjects: Vec<String>,
}

/// An index of several people's conversations, the people, and the everyday words they share.
struct Index {
    _dir: tempfile::TempDir,
    gk: Gatekeeper,
    people: Vec<Person>,
    everyday: Vec<String>,
}

/// Four conversations of 80 turns: every turn says a few everyday words; one in three names
/// the conversation's person and one of its subjects.
fn index() -> Result<Index, Box<dyn std::error::Error>> {
    let mut rng = Rng(0x5eed_1234);
    let everyday: Vec<String> = (0..30).map(|_| invented(&mut rng, 2)).collect();
    let people: Vec<Person> = (0..4)
        .map(|_| Person {
            name: invented(&mut rng, 3),
            subjects: (0..6).map(|_| invented(&mut rng, 4)).collect(),
        })
        .collect();
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    for (p, person) in people.iter().enumerate() {
        let session = gk.session(&format!("people-{p}"))?;
        for turn in 0..80 {
            let mut user: Vec<&str> = (0..4).map(|_| pick(&mut rng, &everyday)).collect();
            let mut assistant: Vec<&str> = (0..5).map(|_| pick(&mut rng, &everyday)).collect();
            if turn % 3 == 0 {
                user.push(&person.name);
                assistant.push(pick(&mut rng, &person.subjects));
            }
            session.add_turn(&format!("{}?", user.join(" ")), &format!("{}.", assistant.join(" ")))?;
        }
    }
    Ok(Index { _dir: dir, gk, people, everyday })
}

#[test]
fn a_question_about_other_people_gets_nothing_and_says_why() -> Result<(), Box<dyn std::error::Error>> {
    let Index { _dir, gk, people, everyday } = index()?;
    let mut asked = 0;
    for (p, person) in people.iter().enumerate() {
        for (s, subject) in person.subjects.iter().enumerate() {
            // The question carries everyday words too: they are what another history shares.
            let query =
                format!("when did {} {} the {subject} {}", person.name, everyday[s], everyday[s + 10]);
            for policy in [Policy::Minimal, Policy::Fill] {
                let options =
                    SelectOptions { policy: Some(policy), budget: Some(2000), ..Default::default() };
                let own = gk.session(&format!("people-{p}"))?.select_with(&query, &options)?;
                assert!(!own.blocks.is_empty(), "{query:?} in its own session selected nothing: {own:?}");
                assert!(own.empty_because.is_none());
                let stranger = gk.session(&format!("people-{}", (p + 1) % people.len()))?;
                let other = stranger.select_with(&query, &options)?;
                assert!(other.blocks.is_empty(), "{query:?} in another person's session: {:?}", other.blocks);
                assert!(other.empty_because.is_some(), "an empty selection says why");
                asked += 1;
            }
        }
    }
    assert_eq!(asked, 48);
    Ok(())
}

#[test]
fn everyday_words_alone_never_admit_a_turn() -> Result<(), Box<dyn std::error::Error>> {
    let Index { _dir, gk, .. } = index()?;
    let session = gk.session("people-0")?;
    // Words every conversation uses evenly: the history holds them, and they name nothing.
    let turn = session.turn(1)?.expect("turn 1");
    let words: Vec<&str> = turn.user.trim_end_matches('?').split(' ').take(3).collect();
    let query = words.join(" ");
    for policy in [Policy::Minimal, Policy::Fill] {
        let options = SelectOptions { policy: Some(policy), ..Default::default() };
        let selection = session.select_with(&query, &options)?;
        assert!(selection.blocks.is_empty(), "{query:?} ({policy:?}) selected {:?}", selection.blocks);
        assert!(
            matches!(
                selection.empty_because,
                Some(EmptyBecause::NotSpecific { .. } | EmptyBecause::OnlyPhrasing { .. })
            ),
            "{:?}",
            selection.empty_because
        );
    }
    Ok(())
}

#[test]
fn search_marks_the_hits_that_bear_on_the_query() -> Result<(), Box<dyn std::error::Error>> {
    let Index { _dir, gk, people, .. } = index()?;
    let person = &people[2];
    let query = format!("{} {}", person.name, person.subjects[0]);
    let hits = gk.search(&query, 20)?;
    assert!(hits.iter().any(|h| h.session == "people-2" && h.bears), "{hits:?}");
    // Everyday words only: no hit bears.
    let turn = gk.session("people-3")?.turn(1)?.expect("turn 1");
    let everyday = turn.user.trim_end_matches('?').split(' ').take(2).collect::<Vec<_>>().join(" ");
    let hits = gk.search(&everyday, 20)?;
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| !h.bears), "{everyday:?}: {hits:?}");
    Ok(())
}

//! What a selection hands the model, through the library on a real index file: `fill` spends
//! its budget past the top 20, takes turns that share a specific anchor before turns that share
//! only a common one, hands whole turns over where the budget allows; evidence admitted by a
//! word the history uses everywhere does not compete.

use ctxgate::{EvidenceOptions, Gatekeeper, Options, Policy, SelectOptions, Selection};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn select(gk: &Gatekeeper, query: &str, policy: Policy, budget: u32) -> Result<Selection, ctxgate::Error> {
    let options = SelectOptions { budget: Some(budget), policy: Some(policy), ..SelectOptions::default() };
    gk.session("s")?.select_with(query, &options)
}

fn within_budget(selection: &Selection) {
    let used: u32 = selection.blocks.iter().map(|b| b.tokens).sum::<u32>()
        + selection.evidence.iter().map(|e| e.tokens).sum::<u32>();
    assert_eq!(used, selection.budget.used);
    assert!(selection.budget.used <= selection.budget.limit, "{:?}", selection.budget);
}

#[test]
fn fill_spends_the_budget_past_the_top_twenty() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    for i in 0..80 {
        session.add_turn(
            &format!("Note {i}: the lease of worker w{i} was renewed."),
            &format!("Worker w{i} keeps its lease for {i} seconds more."),
        )?;
    }
    let minimal = select(&gk, "when was the lease renewed", Policy::Minimal, 8000)?;
    let fill = select(&gk, "when was the lease renewed", Policy::Fill, 8000)?;
    within_budget(&minimal);
    within_budget(&fill);
    assert!(fill.blocks.len() > 20, "fill reads past the top 20: {} blocks", fill.blocks.len());
    assert!(fill.budget.used > 8000 / 2, "fill spends the budget: {:?}", fill.budget);
    let fill_turns: Vec<u32> = fill.blocks.iter().map(|b| b.turn_id).collect();
    assert!(minimal.blocks.iter().all(|b| fill_turns.contains(&b.turn_id)), "fill keeps minimal's choice");
    Ok(())
}

#[test]
fn fill_hands_whole_turns_over_where_the_budget_allows() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    session.add_turn("We met at the pottery class today.", "Nice, how was it?")?;
    let reply = "It was lovely. The teacher showed us glazes. My favourite was the cobalt one, deep blue. \
                 We fired it twice. Then we went home.";
    session.add_turn("Tell me about the glazing workshop.", reply)?;
    for i in 0..10 {
        session.add_turn(&format!("Unrelated chat number {i} about trains."), "Trains are fun.")?;
    }
    let query = "What did the teacher show in the glazing workshop?";
    let minimal = select(&gk, query, Policy::Minimal, 4000)?;
    let fill = select(&gk, query, Policy::Fill, 4000)?;
    within_budget(&fill);
    let block = |s: &Selection| s.blocks.iter().find(|b| b.turn_id == 1).cloned();
    let pruned = block(&minimal).ok_or("minimal selects the workshop turn")?;
    let whole = block(&fill).ok_or("fill selects the workshop turn")?;
    assert!(!pruned.assistant.contains("cobalt"), "minimal prunes: {:?}", pruned.assistant);
    assert_eq!(whole.assistant, reply, "fill hands the turn over whole");
    assert!(whole.tokens > pruned.tokens);
    // With a budget that holds the pruned turn but not the whole one, the turn stays pruned.
    let tight = select(&gk, query, Policy::Fill, pruned.tokens + 30)?;
    within_budget(&tight);
    assert_eq!(block(&tight).map(|b| b.assistant), Some(pruned.assistant));
    Ok(())
}

#[test]
fn fill_takes_a_specific_lead_before_common_ones_that_score_higher() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    // Two other conversations, longer together than this one: the null model under which
    // `fill` may offer turns beyond the focus (without one it takes focus turns only).
    for other in ["trains", "boats"] {
        let other = gk.session(other)?;
        for i in 0..30 {
            other.add_turn(&format!("The {i}th timetable changed again."), "Check the station board.")?;
        }
    }
    let session = gk.session("s")?;
    // Two turns name the watchdog; every other turn names Caroline, the newest ones twice.
    let filler = "We talked for a long while about many things and nothing in particular at all today";
    session.add_turn("Caroline set up the watchdog.", "Good.")?;
    session.add_turn("Hi.", &format!("{filler}. {filler}. Also the watchdog barked once. {filler}."))?;
    for i in 0..40 {
        session.add_turn(&format!("Caroline, Caroline: day {i}."), &format!("Caroline said hi {i}."))?;
    }
    let query = "What did Caroline say about the watchdog?";
    let wide = select(&gk, query, Policy::Fill, 20_000)?;
    let score = |s: &Selection, turn: u32| s.blocks.iter().find(|b| b.turn_id == turn).map(|b| b.score);
    let lead = score(&wide, 1).ok_or("turn 1 holds the watchdog")?;
    let common_above =
        wide.blocks.iter().filter(|b| b.turn_id > 1 && b.score > lead).map(|b| b.turn_id).collect::<Vec<_>>();
    assert!(!common_above.is_empty(), "the test needs common turns ranked above turn 1 (lead {lead})");
    let first = wide.blocks.iter().find(|b| b.turn_id == 0).ok_or("turn 0 is selected")?.tokens;
    let second = select(&gk, query, Policy::Minimal, 20_000)?;
    assert_eq!(second.blocks.iter().map(|b| b.turn_id).collect::<Vec<_>>(), [0], "minimal takes turn 0 only");
    // The smallest budget at which `fill` hands over the specific lead: the higher-scored
    // common turns, cheaper, would have fitted in its place, and none is taken.
    let mut budget = first;
    let tight = loop {
        budget += 4;
        let selection = select(&gk, query, Policy::Fill, budget)?;
        if selection.blocks.iter().any(|b| b.turn_id == 1) {
            break selection;
        }
        assert!(budget < 2000, "fill never takes turn 1");
    };
    within_budget(&tight);
    let turns: Vec<u32> = tight.blocks.iter().map(|b| b.turn_id).collect();
    assert_eq!(turns, [0, 1], "the specific lead, not the higher-scored common turns {common_above:?}");
    let common = wide.blocks.iter().find(|b| b.turn_id == common_above[0]).ok_or("selected")?;
    assert!(common.tokens < tight.blocks[1].tokens, "a common turn is cheaper than the lead");
    Ok(())
}

#[test]
fn evidence_found_by_a_word_the_history_uses_everywhere_is_not_offered() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    for i in 0..30 {
        session.add_turn(
            &format!("The p99 latency was {} ms after change {i}.", 20 + i),
            &format!("So {i} ms more than the target of {} ms.", 10 + i),
        )?;
    }
    let doc = "GET /health took 12 ms\nGET /orders took 340 ms\n";
    gk.put_evidence("logs/requests.txt", doc.as_bytes(), &EvidenceOptions::default())?;
    let weak = select(&gk, "After setting 384 we see GC pauses of 800 ms.", Policy::Minimal, 4000)?;
    assert!(weak.evidence.is_empty(), "offered by `ms` alone: {:?}", weak.evidence);
    // The same document is offered when the query names what it holds.
    let strong = select(&gk, "How long did GET /orders take in ms?", Policy::Minimal, 4000)?;
    assert_eq!(
        strong.evidence.iter().map(|e| e.evidence_ref.as_str()).collect::<Vec<_>>(),
        ["logs/requests.txt"]
    );
    Ok(())
}

#[test]
fn a_deictic_follow_up_takes_the_topics_latest_turn() -> TestResult {
    // The earlier topic's turns repeat the follow-up's own words; the current topic's do not.
    let cases = [
        (
            ["分布式锁过期了。那这个呢？", "锁的过期时间要大于业务耗时。那这个呢？续期。"],
            ["协程调度卡住了，事件循环要怎么排查？", "先检查阻塞调用，再看事件循环的任务队列。"],
            "那这个呢？",
        ),
        (
            [
                "The redis lock expired. Go on, what else?",
                "Renew the lease before it ends. What else? Go on.",
            ],
            ["The asyncio event loop stalls under load.", "Look for a blocking call inside a coroutine."],
            "And then what?",
        ),
    ];
    for (old, current, query) in cases {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        let session = gk.session("s")?;
        for _ in 0..3 {
            session.add_turn(old[0], old[1])?;
        }
        for i in 0..3 {
            session.add_turn(&format!("{} ({i})", current[0]), current[1])?;
        }
        for policy in [Policy::Minimal, Policy::Fill] {
            let selection = select(&gk, query, policy, 4000)?;
            within_budget(&selection);
            assert_eq!(selection.decision.topic, ctxgate::Topic::Continue, "{query}");
            assert!(selection.decision.deictic.is_some(), "{query}");
            let turns: Vec<u32> = selection.blocks.iter().map(|b| b.turn_id).collect();
            assert!(
                turns.contains(&5),
                "{query}: the latest turn is the context: {turns:?} {:?} {:?}",
                selection.anchors,
                selection.decision
            );
            if policy == Policy::Minimal {
                assert!(turns.iter().all(|&t| t >= 3), "{query}: no turn of the earlier topic: {turns:?}");
            }
            let latest = selection.blocks.iter().find(|b| b.turn_id == 5).ok_or("turn 5")?;
            assert_eq!(latest.assistant, current[1], "handed over whole");
        }
        // Without room for it, nothing is forced in.
        let tight = select(&gk, query, Policy::Minimal, 10)?;
        within_budget(&tight);
        assert!(tight.blocks.is_empty());
    }
    Ok(())
}

#[test]
fn a_block_hands_over_its_turns_time_and_counts_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("log.jsonl");
    let mut lines = String::new();
    for i in 0..12 {
        let (user, time) = match i {
            7 => ("I went to the pottery class yesterday.".to_string(), "1:56 pm on 8 May, 2023"),
            _ => (format!("Routine note {i} about the garden."), "10:00 am on 1 June, 2023"),
        };
        let line =
            serde_json::json!({"session": "s", "turn": i, "user": user, "assistant": "Nice.", "time": time});
        lines.push_str(&format!("{line}\n"));
    }
    std::fs::write(&log, lines)?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    gk.import(&[log], &ctxgate::ImportOptions::default())?;
    for policy in [Policy::Minimal, Policy::Fill] {
        let selection = select(&gk, "When did I go to the pottery class?", policy, 4000)?;
        within_budget(&selection);
        let block = selection.blocks.iter().find(|b| b.turn_id == 7).ok_or("the pottery turn is selected")?;
        assert_eq!(block.time.as_deref(), Some("1:56 pm on 8 May, 2023"), "{policy:?}");
        // chars × 1.5 of the user and assistant texts and of the label ` · TIME`
        let est = |s: &str| (s.chars().count() * 3).div_ceil(2) as u32;
        assert_eq!(block.tokens, est(&block.user) + est(&block.assistant) + est(" · 1:56 pm on 8 May, 2023"));
    }
    let prompt = gk.session("s")?.build_prompt("When did I go to the pottery class?")?;
    assert!(prompt.contains("[turn 7 · 1:56 pm on 8 May, 2023]"), "{prompt}");
    Ok(())
}

#[test]
fn minimal_keeps_the_sentences_of_every_anchor_it_covers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    for i in 0..30 {
        session.add_turn(&format!("Caroline watered plant {i} today."), "Good.")?;
    }
    session.add_turn(
        "The adoption agency called back. Nothing else came in the post. Caroline signed the papers on Friday.",
        "Great news.",
    )?;
    for i in 0..5 {
        session.add_turn(&format!("Caroline repotted plant {i}."), "Fine.")?;
    }
    let selection = select(&gk, "When did Caroline sign with the adoption agency?", Policy::Minimal, 4000)?;
    within_budget(&selection);
    let block = selection.blocks.iter().find(|b| b.turn_id == 30).ok_or("the agency turn is selected")?;
    // `adoption` and `agency` are the focus; `caroline`, which the greedy must cover too, keeps
    // the sentence with the answer; the sentence with neither is cut.
    assert!(block.user.contains("on Friday"), "{:?}", block.user);
    assert!(!block.user.contains("post"), "{:?}", block.user);
    Ok(())
}

#[test]
fn a_switch_admits_a_turn_through_a_short_specific_word() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    for i in 0..10 {
        session.add_turn(&format!("Caroline watered plant {i} today."), "Good.")?;
    }
    session.add_turn("I used to ride horses with my dad on Sundays.", "Lovely memory.")?;
    for i in 0..6 {
        session.add_turn(&format!("The database migration step {i} finished."), "Next step then.")?;
    }
    for policy in [Policy::Minimal, Policy::Fill] {
        let selection = select(&gk, "Which activity did Caroline enjoy with her dad?", policy, 4000)?;
        assert_eq!(selection.decision.topic, ctxgate::Topic::Switch, "the test needs a switch");
        // `dad`, three letters, is what the history holds that names the question's subject.
        assert!(selection.blocks.iter().any(|b| b.turn_id == 10), "{policy:?}: {:?}", selection.blocks);
    }
    Ok(())
}

#[test]
fn a_block_keeps_the_sentence_of_its_focus_word() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    for i in 0..40 {
        if i % 2 == 0 {
            session.add_turn(&format!("Caroline, Melanie and Jordan met at step {i}."), "Fine.")?;
        } else {
            session.add_turn(&format!("Routine note {i}."), "Fine.")?;
        }
    }
    for i in 0..4 {
        session.add_turn(&format!("Someone renewed the lease of shop {i}."), "Fine.")?;
    }
    session.add_turn(
        "Caroline and Melanie called Jordan. Jordan told Caroline and Melanie twice. \
         Melanie, Caroline and Jordan laughed. The lease ends in March.",
        "Noted.",
    )?;
    let selection = select(&gk, "Caroline Melanie Jordan lease", Policy::Minimal, 4000)?;
    let block = selection.blocks.iter().find(|b| b.turn_id == 44).ok_or("the lease turn is selected")?;
    // Three sentences of names outweigh the one with `lease`, the focus: the block must not be
    // a fragment of names only.
    assert!(block.user.contains("March"), "{:?}", block.user);
    Ok(())
}

/// An index whose `others` other sessions each mention `redis` in `their_rate` of 20 turns,
/// and a session `s` of 30 turns that mentions it in `our_mentions` of them (then two turns on
/// another subject, so the query below is a switch).
fn redis_everywhere(
    others: usize,
    their_rate: usize,
    our_mentions: usize,
) -> Result<(tempfile::TempDir, Gatekeeper), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    for n in 0..others {
        let session = gk.session(&format!("other-{n}"))?;
        for i in 0..20 {
            let user = if i < their_rate {
                format!("Checked redis node {n}-{i}.")
            } else {
                format!("Filed form {n}-{i}.")
            };
            session.add_turn(&user, "Done.")?;
        }
    }
    let session = gk.session("s")?;
    for i in 0..30 {
        let user =
            if i < our_mentions { format!("Tuned redis shard {i}.") } else { format!("Watered plant {i}.") };
        session.add_turn(&user, "Done.")?;
    }
    session.add_turn("The gutter leaks again.", "Call the roofer.")?;
    session.add_turn("The roofer comes on Monday.", "Good.")?;
    Ok((dir, gk))
}

#[test]
fn a_query_sharing_only_everyday_words_with_the_history_selects_nothing() -> TestResult {
    // `redis` is in every turn of three other sessions and in one of this one's: as this
    // person's history goes, it is phrasing; `quokka`, never seen anywhere, is the subject.
    let (_dir, gk) = redis_everywhere(3, 20, 1)?;
    let selection = select(&gk, "redis quokka", Policy::Fill, 4000)?;
    assert_eq!(selection.decision.topic, ctxgate::Topic::Switch, "the test needs a switch");
    assert!(selection.blocks.is_empty(), "{:?}", selection.blocks);
    // `node` is in every turn of the other conversations and in none of this one: what the
    // query asks about lives there (`bearing`), and this history's one passing `redis` is no
    // evidence of it. The search across sessions finds it where it lives.
    let selection = select(&gk, "redis node", Policy::Minimal, 4000)?;
    assert_eq!(selection.decision.topic, ctxgate::Topic::Switch, "the test needs a switch");
    assert!(selection.blocks.is_empty(), "{:?}", selection.blocks);
    assert!(matches!(selection.empty_because, Some(ctxgate::EmptyBecause::NotSpecific { .. })));
    let hits = gk.search("redis node 1-3", 5)?;
    assert!(hits.first().is_some_and(|h| h.session == "other-1" && h.bears), "{hits:?}");
    Ok(())
}

#[test]
fn a_word_this_session_uses_more_than_the_others_is_its_subject() -> TestResult {
    // Every other session mentions `redis` once in 20 turns; this one in 10 of 30: far above
    // what their rate predicts (1.5), so it is this conversation's subject, however widespread.
    let (_dir, gk) = redis_everywhere(3, 1, 10)?;
    let selection = select(&gk, "redis quokka", Policy::Minimal, 4000)?;
    assert_eq!(selection.decision.topic, ctxgate::Topic::Switch, "the test needs a switch");
    assert!(selection.blocks.iter().any(|b| b.user.contains("redis")), "{:?}", selection.blocks);
    Ok(())
}

#[test]
fn a_query_of_everyday_words_alone_follows_up_what_was_just_said() -> TestResult {
    // `redis` comes back in every turn of three other conversations: how this person talks.
    // Asked alone, it names nothing: the context is the latest turn, not the old one with it.
    let (_dir, gk) = redis_everywhere(3, 20, 1)?;
    for policy in [Policy::Minimal, Policy::Fill] {
        let selection = select(&gk, "redis", policy, 4000)?;
        assert_eq!(selection.decision.topic, ctxgate::Topic::Switch, "the test needs a switch");
        let turns: Vec<u32> = selection.blocks.iter().map(|b| b.turn_id).collect();
        assert_eq!(turns, [31], "{policy:?}: {:?}", selection.blocks);
    }
    // Talked about for a stretch in each (their first 5 of 20 turns), it is a subject.
    let (_dir, gk) = redis_everywhere(3, 5, 1)?;
    for policy in [Policy::Minimal, Policy::Fill] {
        let selection = select(&gk, "redis", policy, 4000)?;
        assert!(
            selection.blocks.iter().any(|b| b.user.contains("redis")),
            "{policy:?}: {:?}",
            selection.blocks
        );
    }
    Ok(())
}

#[test]
fn with_one_other_session_nothing_is_everyday() -> TestResult {
    let (_dir, gk) = redis_everywhere(1, 20, 1)?;
    let selection = select(&gk, "redis quokka", Policy::Minimal, 4000)?;
    assert!(selection.blocks.iter().any(|b| b.user.contains("redis")), "{:?}", selection.blocks);
    Ok(())
}

#[test]
fn a_question_finds_the_turn_that_says_its_words_in_another_form() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("s")?;
    session
        .add_turn("Guess what, I painted a sunrise over the lake last weekend.", "Lovely, which colours?")?;
    for i in 0..12 {
        session.add_turn(
            &format!("Chat {i}: the train to the coast was late again."),
            "Trains are like that.",
        )?;
    }
    session.add_turn("The cities we visited were all by the sea.", "Which one did you like best?")?;
    for policy in [Policy::Minimal, Policy::Fill] {
        // `paint` is written `painted`, `city` `cities`, `visit` `visited`: one word each.
        let selection = select(&gk, "When did she paint a sunrise?", policy, 4000)?;
        within_budget(&selection);
        let first = selection.blocks.iter().find(|b| b.turn_id == 0).ok_or("turn 0 not selected")?;
        assert!(first.user.contains("painted a sunrise"), "the sentence is kept: {first:?}");
        assert!(first.covered_anchors.iter().any(|a| a == "paint"), "{:?}", first.covered_anchors);
        let selection = select(&gk, "Which city did they visit?", policy, 4000)?;
        assert!(selection.blocks.iter().any(|b| b.turn_id == 13), "{policy:?}: {:?}", selection.blocks);
    }
    // A word with no form in the index is read as written: `sunrises` finds `sunrise` only
    // through the forms the index holds, and an unknown word finds nothing.
    let selection = select(&gk, "sunrises", Policy::Minimal, 4000)?;
    assert_eq!(selection.blocks.iter().map(|b| b.turn_id).collect::<Vec<_>>(), [0]);
    assert!(select(&gk, "zeppelins", Policy::Fill, 4000)?.blocks.is_empty());
    Ok(())
}

#[test]
fn blocks_of_one_time_say_it_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("log.jsonl");
    let mut lines = String::new();
    for i in 0..12 {
        let (user, time) = match i {
            3 => ("The kiln reached cone six at noon.".to_string(), "2:10 pm on 9 May, 2023"),
            4 => ("Then the kiln cooled overnight.".to_string(), "2:10 pm on 9 May, 2023"),
            _ => (format!("Routine note {i} about the garden."), "10:00 am on 1 June, 2023"),
        };
        let line =
            serde_json::json!({"session": "s", "turn": i, "user": user, "assistant": "Nice.", "time": time});
        lines.push_str(&format!("{line}\n"));
    }
    std::fs::write(&log, lines)?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    gk.import(&[log], &ctxgate::ImportOptions::default())?;
    let est = |s: &str| (s.chars().count() * 3).div_ceil(2) as u32;
    for policy in [Policy::Minimal, Policy::Fill] {
        let selection = select(&gk, "Did the kiln reach cone six, and when had it cooled?", policy, 4000)?;
        within_budget(&selection);
        let block =
            |turn| selection.blocks.iter().find(|b| b.turn_id == turn).ok_or("a kiln turn is missing");
        let (first, second) = (block(3)?, block(4)?);
        // Both carry their time; the first block's label says it, the second's `same time`.
        assert_eq!(second.time.as_deref(), Some("2:10 pm on 9 May, 2023"));
        assert_eq!(first.tokens, est(&first.user) + est(&first.assistant) + est(" · 2:10 pm on 9 May, 2023"));
        assert_eq!(second.tokens, est(&second.user) + est(&second.assistant) + est(" · same time"));
    }
    let prompt = gk.session("s")?.build_prompt("Did the kiln reach cone six, and when had it cooled?")?;
    assert!(prompt.contains("[turn 3 · 2:10 pm on 9 May, 2023]"), "{prompt}");
    assert!(prompt.contains("[turn 4 · same time]"), "{prompt}");
    Ok(())
}

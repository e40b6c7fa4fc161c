//! What ties a query to the turn before it whatever words it shares: a deictic word (`这个`,
//! `it`), or a reply to the question that turn ended with. Either keeps a query the overlap
//! would switch in its topic (the deictic branch of DESIGN §3.2). Measured in
//! `docs/relevance.md`.

use crate::text::{is_cjk, is_word_char};

/// DESIGN §3.2: the hard-coded deictic patterns; a query starting with one continues the topic.
/// `(pattern as reported, prefix, whether a word boundary must follow)`, matched on the start
/// of the query, ASCII case ignored. Longer prefixes come first, so the most specific is
/// reported. The third-person pronouns (`他`, `她`, `he`, `she`) refer back as `它` and `it` do:
/// in knowledge-grounded chat most follow-ups are about the person just named.
const DEICTIC_PATTERNS: &[(&str, &str, bool)] = &[
    ("^然后呢", "然后呢", false),
    ("^还有呢", "还有呢", false),
    ("^这个", "这个", false),
    ("^那个", "那个", false),
    ("^继续", "继续", false),
    ("^它", "它", false),
    ("^他", "他", false),
    ("^她", "她", false),
    ("^这", "这", false),
    ("^那", "那", false),
    ("^(this|that|it)\\b", "this", true),
    ("^(this|that|it)\\b", "that", true),
    ("^(this|that|it)\\b", "it", true),
    ("^(he|she)\\b", "he", true),
    ("^(he|she)\\b", "she", true),
    ("^continue", "continue", false),
    ("^and then", "and then", false),
    ("^what else", "what else", false),
];

/// How a decision reports a query kept in its topic because it answers the question the
/// previous turn ended with (in the place of a deictic pattern).
pub const REPLY_TO_QUESTION: &str = "reply to a question";

/// How a decision reports a Chinese third-person pronoun found past the query's start.
pub const CJK_PRONOUN: &str = "它|他|她";

/// Characters that make a following `他`/`它` part of another word: `其他`, `其它` (other),
/// `吉他` (guitar).
const NOT_PRONOUN_AFTER: &[char] = &['其', '吉'];

/// A short leading clause, of at most this many words (and [`ACKNOWLEDGEMENT_MAX_CJK`] CJK
/// characters) with a letter in it, is taken for an acknowledgement (`好的，`, `嗯，`,
/// `Yes please,`): a deictic word right after it starts what the query says, as if it came
/// first. Length is the whole test; a short clause that says something (`Redis cluster,
/// this is slow`) passes too.
const ACKNOWLEDGEMENT_MAX_WORDS: usize = 2;
/// See [`ACKNOWLEDGEMENT_MAX_WORDS`].
const ACKNOWLEDGEMENT_MAX_CJK: usize = 4;

/// Questions that offer more help instead of asking about the topic (`Is there anything else
/// I can help with?`, `您还有其他问题吗？`). The reply to one may open any topic, so it is not
/// tied to the turn before. Matched in the question's last clause, lower case.
const OPEN_OFFERS: &[&str] = &[
    "anything else",
    "something else",
    "anything more",
    "any other",
    "what else",
    "其他",
    "其它",
    "别的",
    "还需要什么",
    "还有什么",
];

/// Closing characters that may follow a question mark at the end of an answer (not a code
/// fence: an answer ending in code asks nothing).
const CLOSERS: &[char] = &['"', '\'', ')', ']', '”', '’', '）', '」', '』', '》', '*'];

/// The deictic pattern `query` starts with, as written in DESIGN §3.2, also after a leading
/// acknowledgement (`好的，这个酒店的电话是多少？`, `Sure, it can wait`). A deictic word later
/// in the query usually points at what the query itself just said (`I need a train. It should
/// leave at 9`), so only the start counts, with one exception: a Chinese third-person pronoun
/// anywhere ([`CJK_PRONOUN`], `请把它的电话给我`). Chinese has no expletive pronoun (English
/// `it is late`) and usually drops the subject of a new request, so `它`, `他`, `她` nearly
/// always stand for someone or something said before.
pub fn deictic_pattern(query: &str) -> Option<&'static str> {
    let query = query.trim_start();
    pattern_at(query)
        .or_else(|| {
            let end = query.find(is_clause_end)?;
            let (first, rest) = query.split_at(end);
            let rest = rest.trim_start_matches(|c: char| is_clause_end(c) || c.is_whitespace());
            if is_acknowledgement(first) { pattern_at(rest) } else { None }
        })
        .or_else(|| has_cjk_pronoun(query).then_some(CJK_PRONOUN))
}

fn has_cjk_pronoun(text: &str) -> bool {
    let mut previous = None;
    text.chars().any(|c| {
        let pronoun =
            matches!(c, '它' | '他' | '她') && !previous.is_some_and(|p| NOT_PRONOUN_AFTER.contains(&p));
        previous = Some(c);
        pronoun
    })
}

/// True if `answer` ends by asking the user about the topic: its last sentence ends with a
/// question mark and is not an open offer. The next user message answers it, so it continues
/// the topic whatever words it uses (`Yes, for 5 people on Friday` after `Would you like me to
/// book it?`, `2004年06月25日。` after `是哪年上映的呀？`).
pub fn asks_question(answer: &str) -> bool {
    let end = answer.trim_end_matches(|c: char| c.is_whitespace() || CLOSERS.contains(&c));
    let Some(question) = end.strip_suffix(['?', '？']) else { return false };
    let question = question.trim_end_matches(['?', '？']);
    let last = question.rsplit_once(is_sentence_end).map_or(question, |(_, last)| last).to_lowercase();
    !OPEN_OFFERS.iter().any(|offer| super::contains_word(&last, offer))
}

/// How the reason a low-overlap query continued reads in a human report.
pub fn describe(pattern: &str) -> String {
    if pattern == REPLY_TO_QUESTION { pattern.to_string() } else { format!("deictic {pattern}") }
}

fn pattern_at(text: &str) -> Option<&'static str> {
    DEICTIC_PATTERNS.iter().find_map(|&(name, prefix, needs_boundary)| {
        let head = text.as_bytes().get(..prefix.len())?;
        if !head.eq_ignore_ascii_case(prefix.as_bytes()) {
            return None;
        }
        // Equal bytes up to ASCII case end where the prefix ends: on a char boundary.
        let rest = text.get(prefix.len()..)?;
        (!needs_boundary || !rest.starts_with(is_word_char)).then_some(name)
    })
}

fn is_clause_end(c: char) -> bool {
    matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '\n' | '，' | '。' | '！' | '？' | '；' | '：' | '、')
}

fn is_sentence_end(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '\n' | '。' | '！' | '？')
}

fn is_acknowledgement(clause: &str) -> bool {
    clause.chars().any(char::is_alphabetic)
        && clause.split_whitespace().count() <= ACKNOWLEDGEMENT_MAX_WORDS
        && clause.chars().filter(|&c| is_cjk(c)).count() <= ACKNOWLEDGEMENT_MAX_CJK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deictic_patterns() {
        let rows: &[(&str, Option<&str>)] = &[
            ("这个锁怎么续期", Some("^这个")),
            ("这样可以吗", Some("^这")),
            ("然后呢", Some("^然后呢")),
            ("  It fails again", Some("^(this|that|it)\\b")),
            ("Its lock", None),
            ("item list", None),
            ("Continue please", Some("^continue")),
            ("and then what", Some("^and then")),
            ("What else is there", Some("^what else")),
            ("What is redis", None),
            ("那你帮我看看", Some("^那")),
            ("他今年多大了？", Some("^他")),
            ("She sings too", Some("^(he|she)\\b")),
            ("Help me", None),
        ];
        for (query, expected) in rows {
            assert_eq!(deictic_pattern(query), *expected, "deictic of {query:?}");
        }
    }

    #[test]
    fn deictic_after_an_acknowledgement() {
        assert_eq!(deictic_pattern("好的，这个酒店的电话是多少？"), Some("^这个"));
        assert_eq!(deictic_pattern("Yes please, it can wait"), Some("^(this|that|it)\\b"));
        assert_eq!(deictic_pattern("嗯。那游玩时间要多久？"), Some("^那"));
        // a first clause that says something of its own is not an acknowledgement
        assert_eq!(deictic_pattern("我想找一家评分高的酒店，这个价格可以"), None);
        assert_eq!(deictic_pattern("I also need a train. It should leave at 9"), None);
        // only the clause right after the acknowledgement
        assert_eq!(deictic_pattern("好的，谢谢，这个呢"), None);
        // an empty clause or a list number is no acknowledgement
        assert_eq!(deictic_pattern(",it is"), None);
        assert_eq!(deictic_pattern("1. It should leave at 9"), None);
    }

    #[test]
    fn chinese_pronouns_count_anywhere() {
        assert_eq!(deictic_pattern("好的，麻烦你告诉我一下它家电话"), Some(CJK_PRONOUN));
        assert_eq!(deictic_pattern("演员表演的也很精彩，你知道她的学历吗？"), Some(CJK_PRONOUN));
        // a pattern at the start is reported first
        assert_eq!(deictic_pattern("他的学历呢"), Some("^他"));
        // 其他, 其它 (other) and 吉他 (guitar) are not pronouns
        assert_eq!(deictic_pattern("有没有其他的景点？"), None);
        assert_eq!(deictic_pattern("推荐一首吉他曲"), None);
        // English pronouns past the start do not count
        assert_eq!(deictic_pattern("I need a train. It should leave at 9"), None);
    }

    #[test]
    fn questions_that_expect_a_reply_on_the_topic() {
        assert!(asks_question("The train leaves at 9:35. Shall I book it for you? "));
        assert!(asks_question("是哪年上映的呀？"));
        assert!(asks_question("Do you want me to run the tests?\n"));
        assert!(asks_question("You said \"which port?\""));
        assert!(asks_question("How many other rooms do you need?"), "`many other` is not `any other`");
        assert!(!asks_question("The train leaves at 9:35. I booked it."));
        assert!(!asks_question("Is there anything else I can help you with?"));
        assert!(!asks_question("Booked. Can I help you with anything else ?"));
        assert!(!asks_question("电话是010-87722388，您还有其他问题吗？"));
        assert!(!asks_question("Can I assist you with anything else , today ?"), "the whole sentence");
        assert!(!asks_question("Done:\n```rust\nlet x = parse(s)?;\n```"), "code is no question");
        assert!(!asks_question(""));
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe("^这"), "deictic ^这");
        assert_eq!(describe(REPLY_TO_QUESTION), "reply to a question");
    }
}

//! Shared text facts: which characters are CJK, sentence splitting, control-character checks.
//!
//! Every other module asks these questions the same way, so a CJK character or a sentence
//! boundary means one thing across anchors, pruning and the content-word filter.

/// True for characters written without spaces between words (Han, kana, Hangul).
///
/// These take part in anchors as character n-grams (DESIGN §3.1), not as words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B..F and compatibility supplement
}

/// True for characters that make up words and identifiers: letters, digits and `_`,
/// excluding CJK characters.
pub fn is_word_char(c: char) -> bool {
    // The CJK test first: it is a few comparisons, `is_alphanumeric` a table search for CJK.
    !is_cjk(c) && (c.is_alphanumeric() || c == '_')
}

/// One sentence of a text: its byte span and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sentence<'a> {
    /// Byte offset of the first character in the source text.
    pub byte_start: usize,
    /// The sentence, without its terminator and surrounding whitespace.
    pub text: &'a str,
}

/// Splits `text` into sentences (DESIGN §3.6).
///
/// Boundaries: `. `, `? `, `! ` (the terminator stays with the sentence), a newline, and the
/// CJK sentence ends `。！？`. DESIGN §3.6 names `. `, `\n` and `。！？`; `? ` and `! ` are the
/// same boundary in English and are split alike. Empty sentences are dropped.
pub fn split_sentences(text: &str) -> Vec<Sentence<'_>> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\n' => Some((i, i + 1)),
            '。' | '！' | '？' => Some((i + c.len_utf8(), i + c.len_utf8())),
            '.' | '?' | '!' => match chars.peek() {
                Some((_, next)) if next.is_whitespace() => Some((i + 1, i + 1)),
                _ => None,
            },
            _ => None,
        };
        if let Some((text_end, next_start)) = end {
            push_sentence(text, start, text_end, &mut sentences);
            start = next_start;
        }
    }
    push_sentence(text, start, text.len(), &mut sentences);
    sentences
}

fn push_sentence<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<Sentence<'a>>) {
    let Some(raw) = text.get(start..end) else {
        return;
    };
    let trimmed_start = raw.len() - raw.trim_start().len();
    let trimmed = raw.trim();
    if !trimmed.is_empty() {
        out.push(Sentence { byte_start: start + trimmed_start, text: trimmed });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<&str> {
        split_sentences(text).into_iter().map(|s| s.text).collect()
    }

    #[test]
    fn splits_on_every_boundary() {
        let rows: &[(&str, &[&str])] = &[
            ("One. Two. Three", &["One.", "Two.", "Three"]),
            ("v1.2.3 is out. Next", &["v1.2.3 is out.", "Next"]),
            ("line one\nline two", &["line one", "line two"]),
            ("第一句。第二句！第三句？第四", &["第一句。", "第二句！", "第三句？", "第四"]),
            ("Why? Because! Done", &["Why?", "Because!", "Done"]),
            ("  \n\n  ", &[]),
            ("end.", &["end."]),
        ];
        for (input, expected) in rows {
            assert_eq!(texts(input), *expected, "split of {input:?}");
        }
    }

    #[test]
    fn byte_start_points_at_sentence() {
        let text = "Alpha. 中文。Beta";
        for s in split_sentences(text) {
            assert_eq!(&text[s.byte_start..s.byte_start + s.text.len()], s.text);
        }
    }

    #[test]
    fn cjk_and_word_chars() {
        assert!(is_cjk('锁') && is_cjk('ア') && is_cjk('한'));
        assert!(!is_cjk('a') && !is_cjk('。'));
        assert!(is_word_char('é') && is_word_char('_') && !is_word_char('锁'));
    }
}

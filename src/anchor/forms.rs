//! Inflected forms of an English word: `paint`, `paints`, `painted`, `painting`.
//!
//! A question asks "when did she paint a sunrise?" and the turn says "I painted a sunrise":
//! whole-word anchors miss it. The index keeps every word as written (the anchor rules do not
//! change); a query word is instead read together with the forms of it the index holds. Which
//! candidates are forms of the word is the Snowball English stemmer's judgement (the one
//! search engines ship): the candidates come from the regular inflections (`-s`, `-es`, `-ed`,
//! `-ing`, `-ies`, a doubled or dropped final letter), and a candidate counts only if it stems
//! as the word does. Derivations (`adoption` of `adopt`) and irregular forms (`went`) are not
//! generated. Only plain lower-case ASCII words of at least [`MIN_FORM_LETTERS`] letters have
//! forms: identifiers with digits, `_` or `-`, and CJK text, are matched as written.

use rust_stemmers::{Algorithm, Stemmer};

/// Shorter words are left alone: their candidates (`go` → `goes`, `gos`) are mostly other words.
pub const MIN_FORM_LETTERS: usize = 3;

/// The other inflected forms of `word` (not `word` itself), sorted, or none if it is not a
/// plain lower-case word of [`MIN_FORM_LETTERS`] letters or more. Whether a form occurs
/// anywhere is for the index to say.
pub fn word_forms(word: &str) -> Vec<String> {
    if word.len() < MIN_FORM_LETTERS || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Vec::new();
    }
    let mut candidates: Vec<String> = roots(word)
        .iter()
        .flat_map(|root| inflections(root))
        .filter(|form| form != word && form.len() >= MIN_FORM_LETTERS)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    // Stemming is most of the cost: each candidate once.
    let stemmer = Stemmer::create(Algorithm::English);
    let stem = stemmer.stem(word);
    candidates.retain(|form| stemmer.stem(form) == stem);
    candidates
}

/// The word and what it may be an inflection of: `painted` → `paint`, `paint`+`e`; `cities` →
/// `city`; `stopped` → `stop`.
fn roots(word: &str) -> Vec<String> {
    let mut roots = vec![word.to_string()];
    let mut add = |root: &str| {
        if root.len() >= 2 {
            roots.push(root.to_string());
        }
    };
    for (suffix, replacement) in [("ies", "y"), ("ied", "y")] {
        if let Some(stem) = word.strip_suffix(suffix) {
            add(&format!("{stem}{replacement}"));
        }
    }
    if let Some(stem) = word.strip_suffix("es") {
        add(stem);
    }
    if let Some(stem) = word.strip_suffix('s')
        && !stem.ends_with('s')
    {
        add(stem);
    }
    for suffix in ["ed", "ing"] {
        if let Some(stem) = word.strip_suffix(suffix) {
            add(stem);
            add(&format!("{stem}e"));
            if let Some(single) = undoubled(stem) {
                add(single);
            }
        }
    }
    roots
}

/// `stopp` → `stop`: a doubled final consonant.
fn undoubled(stem: &str) -> Option<&str> {
    let bytes = stem.as_bytes();
    let n = bytes.len();
    (n >= 3 && bytes[n - 1] == bytes[n - 2] && !is_vowel(bytes[n - 1])).then(|| &stem[..n - 1])
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// The regular inflections of `root`, itself included.
fn inflections(root: &str) -> Vec<String> {
    let mut forms = vec![root.to_string(), format!("{root}s"), format!("{root}es")];
    let last = root.as_bytes()[root.len() - 1];
    match root.strip_suffix('e') {
        Some(stem) => forms.extend([format!("{root}d"), format!("{stem}ing")]),
        None => forms.extend([format!("{root}ed"), format!("{root}ing")]),
    }
    if let Some(stem) = root.strip_suffix('y') {
        forms.extend([format!("{stem}ies"), format!("{stem}ied")]);
    }
    if !is_vowel(last) && last != b'w' && last != b'x' && last != b'y' {
        let doubled = format!("{root}{}", last as char);
        forms.extend([format!("{doubled}ed"), format!("{doubled}ing")]);
    }
    forms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_and_its_inflections_find_each_other() {
        for (word, expected) in [
            ("paint", &["painted", "painting", "paints"][..]),
            ("painted", &["paint", "painting", "paints"]),
            ("city", &["cities"]),
            ("cities", &["city"]),
            ("stop", &["stopped", "stopping", "stops"]),
            ("stopped", &["stop", "stopping", "stops"]),
            ("bake", &["baked", "bakes", "baking"]),
            ("baking", &["bake", "baked", "bakes"]),
            ("visits", &["visit", "visited", "visiting"]),
        ] {
            let forms = word_forms(word);
            for form in expected {
                assert!(forms.iter().any(|f| f == form), "{word}: {form} missing from {forms:?}");
            }
            assert!(!forms.iter().any(|f| f == word), "{word} is not its own form");
            for form in &forms {
                assert!(word_forms(form).iter().any(|f| f == word), "{form} does not find {word}");
            }
        }
    }

    #[test]
    fn other_words_are_not_forms() {
        // `news` is not the plural of `new`, nor `sing` a form of `s`.
        assert!(!word_forms("news").iter().any(|f| f == "new"));
        assert!(!word_forms("new").iter().any(|f| f == "news"));
        assert!(word_forms("sing").iter().all(|f| f.starts_with("sing")), "{:?}", word_forms("sing"));
        // derivations are not generated
        assert!(!word_forms("adopt").iter().any(|f| f == "adoption"));
    }

    #[test]
    fn only_plain_lower_case_words_have_forms() {
        for word in ["go", "v1", "snake_case", "ticket-4242", "Paint", "分布式", "café", ""] {
            assert!(word_forms(word).is_empty(), "{word}");
        }
    }
}

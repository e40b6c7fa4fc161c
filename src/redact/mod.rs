//! Secrets out of everything ctxgate keeps: each text is redacted where it enters (turns,
//! tool calls, evidence documents), so the index, its runs and the evidence root never hold a
//! secret's bytes, and nothing read from them (selections, prompts, exports) can.
//!
//! Detection is gitleaks' rule set ([`gitleaks.toml`](https://github.com/gitleaks/gitleaks),
//! vendored with its licence and commit beside this file) applied as gitleaks applies it: the
//! keywords first (one Aho-Corasick pass over the text picks the rules that can match), then
//! each picked rule's regex, the secret group, the entropy threshold and the allowlists (the
//! rule's and the global one). `rules.toml` adds ctxgate's own rules for what gitleaks has no
//! rule for. Each secret becomes `[REDACTED:rule-id]`; the words around it (`password =`)
//! stay, so they remain searchable. See `docs/secrets.md`.
//!
//! Redaction is deterministic and idempotent ([`redact`] of a redacted text is that text), so
//! a history imported again compares equal to what was stored.

mod rules;

use rules::{Candidate, RuleSet};
use std::borrow::Cow;
use std::sync::LazyLock;

/// The vendored gitleaks rules (see `src/redact/SOURCE.md`).
const GITLEAKS_RULES: &str = include_str!("gitleaks.toml");
/// ctxgate's own rules, in the same format.
const OWN_RULES: &str = include_str!("rules.toml");

/// The rule set's name and version, recorded in the index with what it redacted.
pub const RULES_VERSION: &str = "gitleaks 009e025a + ctxgate 1";

/// What a secret is replaced with starts with this.
pub const MARKER_PREFIX: &str = "[REDACTED:";

/// Passes [`redact`] makes at most: a replacement can complete a match the text did not hold
/// before (a secret that ended where another began), so the result is redacted again until
/// nothing is found.
const MAX_PASSES: usize = 4;

static RULES: LazyLock<RuleSet> = LazyLock::new(|| {
    // The files are part of the build and tested: a failure here is a bug, found by the tests.
    RuleSet::parse(&[GITLEAKS_RULES, OWN_RULES])
        .unwrap_or_else(|e| panic!("the redaction rules do not load: {e}"))
});

/// One secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The id of the rule that found it (gitleaks' id, or one of `rules.toml`).
    pub rule: &'static str,
    /// Byte range of the secret in the text.
    pub start: usize,
    /// End of that range (exclusive).
    pub end: usize,
}

/// The number of rules loaded (gitleaks' and ctxgate's own).
pub fn rule_count() -> usize {
    RULES.rules.len()
}

/// Every secret in `text`, in order of where it starts; overlapping findings are merged into
/// one (the rule of the first).
pub fn find(text: &str) -> Vec<Finding> {
    let rules = &*RULES;
    let mut picked = vec![false; rules.rules.len()];
    for &i in &rules.always {
        picked[i] = true;
    }
    let mut any = !rules.always.is_empty();
    for found in rules.keywords.find_overlapping_iter(text) {
        for &i in &rules.keyword_rules[found.pattern().as_usize()] {
            picked[i] = true;
            any = true;
        }
    }
    if !any {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (rule, _) in rules.rules.iter().zip(&picked).filter(|(_, picked)| **picked) {
        for matched in rule.regex.get().find_iter(text) {
            let (start, end) = secret_span(rule, text, matched);
            if start == end {
                continue;
            }
            let secret = &text[start..end];
            if rule.entropy != 0.0 && shannon_entropy(secret) <= rule.entropy {
                continue;
            }
            let candidate =
                Candidate { secret, matched: matched.as_str(), line: line_of(text, matched.range()) };
            if secret.contains(MARKER_PREFIX)
                || rule.allowlists.iter().any(|a| a.allows(&candidate))
                || rules.global.iter().any(|a| a.allows(&candidate))
            {
                continue;
            }
            found.push(Finding { rule: rule.id.as_str(), start, end });
        }
    }
    merge(found)
}

/// `text` with each secret replaced by `[REDACTED:rule-id]`; borrowed when it holds none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for _ in 0..MAX_PASSES {
        let found = find(&out);
        if found.is_empty() {
            break;
        }
        out = Cow::Owned(replace(&out, &found));
    }
    out
}

/// [`redact`], never longer than `limit` bytes when `text` is not: a marker longer than the
/// secret it replaces grows the text, and a text at the limit is then cut at it (on a
/// character boundary).
pub fn redact_within(text: &str, limit: usize) -> Cow<'_, str> {
    let mut out = redact(text);
    for _ in 0..MAX_PASSES {
        if out.len() <= limit || text.len() > limit {
            break;
        }
        let cut = out.floor_char_boundary(limit);
        out = Cow::Owned(redact(&out[..cut]).into_owned());
    }
    if out.len() > limit && text.len() <= limit {
        let cut = out.floor_char_boundary(limit);
        out.to_mut().truncate(cut);
    }
    out
}

/// [`redact`] for a document's bytes: UTF-8 text is redacted, other bytes are kept as they
/// are (a binary file's strings are not looked at).
pub fn redact_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(bytes) {
        Ok(text) => match redact_text_or_json(text) {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(text) => Cow::Owned(text.into_bytes()),
        },
        Err(_) => Cow::Borrowed(bytes),
    }
}

/// [`redact`] of a text that may be a JSON document (a tool call's arguments, a tool's
/// output): the rules read a string's value, not its escaped form (`\"` around a key hides it
/// from them), so a JSON object or array has each of its strings redacted, and is written
/// again (compact) only if one changed.
pub fn redact_text_or_json(text: &str) -> Cow<'_, str> {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(mut value) = serde_json::from_str::<serde_json::Value>(text)
        && redact_json_strings(&mut value)
        && let Ok(json) = serde_json::to_string(&value)
    {
        return Cow::Owned(redact(&json).into_owned());
    }
    redact(text)
}

/// Redacts every string (keys too) of `value` in place; true if one changed.
fn redact_json_strings(value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => redact_in_place(s),
        Value::Array(items) => items.iter_mut().fold(false, |changed, v| redact_json_strings(v) | changed),
        Value::Object(map) => {
            let mut changed = false;
            let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
            for (mut key, mut v) in entries {
                changed |= redact_in_place(&mut key);
                changed |= redact_json_strings(&mut v);
                map.insert(key, v);
            }
            changed
        }
        _ => false,
    }
}

/// Replaces `text` in place by its redacted form; true if it changed.
pub fn redact_in_place(text: &mut String) -> bool {
    match redact(text) {
        Cow::Borrowed(_) => false,
        Cow::Owned(redacted) => {
            *text = redacted;
            true
        }
    }
}

/// [`redact`] of a borrowed or owned text, borrowed as it came when it holds no secret.
pub fn redact_cow(text: Cow<'_, str>) -> Cow<'_, str> {
    match redact(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(redacted) => Cow::Owned(redacted),
    }
}

/// Where the secret of `matched` is: the rule's secret group, else the first group that
/// matched something, else the whole match (gitleaks' rule).
fn secret_span(rule: &rules::Rule, text: &str, matched: regex::Match<'_>) -> (usize, usize) {
    let regex = rule.regex.get();
    if regex.captures_len() < 2 {
        return (matched.start(), matched.end());
    }
    // The same leftmost match, with its groups: searched from where it starts.
    let Some(captures) = regex.captures_at(text, matched.start()) else {
        return (matched.start(), matched.end());
    };
    let group = match rule.secret_group {
        0 => captures.iter().skip(1).flatten().find(|g| !g.is_empty()),
        n => captures.get(n),
    };
    group.map_or((matched.start(), matched.end()), |g| (g.start(), g.end()))
}

/// The line (or lines) `range` is on, without their line ends.
fn line_of(text: &str, range: std::ops::Range<usize>) -> &str {
    let start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
    let end = text[range.end..].find('\n').map_or(text.len(), |i| range.end + i);
    &text[start..end]
}

/// Shannon entropy in bits per character, as gitleaks computes it (characters counted, the
/// frequencies over the length in bytes).
fn shannon_entropy(text: &str) -> f64 {
    if text.is_empty() {
        return 0.0;
    }
    let mut counts: std::collections::HashMap<char, usize> = std::collections::HashMap::new();
    for c in text.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let length = text.len() as f64;
    counts.values().map(|&n| n as f64 / length).map(|p| -p * p.log2()).sum()
}

/// Findings sorted by start, overlapping ones merged (the rule of the earliest, the longest
/// of those, a specific rule before the generic one).
fn merge(mut found: Vec<Finding>) -> Vec<Finding> {
    let generic = |f: &Finding| f.rule == "generic-api-key";
    found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then(generic(a).cmp(&generic(b))));
    let mut merged: Vec<Finding> = Vec::with_capacity(found.len());
    for f in found {
        match merged.last_mut() {
            Some(last) if f.start < last.end => last.end = last.end.max(f.end),
            _ => merged.push(f),
        }
    }
    merged
}

/// `text` with each of `found` (sorted, disjoint) replaced by its marker.
fn replace(text: &str, found: &[Finding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in found {
        out.push_str(&text[at..f.start]);
        out.push_str(MARKER_PREFIX);
        out.push_str(f.rule);
        out.push(']');
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_loads() {
        // gitleaks' rules that have a regex and no path, and ctxgate's own.
        assert!(rule_count() > 200, "{} rules", rule_count());
        assert!(RULES.rules.iter().any(|r| r.id == "url-userinfo-password"));
    }

    #[test]
    fn every_rule_compiles() {
        let rules = &*RULES;
        let allowlists = (rules.global.iter()).chain(rules.rules.iter().flat_map(|r| r.allowlists.iter()));
        let regexes = (rules.rules.iter().map(|r| &r.regex)).chain(allowlists.flat_map(|a| a.regexes()));
        let failed: Vec<String> = regexes.filter_map(|r| r.check().err()).collect();
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }

    #[test]
    fn a_key_becomes_a_marker_and_the_words_around_it_stay() {
        let text = "export GITHUB_TOKEN=ghp_R2d9fKq8LmN3pX7vT1sY6wZ0aB4cE5gH8jK2 then push";
        let redacted = redact(text);
        assert_eq!(redacted, "export GITHUB_TOKEN=[REDACTED:github-pat] then push");
        assert_eq!(redact(&redacted), redacted, "idempotent");
    }

    #[test]
    fn the_secret_group_is_what_is_replaced() {
        let text =
            "curl -H \"Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0\" https://api.example.org";
        let redacted = redact(text);
        assert!(redacted.contains("Authorization: Bearer [REDACTED:"), "{redacted}");
        assert!(!redacted.contains("9f8e7d6c5b4a"), "{redacted}");
    }

    #[test]
    fn a_password_in_a_url_is_redacted_and_a_placeholder_is_not() {
        let redacted = redact("DATABASE_URL=postgres://app:s3cr3t-Pa55@db.internal:5432/app");
        assert_eq!(
            redacted,
            "DATABASE_URL=postgres://app:[REDACTED:url-userinfo-password]@db.internal:5432/app"
        );
        for placeholder in
            ["postgres://user:password@localhost/db", "https://u:${PASSWORD}@host", "mysql://root:<pass>@h"]
        {
            assert_eq!(redact(placeholder), placeholder);
        }
    }

    #[test]
    fn low_entropy_and_allowlisted_values_are_kept() {
        for text in [
            "AKIAIOSFODNN7EXAMPLE",                            // aws-access-token's allowlist
            "api_key = \"${API_KEY}\"",                        // the global allowlist
            "token: aaaaaaaaaaaaaaaaaaaaaa",                   // entropy
            "commit 3f2a9c4e8b1d7f6a5e4c3b2a1908f7e6d5c4b3a2", // a commit id
            "uuid 123e4567-e89b-12d3-a456-426614174000",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn within_a_limit_the_text_never_grows_past_it() {
        let text = "db_password=Ab1\n".repeat(8);
        assert!(redact(&text).len() > text.len(), "the markers are longer than the secrets");
        let redacted = redact_within(&text, text.len());
        assert!(redacted.len() <= text.len());
        assert!(!redacted.contains("Ab1"), "{redacted}");
    }

    #[test]
    fn entropy_is_gitleaks() {
        assert_eq!(shannon_entropy("aaaa"), 0.0);
        assert!((shannon_entropy("ab") - 1.0).abs() < 1e-9);
    }
}

#[cfg(test)]
mod samples {
    use super::*;

    /// The fake secrets of `fixtures/secrets/samples.tsv`: (rule, secret, text).
    pub(crate) fn samples() -> Vec<(String, String, String)> {
        let text = include_str!("../../fixtures/secrets/samples.tsv");
        (text.lines())
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let mut fields = l.splitn(3, '\t').map(|f| f.replace("\\n", "\n"));
                let mut next = || fields.next().expect("three fields");
                (next(), next(), next())
            })
            .collect()
    }

    #[test]
    fn every_sample_is_found_by_its_rule_and_gone_from_the_text() {
        let samples = samples();
        let rules: std::collections::BTreeSet<&str> = samples.iter().map(|(r, _, _)| r.as_str()).collect();
        assert!(rules.len() >= 30, "{} rule types", rules.len());
        let mut wrong = Vec::new();
        for (rule, secret, text) in &samples {
            let redacted = redact(text);
            if redacted.contains(secret.as_str()) || !redacted.contains(&format!("{MARKER_PREFIX}{rule}]")) {
                wrong.push(format!("{rule}: {redacted}"));
            }
            assert_eq!(redact(&redacted), redacted, "idempotent");
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Text with secrets in it: fake keys of the samples cut and joined with ordinary words.
    fn text() -> impl Strategy<Value = String> {
        let samples: Vec<String> = super::samples::samples().into_iter().map(|(_, _, t)| t).collect();
        let piece = prop_oneof![
            proptest::sample::select(samples),
            "[a-zA-Z0-9 =:'\"_./-]{0,40}",
            Just("password = ".to_string()),
            Just("\n".to_string()),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn redaction_is_idempotent(text in text()) {
            let once = redact(&text).into_owned();
            prop_assert_eq!(redact(&once), once.as_str());
        }

        #[test]
        fn redaction_never_grows_a_text_past_the_limit(text in text(), slack in 0usize..64) {
            let limit = text.len() + slack;
            let redacted = redact_within(&text, limit);
            prop_assert!(redacted.len() <= limit, "{} > {limit}", redacted.len());
        }
    }
}

#[cfg(test)]
mod false_positives {
    use super::*;
    use std::path::Path;

    /// Findings in ordinary developer text: this repository's code and the fixtures' logs
    /// (hashes, UUIDs, base64, commit ids). The rate is in docs/secrets.md.
    #[test]
    #[allow(clippy::print_stderr)] // the measurement, for docs/secrets.md (`-- --nocapture`)
    fn ordinary_text_is_almost_never_redacted() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut stack = vec![
            root.join("src"),
            root.join("fixtures/import"),
            root.join("fixtures/hooks"),
            root.join("docs"),
        ];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if !path.starts_with(root.join("src/redact")) {
                    files.push(path);
                }
            }
        }
        let (mut lines, mut flagged) = (0usize, Vec::new());
        for path in &files {
            let Ok(text) = std::fs::read_to_string(path) else { continue };
            for line in text.lines() {
                lines += 1;
                for f in find(line) {
                    flagged.push(format!("{}: {}: {}", path.display(), f.rule, &line[f.start..f.end]));
                }
            }
        }
        let rate = flagged.len() as f64 / lines as f64;
        eprintln!(
            "{} findings in {lines} lines of {} files ({:.4}%)",
            flagged.len(),
            files.len(),
            rate * 100.0
        );
        for f in &flagged {
            eprintln!("{f}");
        }
        assert!(rate < 0.001, "{} findings in {lines} lines", flagged.len());
    }
}

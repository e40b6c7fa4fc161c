//! gitleaks' rule files, read into rules this crate's regex engine runs.
//!
//! The rules are Go regular expressions (RE2). Rust's `regex` takes the same syntax but for
//! three things, which [`go_to_rust`] translates: a brace that does not start a repetition is
//! a literal in Go and an error here; `\w`, `\d`, `\s` and `\b` are ASCII in Go and Unicode
//! here (and the lazy DFA gives up on a Unicode `\b` in non-ASCII text); Go's `\s` has no
//! vertical tab. RE2 has no look-around, so nothing else differs.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use serde::Deserialize;
use std::sync::OnceLock;

/// A rules file in gitleaks' format (the fields this crate applies; the others, such as
/// `description` and `tags`, are ignored).
#[derive(Debug, Deserialize)]
struct ConfigToml {
    allowlist: Option<AllowlistToml>,
    #[serde(default)]
    allowlists: Vec<AllowlistToml>,
    #[serde(default)]
    rules: Vec<RuleToml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleToml {
    id: String,
    regex: Option<String>,
    secret_group: Option<usize>,
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    path: Option<String>,
    #[serde(default)]
    allowlists: Vec<AllowlistToml>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllowlistToml {
    condition: Option<String>,
    regex_target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// The secret (gitleaks' default).
    Secret,
    /// The whole match of the rule's regex.
    Match,
    /// The line (or lines) the match is on.
    Line,
}

/// One allowlist: a finding it allows is not a secret.
#[derive(Debug)]
pub(super) struct Allowlist {
    /// `condition = "AND"`: every criterion it has must hold (else any one).
    all: bool,
    target: Target,
    regexes: Vec<LazyRegex>,
    /// Lower-cased; a secret that contains one is allowed.
    stopwords: Vec<String>,
    /// It names paths or commits, which text without a file never matches.
    has_paths: bool,
}

/// What an allowlist looks at for one finding.
pub(super) struct Candidate<'t> {
    pub secret: &'t str,
    pub matched: &'t str,
    pub line: &'t str,
}

impl Allowlist {
    /// Every regex, for the test that compiles them all.
    #[cfg(test)]
    pub(super) fn regexes(&self) -> &[LazyRegex] {
        &self.regexes
    }

    fn new(toml: AllowlistToml, rule: &str) -> Result<Self, String> {
        let target = match toml.regex_target.as_deref() {
            None | Some("secret") => Target::Secret,
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            Some(other) => return Err(format!("rule {rule}: unknown regexTarget {other:?}")),
        };
        let regexes = toml.regexes.iter().map(|r| LazyRegex::new(r, rule)).collect();
        Ok(Allowlist {
            all: toml.condition.as_deref().is_some_and(|c| c.eq_ignore_ascii_case("and")),
            target,
            regexes,
            stopwords: toml.stopwords.iter().map(|s| s.to_lowercase()).collect(),
            has_paths: !toml.paths.is_empty() || !toml.commits.is_empty(),
        })
    }

    /// True if the finding is allowed, as gitleaks decides it for a fragment without a path
    /// or commit (`condition = "AND"` with paths then never allows).
    pub(super) fn allows(&self, found: &Candidate<'_>) -> bool {
        let text = match self.target {
            Target::Secret => found.secret,
            Target::Match => found.matched,
            Target::Line => found.line,
        };
        let regex = (!self.regexes.is_empty()).then(|| self.regexes.iter().any(|r| r.get().is_match(text)));
        let stopword = (!self.stopwords.is_empty()).then(|| {
            let secret = found.secret.to_lowercase();
            self.stopwords.iter().any(|s| secret.contains(s.as_str()))
        });
        let path = self.has_paths.then_some(false);
        let criteria = [regex, stopword, path];
        let mut given = criteria.iter().flatten().peekable();
        if given.peek().is_none() {
            return false;
        }
        if self.all { given.all(|&c| c) } else { given.any(|&c| c) }
    }
}

/// One rule, compiled.
#[derive(Debug)]
pub(super) struct Rule {
    pub id: String,
    pub regex: LazyRegex,
    /// The capture group that is the secret: `secretGroup`, else 0 for "the first group that
    /// matched, or the whole match".
    pub secret_group: usize,
    /// The secret's Shannon entropy must be above it (0: no check).
    pub entropy: f64,
    pub allowlists: Vec<Allowlist>,
}

/// Every rule, the global allowlist and the keyword prefilter.
#[derive(Debug)]
pub(super) struct RuleSet {
    pub rules: Vec<Rule>,
    pub global: Vec<Allowlist>,
    /// Every rule's keywords, matched ASCII case-insensitively (gitleaks lower-cases the text).
    pub keywords: AhoCorasick,
    /// For each keyword pattern, the rules that have it.
    pub keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords: always run.
    pub always: Vec<usize>,
}

impl RuleSet {
    /// The rules of `files` (gitleaks' format), in order. Rules that only apply to paths
    /// (`path` given) are left out: the text ctxgate redacts has none.
    pub(super) fn parse(files: &[&str]) -> Result<RuleSet, String> {
        let mut rules = Vec::new();
        let mut global = Vec::new();
        let mut keywords: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for text in files {
            let config: ConfigToml = toml::from_str(text).map_err(|e| e.to_string())?;
            for allowlist in config.allowlist.into_iter().chain(config.allowlists) {
                global.push(Allowlist::new(allowlist, "(global)")?);
            }
            for rule in config.rules {
                let (Some(regex), None) = (&rule.regex, &rule.path) else { continue };
                let index = rules.len();
                if rule.keywords.is_empty() {
                    always.push(index);
                }
                for keyword in &rule.keywords {
                    let keyword = keyword.to_lowercase();
                    match keywords.iter().position(|k| *k == keyword) {
                        Some(at) => keyword_rules[at].push(index),
                        None => {
                            keywords.push(keyword);
                            keyword_rules.push(vec![index]);
                        }
                    }
                }
                let allowlists = (rule.allowlists.into_iter())
                    .map(|a| Allowlist::new(a, &rule.id))
                    .collect::<Result<_, _>>()?;
                rules.push(Rule {
                    regex: LazyRegex::new(regex, &rule.id),
                    secret_group: rule.secret_group.unwrap_or(0),
                    entropy: rule.entropy.unwrap_or(0.0),
                    allowlists,
                    id: rule.id,
                });
            }
        }
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&keywords)
            .map_err(|e| e.to_string())?;
        Ok(RuleSet { rules, global, keywords, keyword_rules, always })
    }
}

/// A rule's regex, compiled the first time a text picks its rule: a process that redacts a
/// few turns (a hook's import) compiles the few rules their keywords pick, not all 200.
#[derive(Debug)]
pub(super) struct LazyRegex {
    /// The pattern, translated ([`go_to_rust`]).
    pattern: String,
    rule: String,
    compiled: OnceLock<Regex>,
}

impl LazyRegex {
    fn new(go_pattern: &str, rule: &str) -> Self {
        LazyRegex { pattern: go_to_rust(go_pattern), rule: rule.to_string(), compiled: OnceLock::new() }
    }

    /// The compiled regex. Every rule file is part of the build and a test compiles each of
    /// its regexes (`redact::tests::every_rule_compiles`): one that does not is a bug.
    pub(super) fn get(&self) -> &Regex {
        self.compiled.get_or_init(|| {
            Regex::new(&self.pattern)
                .unwrap_or_else(|e| panic!("rule {}: its regex does not compile: {e}", self.rule))
        })
    }

    /// Compiles it now, or says why it does not compile.
    #[cfg(test)]
    pub(super) fn check(&self) -> Result<(), String> {
        Regex::new(&self.pattern).map(|_| ()).map_err(|e| format!("rule {}: {e}", self.rule))
    }
}

/// A Go (RE2) pattern as the same pattern for `regex`: literal braces escaped, and the Perl
/// classes and word boundaries ASCII, as Go's are (see the module doc).
pub(super) fn go_to_rust(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                let next = chars[i + 1];
                i += 2;
                match (next, in_class) {
                    ('w', false) => out.push_str("(?-u:\\w)"),
                    ('W', false) => out.push_str("(?-u:\\W)"),
                    ('b', false) => out.push_str("(?-u:\\b)"),
                    ('B', false) => out.push_str("(?-u:\\B)"),
                    ('d', false) => out.push_str("[0-9]"),
                    ('D', false) => out.push_str("[^0-9]"),
                    ('s', false) => out.push_str("[\\t\\n\\x0C\\r ]"),
                    ('S', false) => out.push_str("[^\\t\\n\\x0C\\r ]"),
                    ('w', true) => out.push_str("0-9A-Za-z_"),
                    ('d', true) => out.push_str("0-9"),
                    ('s', true) => out.push_str("\\t\\n\\x0C\\r "),
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                // A `]` first (after an optional `^`) is a literal.
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
                continue;
            }
            '[' if in_class => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '{' if !in_class => match repetition_len(&chars[i..]) {
                Some(len) => out.extend(&chars[i..i + len]),
                None => out.push_str("\\{"),
            },
            '}' if !in_class => out.push_str("\\}"),
            _ => out.push(c),
        }
        i += match c {
            '{' if !in_class => repetition_len(&chars[i..]).unwrap_or(1),
            _ => 1,
        };
    }
    out
}

/// The length of a repetition `{n}`, `{n,}` or `{n,m}` at the start of `chars`.
fn repetition_len(chars: &[char]) -> Option<usize> {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if chars.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    (chars.get(i) == Some(&'}')).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_braces_are_escaped_and_repetitions_kept() {
        assert_eq!(go_to_rust(r"^\$(?:\d+|{\d+})$"), r"^\$(?:[0-9]+|\{[0-9]+\})$");
        assert_eq!(go_to_rust(r"a{2,5}b{3}c{1,}"), r"a{2,5}b{3}c{1,}");
        assert_eq!(go_to_rust(r"^\{\{[ \t]*x}}$"), r"^\{\{[ \t]*x\}\}$");
        assert_eq!(go_to_rust(r"[^]]+]"), r"[^\]]+]");
    }

    #[test]
    fn classes_are_ascii_as_in_go() {
        let regex = Regex::new(&go_to_rust(r"^\w+$")).unwrap();
        assert!(regex.is_match("abc_09"));
        assert!(!regex.is_match("café"));
        let class = Regex::new(&go_to_rust(r"^[\w.-]+$")).unwrap();
        assert!(class.is_match("a.b-c_1"));
        assert!(!class.is_match("é"));
    }
}

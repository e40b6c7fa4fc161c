//! Evidence references: relative paths that cannot leave the evidence root (DESIGN §4).
//!
//! A reference is checked lexically when it is parsed: relative, `/`-separated, no empty,
//! blank, `.` or `..` component, no control character, backslash or invisible formatting
//! character (a ref must read as what it is), not a name reserved for temporary files. On disk,
//! every access is made beneath the root by [`super::root::EvidenceRoot`], so a link planted
//! in the tree cannot lead a read or a write outside it.

use std::fmt;
use std::path::{Component, Path};

/// Longest accepted reference, in bytes.
pub const MAX_REF_BYTES: usize = 1024;

/// A checked evidence reference such as `round_3/baseline.json`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EvidenceRef(String);

/// Why a reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("evidence ref {reference:?} {reason}")]
pub struct RefError {
    /// The reference as given.
    pub reference: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl EvidenceRef {
    /// Checks `text` lexically.
    ///
    /// # Errors
    /// [`RefError`] for an empty, absolute or over-long reference, or one with an empty,
    /// whitespace-only, `.` or `..` component, a backslash, a NUL or another control character,
    /// an invisible formatting character, or a component named like a temporary file.
    pub fn parse(text: &str) -> Result<EvidenceRef, RefError> {
        let refuse = |reason| Err(RefError { reference: text.to_string(), reason });
        if text.is_empty() {
            return refuse("is empty");
        }
        if text.len() > MAX_REF_BYTES {
            return refuse("is longer than 1024 bytes");
        }
        if text.starts_with('/') || Path::new(text).is_absolute() {
            return refuse("is absolute: a ref is a path relative to the evidence root");
        }
        if text.contains('\\') {
            return refuse("contains a backslash: separate components with '/'");
        }
        if text.chars().any(char::is_control) {
            return refuse("contains a control character");
        }
        if text.chars().any(is_invisible_format) {
            return refuse(
                "contains an invisible formatting character (a bidirectional override, mark or isolate, or a zero-width character), which makes it print as another name",
            );
        }
        for component in text.split('/') {
            match component {
                "" => return refuse("has an empty component"),
                blank if blank.trim().is_empty() => return refuse("has a component of only whitespace"),
                "." => return refuse("has a '.' component"),
                ".." => return refuse("has a '..' component: a ref cannot leave the evidence root"),
                name if super::root::is_temp_name(name) => {
                    return refuse("has a name reserved for ctxgate's temporary files");
                }
                _ => {}
            }
        }
        Ok(EvidenceRef(text.to_string()))
    }

    /// The reference from a path relative to a root (as found when walking a tree).
    ///
    /// # Errors
    /// [`RefError`] if a component is not UTF-8 or the result is not a valid reference.
    pub fn from_relative_path(path: &Path) -> Result<EvidenceRef, RefError> {
        let mut parts = Vec::new();
        for component in path.components() {
            match component {
                Component::Normal(part) => match part.to_str() {
                    Some(part) => parts.push(part),
                    None => {
                        return Err(RefError {
                            reference: path.to_string_lossy().into_owned(),
                            reason: "has a component that is not UTF-8",
                        });
                    }
                },
                _ => {
                    return Err(RefError {
                        reference: path.to_string_lossy().into_owned(),
                        reason: "is not a plain relative path",
                    });
                }
            }
        }
        EvidenceRef::parse(&parts.join("/"))
    }

    /// The reference text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file name's extension, lower-cased (`json`, `sql`, `log`), if any.
    pub fn extension(&self) -> Option<String> {
        let name = self.0.rsplit('/').next().unwrap_or(&self.0);
        name.rsplit_once('.').filter(|(stem, _)| !stem.is_empty()).map(|(_, ext)| ext.to_ascii_lowercase())
    }
}

/// Characters that change how the text around them is shown without showing themselves: the
/// bidirectional marks, embeddings, overrides and isolates (U+202E prints `gpj.exe` as
/// `exe.jpg`) and the zero-width characters. A ref holding one reads as another ref.
pub(crate) fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

impl fmt::Display for EvidenceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_rules() {
        for good in ["a.json", "round_3/baseline.json", "table_ctx/db.t1/ddl.sql", "名前/報告.txt"] {
            assert_eq!(EvidenceRef::parse(good).unwrap().as_str(), good);
        }
        for (bad, why) in [
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("a/./b", "'.'"),
            ("a//b", "empty component"),
            ("a/", "empty component"),
            ("a\\b", "backslash"),
            ("a\0b", "control"),
            (" ", "only whitespace"),
            ("a/\t /b", "control"),
            ("a/\u{3000}/b", "only whitespace"),
            ("report\u{202E}nosj.exe", "bidirectional override"),
            ("a\u{200B}b.json", "zero-width"),
            ("\u{2067}x", "isolate"),
            ("x/.ctxgate-tmp.12-0", "temporary"),
            ("x/.ctxgate-tmp", "temporary"),
            ("x/.doc.json.ctxgate-tmp", "temporary"),
        ] {
            let err = EvidenceRef::parse(bad).unwrap_err();
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn extension() {
        let ext = |r: &str| EvidenceRef::parse(r).unwrap().extension();
        assert_eq!(ext("a/b.JSON").as_deref(), Some("json"));
        assert_eq!(ext("a.b/c"), None);
        assert_eq!(ext("a/.hidden"), None);
    }
}

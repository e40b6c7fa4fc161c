//! Evidence references: relative paths that cannot leave the evidence root (DESIGN §4).
//!
//! A reference is checked twice. Lexically, when it is parsed: relative, `/`-separated, no
//! empty, `.` or `..` component, no NUL or backslash. On disk, when it is resolved: every
//! directory on the way and the file itself must be inside the root once symbolic links are
//! followed, so a link planted in the tree cannot lead a read or a write outside it.

use std::fmt;
use std::path::{Component, Path, PathBuf};

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
    /// [`RefError`] for an empty, absolute or over-long reference, or one with an empty, `.`
    /// or `..` component, a backslash, a NUL or another control character.
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
        for component in text.split('/') {
            match component {
                "" => return refuse("has an empty component"),
                "." => return refuse("has a '.' component"),
                ".." => return refuse("has a '..' component: a ref cannot leave the evidence root"),
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

    /// The path of an existing document under `root`, refusing one whose real location (links
    /// followed) is outside the root.
    ///
    /// # Errors
    /// [`ResolveError::Escapes`] for a link leading outside, [`ResolveError::Io`] if the file
    /// cannot be found.
    pub fn resolve_existing(&self, root: &Path) -> Result<PathBuf, ResolveError> {
        let real_root = canonical(root)?;
        let path = root.join(&self.0);
        let real = canonical(&path)?;
        if !real.starts_with(&real_root) {
            return Err(ResolveError::Escapes { reference: self.clone(), target: real });
        }
        Ok(path)
    }

    /// The path at which to create a new document under `root`, creating its directories.
    /// Each directory on the way must resolve inside the root; the file itself must not exist
    /// yet (a link in its place is refused too, as existing).
    ///
    /// # Errors
    /// [`ResolveError::Escapes`], or [`ResolveError::Io`] if a directory cannot be created.
    pub fn resolve_new(&self, root: &Path) -> Result<PathBuf, ResolveError> {
        std::fs::create_dir_all(root)
            .map_err(|source| ResolveError::Io { path: root.to_path_buf(), source })?;
        let real_root = canonical(root)?;
        let mut dir = root.to_path_buf();
        let components: Vec<&str> = self.0.split('/').collect();
        for part in &components[..components.len() - 1] {
            dir.push(part);
            if dir.symlink_metadata().is_err() {
                match std::fs::create_dir(&dir) {
                    // Made meanwhile by another thread storing a document beside this one (an
                    // import stores a session's outputs in parallel): checked below like any.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    made => made.map_err(|source| ResolveError::Io { path: dir.clone(), source })?,
                }
            }
            let real = canonical(&dir)?;
            if !real.starts_with(&real_root) {
                return Err(ResolveError::Escapes { reference: self.clone(), target: real });
            }
        }
        Ok(dir.join(components[components.len() - 1]))
    }
}

impl fmt::Display for EvidenceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A reference that cannot be used on disk.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Links lead outside the evidence root.
    #[error("evidence ref {reference} leads outside the evidence root (to {target})")]
    Escapes {
        /// The reference.
        reference: EvidenceRef,
        /// Where it really leads.
        target: PathBuf,
    },
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

fn canonical(path: &Path) -> Result<PathBuf, ResolveError> {
    path.canonicalize().map_err(|source| ResolveError::Io { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_stored_at_once_share_their_new_directories() -> Result<(), Box<dyn std::error::Error>> {
        // Threads storing outputs of one session all find `tool-output/<session>/` missing,
        // and all make it; none may fail because another made it first.
        for round in 0..20 {
            let root = tempfile::tempdir()?;
            let barrier = std::sync::Barrier::new(8);
            let results: Vec<Result<PathBuf, ResolveError>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..8)
                    .map(|i| {
                        let (root, barrier) = (root.path(), &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            EvidenceRef(format!("tool-output/s{round}/call-{i}.txt")).resolve_new(root)
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            assert_eq!(results.len(), 8);
            for result in results {
                assert!(result?.starts_with(root.path().join(format!("tool-output/s{round}"))));
            }
        }
        Ok(())
    }

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

    #[cfg(unix)]
    #[test]
    fn links_cannot_escape() {
        let outside = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.json"), "{}").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.json"), root.path().join("s.json")).unwrap();

        let through_dir = EvidenceRef::parse("out/secret.json").unwrap();
        assert!(matches!(through_dir.resolve_existing(root.path()), Err(ResolveError::Escapes { .. })));
        let file_link = EvidenceRef::parse("s.json").unwrap();
        assert!(matches!(file_link.resolve_existing(root.path()), Err(ResolveError::Escapes { .. })));
        let write_through = EvidenceRef::parse("out/new.json").unwrap();
        assert!(matches!(write_through.resolve_new(root.path()), Err(ResolveError::Escapes { .. })));
        assert!(!outside.path().join("new.json").exists());

        let inside = EvidenceRef::parse("d/e/new.json").unwrap();
        let path = inside.resolve_new(root.path()).unwrap();
        assert_eq!(path, root.path().join("d/e/new.json"));
        assert!(root.path().join("d/e").is_dir());
    }
}

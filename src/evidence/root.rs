//! The evidence root on disk: every file access goes through one handle on the root
//! directory (`cap-std`, `openat2(RESOLVE_BENEATH)` where the kernel has it), so no ref and no
//! entry of a walked tree resolves outside the root, whatever links are planted or directories
//! swapped while ctxgate works. A check and the access it guards are one step: there is no
//! path that is checked first and opened later.
//!
//! This is the one part of `evidence` that touches the disk; the rest is pure.

use super::reference::EvidenceRef;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a temporary file under the root is named with: `.ctxgate-tmp.<pid>-<n>`. A ref whose
/// file name starts with it is refused ([`EvidenceRef::parse`]); walks skip such files and
/// remove those whose writer is gone.
pub const TEMP_PREFIX: &str = ".ctxgate-tmp.";

/// Whether a file name is one of ctxgate's temporary files: `.ctxgate-tmp.<pid>-<n>`, or
/// `.<name>.ctxgate-tmp` as builds before the unique names wrote them.
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX.trim_end_matches('.')) || name.ends_with(".ctxgate-tmp")
}

/// A temporary file older than this is stale even if a process of its pid runs (pids are
/// reused; elsewhere than Linux the pid cannot be checked at all).
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// An open evidence root.
#[derive(Debug)]
pub struct EvidenceRoot {
    dir: Dir,
    path: PathBuf,
}

/// A document read from the root.
#[derive(Debug)]
pub struct ReadDocument {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// How many hard links the file has (1 for a plain file). A file with more may also be
    /// linked from outside the root, which cannot be told from its inode alone.
    pub links: u64,
}

/// What [`EvidenceRoot::write_once`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The document was written.
    New,
    /// A file with the same bytes was already there.
    Existing,
}

/// A file of the tree found by [`EvidenceRoot::walk`].
#[derive(Debug, Clone)]
pub struct WalkedFile {
    /// Its ref.
    pub reference: EvidenceRef,
    /// Its inode, as the walk saw it: a read checks it is still the same file.
    identity: FileIdentity,
}

/// A file the walk left out, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkSkip {
    /// Its path, relative to the root.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// Why an access was refused.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The ref leads outside the root (a link), or is not a regular file inside it.
    #[error("evidence ref {reference} {reason}")]
    Refused {
        /// The ref.
        reference: EvidenceRef,
        /// What it leads to.
        reason: String,
    },
    /// There is no such document.
    #[error("no evidence {reference} under {}", .root.display())]
    NotFound {
        /// The ref.
        reference: EvidenceRef,
        /// The root.
        root: PathBuf,
    },
    /// A different file already has this ref.
    #[error(
        "evidence {0} already exists with other content; evidence is never modified: store it under a new ref"
    )]
    Exists(EvidenceRef),
    /// The document is larger than [`crate::limits::MAX_EVIDENCE_BYTES`].
    #[error("evidence {reference}: {}", crate::limits::evidence_too_large(*.bytes).unwrap_or_default())]
    TooLarge {
        /// The ref.
        reference: EvidenceRef,
        /// Its size.
        bytes: u64,
    },
    /// The file system refused.
    #[error("{}: {cause}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause, printed in the message (not also chained as a source).
        cause: io::Error,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FileIdentity {
    dev: u64,
    ino: u64,
}

impl EvidenceRoot {
    /// Opens the existing directory `path` as the root.
    ///
    /// # Errors
    /// [`RootError::Io`] if it is not a directory that can be opened.
    pub fn open(path: &Path) -> Result<EvidenceRoot, RootError> {
        let dir = Dir::open_ambient_dir(path, ambient_authority())
            .map_err(|source| RootError::Io { path: path.to_path_buf(), cause: source })?;
        Ok(EvidenceRoot { dir, path: path.to_path_buf() })
    }

    /// Opens `path` as the root, creating it (and its parents) if it is missing.
    ///
    /// # Errors
    /// [`RootError::Io`] if it cannot be created or opened.
    pub fn create(path: &Path) -> Result<EvidenceRoot, RootError> {
        std::fs::create_dir_all(path)
            .map_err(|source| RootError::Io { path: path.to_path_buf(), cause: source })?;
        EvidenceRoot::open(path)
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads document `reference`: a regular file inside the root (links followed only while
    /// they stay inside it).
    ///
    /// # Errors
    /// [`RootError::NotFound`], [`RootError::Refused`] for a link out of the root or what is
    /// not a regular file, [`RootError::Io`].
    pub fn read(&self, reference: &EvidenceRef) -> Result<ReadDocument, RootError> {
        let (bytes, metadata) = self.read_file(reference, None)?;
        Ok(ReadDocument { bytes, links: links(&metadata) })
    }

    /// Reads a file found by [`EvidenceRoot::walk`], refusing it if another file has taken its
    /// place since.
    ///
    /// # Errors
    /// As [`EvidenceRoot::read`], and [`RootError::Refused`] for a replaced file.
    pub fn read_walked(&self, file: &WalkedFile) -> Result<Vec<u8>, RootError> {
        let (bytes, metadata) = self.read_file(&file.reference, Some(crate::limits::MAX_EVIDENCE_BYTES))?;
        if identity(&metadata) != file.identity {
            return Err(refused(&file.reference, "was replaced while the tree was indexed"));
        }
        Ok(bytes)
    }

    /// Reads a document; one larger than `limit` is refused unread ([`RootError::TooLarge`]).
    fn read_file(
        &self,
        reference: &EvidenceRef,
        limit: Option<u64>,
    ) -> Result<(Vec<u8>, std::fs::Metadata), RootError> {
        let mut options = OpenOptions::new();
        options.read(true);
        nonblocking(&mut options);
        let file =
            self.dir.open_with(reference.as_str(), &options).map_err(|e| self.open_error(reference, e))?;
        let mut file = file.into_std();
        let io = |source| RootError::Io { path: self.path.join(reference.as_str()), cause: source };
        let metadata = file.metadata().map_err(io)?;
        if !metadata.is_file() {
            return Err(refused(reference, "is not a regular file"));
        }
        if limit.is_some_and(|limit| metadata.len() > limit) {
            return Err(RootError::TooLarge { reference: reference.clone(), bytes: metadata.len() });
        }
        let mut bytes = Vec::with_capacity(metadata.len().min(1 << 30) as usize);
        match limit {
            // A file that grew since its size was read: read no more than one byte past the limit.
            Some(limit) => (&mut file).take(limit + 1).read_to_end(&mut bytes).map_err(io)?,
            None => file.read_to_end(&mut bytes).map_err(io)?,
        };
        if limit.is_some_and(|limit| bytes.len() as u64 > limit) {
            return Err(RootError::TooLarge { reference: reference.clone(), bytes: bytes.len() as u64 });
        }
        Ok((bytes, metadata))
    }

    /// Writes `bytes` as a new document `reference`, creating its directories, or accepts an
    /// existing file with the same bytes. Never changes or replaces an existing file. The bytes
    /// go to a temporary file of a unique name first, synced, then moved into place, so a crash
    /// never leaves a partial document under the ref, and a temporary file a crash leaves
    /// behind blocks nothing (a later walk removes it).
    ///
    /// # Errors
    /// [`RootError::Exists`] for a file with other bytes, [`RootError::Refused`] for a
    /// directory on the way that is a link out of the root, [`RootError::Io`].
    pub fn write_once(&self, reference: &EvidenceRef, bytes: &[u8]) -> Result<Written, RootError> {
        let (parent, name) = match reference.as_str().rsplit_once('/') {
            Some((parent, name)) => (Some(parent), name),
            None => (None, reference.as_str()),
        };
        let dir = match parent {
            Some(parent) => {
                self.dir.create_dir_all(parent).map_err(|e| self.open_error(reference, e))?;
                self.dir.open_dir(parent).map_err(|e| self.open_error(reference, e))?
            }
            None => self
                .dir
                .try_clone()
                .map_err(|source| RootError::Io { path: self.path.clone(), cause: source })?,
        };
        if dir.symlink_metadata(name).is_ok() {
            return self.same_or_exists(reference, bytes);
        }
        let temp = temp_name();
        let io = |source| RootError::Io { path: self.path.join(reference.as_str()), cause: source };
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            let mut file = dir.open_with(&temp, &options)?;
            file.write_all(bytes)?;
            file.sync_all()
        })();
        let placed = written.and_then(|()| move_no_replace(&dir, &temp, name));
        let _ = dir.remove_file(&temp);
        match placed {
            Ok(()) => {
                sync_dir(&dir);
                Ok(Written::New)
            }
            // Written meanwhile by another writer of the same ref.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.same_or_exists(reference, bytes),
            Err(e) => Err(io(e)),
        }
    }

    /// Replaces the existing document `reference` with `bytes` (`ctxgate redact`): written to
    /// a temporary file of a unique name, synced, then renamed over it, so a crash leaves the
    /// old document or the new one. Evidence is otherwise never modified ([`Self::write_once`]).
    ///
    /// # Errors
    /// [`RootError::Refused`] for a directory on the way that is a link out of the root,
    /// [`RootError::Io`].
    pub fn replace(&self, reference: &EvidenceRef, bytes: &[u8]) -> Result<(), RootError> {
        let (parent, name) = match reference.as_str().rsplit_once('/') {
            Some((parent, name)) => (Some(parent), name),
            None => (None, reference.as_str()),
        };
        let dir = match parent {
            Some(parent) => self.dir.open_dir(parent).map_err(|e| self.open_error(reference, e))?,
            None => self
                .dir
                .try_clone()
                .map_err(|source| RootError::Io { path: self.path.clone(), cause: source })?,
        };
        let temp = temp_name();
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            let mut file = dir.open_with(&temp, &options)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            dir.rename(&temp, &dir, name)
        })();
        if written.is_err() {
            let _ = dir.remove_file(&temp);
        }
        written.map_err(|cause| RootError::Io { path: self.path.join(reference.as_str()), cause })?;
        sync_dir(&dir);
        Ok(())
    }

    fn same_or_exists(&self, reference: &EvidenceRef, bytes: &[u8]) -> Result<Written, RootError> {
        match self.read_file(reference, None) {
            Ok((existing, _)) if existing == bytes => Ok(Written::Existing),
            Ok(_) => Err(RootError::Exists(reference.clone())),
            Err(RootError::NotFound { .. }) => Err(RootError::Exists(reference.clone())),
            Err(e) => Err(e),
        }
    }

    /// The regular files of the tree in ref order, and what was left out with why. Links are
    /// followed only to files inside the root, never to directories. A file with hard links
    /// that the walk did not all see may also be linked from outside the root: it is left out.
    /// `skip_file` names a file to leave out silently (the index itself, when it lies inside
    /// the root). Temporary files of writers that are gone are removed.
    pub fn walk(&self, skip_file: Option<&Path>) -> (Vec<WalkedFile>, Vec<WalkSkip>) {
        let skip_identity =
            skip_file.filter(|_| cfg!(unix)).and_then(|p| std::fs::metadata(p).ok()).map(|m| identity(&m));
        let mut walk = Walk { root: self, files: Vec::new(), skipped: Vec::new(), links: HashMap::new() };
        walk.dir(None, skip_identity);
        let Walk { mut files, mut skipped, links, .. } = walk;
        files.retain(|(file, nlink)| {
            let seen = links.get(&file.identity).copied().unwrap_or(1);
            if *nlink > seen {
                skipped.push(WalkSkip {
                    path: file.reference.as_str().to_string(),
                    reason: format!(
                        "has {nlink} hard links, {} of them outside the evidence root: copy the file into the tree instead",
                        nlink - seen
                    ),
                });
                return false;
            }
            true
        });
        files.sort_by(|a, b| a.0.reference.cmp(&b.0.reference));
        (files.into_iter().map(|(f, _)| f).collect(), skipped)
    }

    fn open_error(&self, reference: &EvidenceRef, e: io::Error) -> RootError {
        if e.kind() == io::ErrorKind::NotFound {
            return RootError::NotFound { reference: reference.clone(), root: self.path.clone() };
        }
        if self.leads_outside(reference) {
            return refused(reference, "leads outside the evidence root through a link");
        }
        RootError::Io { path: self.path.join(reference.as_str()), cause: e }
    }

    /// Whether a component of `reference` is a link whose target is not inside the root: the
    /// reason a beneath-the-root open failed, said as such.
    fn leads_outside(&self, reference: &EvidenceRef) -> bool {
        let mut prefix = String::new();
        for part in reference.as_str().split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            match self.dir.symlink_metadata(&prefix) {
                Ok(m) if m.file_type().is_symlink() => return self.dir.metadata(&prefix).is_err(),
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

struct Walk<'a> {
    root: &'a EvidenceRoot,
    files: Vec<(WalkedFile, u64)>,
    skipped: Vec<WalkSkip>,
    /// Links seen per hard-linked inode.
    links: HashMap<FileIdentity, u64>,
}

impl Walk<'_> {
    fn dir(&mut self, relative: Option<&str>, skip: Option<FileIdentity>) {
        let entries = match relative {
            Some(r) => self.root.dir.read_dir(r),
            None => self.root.dir.entries(),
        };
        let entries = match entries {
            Ok(entries) => entries,
            Err(e) => {
                self.skip(relative.unwrap_or("."), e.to_string());
                return;
            }
        };
        let mut names = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => names.push((entry.file_name(), entry.file_type())),
                Err(e) => self.skip(relative.unwrap_or("."), e.to_string()),
            }
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, file_type) in names {
            let path = match relative {
                Some(r) => Path::new(r).join(&name),
                None => PathBuf::from(&name),
            };
            let shown = path.to_string_lossy().into_owned();
            let name_text = name.to_string_lossy();
            if is_temp_name(&name_text) {
                self.remove_if_stale(&shown);
                continue;
            }
            let reference = match EvidenceRef::from_relative_path(&path) {
                Ok(r) => r,
                Err(e) => {
                    self.skip(&shown, e.reason.to_string());
                    continue;
                }
            };
            let file_type = match file_type {
                Ok(t) => t,
                Err(e) => {
                    self.skip(&shown, e.to_string());
                    continue;
                }
            };
            if file_type.is_dir() {
                self.dir(Some(reference.as_str()), skip);
                continue;
            }
            // A link is followed, beneath the root only, to see what it leads to.
            let metadata = match self.root.dir.metadata(reference.as_str()) {
                Ok(m) => m,
                Err(_) if file_type.is_symlink() => {
                    self.skip(&shown, "a link that leads outside the evidence root (or nowhere)".into());
                    continue;
                }
                Err(e) => {
                    self.skip(&shown, e.to_string());
                    continue;
                }
            };
            if metadata.is_dir() {
                self.skip(&shown, "a link to a directory: not followed".into());
                continue;
            }
            if !metadata.is_file() {
                continue;
            }
            let identity = cap_identity(&metadata);
            if Some(identity) == skip {
                continue;
            }
            let nlink = cap_links(&metadata);
            if nlink > 1 {
                *self.links.entry(identity).or_insert(0) += 1;
            }
            self.files.push((WalkedFile { reference, identity }, nlink));
        }
    }

    fn skip(&mut self, path: &str, reason: String) {
        self.skipped.push(WalkSkip { path: path.to_string(), reason });
    }

    fn remove_if_stale(&self, path: &str) {
        let Ok(metadata) = self.root.dir.symlink_metadata(path) else { return };
        if !metadata.is_file() {
            return;
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let legacy = !name.starts_with(TEMP_PREFIX);
        let old = metadata
            .modified()
            .ok()
            .and_then(|t| t.into_std().elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if old || (!legacy && !writer_alive(name)) {
            match self.root.dir.remove_file(path) {
                Ok(()) => log::info!("removed {path}, left by a writer that is gone"),
                Err(e) => log::debug!("could not remove {path}: {e}"),
            }
        }
    }
}

fn refused(reference: &EvidenceRef, reason: &str) -> RootError {
    RootError::Refused { reference: reference.clone(), reason: reason.to_string() }
}

/// A name no other writer uses: this process's id and a counter.
fn temp_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{TEMP_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Whether the process that named temporary file `name` may still be writing it.
fn writer_alive(name: &str) -> bool {
    let pid = name
        .strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.split('-').next())
        .and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) if pid == std::process::id() => true,
        Some(pid) if cfg!(target_os = "linux") => Path::new(&format!("/proc/{pid}")).exists(),
        _ => true,
    }
}

/// Moves `from` to `to` in `dir`, failing with `AlreadyExists` if `to` exists.
fn move_no_replace(dir: &Dir, from: &str, to: &str) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{RenameFlags, renameat_with};
        match renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            // A file system without the flag: the portable way below.
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {}
            Err(e) => return Err(e.into()),
        }
    }
    // `hard_link` fails if `to` exists, where `rename` would replace it.
    dir.hard_link(from, dir, to)
}

/// Makes a new entry of `dir` durable; not every platform can sync a directory.
fn sync_dir(dir: &Dir) {
    #[cfg(unix)]
    if let Err(e) = rustix::fs::fsync(dir) {
        log::debug!("fsync of an evidence directory: {e}");
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Opens never block (a FIFO planted in the tree must not hang a read).
fn nonblocking(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    #[cfg(not(unix))]
    let _ = options;
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> FileIdentity {
    use std::os::unix::fs::MetadataExt;
    FileIdentity { dev: m.dev(), ino: m.ino() }
}

#[cfg(unix)]
fn links(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.nlink()
}

#[cfg(unix)]
fn cap_identity(m: &cap_std::fs::Metadata) -> FileIdentity {
    use cap_std::fs::MetadataExt;
    FileIdentity { dev: m.dev(), ino: m.ino() }
}

#[cfg(unix)]
fn cap_links(m: &cap_std::fs::Metadata) -> u64 {
    use cap_std::fs::MetadataExt;
    m.nlink()
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> FileIdentity {
    FileIdentity { dev: 0, ino: 0 }
}

#[cfg(not(unix))]
fn links(_: &std::fs::Metadata) -> u64 {
    1
}

#[cfg(not(unix))]
fn cap_identity(_: &cap_std::fs::Metadata) -> FileIdentity {
    FileIdentity { dev: 0, ino: 0 }
}

#[cfg(not(unix))]
fn cap_links(_: &cap_std::fs::Metadata) -> u64 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(text: &str) -> EvidenceRef {
        EvidenceRef::parse(text).unwrap()
    }

    #[test]
    fn documents_stored_at_once_share_their_new_directories() -> Result<(), Box<dyn std::error::Error>> {
        // Threads storing outputs of one session all find `tool-output/<session>/` missing,
        // and all make it; none may fail because another made it first.
        for round in 0..20 {
            let dir = tempfile::tempdir()?;
            let root = EvidenceRoot::open(dir.path())?;
            let barrier = std::sync::Barrier::new(8);
            let results: Vec<Result<Written, RootError>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..8)
                    .map(|i| {
                        let (root, barrier) = (&root, &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            root.write_once(&r(&format!("tool-output/s{round}/call-{i}.txt")), b"x")
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            assert_eq!(results.len(), 8);
            for result in results {
                assert_eq!(result?, Written::New);
            }
            assert_eq!(std::fs::read_dir(dir.path().join(format!("tool-output/s{round}")))?.count(), 8);
        }
        Ok(())
    }

    #[test]
    fn a_document_is_written_once_and_never_changed() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = EvidenceRoot::open(dir.path())?;
        assert_eq!(root.write_once(&r("d/e/new.json"), b"{}")?, Written::New);
        assert_eq!(std::fs::read(dir.path().join("d/e/new.json"))?, b"{}");
        assert_eq!(root.write_once(&r("d/e/new.json"), b"{}")?, Written::Existing);
        assert!(matches!(root.write_once(&r("d/e/new.json"), b"[]"), Err(RootError::Exists(_))));
        assert_eq!(std::fs::read(dir.path().join("d/e/new.json"))?, b"{}");
        // Nothing but the document is left in its directory.
        assert_eq!(std::fs::read_dir(dir.path().join("d/e"))?.count(), 1);
        Ok(())
    }

    #[test]
    fn a_temporary_file_left_by_a_crash_blocks_nothing_and_a_walk_removes_it()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("w"))?;
        // What a writer killed mid-write leaves: under the old fixed name, and under a unique
        // name of a process that is gone (pid 0 is never a user process's).
        std::fs::write(dir.path().join("w/.doc.json.ctxgate-tmp"), b"partial")?;
        std::fs::write(dir.path().join(format!("w/{TEMP_PREFIX}0-7")), b"partial")?;
        let root = EvidenceRoot::open(dir.path())?;
        assert_eq!(root.write_once(&r("w/doc.json"), b"{\"a\": 1}")?, Written::New);
        let (files, skipped) = root.walk(None);
        let refs: Vec<&str> = files.iter().map(|f| f.reference.as_str()).collect();
        assert_eq!(refs, ["w/doc.json"], "temporary files are never documents");
        assert!(skipped.is_empty(), "{skipped:?}");
        assert!(
            !dir.path().join(format!("w/{TEMP_PREFIX}0-7")).exists(),
            "the dead writer's file is removed"
        );
        // A temporary file of a live writer (this process) stays.
        let live = dir.path().join(format!("w/{TEMP_PREFIX}{}-999", std::process::id()));
        std::fs::write(&live, b"in progress")?;
        root.walk(None);
        assert!(live.exists());
        Ok(())
    }

    #[cfg(unix)]
    #[test]
    fn links_cannot_escape() -> Result<(), Box<dyn std::error::Error>> {
        let outside = tempfile::tempdir()?;
        let dir = tempfile::tempdir()?;
        std::fs::write(outside.path().join("secret.json"), "{}")?;
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out"))?;
        std::os::unix::fs::symlink(outside.path().join("secret.json"), dir.path().join("s.json"))?;
        std::os::unix::fs::symlink("../s.json", dir.path().join("inner"))?;
        std::fs::create_dir(dir.path().join("d"))?;
        std::fs::write(dir.path().join("d/real.json"), "[1]")?;
        std::os::unix::fs::symlink("d/real.json", dir.path().join("ok.json"))?;
        let root = EvidenceRoot::open(dir.path())?;

        for escaping in ["out/secret.json", "s.json"] {
            let refused = root.read(&r(escaping));
            assert!(matches!(refused, Err(RootError::Refused { .. })), "{escaping}: {refused:?}");
        }
        let write_through = root.write_once(&r("out/new.json"), b"{}");
        assert!(matches!(write_through, Err(RootError::Refused { .. })), "{write_through:?}");
        assert!(!outside.path().join("new.json").exists());
        // A link that stays inside the root is followed.
        assert_eq!(root.read(&r("ok.json"))?.bytes, b"[1]");

        let (files, skipped) = root.walk(None);
        let refs: Vec<&str> = files.iter().map(|f| f.reference.as_str()).collect();
        assert_eq!(refs, ["d/real.json", "ok.json"]);
        let skipped: Vec<&str> = skipped.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(skipped, ["inner", "out", "s.json"]);
        Ok(())
    }

    #[cfg(unix)]
    #[test]
    fn a_file_hard_linked_from_outside_the_root_is_left_out_of_a_walk()
    -> Result<(), Box<dyn std::error::Error>> {
        let base = tempfile::tempdir()?;
        let (tree, outside) = (base.path().join("tree"), base.path().join("outside"));
        std::fs::create_dir_all(tree.join("a"))?;
        std::fs::create_dir_all(&outside)?;
        std::fs::write(outside.join("secret.json"), "{\"password\": 1}")?;
        std::fs::hard_link(outside.join("secret.json"), tree.join("a/copy.json"))?;
        // Both links of this one are inside: it is indexed.
        std::fs::write(tree.join("a/one.json"), "[]")?;
        std::fs::hard_link(tree.join("a/one.json"), tree.join("two.json"))?;
        let root = EvidenceRoot::open(&tree)?;
        let (files, skipped) = root.walk(None);
        let refs: Vec<&str> = files.iter().map(|f| f.reference.as_str()).collect();
        assert_eq!(refs, ["a/one.json", "two.json"]);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].path, "a/copy.json");
        assert!(skipped[0].reason.contains("hard links"), "{}", skipped[0].reason);
        // A single read reports the links, for its caller to decide.
        assert_eq!(root.read(&r("a/copy.json"))?.links, 2);
        Ok(())
    }

    #[cfg(unix)]
    #[test]
    fn a_walked_file_replaced_before_it_is_read_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("a.json"), "[1]")?;
        let root = EvidenceRoot::open(dir.path())?;
        let (files, _) = root.walk(None);
        std::fs::write(dir.path().join("b.json"), "[2]")?;
        std::fs::rename(dir.path().join("b.json"), dir.path().join("a.json"))?;
        assert!(matches!(root.read_walked(&files[0]), Err(RootError::Refused { .. })));
        Ok(())
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_not_a_document_and_never_blocks_a_read() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        rustix::fs::mkfifoat(rustix::fs::CWD, dir.path().join("pipe.json"), rustix::fs::Mode::RWXU)?;
        let root = EvidenceRoot::open(dir.path())?;
        assert!(matches!(root.read(&r("pipe.json")), Err(RootError::Refused { .. })));
        assert!(root.walk(None).0.is_empty());
        Ok(())
    }
}

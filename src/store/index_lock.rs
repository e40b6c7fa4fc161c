//! The index's lock file, `<index>.lock`: the operating system's file lock (`flock` on Unix),
//! so a process killed at any point releases it.
//!
//! - Maintenance jobs (`rebuild`, `compact`) hold it exclusively for their whole run: a second
//!   job waits the busy timeout and then reports `busy` instead of deleting or renaming over
//!   the first one's files; holding it, a job knows that a scratch file of an earlier job is
//!   left over from a crash.
//! - An import that writes runs (`super::runs`) holds it shared from its first run to its
//!   merge. Finding runs, a process that takes it exclusively knows that no import that wrote
//!   them is alive: the runs are an interrupted import's, to merge. One that cannot take it
//!   leaves them to the import that is writing them.
//!
//! A lock file its user may not write (made by another user, such as root) is locked through a
//! read-only handle: the lock is the same, and nothing is ever written to the file.
//!
//! The turnstile, `<index>.turnstile`, lets `rebuild` in past a stream of writers. A rebuild
//! reads the file through a read-only open, which waits until no process has it open for
//! writing; writers that come and go without a gap (hooks, `add`s) would keep it out for ever
//! (the operating system's file locks are not fair). So a rebuild first closes the turnstile
//! (holds it exclusively), and every read-write open passes it (holds it shared for the moment
//! of its open): from then on no new writer gets in, the ones inside finish, and the rebuild
//! starts. Writers wait for it as they wait for any busy index.

use super::Error;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Between two attempts to take a busy lock.
const RETRY: Duration = Duration::from_millis(20);

/// The index's lock, held until dropped.
#[derive(Debug)]
pub struct IndexLock {
    _file: File,
}

impl IndexLock {
    /// Takes the lock of the index at `index` exclusively, waiting up to `timeout` for the
    /// processes that hold it.
    ///
    /// # Errors
    /// [`Error::Busy`] past the timeout, [`Error::Io`] if the lock file cannot be opened.
    pub fn exclusive(index: &Path, timeout: Duration) -> Result<IndexLock, Error> {
        IndexLock::acquire(index, timeout, File::try_lock)
    }

    /// Takes the lock of the index at `index` shared, waiting up to `timeout` for an
    /// exclusive holder.
    ///
    /// # Errors
    /// As [`IndexLock::exclusive`].
    pub fn shared(index: &Path, timeout: Duration) -> Result<IndexLock, Error> {
        IndexLock::acquire(index, timeout, File::try_lock_shared)
    }

    /// The lock taken exclusively if no process holds it, else `None`.
    ///
    /// # Errors
    /// [`Error::Io`] if the lock file cannot be opened.
    pub fn try_exclusive(index: &Path) -> Result<Option<IndexLock>, Error> {
        match IndexLock::acquire(index, Duration::ZERO, File::try_lock) {
            Ok(lock) => Ok(Some(lock)),
            Err(Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn acquire(
        index: &Path,
        timeout: Duration,
        try_lock: fn(&File) -> Result<(), TryLockError>,
    ) -> Result<IndexLock, Error> {
        let index = real_path(index);
        let path = beside(&index, ".lock");
        let file = open_lock_file(&path)?;
        lock(file, &index, &path, timeout, try_lock).map(|file| IndexLock { _file: file })
    }
}

/// A rebuild's hold of the index's turnstile (see the module's doc), until dropped; or a
/// writer's pass through it, for the moment of its open.
#[derive(Debug)]
pub struct Turnstile {
    _file: File,
}

impl Turnstile {
    /// Closes the turnstile of the index at `index`: no writer opens the index until this is
    /// dropped. Waits up to `timeout` for the writers passing it at this moment.
    ///
    /// # Errors
    /// [`Error::Busy`] past the timeout, [`Error::Io`] if the file cannot be opened.
    pub fn close(index: &Path, timeout: Duration) -> Result<Turnstile, Error> {
        let index = real_path(index);
        let path = beside(&index, ".turnstile");
        let file = open_lock_file(&path)?;
        lock(file, &index, &path, timeout, File::try_lock).map(|file| Turnstile { _file: file })
    }

    /// Passes the turnstile of the index at `index`, waiting up to `timeout` while a rebuild
    /// holds it closed; the pass is held until dropped. `None` when no rebuild ever made one.
    ///
    /// # Errors
    /// [`Error::Busy`] past the timeout, [`Error::Io`] if the file cannot be opened.
    pub fn pass(index: &Path, timeout: Duration) -> Result<Option<Turnstile>, Error> {
        let index = real_path(index);
        let path = beside(&index, ".turnstile");
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Io { path, source }),
        };
        lock(file, &index, &path, timeout, File::try_lock_shared).map(|file| Some(Turnstile { _file: file }))
    }
}

/// Whether the operating system's file locks hold in `dir`: a lock one handle of a file holds
/// keeps another handle out. On a file system where they silently do nothing (some network and
/// FUSE file systems), processes sharing an index would write over each other's pages, leaving
/// a file the database engine aborts on. Tried once per directory and process, on a probe file
/// of its own (removed at once); `true` where no probe file can be made (a directory the user
/// may not write): there the index is not written by this user either.
pub fn locks_hold(dir: &Path) -> bool {
    static TRIED: std::sync::Mutex<Vec<(PathBuf, bool)>> = std::sync::Mutex::new(Vec::new());
    let mut tried = TRIED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, hold)) = tried.iter().find(|(tried, _)| tried == dir) {
        return *hold;
    }
    let hold = probe_locks(dir, File::try_lock, File::try_lock_shared).unwrap_or(true);
    tried.push((dir.to_path_buf(), hold));
    hold
}

/// Takes `exclusive` on one handle of a new probe file in `dir`, then tries `shared` on
/// another: `Some(false)` if that succeeds. `None` if the probe cannot be made or locked.
fn probe_locks(
    dir: &Path,
    exclusive: fn(&File) -> Result<(), TryLockError>,
    shared: fn(&File) -> Result<(), TryLockError>,
) -> Option<bool> {
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(".ctxgate-lock-probe-{}-{n}", std::process::id()));
    let first = OpenOptions::new().read(true).write(true).create_new(true).open(&path).ok()?;
    let hold = (|| {
        let second = File::open(&path).ok()?;
        exclusive(&first).ok()?;
        Some(matches!(shared(&second), Err(TryLockError::WouldBlock)))
    })();
    let _ = std::fs::remove_file(&path);
    hold
}

/// Opens (creating it) the lock file at `path`. A lock file another user made (`sudo ctxgate
/// compact` leaves a root-owned one) is opened read-only: an OS lock needs no write access.
fn open_lock_file(path: &Path) -> Result<File, Error> {
    match OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path) {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => OpenOptions::new()
            .read(true)
            .open(path)
            .map_err(|_| Error::Io { path: path.to_path_buf(), source: e }),
        Err(source) => Err(Error::Io { path: path.to_path_buf(), source }),
    }
}

/// Takes `try_lock` on `file` (the lock file at `path` of the index at `index`), retrying for up
/// to `timeout`.
fn lock(
    file: File,
    index: &Path,
    path: &Path,
    timeout: Duration,
    try_lock: fn(&File) -> Result<(), TryLockError>,
) -> Result<File, Error> {
    let started = Instant::now();
    loop {
        match try_lock(&file) {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if started.elapsed() < timeout => std::thread::sleep(RETRY),
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Busy { path: index.to_path_buf(), waited: started.elapsed() });
            }
            Err(TryLockError::Error(source)) => return Err(Error::Io { path: path.to_path_buf(), source }),
        }
    }
}

/// The file an index path names: a link is followed, so a job works beside the file itself
/// (a rebuild replaces the link's target, and the link stays a link).
pub fn real_path(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// `<index><suffix>`, beside the index.
fn beside(index: &Path, suffix: &str) -> PathBuf {
    let mut name = index.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(suffix);
    index.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_job_waits_then_is_busy_and_gets_the_lock_once_the_first_ends() -> Result<(), Error> {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("x.redb");
        let first = IndexLock::exclusive(&index, Duration::ZERO)?;
        let started = Instant::now();
        let second = IndexLock::exclusive(&index, Duration::from_millis(200));
        assert!(matches!(second, Err(Error::Busy { .. })), "{second:?}");
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(first);
        IndexLock::exclusive(&index, Duration::ZERO)?;
        Ok(())
    }

    #[test]
    fn a_closed_turnstile_keeps_writers_out_until_it_opens() -> Result<(), Error> {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("x.redb");
        assert!(Turnstile::pass(&index, Duration::ZERO)?.is_none(), "no rebuild made one");
        assert!(!dir.path().join("x.redb.turnstile").exists(), "a writer creates none");
        let rebuild = Turnstile::close(&index, Duration::ZERO)?;
        let waited = Instant::now();
        assert!(matches!(Turnstile::pass(&index, Duration::from_millis(100)), Err(Error::Busy { .. })));
        assert!(waited.elapsed() >= Duration::from_millis(100));
        drop(rebuild);
        let one = Turnstile::pass(&index, Duration::ZERO)?.expect("the file stays");
        let two = Turnstile::pass(&index, Duration::ZERO)?.expect("writers pass together");
        assert!(matches!(Turnstile::close(&index, Duration::ZERO), Err(Error::Busy { .. })), "a writer is passing");
        drop((one, two));
        Turnstile::close(&index, Duration::ZERO)?;
        Ok(())
    }

    #[test]
    fn locks_that_keep_no_one_out_are_found() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(probe_locks(dir.path(), File::try_lock, File::try_lock_shared), Some(true));
        // What a file system whose locks do nothing gives: every attempt succeeds.
        let lock_nothing: fn(&File) -> Result<(), TryLockError> = |_| Ok(());
        assert_eq!(probe_locks(dir.path(), lock_nothing, lock_nothing), Some(false));
        assert!(locks_hold(dir.path()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the probe files are removed");
        assert_eq!(probe_locks(&dir.path().join("missing"), File::try_lock, File::try_lock_shared), None);
    }

    #[test]
    fn imports_share_the_lock_and_keep_an_exclusive_taker_out() -> Result<(), Error> {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("x.redb");
        let one = IndexLock::shared(&index, Duration::ZERO)?;
        let two = IndexLock::shared(&index, Duration::ZERO)?;
        assert!(IndexLock::try_exclusive(&index)?.is_none(), "two imports hold it");
        drop(one);
        assert!(IndexLock::try_exclusive(&index)?.is_none(), "one import still holds it");
        drop(two);
        let job = IndexLock::try_exclusive(&index)?.expect("nobody holds it");
        assert!(matches!(IndexLock::shared(&index, Duration::ZERO), Err(Error::Busy { .. })));
        drop(job);
        Ok(())
    }
}

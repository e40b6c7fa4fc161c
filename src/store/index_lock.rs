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
        let path = lock_path(&index);
        let file = match OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path) {
            Ok(file) => file,
            // A lock file another user made (`sudo ctxgate compact` leaves a root-owned one): an
            // OS lock needs no write access, so it is taken through a read-only handle.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => OpenOptions::new()
                .read(true)
                .open(&path)
                .map_err(|_| Error::Io { path: path.clone(), source: e })?,
            Err(source) => return Err(Error::Io { path, source }),
        };
        let started = Instant::now();
        loop {
            match try_lock(&file) {
                Ok(()) => return Ok(IndexLock { _file: file }),
                Err(TryLockError::WouldBlock) if started.elapsed() < timeout => std::thread::sleep(RETRY),
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Busy { path: index.clone(), waited: started.elapsed() });
                }
                Err(TryLockError::Error(source)) => return Err(Error::Io { path, source }),
            }
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

/// `<index>.lock`, beside the index.
fn lock_path(index: &Path) -> PathBuf {
    let mut name = index.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
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

//! Maintenance jobs exclusive per index: `rebuild` and `compact` hold a lock on `<index>.lock`
//! for their whole run, so a second job waits the busy timeout and then reports `busy`
//! instead of deleting or renaming over the first one's files. The lock is the operating
//! system's (`flock` on Unix): a job killed at any point releases it.
//!
//! Holding the lock, a job knows that a scratch file of an earlier job of this index is left
//! over from a crash, and removes it.

use crate::store;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Between two attempts to take a busy lock.
const RETRY: Duration = Duration::from_millis(20);

/// The lock of an index's maintenance jobs, held until dropped.
#[derive(Debug)]
pub(crate) struct JobLock {
    _file: File,
}

impl JobLock {
    /// Takes the job lock of the index at `index` (its real path: links resolved by the
    /// caller), waiting up to `timeout` for a job that holds it.
    ///
    /// # Errors
    /// [`store::Error::Busy`] past the timeout, [`store::Error::Io`] if the lock file cannot
    /// be opened.
    pub(crate) fn acquire(index: &Path, timeout: Duration) -> Result<JobLock, store::Error> {
        let path = lock_path(index);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| store::Error::Io { path: path.clone(), source })?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(JobLock { _file: file }),
                Err(TryLockError::WouldBlock) if started.elapsed() < timeout => std::thread::sleep(RETRY),
                Err(TryLockError::WouldBlock) => {
                    return Err(store::Error::Busy { path: index.to_path_buf(), waited: started.elapsed() });
                }
                Err(TryLockError::Error(source)) => return Err(store::Error::Io { path, source }),
            }
        }
    }
}

/// The file an index path names: a link is followed, so a job works beside the file itself
/// (a rebuild replaces the link's target, and the link stays a link).
pub(crate) fn real_path(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// `<index>.lock`, beside the index.
pub(crate) fn lock_path(index: &Path) -> PathBuf {
    let mut name = index.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    index.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_job_waits_then_is_busy_and_gets_the_lock_once_the_first_ends() -> Result<(), store::Error> {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("x.redb");
        let first = JobLock::acquire(&index, Duration::ZERO)?;
        let started = Instant::now();
        let second = JobLock::acquire(&index, Duration::from_millis(200));
        assert!(matches!(second, Err(store::Error::Busy { .. })), "{second:?}");
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(first);
        JobLock::acquire(&index, Duration::ZERO)?;
        Ok(())
    }
}

//! A damaged index file is an error, never a panic (issue 23).
//!
//! redb trusts the pages it reads: a flipped bit or a cut file can make it unwrap a string that
//! is not UTF-8, slice past a page's end or reach an `unreachable!` (debug builds also stop at
//! its internal consistency assertions). [`catch_damage`] runs a piece of work on an index and
//! turns such a panic into [`Error::Damaged`] naming the file and what to do; a panic raised
//! anywhere else is a bug in ctxgate, returned as [`crate::Error::Internal`] with its message
//! and location. Errors that say the file is damaged ([`Error::Corrupt`], a redb `Corrupted`
//! storage error) come back as [`Error::Damaged`] too, so every way a damaged file shows has
//! one kind (`damaged`) and one message.
//!
//! Telling the two kinds of panic apart needs the panic's location, which only a panic hook
//! sees. The first catch installs one (keeping the hook that was there before): while a catch
//! is running, it records where each panic was raised, and on which thread, and keeps redb's
//! panics (and any panic on a thread that runs [`catch_panic`], which reports it as an error)
//! off stderr, logging them at debug level instead; every other panic goes to the previous
//! hook as before. A catch claims the record of the panic its own thread raised under it;
//! failing that, that of a panic with the same message raised on a thread no catch was running
//! on, since a panic on a worker thread (rayon's, `wait_on_thread`'s, an import's) is raised
//! again in the thread waiting for it. No catch takes or clears a record another catch will
//! claim.

use super::Error;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, Location};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::thread::ThreadId;

/// What the hook saw of a panic.
#[derive(Debug, Clone)]
struct Raised {
    message: String,
    location: String,
    in_redb: bool,
    thread: ThreadId,
    /// A catch was running on `thread`: it claims the record. Otherwise the panic is raised
    /// again elsewhere, and a catch on the thread it reaches claims it.
    under_catch: bool,
}

/// Panics raised while a catch was running and not yet claimed by one, oldest first.
static RAISED: Mutex<Vec<Raised>> = Mutex::new(Vec::new());
/// Records kept at most: one no catch claims (a panic something else caught, on a thread
/// without a catch) is dropped in time, so the list stays small whatever runs beside them.
const MAX_RAISED: usize = 64;
/// Catches running in the process, on any thread.
static CATCHES: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

thread_local! {
    /// Catches running on this thread (nested ones included).
    static CATCHES_HERE: Cell<usize> = const { Cell::new(0) };
    /// Those of them that report any panic as an error ([`catch_panic`]).
    static REPORTING_HERE: Cell<usize> = const { Cell::new(0) };
}

/// A panic [`catch_reported`] caught: raised inside redb (the file is damaged), or elsewhere.
#[derive(Debug)]
pub enum Panicked {
    /// Raised inside redb: [`Error::Damaged`] for the file.
    InRedb(Error),
    /// Raised elsewhere: a bug, with where it was raised.
    Other {
        /// The panic's message.
        message: String,
        /// `file:line:column`.
        location: String,
    },
}

/// Runs `f`, returning a panic it raises as a [`Panicked`] (and never printing it): the core of
/// `crate::catch_panic`, which the CLI and the server run every call through.
pub fn catch_reported<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch(f, true).map_err(|(_, raised)| match raised.in_redb {
        true => Panicked::InRedb(Error::Damaged { path: path.to_path_buf(), detail: DAMAGED_PAGE.into() }),
        false => Panicked::Other { message: raised.message, location: raised.location },
    })
}

/// Runs `f`, turning a panic raised inside redb into [`Error::Damaged`] naming `path`; any
/// other panic goes on (for an outer [`catch_panic`] to report). The store's own entry points
/// (open, write) run through this, so a library user's writes are covered without a catch.
pub(crate) fn catch_redb_panic<T, E: From<Error>>(
    path: &Path,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match catch(f, false) {
        Ok(result) => result,
        Err((_, raised)) if raised.in_redb => {
            Err(Error::Damaged { path: path.to_path_buf(), detail: DAMAGED_PAGE.into() }.into())
        }
        Err((payload, raised)) => {
            // Put the record back for the catch this panic goes on to: on this thread if one
            // is running here, else wherever the panic is raised again.
            record(Raised { under_catch: CATCHES_HERE.get() > 0, ..raised });
            std::panic::resume_unwind(payload)
        }
    }
}

type Payload = Box<dyn std::any::Any + Send>;

/// Runs `f` under `catch_unwind`, with the hook recording where a panic was raised;
/// `reporting`: every panic becomes an error (so the hook need not print it).
fn catch<T>(f: impl FnOnce() -> T, reporting: bool) -> Result<T, (Payload, Raised)> {
    install_hook();
    if CATCHES_HERE.get() == 0 {
        // A record of a panic raised here under an earlier catch, which something else caught,
        // is not this call's.
        let here = std::thread::current().id();
        lock_raised().retain(|raised| !(raised.thread == here && raised.under_catch));
    }
    CATCHES_HERE.set(CATCHES_HERE.get() + 1);
    REPORTING_HERE.set(REPORTING_HERE.get() + usize::from(reporting));
    CATCHES.fetch_add(1, Ordering::SeqCst);
    // Unwind safety: after a panic nothing `f` touched is used again here, and the error tells
    // the caller to drop the index handle.
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    CATCHES.fetch_sub(1, Ordering::SeqCst);
    REPORTING_HERE.set(REPORTING_HERE.get() - usize::from(reporting));
    CATCHES_HERE.set(CATCHES_HERE.get() - 1);
    result.map_err(|payload| {
        let message = payload_message(payload.as_ref());
        let raised = claim(&message).unwrap_or_else(|| Raised {
            // No record of this panic: another hook replaced ours after it was installed, the
            // panic was raised while no catch was running and caught only to be raised again,
            // or more than `MAX_RAISED` panics went unclaimed since. No location to go by.
            message,
            location: "an unknown location".into(),
            in_redb: false,
            thread: std::thread::current().id(),
            under_catch: false,
        });
        (payload, raised)
    })
}

/// Keeps `raised` for the catch its panic reaches.
fn record(raised: Raised) {
    let mut records = lock_raised();
    if records.len() == MAX_RAISED {
        records.remove(0);
    }
    records.push(raised);
}

/// Takes the record of the panic with `message` that a catch on this thread just caught: the
/// newest raised on this thread under a catch, else the newest raised with no catch on its
/// thread (a worker's, raised again here).
fn claim(message: &str) -> Option<Raised> {
    let here = std::thread::current().id();
    let mut records = lock_raised();
    let at = records
        .iter()
        .rposition(|raised| raised.under_catch && raised.thread == here && raised.message == message)
        .or_else(|| records.iter().rposition(|raised| !raised.under_catch && raised.message == message))?;
    Some(records.remove(at))
}

/// What [`Error::Damaged`] says after redb panicked (its message is logged at debug level).
const DAMAGED_PAGE: &str = "the database engine found a page it cannot read";

impl Error {
    /// This error as [`Error::Damaged`] naming `path`, if it says the file is damaged.
    pub(crate) fn naming_damaged_file(self, path: &Path) -> Error {
        let detail = match &self {
            Error::Corrupt { what } => format!("a record does not decode: {what}"),
            Error::Database(e) => match corrupted_message(e) {
                Some(message) => format!("the database engine reports: {message}"),
                // A read past the end: the header points at pages the file no longer has.
                None if is_cut_short(e) => "the file ends before its data does (it was cut short)".into(),
                // A file not closed cleanly that redb's repair could not finish (a cut file, a
                // full disk, a failed write).
                None if matches!(e, redb::Error::RepairAborted) => {
                    "it was not closed cleanly and the database engine could not repair it".into()
                }
                None => return self,
            },
            _ => return self,
        };
        Error::Damaged { path: path.to_path_buf(), detail }
    }
}

/// Whether redb failed reading past the end of the file.
fn is_cut_short(e: &redb::Error) -> bool {
    matches!(e, redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof)
}

/// The message of a redb `Corrupted` storage error, wherever redb wrapped it.
fn corrupted_message(e: &redb::Error) -> Option<&str> {
    match e {
        redb::Error::Corrupted(message) => Some(message),
        _ => None,
    }
}

fn lock_raised() -> std::sync::MutexGuard<'static, Vec<Raised>> {
    RAISED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHES.load(Ordering::SeqCst) == 0 {
                return previous(info);
            }
            let location = info.location();
            let raised = Raised {
                message: payload_message(info.payload()),
                location: location.map_or_else(|| "an unknown location".into(), Location::to_string),
                in_redb: location.is_some_and(|l| is_redb_source(l.file())),
                thread: std::thread::current().id(),
                under_catch: CATCHES_HERE.get() > 0,
            };
            let quiet = raised.in_redb || REPORTING_HERE.get() > 0;
            if quiet {
                log::debug!("panic at {}: {}", raised.location, raised.message);
            }
            record(raised);
            if !quiet {
                previous(info);
            }
        }));
    });
}

/// Whether `file` (a panic location's path) is a source file of the redb crate: under
/// `redb-<version>/src/` (crates.io), `redb/src/` (vendored), or a git checkout of redb.
fn is_redb_source(file: &str) -> bool {
    let parts: Vec<&str> = file.split(['/', '\\']).collect();
    parts.windows(2).any(|pair| match pair {
        [name, next] => {
            let versioned =
                name.strip_prefix("redb-").is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()));
            (*name == "redb" || versioned) && *next == "src"
                || (*name == "checkouts" && next.starts_with("redb-"))
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use crate::{catch_panic, name_damaged_file};
    use super::*;

    #[test]
    fn redb_sources_are_told_from_others() {
        let rows = [
            ("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/redb-4.6.0/src/types.rs", true),
            ("C:\\Users\\a\\.cargo\\registry\\src\\index\\redb-2.1.0\\src\\tree_store\\btree.rs", true),
            ("/home/a/.cargo/git/checkouts/redb-1a2b3c/4d5e6f7/src/db.rs", true),
            ("vendor/redb/src/db.rs", true),
            ("src/store/mod.rs", false),
            ("/work/redb-notes/ctxgate/src/store/mod.rs", false),
            (
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/redb-derive-1.0.0/src/lib.rs",
                false,
            ),
            ("/rustc/59807616e1fa/library/core/src/str/mod.rs", false),
        ];
        for (file, expected) in rows {
            assert_eq!(is_redb_source(file), expected, "{file}: is it a redb source file?");
        }
    }

    #[test]
    fn a_panic_outside_redb_is_an_internal_error_with_its_location() {
        let path = Path::new("index.redb");
        let err = catch_panic(path, || -> u32 { panic!("boom {}", 7) }).unwrap_err();
        match &err {
            crate::Error::Internal { message, location } => {
                assert_eq!(message, "boom 7");
                assert!(location.starts_with(&format!("{}:", file!())), "{location}");
            }
            other => panic!("expected an internal error, got {other:?}"),
        }
        assert_eq!(err.kind(), "internal");
        assert_eq!(catch_panic(path, || 5).unwrap(), 5, "no panic: the value comes back");
    }

    /// Runs its closure when dropped during an unwind: after the hook has recorded the panic,
    /// before the catch claims the record.
    struct WhileUnwinding<F: FnMut()>(F);

    impl<F: FnMut()> Drop for WhileUnwinding<F> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                (self.0)();
            }
        }
    }

    fn internal(err: &crate::Error) -> (&str, &str) {
        match err {
            crate::Error::Internal { message, location } => (message, location),
            other => panic!("expected an internal error, got {other:?}"),
        }
    }

    /// `err` is the internal error of a panic with `message` raised at `line` of this file.
    fn assert_internal_at(err: &crate::Error, expected: &str, line: u32) {
        let (message, location) = internal(err);
        assert_eq!(message, expected);
        assert!(location.starts_with(&format!("{}:{line}:", file!())), "{location}, not line {line}");
    }

    /// Panics with `message` under a catch, running `interference` while the panic unwinds;
    /// the error the catch returns, and the line the panic was raised at.
    fn panic_with_interference(message: &str, interference: impl FnMut()) -> (crate::Error, u32) {
        let mut line = 0;
        let err = catch_panic(Path::new("index.redb"), || {
            let _other = WhileUnwinding(interference);
            line = line!() + 1;
            panic!("{message}")
        })
        .unwrap_err();
        (err, line)
    }

    #[test]
    fn a_catch_starting_on_another_thread_leaves_a_panics_record() {
        let (err, line) = panic_with_interference("raised here", || {
            std::thread::scope(|scope| {
                scope.spawn(|| assert_eq!(catch_panic(Path::new("index.redb"), || 1).unwrap(), 1));
            });
        });
        assert_internal_at(&err, "raised here", line);
    }

    #[test]
    fn the_same_message_raised_on_another_thread_is_not_this_catchs() {
        // A thread without a catch of ours panics with the same message, later.
        let (err, line) = panic_with_interference("the same", || {
            let other = std::thread::spawn(|| std::panic::catch_unwind(|| panic!("the same")).is_err());
            assert!(other.join().unwrap());
        });
        assert_internal_at(&err, "the same", line);
    }

    #[test]
    fn a_panic_on_a_rayon_worker_keeps_its_location_past_a_catch_on_that_worker() {
        // With one thread, the worker that panicked runs the join's other half, which starts
        // a catch of its own, before the panic is raised again in the caller.
        let path = Path::new("index.redb");
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut line = 0;
        let err = catch_panic(path, || {
            pool.install(|| {
                rayon::join(
                    || -> u32 {
                        line = line!() + 1;
                        panic!("on a worker")
                    },
                    || catch_panic(path, || 1).unwrap(),
                )
            })
        })
        .unwrap_err();
        assert_internal_at(&err, "on a worker", line);
    }

    #[test]
    fn catches_side_by_side_each_report_their_own_panic() {
        let path = Path::new("index.redb");
        std::thread::scope(|scope| {
            for thread in 0..4 {
                scope.spawn(move || {
                    for round in 0..200 {
                        let err = catch_panic(path, || -> u32 { panic!("thread {thread} round {round}") })
                            .unwrap_err();
                        let (message, location) = internal(&err);
                        assert_eq!(message, format!("thread {thread} round {round}"));
                        assert!(location.starts_with(&format!("{}:", file!())), "{location}");
                        assert_eq!(catch_panic(path, || round).unwrap(), round);
                    }
                });
            }
        });
    }

    #[test]
    fn damage_errors_name_the_file() {
        let path = Path::new("/data/index.redb");
        let corrupt: crate::Error = Error::Corrupt { what: "turn 3".into() }.into();
        let err = name_damaged_file(corrupt, path);
        assert_eq!(err.kind(), "damaged");
        assert!(
            err.to_string().starts_with("/data/index.redb is damaged: a record does not decode: turn 3"),
            "{err}"
        );
        let redb: crate::Error = Error::from(redb::StorageError::Corrupted("bad page".into())).into();
        let err = name_damaged_file(redb, path);
        assert!(err.to_string().contains("the database engine reports: bad page"), "{err}");
        let busy: crate::Error = Error::Busy { path: path.into(), waited: std::time::Duration::ZERO }.into();
        assert_eq!(name_damaged_file(busy, path).kind(), "busy", "other errors stay as they are");
    }
}

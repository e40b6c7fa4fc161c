//! `Index`: one open index file and what every component works with it by (the store, the
//! options, the scoring threads, the token estimator).
//!
//! The write path, the jobs, evidence storage and the query path take an `&Index`; the facade
//! ([`crate::Gatekeeper`], [`crate::Session`]) sits on top of it and nothing below imports the
//! facade.

use crate::error::{Error, Result};
use crate::names::session_name_problem;
use crate::options::{MAX_THREADS, Options};
use crate::store::{Store, StoreOptions};
use crate::tokens::TokenEstimator;
use std::path::Path;

/// An open index and the settings it was opened with.
pub(crate) struct Index {
    store: Store,
    options: Options,
    pool: Option<rayon::ThreadPool>,
    estimator: Box<dyn TokenEstimator>,
}

/// How a file is opened: read-write ([`Store::open`]) or read-only.
pub(crate) type OpenStore = fn(&Path, &StoreOptions) -> std::result::Result<Store, crate::store::Error>;

impl Index {
    /// Checks `options`, builds the thread pool and opens the store with `open`.
    pub(crate) fn open(path: &Path, options: Options, open: OpenStore) -> Result<Index> {
        if options.token_budget == 0 {
            return Err(Error::InvalidOption { name: "token_budget", reason: "must be at least 1".into() });
        }
        if options.threads > MAX_THREADS {
            return Err(Error::InvalidOption {
                name: "threads",
                reason: format!("{} is more than {MAX_THREADS}; 0 uses one per core", options.threads),
            });
        }
        if options.cache_bytes < 1024 * 1024 {
            return Err(Error::InvalidOption {
                name: "cache_bytes",
                reason: "must be at least 1 MiB".into(),
            });
        }
        let pool = match options.threads {
            0 => None,
            n => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| Error::InvalidOption { name: "threads", reason: e.to_string() })?,
            ),
        };
        let store = open(
            path,
            &StoreOptions {
                cache_bytes: options.cache_bytes,
                busy_timeout: options.busy_timeout,
                quick_repair: options.quick_repair,
            },
        )?;
        let estimator = Box::new(options.tokenizer);
        Ok(Index { store, options, pool, estimator })
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn estimator(&self) -> &dyn TokenEstimator {
        self.estimator.as_ref()
    }

    pub(crate) fn set_estimator(&mut self, estimator: Box<dyn TokenEstimator>) {
        self.estimator = estimator;
    }

    /// A `read_only` error if the index was opened read-only: for writers that touch files
    /// (run files, evidence, lock files) before their first transaction.
    pub(crate) fn check_writable(&self) -> Result<()> {
        Ok(self.store.check_writable()?)
    }

    /// Runs `f` on the configured thread pool (the global one when `threads` is 0).
    pub(crate) fn in_pool<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// [`session_name_problem`] as the API's error: what `Gatekeeper::session` and import's
/// `--session` refuse.
pub(crate) fn check_session_name(name: &str) -> Result<()> {
    match session_name_problem(name) {
        Some(reason) => Err(Error::InvalidInput { what: "session name", reason }),
        None => Ok(()),
    }
}

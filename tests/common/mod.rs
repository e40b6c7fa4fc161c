//! Shared helpers for the CLI tests: a temporary index, the real `ctxgate` binary, and the JSON
//! documents it prints, parsed strictly (`deny_unknown_fields`) so a renamed or extra field fails.
#![allow(dead_code, reason = "each test binary uses its own subset of these helpers")]

use serde::{Deserialize, Deserializer};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Result of a test.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// A temporary directory with an index path in it (the file is created by the first command).
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

/// What a finished `ctxgate` process left: exit code, stdout and stderr.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_bytes: Vec<u8>,
}

impl Run {
    /// The outcome of a finished process.
    pub fn from_output(output: Output) -> Run {
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            stdout_bytes: output.stdout,
        }
    }

    /// Fails unless the process exited with `code`.
    pub fn expect_code(self, code: i32) -> TestResult<Run> {
        if self.code != Some(code) {
            return Err(format!("expected exit code {code}, got {self:#?}").into());
        }
        Ok(self)
    }

    /// Fails unless the process succeeded.
    pub fn ok(self) -> TestResult<Run> {
        self.expect_code(0)
    }

    /// Parses stdout as one JSON document of type `T`.
    pub fn json<T: for<'de> Deserialize<'de>>(&self) -> TestResult<T> {
        serde_json::from_str(&self.stdout)
            .map_err(|e| format!("stdout does not parse ({e}):\n{}", self.stdout).into())
    }

    /// Parses stderr as exactly one line holding a JSON error document.
    pub fn json_error(&self) -> TestResult<ErrorDoc> {
        let lines: Vec<&str> = self.stderr.lines().collect();
        if lines.len() != 1 {
            return Err(
                format!("expected one JSON line on stderr, got {}:\n{}", lines.len(), self.stderr).into()
            );
        }
        serde_json::from_str(lines[0])
            .map_err(|e| format!("stderr does not parse ({e}):\n{}", self.stderr).into())
    }
}

/// A `ctxgate` command with the environment that could change its behavior removed.
/// `CTXGATE_TEST_BIN` runs the tests against another build (to see a test fail on the build
/// before a fix).
pub fn ctxgate() -> Command {
    let bin = std::env::var_os("CTXGATE_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_ctxgate").into());
    let mut cmd = Command::new(bin);
    cmd.env_remove("CTXGATE_DB").env_remove("CTXGATE_LOG").env_remove("RUST_LOG");
    cmd
}

/// Runs `ctxgate --db <db> ARGS...`.
pub fn run_at<I, S>(db: &Path, args: I) -> TestResult<Run>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = ctxgate().arg("--db").arg(db).args(args).output()?;
    Ok(Run::from_output(output))
}

impl TestEnv {
    /// A new empty directory; the index is `index.redb` in it.
    pub fn new() -> TestResult<TestEnv> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("index.redb");
        Ok(TestEnv { dir, db })
    }

    /// Runs `ctxgate --db <index> ARGS...`.
    pub fn run<I, S>(&self, args: I) -> TestResult<Run>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_at(&self.db, args)
    }

    /// Adds a turn with the human output and returns the printed turn id.
    pub fn add(&self, session: &str, user: &str, assistant: &str) -> TestResult<u32> {
        let run = self.run(["add", "--session", session, "--user", user, "--assistant", assistant])?.ok()?;
        run.stdout.trim().parse::<u32>().map_err(|e| format!("turn id {:?}: {e}", run.stdout).into())
    }

    /// `select --json` with extra arguments before the query.
    pub fn select(&self, session: &str, extra: &[&str], query: &str) -> TestResult<SelectDoc> {
        let mut args = vec!["--json", "select", "--session", session];
        args.extend_from_slice(extra);
        args.push("--");
        args.push(query);
        self.run(&args)?.ok()?.json()
    }

    /// `stats --json`.
    pub fn stats(&self) -> TestResult<StatsDoc> {
        self.run(["--json", "stats"])?.ok()?.json()
    }
}

/// A field that must be present in the JSON, though its value may be `null`.
fn required<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// `add --json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddDoc {
    pub session: String,
    pub turn_id: u32,
    pub schema_version: u32,
}

/// `"continue"` or `"switch"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Topic {
    Continue,
    Switch,
}

/// `"minimal"` or `"fill"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Minimal,
    Fill,
}

/// The gate's decision.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub topic: Topic,
    pub overlap: f64,
    pub new_ratio: f64,
    #[serde(deserialize_with = "required")]
    pub deictic: Option<String>,
}

/// One query anchor.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    pub text: String,
    pub idf: f64,
}

/// Budget and use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub limit: u32,
    pub used: u32,
}

/// One selected block.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub turn_id: u32,
    pub user: String,
    pub assistant: String,
    pub score: f64,
    pub covered_anchors: Vec<String>,
    pub tokens: u32,
}

/// `select --json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectDoc {
    pub session: String,
    pub query: String,
    pub decision: Decision,
    pub anchors: Vec<Anchor>,
    pub policy: Policy,
    pub budget: Budget,
    pub coverage: f64,
    pub blocks: Vec<Block>,
    pub evidence: Vec<EvidenceBlock>,
    /// Present exactly when nothing was selected.
    #[serde(default)]
    pub empty_because: Option<EmptyBecause>,
    pub schema_version: u32,
}

/// Why a selection is empty.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptyBecause {
    pub reason: String,
    #[serde(default)]
    pub shared: Option<Vec<String>>,
}

/// One selected evidence projection.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceBlock {
    pub evidence_ref: String,
    pub kind: String,
    pub score: f64,
    pub covered_anchors: Vec<String>,
    pub tokens: u32,
    pub projection: serde_json::Value,
}

impl SelectDoc {
    /// The selected turn ids, in output order.
    pub fn turn_ids(&self) -> Vec<u32> {
        self.blocks.iter().map(|b| b.turn_id).collect()
    }

    /// Checks what must hold of every selection: budget, chronological order, coverage range.
    pub fn check_invariants(&self) -> TestResult {
        let sum: u32 = self.blocks.iter().map(|b| b.tokens).sum::<u32>()
            + self.evidence.iter().map(|e| e.tokens).sum::<u32>();
        if self.budget.used > self.budget.limit {
            return Err(format!("used {} > limit {}: {self:#?}", self.budget.used, self.budget.limit).into());
        }
        if self.budget.used != sum {
            return Err(format!(
                "used {} != sum of block and evidence tokens {sum}: {self:#?}",
                self.budget.used
            )
            .into());
        }
        let ids = self.turn_ids();
        if !ids.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!("blocks not in ascending turn order: {ids:?}").into());
        }
        if !(0.0..=1.0).contains(&self.coverage) {
            return Err(format!("coverage {} outside [0, 1]", self.coverage).into());
        }
        if self.schema_version != 1 {
            return Err(format!("schema_version {}", self.schema_version).into());
        }
        let empty = self.blocks.is_empty() && self.evidence.is_empty();
        if empty != self.empty_because.is_some() {
            return Err(format!("empty_because is given exactly when nothing is selected: {self:#?}").into());
        }
        Ok(())
    }
}

/// `gate --json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateDoc {
    pub session: String,
    pub query: String,
    pub decision: Decision,
    pub schema_version: u32,
}

/// `prompt --json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptDoc {
    pub session: String,
    pub query: String,
    pub prompt: String,
    pub schema_version: u32,
}

/// One session in `sessions --json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionDoc {
    pub name: String,
    pub turns: u32,
    pub segment_start: u32,
}

/// `sessions --json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsDoc {
    pub sessions: Vec<SessionDoc>,
    pub schema_version: u32,
}

/// `stats --json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsDoc {
    pub index: String,
    pub sessions: u64,
    pub turns: u64,
    pub anchors: u64,
    pub postings: u64,
    pub pending_turns: u64,
    pub file_bytes: u64,
    /// Whether the run redacts (no `--no-redact`).
    pub redaction: bool,
    /// How the history was written: `redacted`, `raw`, `mixed`, or null.
    #[serde(deserialize_with = "required")]
    pub history: Option<String>,
    #[serde(deserialize_with = "required")]
    pub redaction_rules: Option<String>,
    pub schema_version: u32,
}

/// The error document printed on stderr with `--json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorDoc {
    pub error: ErrorBody,
}

/// `{"kind", "message"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    pub kind: String,
    pub message: String,
}

/// DESIGN §3.5: characters × 1.5, rounded up.
pub fn estimate_tokens(text: &str) -> u32 {
    (text.chars().count() as f64 * 1.5).ceil() as u32
}

/// A session with three turns on three distinct topics.
pub const TOPICS: [(&str, &str); 3] = [
    (
        "How do I expire a Redis lock so a crashed worker releases it?",
        "Set a TTL when you take the lock: SET lockkey token NX PX 30000, and renew it while working.",
    ),
    (
        "Our Kubernetes ingress returns 502 after the certificate rotation.",
        "Check that the ingress controller reloaded the new TLS secret and that the backend pods are ready.",
    ),
    (
        "Postgres vacuum is slow on the orders table with millions of dead tuples.",
        "Tune autovacuum_vacuum_scale_factor for the orders table and run VACUUM ANALYZE during quiet hours.",
    ),
];

/// Adds [`TOPICS`] to `session`, checking the ids are 0, 1, 2.
pub fn add_topics(env: &TestEnv, session: &str) -> TestResult {
    for (i, (user, assistant)) in TOPICS.iter().enumerate() {
        let id = env.add(session, user, assistant)?;
        if id as usize != i {
            return Err(format!("turn {i} of {session:?} got id {id}").into());
        }
    }
    Ok(())
}

/// Helpers for `ctxgate serve` over MCP.
pub mod mcp;

/// The real agents, their model stand-ins and a bounded process runner (tests/real_agents.rs).
#[cfg(unix)]
pub mod agents;

/// Another writer in the middle of a write transaction, as an import is during each batch:
/// holds the index's write lock until dropped. Opening the index never waits; writes wait
/// for this one, reads do not.
pub struct WriteHold {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WriteHold {
    /// Begins a write transaction on the index at `db` (created if missing) and holds it.
    pub fn begin(db: &Path) -> TestResult<WriteHold> {
        use ctxgate::store::{Error, Store, StoreOptions};
        let options = StoreOptions {
            cache_bytes: 1 << 20,
            busy_timeout: std::time::Duration::from_secs(10),
            quick_repair: true,
        };
        let store = Store::open(db, &options)?;
        let (began, began_rx) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let held = store.write(|_view| -> Result<(), Error> {
                let _ = began.send(());
                let _ = release_rx.recv();
                Ok(())
            });
            held.expect("the held write transaction commits");
        });
        began_rx.recv_timeout(std::time::Duration::from_secs(10))?;
        Ok(WriteHold { release: Some(release), thread: Some(thread) })
    }
}

impl Drop for WriteHold {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Copies the tree `from` to `to`.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// The generated conversations of the contamination protocol (shared with `tools/eval`), and
/// its xorshift generator.
#[path = "../../tools/eval/src/contamination.rs"]
pub mod contamination;
#[allow(unused_imports, reason = "each test binary uses its own subset of these helpers")]
pub use contamination::Rng;

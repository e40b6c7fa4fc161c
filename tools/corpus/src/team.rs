//! A team's history as the hooks lay it out: projects × sessions × turns, each session named
//! `<project path>#<session id>` (what `ctxgate hook` names them), for measuring the hook's two
//! questions at scale: this session, and the project's other sessions.
//!
//! Every turn is a [`Corpus`] turn (the topics, languages and anchors of the generator) with a
//! sentence about the project's own code appended to each side: file names and identifiers
//! drawn from a vocabulary of the project's own, so a project's sessions share words the other
//! projects do not have. Everything is streamed and deterministic from the seed.
//!
//! ```
//! let team = corpus::team::Team::new(corpus::Corpus::new(42), 2, 3, 4);
//! assert_eq!(team.turns(), 24);
//! let name = team.session_name(1, 2);
//! assert!(name.starts_with(&format!("{}#", team.project_path(1))));
//! assert_eq!(team.placed().count(), 24);
//! ```

use crate::rng::Rng;
use crate::{Corpus, PlacedTurn, Turn};

/// Streams of the seed used here (the corpus's own are 1–3).
const STREAM_PROJECT: u64 = 11;
const STREAM_SESSION_ID: u64 = 12;
const STREAM_PROJECT_TURN: u64 = 13;

/// File paths in each project's own vocabulary.
pub const PROJECT_FILES: usize = 40;
/// Identifiers in each project's own vocabulary.
pub const PROJECT_IDENTS: usize = 60;

/// Syllables project words are made of: enough for thousands of distinct project words.
const PARTS: &[&str] = &[
    "ledger", "billing", "invoice", "tenant", "quota", "router", "gateway", "ingest", "shard", "replica",
    "cursor", "batch", "stream", "cache", "token", "session", "audit", "report", "export", "import",
    "schema", "mapper", "worker", "queue", "notify", "search", "rank", "pricing", "refund", "payout",
    "catalog", "sku", "cart", "checkout", "profile", "avatar", "upload", "thumb", "media", "feed", "digest",
    "metric", "probe", "alert", "pager", "rollout", "flag", "config", "secret", "vault", "policy", "grant",
    "role", "scope", "lease", "lock", "fence", "epoch", "snapshot", "compact", "merge", "diff", "patch",
    "sync",
];

const DIRS: &[&str] = &["src", "lib", "internal", "pkg", "app", "services", "crates", "cmd"];
const EXTS: &[&str] = &["rs", "go", "py", "ts", "java", "kt", "sql", "yaml"];
const PROJECT_ROOTS: &[&str] = &["/home/dev/src", "/Users/dev/work", "/srv/repos", "/home/ci/build"];

/// The layout: `projects` × `sessions_per_project` × `turns_per_session` turns.
#[derive(Debug, Clone, Copy)]
pub struct Team {
    corpus: Corpus,
    projects: u32,
    sessions_per_project: u32,
    turns_per_session: u32,
}

/// One project's own words.
#[derive(Debug, Clone)]
pub struct ProjectVocabulary {
    /// File paths, such as `services/ledger_sync/refund_queue.go`.
    pub files: Vec<String>,
    /// Identifiers, such as `LedgerSyncWorker` or `refund_quota_lease`.
    pub idents: Vec<String>,
}

impl Team {
    /// A layout of `projects * sessions_per_project * turns_per_session` turns. Sessions are
    /// told apart by 16 bits per project: up to 65,535 projects of up to 65,535 sessions (the
    /// `corpus` and `compare` tools check their arguments against that).
    pub fn new(corpus: Corpus, projects: u32, sessions_per_project: u32, turns_per_session: u32) -> Self {
        Team { corpus, projects, sessions_per_project, turns_per_session }
    }

    /// Projects in the layout.
    pub fn projects(&self) -> u32 {
        self.projects
    }

    /// Sessions of each project.
    pub fn sessions_per_project(&self) -> u32 {
        self.sessions_per_project
    }

    /// Turns of each session.
    pub fn turns_per_session(&self) -> u32 {
        self.turns_per_session
    }

    /// Every turn of the layout.
    pub fn turns(&self) -> u64 {
        u64::from(self.projects) * u64::from(self.sessions_per_project) * u64::from(self.turns_per_session)
    }

    /// Every session of the layout.
    pub fn sessions(&self) -> u64 {
        u64::from(self.projects) * u64::from(self.sessions_per_project)
    }

    /// The working directory of project `p`, such as `/home/dev/src/ledger-sync-007`: the part
    /// of its session names before `#`.
    pub fn project_path(&self, p: u32) -> String {
        let mut rng = Rng::derive(self.corpus.seed(), STREAM_PROJECT, u64::from(p));
        let root = rng.pick(PROJECT_ROOTS);
        let (a, b) = (rng.pick(PARTS), rng.pick(PARTS));
        format!("{root}/{a}-{b}-{p:03}")
    }

    /// The session id of session `s` of project `p`, shaped like the UUIDs agents use.
    pub fn session_id(&self, p: u32, s: u32) -> String {
        let mut rng = Rng::derive(self.corpus.seed(), STREAM_SESSION_ID, (u64::from(p) << 32) | u64::from(s));
        let (a, b) = (rng.next_u64(), rng.next_u64());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }

    /// `<project path>#<session id>`, as `ctxgate hook` names a session.
    pub fn session_name(&self, p: u32, s: u32) -> String {
        format!("{}#{}", self.project_path(p), self.session_id(p, s))
    }

    /// The index of session `s` of project `p` among the corpus's sessions. Sessions past
    /// `sessions_per_project` (a live session the measurements add) get their own streams too.
    fn corpus_session(&self, p: u32, s: u32) -> u32 {
        // 2^16 sessions per project at most, far more than any layout here.
        (p << 16) | (s & 0xffff)
    }

    /// Project `p`'s own vocabulary, the same on every call.
    pub fn vocabulary(&self, p: u32) -> ProjectVocabulary {
        let mut rng = Rng::derive(self.corpus.seed(), STREAM_PROJECT, (1 << 40) | u64::from(p));
        let word = |rng: &mut Rng| format!("{}_{}", rng.pick(PARTS), rng.pick(PARTS));
        let files = (0..PROJECT_FILES)
            .map(|_| {
                let (dir, module, file, ext) =
                    (rng.pick(DIRS), word(&mut rng), word(&mut rng), rng.pick(EXTS));
                format!("{dir}/{module}/{file}.{ext}")
            })
            .collect();
        let idents = (0..PROJECT_IDENTS)
            .map(|i| {
                let w = word(&mut rng);
                if i % 2 == 0 {
                    // CamelCase, such as LedgerSyncWorker.
                    let camel: String = w.split('_').map(capitalize).collect();
                    format!("{camel}{}", capitalize(rng.pick::<&str>(PARTS)))
                } else {
                    format!("{w}_{}", rng.pick(PARTS))
                }
            })
            .collect();
        ProjectVocabulary { files, idents }
    }

    /// The endless turns of session `s` of project `p`: corpus turns with a sentence about the
    /// project's code on each side.
    pub fn session(&self, p: u32, s: u32) -> impl Iterator<Item = Turn> + use<> {
        let vocabulary = self.vocabulary(p);
        let session = self.corpus_session(p, s);
        let seed = self.corpus.seed();
        self.corpus.session(session).enumerate().map(move |(t, mut turn)| {
            let index = (u64::from(session) << 32) | t as u64;
            let mut rng = Rng::derive(seed, STREAM_PROJECT_TURN, index);
            let (file, ident) = (rng.pick(&vocabulary.files), rng.pick(&vocabulary.idents));
            turn.user.push_str(&format!(" This is in `{file}`, around `{ident}`."));
            let (other, second) = (rng.pick(&vocabulary.idents), rng.pick(&vocabulary.files));
            turn.assistant.push_str(&format!(" Look at how `{other}` calls into `{second}` as well."));
            turn
        })
    }

    /// A prompt about project `p` as its users ask: a corpus question about a topic with one of
    /// the project's identifiers; `n` picks one of many variants.
    pub fn prompt(&self, p: u32, n: u64) -> String {
        let topics: Vec<crate::TopicId> = crate::TopicId::all().collect();
        let topic = topics[(n as usize + p as usize) % topics.len()];
        let vocabulary = self.vocabulary(p);
        let mut rng =
            Rng::derive(self.corpus.seed(), STREAM_PROJECT_TURN, (1 << 63) | (u64::from(p) << 32) | n);
        let ident = rng.pick(&vocabulary.idents);
        format!("{} It is about `{ident}`.", self.corpus.query_for(topic, n))
    }

    /// Every turn of the layout, project by project, session by session, in turn order.
    /// `session` of each [`PlacedTurn`] is the session's place in that order
    /// (`p * sessions_per_project + s`; its name is [`Team::name_of`]).
    pub fn placed(&self) -> impl Iterator<Item = PlacedTurn> + '_ {
        (0..self.projects).flat_map(move |p| {
            (0..self.sessions_per_project).flat_map(move |s| {
                let place = p * self.sessions_per_project + s;
                self.session(p, s)
                    .take(self.turns_per_session as usize)
                    .enumerate()
                    .map(move |(t, content)| PlacedTurn { session: place, turn: t as u32, content })
            })
        })
    }

    /// The name of the session at `place` in [`Team::placed`]'s order.
    pub fn name_of(&self, place: u32) -> String {
        self.session_name(place / self.sessions_per_project, place % self.sessions_per_project)
    }

    /// Writes the whole layout as canonical JSONL, streamed; returns the bytes of turn text.
    pub fn write_jsonl(&self, out: &mut impl std::io::Write) -> std::io::Result<u64> {
        crate::jsonl::write(out, self.placed(), |place| self.name_of(place))
    }
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn team() -> Team {
        Team::new(Corpus::new(42), 3, 4, 5)
    }

    #[test]
    fn counts_and_names_follow_the_layout() {
        let team = team();
        let placed: Vec<PlacedTurn> = team.placed().collect();
        assert_eq!(placed.len() as u64, team.turns());
        assert_eq!(team.turns(), 60);
        let names: Vec<String> = placed.iter().map(|p| team.name_of(p.session)).collect();
        let distinct: HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len() as u64, team.sessions(), "one name per session");
        let projects: HashSet<&str> =
            names.iter().map(|n| ctxgate::hook::project_of(n).expect("a hook-style name")).collect();
        assert_eq!(projects.len(), 3);
        for p in 0..3 {
            let path = team.project_path(p);
            assert!(path.starts_with('/') && !path.contains('#'), "{path}");
            // What the hook would name a session in that directory.
            assert_eq!(ctxgate::hook::project_key(&path), path);
        }
        for (p, s) in [(0, 0), (2, 3)] {
            let id = team.session_id(p, s);
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(id.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
        }
        // Turns come session by session, numbered from 0 in each.
        let shape: Vec<(u32, u32)> = placed.iter().take(7).map(|p| (p.session, p.turn)).collect();
        assert_eq!(shape, [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0), (1, 1)]);
    }

    #[test]
    fn same_seed_same_jsonl_and_other_seeds_differ() {
        let write = |seed| {
            let mut out = Vec::new();
            Team::new(Corpus::new(seed), 2, 2, 3).write_jsonl(&mut out).expect("writes to memory");
            out
        };
        assert_eq!(write(7), write(7));
        assert_ne!(write(7), write(8));
        let text = String::from_utf8(write(7)).expect("UTF-8");
        assert_eq!(text.lines().count(), 12);
        for line in text.lines() {
            let parsed: ctxgate::import::CanonicalLine = serde_json::from_str(line).expect("canonical");
            assert!(ctxgate::hook::project_of(&parsed.session).is_some());
        }
    }

    #[test]
    fn a_project_shares_its_own_vocabulary() {
        let team = team();
        let own = team.vocabulary(1);
        let other = team.vocabulary(2);
        let own_words: HashSet<&String> = own.files.iter().chain(&own.idents).collect();
        let shared = other.files.iter().chain(&other.idents).filter(|w| own_words.contains(w)).count();
        assert!(shared < 5, "{shared} words of project 2 are also project 1's");
        // Every session of project 1 mentions project 1's words, none of project 2's files.
        for s in 0..4 {
            for turn in team.session(1, s).take(20) {
                let text = format!("{} {}", turn.user, turn.assistant);
                assert!(own_words.iter().any(|w| text.contains(w.as_str())), "{text}");
                assert!(!other.files.iter().any(|f| text.contains(f.as_str())), "{text}");
            }
        }
        let prompt = team.prompt(1, 0);
        assert!(own.idents.iter().any(|i| prompt.contains(i.as_str())), "{prompt}");
    }

    #[test]
    fn turns_keep_the_corpus_anchors() {
        let team = team();
        let turns: Vec<Turn> = team.session(0, 0).take(200).collect();
        let anchors: u32 = turns
            .iter()
            .map(|t| {
                ctxgate::anchor::extract(&t.user).total() + ctxgate::anchor::extract(&t.assistant).total()
            })
            .sum();
        let average = f64::from(anchors) / turns.len() as f64;
        assert!((100.0..=200.0).contains(&average), "average anchors per turn is {average:.1}");
    }
}

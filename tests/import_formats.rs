//! Importing every format's fixture through the library into a real index: detection, session
//! names and turn counts, idempotent re-import, malformed twins (exact message, index
//! untouched), `skip_invalid`, and a file of an unknown shape.

use ctxgate::{Error, Format, Gatekeeper, ImportOptions, ImportReport, Options, StoredTurn};
use std::path::{Path, PathBuf};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A well-formed fixture: its format, sessions with their turn counts, and text that must not
/// be imported (other branches, thinking, injected context, sidechains…).
struct Case {
    file: &'static str,
    format: Format,
    sessions: &'static [(&'static str, u32)],
    absent: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        file: "fixtures/import/jsonl/conversation.jsonl",
        format: Format::Jsonl,
        sessions: &[("pg-migration", 5), ("学习计划", 3)],
        absent: &[],
    },
    Case {
        file: "fixtures/import/openai/chat.jsonl",
        format: Format::OpenAi,
        sessions: &[("support-4471", 4), ("#2", 2), ("request-7", 1), ("zh-weather-02", 2)],
        absent: &["Acme Outfitters' support assistant", "senior Kubernetes SRE", "Classify the sentiment"],
    },
    Case {
        file: "fixtures/import/openai/messages.json",
        format: Format::OpenAi,
        sessions: &[("qa-1", 1), ("#2", 1)],
        absent: &[],
    },
    Case {
        file: "fixtures/import/chatgpt/conversations.json",
        format: Format::ChatGpt,
        sessions: &[
            ("66a1f2c0-0b1e-4c55-9d1e-1f2a3b4c5d6e", 6),
            ("7c9e4d12-5f3a-4b8e-a1d0-93c2e6b7f801", 2),
            ("c3d8a7e2-4410-4b6b-8f0e-2d6c1a9b7e55", 2),
        ],
        absent: &["DISCARDED", "SECRET-THOUGHT", "Thought for 7 seconds", "Prefer Python examples"],
    },
    Case {
        file: "fixtures/import/claude/conversations.json",
        format: Format::Claude,
        sessions: &[("5f1c9e7a-3b2d-4e8f-a1c0-6d9b8e7f6a51", 5), ("9a7b3c1d-2e4f-4a6b-8c0d-1e2f3a4b5c6d", 2)],
        absent: &["ATTACHMENT-ONLY", "HIDDEN-THINKING", "not supported on your current device"],
    },
    Case {
        file: "fixtures/import/claude-code/session.jsonl",
        format: Format::ClaudeCode,
        sessions: &[("3f6a2b1c-8d4e-4f5a-9b6c-7d8e9f0a1b2c", 5), ("b7c8d9e0-1f2a-4b3c-8d4e-5f6a7b8c9d0e", 2)],
        absent: &[
            "HIDDEN-THINKING",
            "SIDECHAIN-ONLY",
            "COMPACT-SUMMARY",
            "<command-name>",
            "<local-command-stderr>",
        ],
    },
    Case {
        file: "fixtures/import/claude-code/rewind.jsonl",
        format: Format::ClaudeCode,
        sessions: &[("5b0c3e1a-7d2f-4c8e-9a1b-3e4f5a6b7c8d", 3)],
        absent: &[
            "ABANDONED",
            "REMINDER-NOISE",
            "Caveat",
            "Total cost",
            "Request interrupted",
            "No response requested",
        ],
    },
    Case {
        file: "fixtures/import/claude-code/9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b.jsonl",
        format: Format::ClaudeCode,
        sessions: &[("9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b", 2)],
        absent: &["ABANDONED-ROOT-REPLY"],
    },
    Case {
        file: "fixtures/import/claude/single_conversation.json",
        format: Format::Claude,
        sessions: &[("e3b7a9d1-4c2f-4a8e-b6d5-0f1e2d3c4b5a", 2)],
        absent: &["Rows_examined", "customer_email text NOT NULL"],
    },
    Case {
        file: "fixtures/import/codex/rollout-2025-10-02T07-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl",
        format: Format::Codex,
        sessions: &[("0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d", 4)],
        absent: &[
            "<environment_context>",
            "INJECTED-INSTRUCTIONS",
            "permissions instructions",
            "COMPACTED-SUMMARY",
        ],
    },
    Case {
        file: "fixtures/import/codex/events-only.jsonl",
        format: Format::Codex,
        sessions: &[("0198f1e2-d3c4-7b5a-8e9f-0a1b2c3d4e5f", 2)],
        absent: &["Keep answers short"],
    },
    Case {
        file: "fixtures/import/sharegpt/conversations.json",
        format: Format::ShareGpt,
        sessions: &[("sg-8841", 3), ("#2", 2), ("1024", 2)],
        absent: &["helpful travel assistant"],
    },
    Case {
        file: "fixtures/import/sharegpt/vicuna.jsonl",
        format: Format::ShareGpt,
        sessions: &[("vicuna-0001", 2), ("#2", 1)],
        absent: &[],
    },
];

/// A malformed twin: a good fixture of its format, how to import it, and what `skip_invalid`
/// leaves (`None`: the error is not a record's, skipping does not help).
struct Bad {
    file: &'static str,
    good: &'static str,
    format: Format,
    skipped: Option<(u64, &'static [(&'static str, u32)])>,
}

const BAD: &[Bad] = &[
    Bad {
        file: "fixtures/import/jsonl/bad_line.jsonl",
        good: "fixtures/import/jsonl/conversation.jsonl",
        format: Format::Auto,
        skipped: Some((3, &[("pg-migration", 2), ("学习计划", 1)])),
    },
    Bad {
        file: "fixtures/import/openai/bad_role.jsonl",
        good: "fixtures/import/openai/chat.jsonl",
        format: Format::Auto,
        skipped: Some((2, &[("support-4471", 4), ("#3", 2)])),
    },
    Bad {
        file: "fixtures/import/chatgpt/bad_node.json",
        good: "fixtures/import/chatgpt/conversations.json",
        format: Format::Auto,
        skipped: Some((298, &[("7c9e4d12-5f3a-4b8e-a1d0-93c2e6b7f801", 2)])),
    },
    Bad {
        // A broken document cannot be detected: the format is given.
        file: "fixtures/import/chatgpt/bad_syntax.json",
        good: "fixtures/import/chatgpt/conversations.json",
        format: Format::ChatGpt,
        skipped: None,
    },
    Bad {
        file: "fixtures/import/claude/bad_messages.json",
        good: "fixtures/import/claude/conversations.json",
        format: Format::Auto,
        skipped: Some((53, &[("9a7b3c1d-2e4f-4a6b-8c0d-1e2f3a4b5c6d", 2)])),
    },
    Bad {
        file: "fixtures/import/claude-code/bad_content.jsonl",
        good: "fixtures/import/claude-code/session.jsonl",
        format: Format::Auto,
        skipped: Some((4, &[("3f6a2b1c-8d4e-4f5a-9b6c-7d8e9f0a1b2c", 1)])),
    },
    Bad {
        file: "fixtures/import/codex/bad_payload.jsonl",
        good: "fixtures/import/codex/rollout-2025-10-02T07-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl",
        format: Format::Auto,
        skipped: Some((7, &[("0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d", 1)])),
    },
    Bad {
        file: "fixtures/import/sharegpt/bad_from.json",
        good: "fixtures/import/sharegpt/conversations.json",
        format: Format::Auto,
        skipped: Some((23, &[("1024", 2)])),
    },
];

fn open(dir: &tempfile::TempDir) -> Result<Gatekeeper, Error> {
    Gatekeeper::open(dir.path().join("index.redb"), Options::default())
}

fn import(gk: &Gatekeeper, file: &str, format: Format, skip_invalid: bool) -> Result<ImportReport, Error> {
    gk.import(
        &[PathBuf::from(file)],
        &ImportOptions { format, session: None, skip_invalid, ..Default::default() },
    )
}

/// Every session of the index with its turn count.
fn sessions(gk: &Gatekeeper) -> Result<Vec<(String, u32)>, Error> {
    Ok(gk.sessions()?.into_iter().map(|s| (s.name, s.turns)).collect())
}

/// The sessions of `file` with their turn counts; a name `#N` is conversation N of a file
/// without ids, named after the file (DESIGN §8.7: `NAME@HASH#N`, the hash of its canonical
/// path).
fn owned(file: &str, sessions: &[(&str, u32)]) -> Vec<(String, u32)> {
    sessions
        .iter()
        .map(|(name, turns)| match name.strip_prefix('#') {
            Some(n) => (format!("{}#{n}", file_name_key(Path::new(file))), *turns),
            None => (name.to_string(), *turns),
        })
        .collect()
}

/// `NAME@HASH`: the file name and the top 32 bits of the XXH3 of its canonical path, in hex.
fn file_name_key(file: &Path) -> String {
    let canonical = std::fs::canonicalize(file).expect("the fixture exists");
    let digest = xxhash_rust::xxh3::xxh3_64(canonical.as_os_str().as_encoded_bytes()) >> 32;
    format!("{}@{digest:08x}", canonical.file_name().unwrap().to_string_lossy())
}

fn stored_turns(gk: &Gatekeeper, session: &str) -> Result<Vec<StoredTurn>, Error> {
    let mut turns = Vec::new();
    gk.session(session)?.for_each_turn(|t| {
        turns.push(t);
        Ok(())
    })?;
    Ok(turns)
}

/// The `.expected` sibling of a malformed fixture.
fn expected(file: &str) -> Result<String, std::io::Error> {
    let path = Path::new(file).with_extension("expected");
    Ok(std::fs::read_to_string(path)?.trim_end().to_string())
}

#[test]
fn every_fixture_is_detected_and_imported_once() -> TestResult {
    for case in CASES {
        let dir = tempfile::tempdir()?;
        let gk = open(&dir)?;
        let report = import(&gk, case.file, Format::Auto, false)?;
        let file = &report.files[0];
        assert_eq!(file.format, case.format, "{}: detected format", case.file);
        let total: u32 = case.sessions.iter().map(|(_, n)| n).sum();
        assert_eq!(report.new_turns, u64::from(total), "{}: new turns", case.file);
        assert_eq!(report.skipped, 0, "{}", case.file);
        assert!(file.sessions.iter().all(|s| s.held_back == 0), "{}: {:?}", case.file, file.sessions);
        let expected = owned(case.file, case.sessions);
        assert_eq!(sessions(&gk)?, expected, "{}: sessions and turn counts", case.file);
        for (name, _) in &expected {
            for turn in stored_turns(&gk, name)? {
                for text in case.absent {
                    assert!(
                        !turn.user.contains(text) && !turn.assistant.contains(text),
                        "{}: {text:?} was imported into {name} turn {}",
                        case.file,
                        turn.turn_id
                    );
                }
            }
        }

        let before = gk.stats()?;
        let again = import(&gk, case.file, Format::Auto, false)?;
        assert_eq!(
            (again.new_turns, again.existing_turns),
            (0, u64::from(total)),
            "{}: re-import",
            case.file
        );
        assert_eq!(gk.stats()?, before, "{}: a re-import must not write", case.file);
        assert_eq!(sessions(&gk)?, expected, "{}", case.file);
    }
    Ok(())
}

#[test]
fn imported_turns_keep_text_time_and_tools() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(&dir)?;
    for case in CASES {
        import(&gk, case.file, Format::Auto, false)?;
    }

    let chatgpt = stored_turns(&gk, "66a1f2c0-0b1e-4c55-9d1e-1f2a3b4c5d6e")?;
    assert_eq!(chatgpt[0].user, "How do I make a Redis lock expire safely if the worker dies?");
    assert_eq!(chatgpt[0].time.as_deref(), Some("1712131200.512"));
    assert_eq!(chatgpt[2].tools.len(), 1);
    assert_eq!((chatgpt[2].tools[0].name.as_str(), chatgpt[2].tools[0].result_bytes), ("python", 7));
    assert_eq!(chatgpt[5].user, "What's a fencing token?");

    let code = stored_turns(&gk, "3f6a2b1c-8d4e-4f5a-9b6c-7d8e9f0a1b2c")?;
    let names: Vec<&str> = code[1].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Task", "Edit"]);
    assert_eq!(code[1].tools[0].call_id.as_deref(), Some("toolu_01MnOpQr"));
    assert_eq!(code[4].assistant, "Pushing.\n\n[tool: Bash]\n\nPushed to origin/fix/duration. 🚀");

    let codex = stored_turns(&gk, "0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d")?;
    assert_eq!(codex[2].user, "顺便把 README 里的“四舍五入”说明也更新一下。");
    assert_eq!(codex[0].time.as_deref(), Some("2025-10-02T07:00:18.358Z"));

    // Imported turns are selectable like any other.
    let selection = gk.session("66a1f2c0-0b1e-4c55-9d1e-1f2a3b4c5d6e")?.select("fencing token INCR")?;
    assert!(selection.blocks.iter().any(|b| b.turn_id == 5), "{selection:?}");
    let selection = gk.session("3f6a2b1c-8d4e-4f5a-9b6c-7d8e9f0a1b2c")?.select("clippy commit 4e5f6a7")?;
    assert!(selection.blocks.iter().any(|b| b.turn_id == 2), "{selection:?}");
    Ok(())
}

#[test]
fn malformed_twins_fail_with_their_message_and_change_nothing() -> TestResult {
    for bad in BAD {
        let dir = tempfile::tempdir()?;
        let gk = open(&dir)?;
        import(&gk, bad.good, Format::Auto, false)?;
        let before = (gk.stats()?, sessions(&gk)?);
        let err = import(&gk, bad.file, bad.format, false).expect_err(bad.file);
        assert_eq!(err.to_string(), expected(bad.file)?, "{}", bad.file);
        assert_eq!(err.kind(), "bad_log", "{}", bad.file);
        assert!(matches!(err, Error::Import(_)), "{err:?}");
        assert_eq!((gk.stats()?, sessions(&gk)?), before, "{}: a failed import must not write", bad.file);
    }
    Ok(())
}

#[test]
fn skip_invalid_imports_the_rest_and_reports_the_line() -> TestResult {
    for bad in BAD {
        let dir = tempfile::tempdir()?;
        let gk = open(&dir)?;
        let Some((line, kept)) = bad.skipped else {
            let err = import(&gk, bad.file, bad.format, true).expect_err(bad.file);
            assert_eq!(err.to_string(), expected(bad.file)?, "{}: skipping cannot mend a document", bad.file);
            assert_eq!(gk.stats()?.turns, 0);
            continue;
        };
        let report = import(&gk, bad.file, bad.format, true)?;
        let file = &report.files[0];
        assert_eq!(report.skipped, 1, "{}", bad.file);
        assert_eq!(file.skipped[0].line, line, "{}", bad.file);
        let message = expected(bad.file)?;
        let reason = message.split_once(&format!(":{line}: ")).map(|(_, r)| r);
        assert_eq!(Some(file.skipped[0].reason.as_str()), reason, "{}", bad.file);
        assert_eq!(sessions(&gk)?, owned(bad.file, kept), "{}: the rest is imported", bad.file);
    }
    Ok(())
}

#[test]
fn an_unknown_shape_asks_for_the_format() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(&dir)?;
    let file = dir.path().join("mystery.jsonl");
    std::fs::write(&file, "{\"foo\": 1}\n{\"foo\": 2}\n")?;
    let err = gk.import(std::slice::from_ref(&file), &ImportOptions::default()).expect_err("unknown shape");
    assert!(matches!(err, Error::Import(ctxgate::import::Error::UnknownFormat { .. })), "{err:?}");
    assert_eq!(err.kind(), "unknown_format");
    let message = err.to_string();
    assert!(message.starts_with(&format!("{}: ", file.display())), "{message}");
    assert!(message.contains("pass --format"), "{message}");
    assert_eq!(gk.stats()?.turns, 0);
    Ok(())
}

//! The README tells the truth: its JSON example is what the binary prints, every command,
//! global flag and exit code of `--help` is in it, its links resolve in a clone, and the MCP
//! tools it lists are the server's.

mod common;

use common::{TestEnv, TestResult, copy_tree};
use serde_json::Value;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn readme() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md")
}

/// The fenced blocks of `markdown` with their info string (`json`, `sh`, …).
fn code_blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), String::new())),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// `ctxgate --help` as text.
fn help() -> TestResult<String> {
    Ok(common::ctxgate().arg("--help").output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned())?)
}

/// The paragraph of `text` that starts with `start`, up to the next blank line.
fn paragraph<'a>(text: &'a str, start: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("no paragraph starting {start:?}"));
    let rest = &text[from..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

#[test]
fn the_select_json_example_is_what_the_binary_prints() -> TestResult {
    let readme = readme();
    let blocks = code_blocks(&readme);
    let example = blocks
        .iter()
        .filter(|(info, _)| info == "json")
        .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
        .find(|doc| doc.get("blocks").is_some())
        .ok_or("no select --json example in the README")?;
    // The commands the README gives for it: the `add` of the command-line block, then
    // `select --json --budget 2000` on a fresh index.
    let env = TestEnv::new()?;
    env.run([
        "add",
        "--session",
        "work",
        "--user",
        "How do I expire a Redis lock?",
        "--assistant",
        "SET key val NX PX 30000.",
    ])?
    .ok()?;
    let printed: Value = env
        .run([
            "select",
            "--session",
            "work",
            "--json",
            "--budget",
            "2000",
            "the redis lock expired too early",
        ])?
        .ok()?
        .json()?;
    assert_eq!(example, printed, "update the README's example to what the binary prints");
    let commands = blocks
        .iter()
        .find(|(info, body)| info == "sh" && body.contains("ctxgate add"))
        .map(|(_, body)| body.as_str())
        .ok_or("no command-line block")?;
    let add = r#"ctxgate add --session work --user "How do I expire a Redis lock?" --assistant "SET key val NX PX 30000.""#;
    let select = r#"ctxgate select --session work --json --budget 2000 "the redis lock expired too early""#;
    assert!(
        commands.contains(add) && commands.contains(select),
        "the example's commands changed:\n{commands}"
    );
    Ok(())
}

#[test]
fn every_command_global_flag_and_exit_code_of_the_help_is_in_the_readme() -> TestResult {
    let readme = readme();
    let help = help()?;
    let section = |name: &str| -> Vec<&str> {
        let from = help.find(&format!("{name}:\n")).unwrap_or_else(|| panic!("no {name} in --help:\n{help}"));
        help[from..].lines().skip(1).take_while(|l| l.starts_with("  ")).collect()
    };
    let table = paragraph(&readme, "| command | what it does |");
    for line in section("Commands") {
        let command = line.split_whitespace().next().unwrap_or_default();
        if command != "help" {
            assert!(
                table
                    .lines()
                    .any(|row| row.split('|').nth(1).is_some_and(|c| c.contains(&format!("`{command}")))),
                "command {command} is not in the README's table"
            );
        }
    }
    let flags = paragraph(&readme, "Global flags:");
    for line in section("Options") {
        let Some(flag) = line.split_whitespace().find(|w| w.starts_with("--")) else { continue };
        let flag = flag.trim_end_matches("...");
        // `-q, --quiet`: the short form will do.
        let short =
            line.trim_start().strip_prefix('-').and_then(|r| r.split(',').next()).map(|s| format!("`-{s}"));
        if !matches!(flag, "--help" | "--version") {
            let named = flags.contains(&format!("`{flag}")) || short.is_some_and(|s| flags.contains(&s));
            assert!(named, "global flag {flag} is not in the README's list:\n{flags}");
        }
    }
    let codes = paragraph(&readme, "Errors go to stderr");
    let listed = help.split("Exit codes:").nth(1).ok_or("no exit codes in --help")?;
    for code in listed.lines().filter_map(|l| l.split_whitespace().next()?.parse::<u8>().ok()) {
        assert!(codes.contains(&format!(" {code} ")), "exit code {code} is not in the README:\n{codes}");
    }
    for kind in ["unknown_index", "unknown_session", "busy", "damaged"] {
        assert!(codes.contains(kind), "error kind {kind} is not in the README");
    }
    Ok(())
}

#[test]
fn the_mcp_tools_listed_are_the_servers() {
    let readme = readme();
    let table = paragraph(&readme, "| tool | arguments |");
    let listed: Vec<&str> =
        table.lines().skip(2).filter_map(|l| l.strip_prefix("| `")?.split('`').next()).collect();
    assert_eq!(listed, ctxgate::server::TOOL_NAMES);
}

/// GitHub's anchor of a heading: lowercase, spaces to `-`, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn links_resolve_in_a_clone() {
    for doc in [
        "README.md",
        "docs/DESIGN.md",
        "docs/ARCHITECTURE.md",
        "docs/server.md",
        "docs/evidence.md",
        "docs/relevance.md",
    ] {
        let path = Path::new(ROOT).join(doc);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let anchors: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .map(|h| slug(h.trim_start_matches('#')))
            .collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(0)];
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            if file.is_empty() {
                assert!(anchors.iter().any(|a| a == anchor), "{doc}: no heading for #{anchor}");
            } else {
                let linked = path.parent().expect("a parent").join(file);
                assert!(linked.exists(), "{doc}: {target} does not exist in the repository");
            }
            assert!(!target.contains("../shared"), "{doc}: {target} points outside the repository");
        }
    }
    let quick_start = Path::new(ROOT).join("fixtures/example/conversation.jsonl");
    assert!(quick_start.is_file() && Path::new(ROOT).join("examples/quickstart.rs").is_file());
}

/// The words of a shell line: double quotes group, `~` at a word's start is `home`, and a `#`
/// after a blank starts a comment.
fn shell_words(line: &str, home: &Path) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            '#' if !quoted && word.is_none() => break,
            c if c.is_whitespace() && !quoted => words.extend(word.take()),
            '~' if word.is_none() => word = Some(home.display().to_string()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The README's command-line example runs as written, in its order, on the logs it names
/// (issue 54, finding 19: an import that stored tool outputs as evidence made `evidence
/// index` of another tree fail, and so did `evidence put` before it). Every command exits 0.
#[test]
fn the_command_line_example_runs_in_its_order() -> TestResult {
    let blocks = code_blocks(&readme());
    let block = blocks
        .iter()
        .find(|(info, body)| info == "sh" && body.contains("ctxgate evidence index"))
        .ok_or("no sh block with the command-line example")?;
    let env = TestEnv::new()?;
    let home = env.dir.path().join("home");
    let fixtures = Path::new(ROOT).join("fixtures");
    let project = home.join(".claude/projects/-home-mei-src-app");
    std::fs::create_dir_all(&project)?;
    std::fs::copy(fixtures.join("import/claude-code/session.jsonl"), project.join("session.jsonl"))?;
    let codex = home.join(".codex/sessions/2025/10/02");
    std::fs::create_dir_all(&codex)?;
    let rollout = "rollout-2025-10-02T07-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl";
    std::fs::copy(fixtures.join("import/codex").join(rollout), codex.join(rollout))?;
    std::fs::copy(fixtures.join("import/chatgpt/conversations.json"), home.join("conversations.json"))?;
    std::fs::copy(fixtures.join("evidence/spec.json"), home.join("spec.json"))?;
    std::fs::write(home.join("result.json"), r#"{"result": {"rows": [{"id": 1, "latency_ms": 12}]}}"#)?;
    copy_tree(&fixtures.join("evidence/tree"), &home.join("evidence"))?;

    let mut vars: Vec<(String, String)> = Vec::new();
    let mut ran = Vec::new();
    for line in block.1.lines() {
        let words = shell_words(line, &home);
        match words.first().map(String::as_str) {
            Some("export") => {
                let (name, value) = words.get(1).and_then(|w| w.split_once('=')).ok_or(line.to_string())?;
                let value = match value.strip_prefix('~') {
                    Some(rest) => format!("{}{rest}", home.display()),
                    None => value.to_string(),
                };
                vars.push((name.to_string(), value));
            }
            Some("ctxgate") => {
                let mut command = common::ctxgate();
                command.current_dir(&home).env("HOME", &home).env_remove("CTXGATE_EVIDENCE_ROOT");
                command.envs(vars.iter().map(|(k, v)| (k, v))).args(&words[1..]);
                let run = common::Run::from_output(command.output()?);
                assert_eq!(run.code, Some(0), "{line}\n{run:#?}");
                ran.push(words[1].clone());
            }
            _ => {}
        }
    }
    assert!(
        ran.iter().any(|c| c == "import") && ran.iter().filter(|c| *c == "evidence").count() >= 2,
        "{ran:?}"
    );
    // The import's tool outputs, the indexed tree and the document put are all evidence.
    let mut list = common::ctxgate();
    list.env("HOME", &home).envs(vars.iter().map(|(k, v)| (k, v))).args(["--json", "evidence", "list"]);
    let listed: Value = serde_json::from_slice(&list.output()?.stdout)?;
    let refs: Vec<&str> = listed["documents"]
        .as_array()
        .ok_or("no documents")?
        .iter()
        .filter_map(|d| d["evidence_ref"].as_str())
        .collect();
    assert!(refs.contains(&"round_3/baseline.json"), "{refs:?}");
    assert!(refs.iter().any(|r| r.starts_with("tool-output/")), "{refs:?}");
    assert!(refs.iter().any(|r| r.starts_with("round_1/")), "{refs:?}");
    Ok(())
}

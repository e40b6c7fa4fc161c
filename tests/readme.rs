//! The README tells the truth: its JSON example is what the binary prints, every command,
//! global flag and exit code of `--help` is in it, its links resolve in a clone, and the MCP
//! tools it lists are the server's.

mod common;

use common::{TestEnv, TestResult};
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

//! `ctxgate serve` driven by a client nobody here wrote: the official MCP Python SDK (`mcp` on
//! PyPI, pinned in `tests/clients/requirements.txt`). The SDK validates every result against
//! its tool's output schema with `jsonschema`; the script (`tests/clients/python_sdk.py`) also
//! checks the schemas themselves and that tool errors arrive as errors with their kind.
//!
//! The SDK is installed on first use into a virtual environment under the target directory,
//! with the machine's `python3` (or `$CTXGATE_PYTHON`) and pip; later runs reuse it.

use std::path::{Path, PathBuf};
use std::process::Command;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CLIENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients");

/// The virtual environment's python with the pinned SDK, made once. Built in a unique
/// directory and renamed into place, so a run that stops half way leaves nothing half made.
fn sdk_python() -> Result<PathBuf, Box<dyn std::error::Error>> {
    let requirements = std::fs::read(Path::new(CLIENTS).join("requirements.txt"))?;
    let digest = xxhash_rust::xxh3::xxh3_64(&requirements);
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("python-mcp-{digest:016x}"));
    let python = home.join("bin").join("python");
    if python.exists() {
        return Ok(python);
    }
    let system = std::env::var("CTXGATE_PYTHON").unwrap_or_else(|_| "python3".into());
    let staging = tempfile::Builder::new().prefix("python-mcp-").tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let venv = staging.path().join("venv");
    run(Command::new(&system).arg("-m").arg("venv").arg(&venv), "create a virtual environment")?;
    run(
        Command::new(venv.join("bin").join("python"))
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(Path::new(CLIENTS).join("requirements.txt")),
        "install the MCP Python SDK from PyPI",
    )?;
    // Another run may have finished first: either environment will do.
    if std::fs::rename(&venv, &home).is_err() && !python.exists() {
        return Err(format!("cannot move the environment into {}", home.display()).into());
    }
    Ok(python)
}

fn run(command: &mut Command, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    let output = command.output().map_err(|e| format!("cannot {what}: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("cannot {what} ({}): {stderr}", output.status).into());
    }
    Ok(())
}

#[test]
fn the_official_python_sdk_lists_calls_and_validates_every_tool() -> TestResult {
    let python = sdk_python()?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let log = dir.path().join("log.jsonl");
    let line = r#"{"session": "imported", "user": "How do I rotate TLS certificates?", "assistant": "Use cert-manager."}"#;
    std::fs::write(&log, format!("{line}\n"))?;
    let output = Command::new(python)
        .arg(Path::new(CLIENTS).join("python_sdk.py"))
        .arg(env!("CARGO_BIN_EXE_ctxgate"))
        .arg(&db)
        .arg(&log)
        .env_remove("CTXGATE_LOG")
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Python client failed:\n{stderr}");
    let findings: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let mut tools = ctxgate::server::TOOL_NAMES.to_vec();
    tools.sort_unstable();
    assert_eq!(findings["tools"], serde_json::json!(tools), "{stderr}");
    // `serve` creates the index it is given, so even its first reply is `unknown_session`.
    assert_eq!(findings["new_index"], "unknown_session");
    assert_eq!(findings["new_session"], "unknown_session");
    assert_eq!(findings["bad_input"], "bad_input");
    assert_eq!(findings["selected_turns"], serde_json::json!([0]));
    assert_eq!(findings["imported_turns"], 1);
    assert_eq!(findings["read"], "error", "max_bytes 5 of \"error: linking failed\"");
    assert_eq!(findings["sessions"], serde_json::json!(["work"]));
    Ok(())
}

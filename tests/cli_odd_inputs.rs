//! Inputs at the edges: a `--db` that is not a regular file, and `--as-of 0`.

mod common;

use common::{TestEnv, TestResult};

#[cfg(unix)]
#[test]
fn a_fifo_db_is_not_a_regular_file() -> TestResult {
    let env = TestEnv::new()?;
    let status = std::process::Command::new("mkfifo").arg(&env.db).status()?;
    assert!(status.success(), "mkfifo failed");
    for args in [&["stats"][..], &["add", "-s", "s", "-u", "hello"]] {
        let run = env.run(args)?.expect_code(1)?;
        assert!(
            run.stderr.contains(&format!("{} is not a regular file", env.db.display())),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("os error"), "{args:?}: {}", run.stderr);
    }
    let doc = env.run(["--json", "stats"])?.expect_code(1)?.json_error()?;
    assert_eq!(doc.error.kind, "not_an_index", "{doc:#?}");
    Ok(())
}

#[test]
fn as_of_0_covers_0_percent_not_minus_0() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "SET key value NX PX 30000.")?;
    let run = env.run(["select", "-s", "s", "--as-of", "0", "--", "redis lock"])?.ok()?;
    assert!(run.stdout.contains("coverage 0%"), "{}", run.stdout);
    assert!(!run.stdout.contains("-0"), "{}", run.stdout);
    let json = env.run(["--json", "select", "-s", "s", "--as-of", "0", "--", "redis lock"])?.ok()?;
    assert!(
        json.stdout.contains("\"coverage\":0.0") || json.stdout.contains("\"coverage\": 0.0"),
        "{}",
        json.stdout
    );
    Ok(())
}

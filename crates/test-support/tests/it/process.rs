//! Running programs, finding processes by environment, waiting for one to die.

use std::process::{Command, Stdio};

use test_support::process::{is_dead, must, output, wait_dead, with_env};

#[test]
fn output_keeps_a_failure_and_must_returns_stdout() {
    assert!(!output("false", &[]).status.success());
    assert_eq!(must("echo", &["a", "b"]), "a b\n");
}

#[test]
#[should_panic(expected = "failed")]
fn must_fails_the_test_when_the_program_fails() {
    must("sh", &["-c", "echo oops >&2; exit 3"]);
}

#[test]
#[should_panic(expected = "cannot run")]
fn a_program_that_cannot_start_fails_the_test() {
    output("/nonexistent/program", &[]);
}

#[tokio::test]
async fn a_process_is_found_by_its_environment_and_seen_dying() {
    let marker = test_support::unique_name("TSUP_MARK");
    let mut child = Command::new("sleep")
        .arg("60")
        .env("TSUP_MARK", &marker)
        .stdin(Stdio::null())
        .spawn()
        .expect("start sleep");
    let want = format!("TSUP_MARK={marker}");
    let found = with_env(|var| var == want);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].pid, child.id());
    assert_eq!(found[0].cmdline, "sleep 60");
    let pid = u64::from(child.id());
    assert!(!is_dead(pid));

    child.kill().expect("kill sleep");
    // Unreaped, it is a zombie, which counts as dead.
    assert!(wait_dead(pid).await);
    child.wait().expect("reap sleep");
    assert!(is_dead(pid));
    assert!(with_env(|var| var == want).is_empty());
}

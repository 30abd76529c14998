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

#[test]
fn a_rerun_test_runs_only_itself_as_a_worker() {
    if let Ok(out) = std::env::var("TSUP_WORKER_OUT") {
        std::fs::write(out, "worker ran").expect("write the worker's file");
        return;
    }
    let dir = test_support::temp_dir("tsup-rerun");
    let out = dir.path().join("out");
    let run =
        test_support::process::rerun_test("process::a_rerun_test_runs_only_itself_as_a_worker")
            .env("TSUP_WORKER_OUT", &out)
            .stdin(Stdio::null())
            .output()
            .expect("run the worker");
    assert!(run.status.success(), "{run:?}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "worker ran");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("running 1 test"), "{stdout}");
}

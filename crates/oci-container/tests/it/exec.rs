//! `exec_sync` in a running container, against each runtime: output and exit code, a missing
//! command, a timeout that kills the command inside the container, and the output cap.

use std::time::{Duration, Instant};

use oci_container::{EXEC_TIMEOUT_EXIT_CODE, Error};

use crate::support::{Fixture, config, runtimes, started};

const LONG: Duration = Duration::from_secs(30);
const CAP: usize = 64 << 10;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|&s| s.to_owned()).collect()
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn exec_sync_returns_output_and_exit_code_in_the_containers_env_and_cwd() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-{name}"));
        let mut cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        cfg.env = vec![("GREETING".into(), "hello".into())];
        cfg.working_dir = Some("/tmp".into());
        started(&fx, &cfg).await;

        let out = fx
            .runtime
            .exec_sync(
                &id,
                &args(&[
                    "/bin/busybox",
                    "sh",
                    "-c",
                    "echo $GREETING; pwd; echo oops >&2; exit 7",
                ]),
                LONG,
                CAP,
            )
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello\n/tmp\n",
            "{name}"
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n", "{name}");
        assert_eq!(out.exit_code, 7, "{name}");
        assert!(!out.timed_out && !out.truncated, "{name}: {out:?}");

        // the environment is the container's, none of this test's (cargo sets CARGO_*)
        let out = fx
            .runtime
            .exec_sync(&id, &args(&["/bin/busybox", "env"]), LONG, CAP)
            .await
            .unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        assert!(env.lines().any(|l| l == "GREETING=hello"), "{name}: {env}");
        assert!(
            !env.lines().any(|l| l.starts_with("CARGO")),
            "{name}: the caller's environment leaked: {env}"
        );
        assert_eq!(out.exit_code, 0);
        fx.runtime.remove(&id).await.unwrap();
    }
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_missing_command_is_an_exit_code_and_a_stopped_container_an_error() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-missing-{name}"));
        let cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        started(&fx, &cfg).await;

        let out = fx
            .runtime
            .exec_sync(&id, &args(&["/no/such/command"]), LONG, CAP)
            .await
            .unwrap();
        assert_ne!(out.exit_code, 0, "{name}: {out:?}");
        assert!(!out.timed_out, "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("/no/such/command"),
            "{name}: the runtime says what is missing: {stderr}"
        );

        fx.runtime
            .kill(&id, nix::sys::signal::Signal::SIGKILL)
            .await
            .unwrap();
        fx.runtime.wait(&id, LONG).await.unwrap();
        let err = fx
            .runtime
            .exec_sync(&id, &args(&["/bin/busybox", "true"]), LONG, CAP)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NotRunning { .. }), "{name}: {err}");
        assert_eq!(
            err.to_string(),
            format!("container {id}: not running (stopped)")
        );
        fx.runtime.remove(&id).await.unwrap();

        let err = fx
            .runtime
            .exec_sync(&id, &args(&["/bin/busybox", "true"]), LONG, CAP)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{name}: {err}");
    }
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn an_exec_past_its_timeout_is_killed_inside_the_container() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-timeout-{name}"));
        let cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        started(&fx, &cfg).await;

        // the shell forks the sleep: both the command and its child must go
        let started_at = Instant::now();
        let out = fx
            .runtime
            .exec_sync(
                &id,
                &args(&[
                    "/bin/busybox",
                    "sh",
                    "-c",
                    "echo before; /bin/busybox sleep 7777; echo after",
                ]),
                Duration::from_secs(1),
                CAP,
            )
            .await
            .unwrap();
        let took = started_at.elapsed();
        assert!(out.timed_out, "{name}: {out:?}");
        assert_eq!(out.exit_code, EXEC_TIMEOUT_EXIT_CODE, "{name}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "before\n", "{name}");
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(6),
            "{name}: took {took:?}"
        );

        // no process in the container still runs the command (the killed ones are at most
        // zombies the container's init never reaps, which have no command line)
        let ps = fx
            .runtime
            .exec_sync(
                &id,
                &args(&["/bin/busybox", "ps", "-o", "pid,stat,args"]),
                LONG,
                CAP,
            )
            .await
            .unwrap();
        let listing = String::from_utf8_lossy(&ps.stdout);
        assert_eq!(ps.exit_code, 0, "{name}: {listing}");
        assert!(
            listing.contains("sleep 300"),
            "{name}: ps sees the container: {listing}"
        );
        assert!(
            !listing.contains("7777"),
            "{name}: the timed-out command still runs: {listing}"
        );
        fx.runtime.remove(&id).await.unwrap();
    }
}

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn ten_megabytes_of_output_are_capped_without_blocking_the_command() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-cap-{name}"));
        let cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        started(&fx, &cfg).await;

        let out = fx
            .runtime
            .exec_sync(
                &id,
                &args(&["/bin/busybox", "head", "-c", "10000000", "/dev/zero"]),
                LONG,
                CAP,
            )
            .await
            .unwrap();
        assert_eq!(out.stdout.len(), CAP, "{name}");
        assert!(
            out.truncated && !out.timed_out,
            "{name}: {:?}",
            (out.truncated, out.timed_out)
        );
        assert_eq!(out.exit_code, 0, "{name}: the command ran to its end");
        fx.runtime.remove(&id).await.unwrap();
    }
}

//! The stop protocol against each runtime: the stop signal (a real-time one too), SIGKILL when
//! the grace period runs out or there is none, and a container that exited already.

use std::time::{Duration, Instant};

use oci_container::{StopOutcome, StopSignal};

use crate::support::{Fixture, config, line_in, runtimes, started};

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn a_container_stops_on_its_signal_or_is_killed_when_the_grace_period_ends() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);

        // Its init traps the image's real-time stop signal (SIGRTMIN+3, as systemd images name
        // it) and exits 0 on it.
        let signal = StopSignal::parse("SIGRTMIN+3").unwrap();
        let id = test_support::unique_name(&format!("stop-rt-{name}"));
        let trap = format!(
            "trap 'exit 0' {}; echo ready; /bin/busybox sleep 300 & wait",
            signal.number()
        );
        started(&fx, &config(&id, &["/bin/busybox", "sh", "-c", &trap])).await;
        line_in(&fx.log_path(&id), |l| l == "ready").await;
        let pid = fx.runtime.state(&id).await.unwrap().pid;
        let outcome = fx
            .runtime
            .stop(&id, pid, signal, Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(outcome, StopOutcome::Exited, "{name}");
        assert_eq!(fx.runtime.exit_details(&id).unwrap().code, 0, "{name}");

        // Stopping it again: it has exited, nothing to do.
        let again = fx
            .runtime
            .stop(&id, pid, signal, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(again, StopOutcome::Exited, "{name}");

        // A namespace's init without a handler never sees SIGTERM: killed after the grace
        // period, not before.
        let id = test_support::unique_name(&format!("stop-kill-{name}"));
        started(&fx, &config(&id, &["/bin/busybox", "sleep", "300"])).await;
        let pid = fx.runtime.state(&id).await.unwrap().pid;
        let begun = Instant::now();
        let outcome = fx
            .runtime
            .stop(&id, pid, StopSignal::default(), Duration::from_millis(500))
            .await
            .unwrap();
        assert_eq!(outcome, StopOutcome::Killed, "{name}");
        assert!(begun.elapsed() >= Duration::from_millis(500), "{name}");
        assert_eq!(fx.runtime.exit_details(&id).unwrap().code, 137, "{name}");

        // Created, never started: no grace period, killed at once.
        let id = test_support::unique_name(&format!("stop-created-{name}"));
        let cfg = config(&id, &["/bin/busybox", "sleep", "300"]);
        let bundle = fx.bundle(&cfg, &fx.rootfs);
        let pid = fx
            .runtime
            .create(&id, &bundle, &fx.log_path(&id))
            .await
            .unwrap();
        let outcome = fx
            .runtime
            .stop(&id, Some(pid), StopSignal::default(), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(outcome, StopOutcome::Killed, "{name}");
        assert!(
            fx.runtime.exit_code(&id).is_ok(),
            "{name}: its exit recorded"
        );
    }
}

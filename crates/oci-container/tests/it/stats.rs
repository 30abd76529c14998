//! Resource usage of a running container, read from its cgroup, against each runtime.

use std::time::{Duration, SystemTime};

use nix::sys::signal::Signal;
use oci_container::Error;

use crate::support::{Fixture, config, line_in, runtimes, started};

const LONG: Duration = Duration::from_secs(30);

#[tokio::test]
#[ignore = "needs root: cargo xtask test"]
async fn stats_of_a_running_container_come_from_its_cgroup() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("stats-{name}"));
        // some CPU time and some memory, then two processes that wait
        let cfg = config(
            &id,
            &[
                "/bin/busybox",
                "sh",
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; \
                 x=$(/bin/busybox head -c 4000000 /dev/zero | /bin/busybox tr '\\0' a); \
                 /bin/busybox sleep 300 & echo ready; wait",
            ],
        );
        started(&fx, &cfg).await;
        line_in(&fx.log_path(&id), |l| l == "ready").await;

        let before = SystemTime::now();
        let stats = fx.runtime.stats(&id).await.unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(stats.timestamp_ns as u64);
        assert!(at >= before && at <= SystemTime::now(), "{name}: {stats:?}");
        assert!(stats.cpu_usage_ns.unwrap() > 0, "{name}: {stats:?}");
        let usage = stats.memory_usage_bytes.unwrap();
        let working_set = stats.memory_working_set_bytes.unwrap();
        assert!(
            usage > 0 && working_set > 0 && working_set <= usage,
            "{name}: {stats:?}"
        );
        assert!(stats.memory_rss_bytes.unwrap() > 0, "{name}: {stats:?}");
        assert_eq!(
            stats.pids,
            Some(2),
            "{name}: the shell and its sleep: {stats:?}"
        );

        // usage only grows
        let later = fx.runtime.stats(&id).await.unwrap();
        assert!(later.cpu_usage_ns >= stats.cpu_usage_ns, "{name}");
        assert!(later.timestamp_ns >= stats.timestamp_ns, "{name}");

        fx.runtime.kill(&id, Signal::SIGKILL).await.unwrap();
        fx.runtime.wait(&id, LONG).await.unwrap();
        let err = fx.runtime.stats(&id).await.unwrap_err();
        assert!(matches!(err, Error::NotRunning { .. }), "{name}: {err}");
        fx.runtime.remove(&id).await.unwrap();
    }
}

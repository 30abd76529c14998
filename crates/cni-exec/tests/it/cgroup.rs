//! Each plugin in a cgroup of its own: what it starts dies with it, even in a session of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cni_exec::{Error, Exec, ProcessExec};
use test_support::process::{is_dead, must, wait_dead};

use crate::support::{PluginDir, cni_env};

/// A plugin that records its cgroup, starts a grandchild in a new session (`setsid`: a process
/// group of its own, out of reach of a kill of the plugin's group) that records its pid and
/// sleeps forever, then runs `then`.
fn escaping_plugin(dir: &PluginDir, then: &str) -> PathBuf {
    let d = dir.path().display();
    dir.script(
        "escaper",
        &format!(
            "cat /proc/self/cgroup > {d}/cgroup\n\
             setsid sh -c 'echo $$ > {d}/gc.tmp && mv {d}/gc.tmp {d}/grandchild && exec sleep 1000' \
               </dev/null >/dev/null 2>&1 &\n\
             while [ ! -e {d}/grandchild ]; do sleep 0.01; done\n\
             {then}"
        ),
    )
}

/// The grandchild's pid, and the directory of the cgroup the plugin ran in.
fn recorded(dir: &PluginDir) -> (u64, PathBuf) {
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect(name);
    let pid = read("grandchild").trim().parse().expect("a pid");
    let cgroup = read("cgroup");
    let own = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a cgroup2 line");
    let mount = must("findmnt", &["-n", "-o", "TARGET", "-t", "cgroup2"]);
    let mount = mount.lines().next().expect("a cgroup2 mount");
    (pid, Path::new(mount).join(own.trim_start_matches('/')))
}

/// What a user checks once the call returned: the grandchild is dead, and the plugin's cgroup,
/// one of its own and not the caller's, is gone.
fn assert_nothing_left(dir: &PluginDir, what: &str) {
    let (pid, cgroup) = recorded(dir);
    assert!(
        is_dead(pid),
        "the setsid grandchild {pid} survived the {what}"
    );
    let caller = std::fs::read_to_string("/proc/self/cgroup").expect("own cgroup");
    assert!(
        !caller.contains(&format!("0::{}\n", cgroup.display())) && !cgroup.exists(),
        "the plugin's cgroup {} is still there after the {what}",
        cgroup.display()
    );
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn a_setsid_grandchild_dies_at_the_plugins_timeout() {
    let dir = PluginDir::new();
    let plugin = escaping_plugin(&dir, "sleep 1000");
    let err = ProcessExec::new()
        .with_timeout(Duration::from_millis(1500))
        .exec_plugin(&plugin, &cni_env("ADD", "cg1"), b"{}")
        .await
        .expect_err("the plugin hangs");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert_nothing_left(&dir, "timeout");
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn what_a_successful_plugin_leaves_behind_is_killed() {
    let dir = PluginDir::new();
    let plugin = escaping_plugin(&dir, r#"echo '{"cniVersion":"1.0.0"}'"#);
    let out = ProcessExec::new()
        .exec_plugin(&plugin, &cni_env("ADD", "cg2"), b"{}")
        .await
        .expect("the plugin succeeds");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1.0.0"));
    assert_nothing_left(&dir, "plugin's exit");
}

#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn a_setsid_grandchild_dies_when_the_call_is_dropped() {
    let dir = PluginDir::new();
    let plugin = escaping_plugin(&dir, "sleep 1000");
    let env = cni_env("DEL", "cg3");
    let exec = ProcessExec::new();
    let run = exec.exec_plugin(&plugin, &env, b"{}");
    let grandchild = dir.path().join("grandchild");
    tokio::select! {
        result = run => panic!("a hanging plugin returned: {result:?}"),
        () = async {
            while !grandchild.exists() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } => {}
    }
    // `run` is dropped here, as when the caller's request is cancelled; the group is emptied and
    // removed in the background.
    let (pid, cgroup) = recorded(&dir);
    assert!(
        wait_dead(pid).await,
        "the setsid grandchild {pid} survived the drop"
    );
    for _ in 0..500 {
        if !cgroup.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the plugin's cgroup {} outlived the drop", cgroup.display());
}

/// A runtime killed with SIGKILL cleans nothing up: its plugin dies (PDEATHSIG), but the plugin's
/// child in a session of its own lives on, in the plugin's cgroup. The next runtime's first
/// plugin run kills it and removes the group. The test re-runs itself as both runtimes.
#[tokio::test]
#[ignore = "needs root + netns: cargo xtask test"]
async fn a_killed_runtimes_leftovers_die_at_the_next_runtimes_first_run() {
    const WORKER: &str = "CNI_EXEC_TEST_CGROUP_PLUGIN";
    if let Ok(script) = std::env::var(WORKER) {
        // A runtime: run the plugin; the first one hangs and is killed with us.
        let _ = ProcessExec::new()
            .with_timeout(Duration::from_secs(30))
            .exec_plugin(Path::new(&script), &cni_env("ADD", "cg4"), b"{}")
            .await;
        return;
    }
    let runtime = |script: &Path| {
        test_support::process::rerun_test(
            "cgroup::a_killed_runtimes_leftovers_die_at_the_next_runtimes_first_run",
        )
        .env(WORKER, script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a runtime")
    };
    let dir = PluginDir::new();
    let mut first = runtime(&escaping_plugin(&dir, "sleep 1000"));
    let grandchild = dir.path().join("grandchild");
    for _ in 0..1000 {
        if grandchild.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill().expect("kill the first runtime");
    first.wait().expect("reap it");
    let (pid, cgroup) = recorded(&dir);
    assert!(
        !is_dead(pid),
        "the grandchild should outlive a killed runtime"
    );

    let status = runtime(&dir.script("ok", r#"echo '{"cniVersion":"1.0.0"}'"#))
        .wait()
        .expect("the second runtime");
    assert!(status.success(), "{status}");
    assert!(
        wait_dead(pid).await,
        "the dead runtime's grandchild {pid} lives on"
    );
    assert!(!cgroup.exists(), "{} is still there", cgroup.display());
}

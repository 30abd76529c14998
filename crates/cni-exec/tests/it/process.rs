//! `ProcessExec` against the fake plugin and small shell scripts.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cni_exec::{Error, Exec, OutputStream, PluginStatus, ProcessExec};
use serde_json::{Value, json};
use test_support::fs::set_mode;
use test_support::process::wait_dead;

use crate::support::{PluginDir, cni_env, wait_child_record};

/// A plugin directory with the fake plugin linked into it.
struct Fake {
    dir: PluginDir,
    plugin: PathBuf,
}

impl Fake {
    /// A new directory with the fake plugin in it as `name`.
    fn install(name: &str) -> Self {
        let dir = PluginDir::new();
        let plugin = dir.install_fake(name);
        Self { dir, plugin }
    }

    /// [`Fake::run_with`] with a default [`ProcessExec`].
    async fn run(&self, command: &str, container: &str, fake: Value) -> cni_exec::Result<Vec<u8>> {
        self.run_with(&ProcessExec::new(), command, container, fake)
            .await
    }

    /// Runs the plugin through `exec` as `command` for `container`, its stdin a configuration
    /// whose `fake` object is `fake`.
    async fn run_with(
        &self,
        exec: &ProcessExec,
        command: &str,
        container: &str,
        fake: Value,
    ) -> cni_exec::Result<Vec<u8>> {
        exec.exec_plugin(
            &self.plugin,
            &cni_env(command, container),
            &self.dir.config(fake),
        )
        .await
        .map(|out| out.stdout)
    }
}

/// What an [`Error::Failed`] holds, and its message.
struct Failed {
    message: String,
    plugin: PathBuf,
    status: PluginStatus,
    stdout: Vec<u8>,
    stderr_tail: String,
}

/// The parts of the `Failed` error a run ended with; fails the test on success or any other error.
fn failed(outcome: cni_exec::Result<Vec<u8>>) -> Failed {
    let err = outcome.expect_err("plugin fails");
    let message = err.to_string();
    let Error::Failed {
        plugin,
        status,
        stdout,
        stderr_tail,
    } = err
    else {
        panic!("want Failed, got {message}");
    };
    Failed {
        message,
        plugin,
        status,
        stdout,
        stderr_tail,
    }
}

#[tokio::test]
async fn plugin_sees_only_cni_vars_and_path() {
    let fake = Fake::install("fake");
    fake.run("ADD", "c1", json!({}))
        .await
        .expect("ADD succeeds");

    let records = fake.dir.records();
    assert_eq!(records.len(), 1);
    let env = records[0]["env"].as_object().expect("env object");
    let keys: BTreeSet<&str> = env.keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = [
        "CNI_COMMAND",
        "CNI_CONTAINERID",
        "CNI_IFNAME",
        "CNI_NETNS",
        "CNI_PATH",
        "PATH",
    ]
    .into();
    assert_eq!(keys, want);
    assert_eq!(env["CNI_COMMAND"], "ADD");
    assert_eq!(env["CNI_CONTAINERID"], "c1");
    let runtime_path = std::env::var("PATH").unwrap_or_else(|_| cni_exec::DEFAULT_PATH.into());
    assert_eq!(env["PATH"], runtime_path.as_str());
}

#[tokio::test]
async fn passed_env_and_caller_vars_reach_the_plugin() {
    let dir = PluginDir::new();
    let plugin = dir.install_fake("fake");
    // Any variable of the test process other than PATH: cargo sets several for every test run.
    let (name, value) = std::env::vars()
        .find(|(k, _)| k != "PATH" && !k.starts_with("CNI_"))
        .expect("the test process has some environment");
    let mut env = cni_env("DEL", "c2");
    env.push(("PATH".into(), "/caller/path".into()));
    ProcessExec::new()
        .with_passed_env(name.clone())
        .with_passed_env("CNI_EXEC_TEST_SURELY_UNSET_VARIABLE")
        .exec_plugin(&plugin, &env, &dir.config(json!({})))
        .await
        .expect("DEL succeeds");

    let rec = &dir.records()[0];
    assert_eq!(rec["env"][&name], value.as_str());
    assert_eq!(
        rec["env"]["PATH"], "/caller/path",
        "caller wins over the runtime"
    );
    assert!(
        rec["env"]
            .get("CNI_EXEC_TEST_SURELY_UNSET_VARIABLE")
            .is_none()
    );
}

#[tokio::test]
async fn stdin_is_delivered_and_stdout_returned() {
    let fake = Fake::install("fake");
    let behaviour = json!({"result": {"cniVersion": "1.0.0", "ips": [], "marker": 42}});
    let stdin = fake.dir.config(behaviour.clone());
    let stdout = fake
        .run("ADD", "c3", behaviour)
        .await
        .expect("ADD succeeds");

    let printed: Value = serde_json::from_slice(&stdout).expect("stdout is JSON");
    assert_eq!(printed["marker"], 42);
    let sent: Value = serde_json::from_slice(&stdin).expect("config is JSON");
    assert_eq!(fake.dir.records()[0]["stdin"], sent);
}

#[tokio::test]
async fn failure_keeps_the_spec_error_on_stdout() {
    let fake = Fake::install("fake");
    let behaviour = json!({
        "fail": {"code": 7, "msg": "bad config", "details": "no bridge"},
        "stderr": "some diagnostics\n",
    });
    let Failed {
        message,
        plugin: failed,
        status,
        stdout,
        stderr_tail,
    } = failed(fake.run("ADD", "c4", behaviour).await);
    assert_eq!(failed, fake.plugin);
    assert_eq!(status, PluginStatus::Code(1));
    let spec: Value = serde_json::from_slice(&stdout).expect("stdout is the spec error");
    assert_eq!(spec["code"], 7);
    assert_eq!(spec["msg"], "bad config");
    assert_eq!(stderr_tail, "some diagnostics");
    assert!(
        message.contains(&fake.plugin.display().to_string()),
        "{message}"
    );
    assert!(message.contains("exit code 1"), "{message}");
}

/// Asserts that the plugin `pid` and its child `child` are both gone after the `what`.
async fn assert_group_dead(pid: u64, child: u64, what: &str) {
    assert!(wait_dead(pid).await, "plugin {pid} survived the {what}");
    assert!(
        wait_dead(child).await,
        "grandchild {child} survived the {what}"
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let fake = Fake::install("hanger");
    let exec = ProcessExec::new().with_timeout(Duration::from_millis(700));
    let started = Instant::now();
    let err = fake
        .run_with(&exec, "ADD", "c5", json!({"spawnChild": true}))
        .await
        .expect_err("plugin hangs");
    assert!(started.elapsed() < Duration::from_secs(5));

    let message = err.to_string();
    assert!(
        matches!(&err, Error::Timeout { plugin: p, command: Some(c), timeout }
            if *p == fake.plugin && c == "ADD" && *timeout == Duration::from_millis(700)),
        "{message}"
    );
    assert!(message.contains("hanger"), "{message}");
    assert!(message.contains("700ms"), "{message}");

    let (pid, child) = wait_child_record(&fake.dir).await;
    assert_group_dead(pid, child, "timeout").await;
}

#[tokio::test]
async fn dropping_the_future_kills_the_whole_group() {
    let fake = Fake::install("hanger");
    let exec = ProcessExec::new();
    let run = fake.run_with(&exec, "DEL", "c6", json!({"spawnChild": true}));
    let (pid, child) = tokio::select! {
        result = run => panic!("a hanging plugin returned: {result:?}"),
        pids = wait_child_record(&fake.dir) => pids,
    };
    // `run` is dropped here, as when the caller's request is cancelled.
    assert_group_dead(pid, child, "drop").await;
}

#[tokio::test]
async fn death_by_signal_is_reported() {
    for (crash, signal, name) in [("abort", 6, "SIGABRT"), ("segv", 11, "SIGSEGV")] {
        let fake = Fake::install("crasher");
        let err = fake
            .run("ADD", "c7", json!({"crash": crash}))
            .await
            .expect_err("plugin crashes");
        let message = err.to_string();
        assert!(
            matches!(&err, Error::Failed { status: PluginStatus::Signal(s), .. } if *s == signal),
            "{crash}: {message}"
        );
        assert!(message.contains(name), "{message}");
    }
}

#[tokio::test]
async fn garbage_with_exit_zero_is_returned_as_is() {
    let fake = Fake::install("fake");
    let stdout = fake
        .run("ADD", "c8", json!({"garbage": true}))
        .await
        .expect("exit 0 is success at this layer");
    assert!(serde_json::from_slice::<Value>(&stdout).is_err());
    assert!(!stdout.is_empty());
}

#[tokio::test]
async fn nonzero_exit_without_json_carries_the_stderr_tail() {
    let fake = Fake::install("fake");
    let Failed {
        message,
        status,
        stdout,
        stderr_tail,
        ..
    } = failed(
        fake.run("ADD", "c9", json!({"crash": "exit3-no-json"}))
            .await,
    );
    assert_eq!(status, PluginStatus::Code(3));
    assert!(stdout.is_empty());
    assert_eq!(stderr_tail, "fake plugin crashed on purpose");
    assert!(message.contains("crashed on purpose"), "{message}");
}

#[tokio::test]
async fn output_over_the_limit_is_an_error_and_kills_the_plugin() {
    let fake = Fake::install("chatty");
    let limit = 64 * 1024;
    let exec = ProcessExec::new().with_stdout_limit(limit);
    let err = fake
        .run_with(&exec, "ADD", "c10", json!({"hugeBytes": 50_000_000}))
        .await
        .expect_err("too much output");
    let message = err.to_string();
    assert!(
        matches!(&err, Error::OutputTooLarge { stream: OutputStream::Stdout, limit: l, .. } if *l == limit),
        "{message}"
    );
    assert!(
        message.contains("chatty") && message.contains("65536"),
        "{message}"
    );
    let pid = fake.dir.records()[0]["pid"].as_u64().expect("pid");
    assert!(wait_dead(pid).await, "plugin {pid} kept running");

    let exec = ProcessExec::new().with_stderr_limit(100);
    let err = fake
        .run_with(&exec, "ADD", "c10", json!({"stderr": "e".repeat(1000)}))
        .await
        .expect_err("too much stderr");
    assert!(
        matches!(
            &err,
            Error::OutputTooLarge {
                stream: OutputStream::Stderr,
                limit: 100,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn output_larger_than_a_pipe_buffer_is_read_whole() {
    let fake = Fake::install("fake");
    let stdout = fake
        .run("ADD", "c11", json!({"hugeBytes": 300_000}))
        .await
        .expect("under the default limit");
    assert_eq!(stdout.len(), 300_000);
}

#[tokio::test]
async fn plugin_that_ignores_stdin_is_not_an_epipe_error() {
    let dir = PluginDir::new();
    let plugin = dir.script("lazy", "echo '{}'");
    let stdin = vec![b' '; 4 << 20];
    let stdout = ProcessExec::new()
        .exec_plugin(&plugin, &cni_env("DEL", "c12"), &stdin)
        .await
        .expect("not reading stdin is fine")
        .stdout;
    assert_eq!(stdout, b"{}\n");
}

/// Writes a script while keeping the file open for writing, as an installer copying a binary does.
fn busy_script(dir: &PluginDir, name: &str) -> (std::path::PathBuf, std::fs::File) {
    let path = dir.path().join(name);
    let mut writer = std::fs::File::create(&path).expect("create plugin");
    writer
        .write_all(b"#!/bin/sh\necho '{\"replaced\":true}'\n")
        .expect("write plugin");
    set_mode(&path, 0o755);
    (path, writer)
}

#[tokio::test]
async fn text_file_busy_is_retried_until_the_writer_is_done() {
    let dir = PluginDir::new();
    let (plugin, writer) = busy_script(&dir, "upgrading");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(writer);
    });
    let stdout = ProcessExec::new()
        .exec_plugin(&plugin, &cni_env("ADD", "c13"), b"{}")
        .await
        .expect("spawn succeeds once the writer closes")
        .stdout;
    assert_eq!(stdout, b"{\"replaced\":true}\n");
    release.await.expect("release task");
}

#[tokio::test]
async fn text_file_busy_gives_up_with_a_clear_error() {
    let dir = PluginDir::new();
    let (plugin, _writer) = busy_script(&dir, "stuck");
    let err = ProcessExec::new()
        .with_busy_retries(3, Duration::from_millis(5))
        .exec_plugin(&plugin, &cni_env("ADD", "c14"), b"{}")
        .await
        .expect_err("binary stays busy");
    let message = err.to_string();
    assert!(
        matches!(&err, Error::TextFileBusy { attempts: 3, .. }),
        "{message}"
    );
    assert!(
        message.contains("stuck") && message.contains("text file busy"),
        "{message}"
    );
}

#[tokio::test]
async fn missing_binary_is_a_spawn_error() {
    let dir = PluginDir::new();
    let plugin = dir.path().join("absent");
    let err = ProcessExec::new()
        .exec_plugin(&plugin, &cni_env("ADD", "c15"), b"{}")
        .await
        .expect_err("nothing to run");
    assert!(
        matches!(&err, Error::Spawn { plugin: p, .. } if *p == plugin),
        "{err}"
    );
    assert!(err.to_string().contains("absent"));
}

#[tokio::test]
async fn bad_env_is_rejected_before_spawning() {
    let dir = PluginDir::new();
    let plugin = dir.install_fake("fake");
    for name in ["", "A=B", "NUL\0"] {
        let env = vec![(name.to_owned(), "x".to_owned())];
        let err = ProcessExec::new()
            .exec_plugin(&plugin, &env, &dir.config(json!({})))
            .await
            .expect_err("invalid variable");
        assert!(matches!(err, Error::InvalidEnv { .. }), "{name:?}: {err}");
    }
    assert!(dir.records().is_empty(), "the plugin must not have run");
}

#[tokio::test]
async fn launcher_wraps_the_plugin() {
    let fake = Fake::install("fake");
    // `env VAR=value cmd` is the simplest wrapper that execs its command.
    let exec = ProcessExec::new().with_launcher(["env", "CNI_VIA_LAUNCHER=yes"]);
    let stdout = fake
        .run_with(&exec, "ADD", "c16", json!({}))
        .await
        .expect("wrapped plugin runs");
    assert!(serde_json::from_slice::<Value>(&stdout).is_ok());
    let rec = &fake.dir.records()[0];
    assert_eq!(rec["env"]["CNI_VIA_LAUNCHER"], "yes");
    assert_eq!(rec["env"]["CNI_COMMAND"], "ADD");
}

#[tokio::test]
async fn works_as_a_trait_object() {
    let dir = PluginDir::new();
    dir.install_fake("fake");
    let exec: std::sync::Arc<dyn Exec> = std::sync::Arc::new(ProcessExec::new());
    let found = exec
        .find_plugin("fake", &[dir.path().to_owned()])
        .await
        .expect("found");
    let stdout = exec
        .exec_plugin(
            &found,
            &cni_env("VERSION", ""),
            br#"{"cniVersion":"1.1.0"}"#,
        )
        .await
        .expect("VERSION succeeds")
        .stdout;
    let version: Value = serde_json::from_slice(&stdout).expect("JSON");
    assert_eq!(version["cniVersion"], "1.1.0");
}

/// A runtime killed with SIGKILL runs no destructor, so the plugin it was running went on as an
/// orphan. The plugin now gets SIGKILL when its runtime dies. The test re-runs itself as the
/// "runtime": a process that starts a hanging plugin and is then killed.
#[tokio::test]
async fn a_plugin_dies_with_its_runtime() {
    if let Ok(script) = std::env::var("CNI_EXEC_TEST_RUNTIME_PLUGIN") {
        // The runtime: run the plugin, which never returns; the test kills us.
        let _ = ProcessExec::new()
            .exec_plugin(std::path::Path::new(&script), &cni_env("ADD", "c1"), b"{}")
            .await;
        unreachable!("the hanging plugin returned");
    }
    let dir = PluginDir::new();
    let pid_file = dir.path().join("plugin.pid");
    let script = dir.script(
        "orphan",
        &format!(
            "echo $$ > {}.tmp && mv {0}.tmp {0}\nexec sleep 60\n",
            pid_file.display()
        ),
    );
    let mut runtime = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "process::a_plugin_dies_with_its_runtime",
            "--exact",
            "--nocapture",
        ])
        .env("CNI_EXEC_TEST_RUNTIME_PLUGIN", &script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid: u64 = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text.trim().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the plugin never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    runtime.kill().unwrap();
    runtime.wait().unwrap();
    let survived = !wait_dead(pid).await;
    if survived {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(!survived, "plugin {pid} outlived its runtime");
}

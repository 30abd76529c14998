//! FIFOs, devices and stray files in every path the daemon reads: its configuration file, the CNI
//! configuration and plugin directories, its state, run and netns directories, the CNI cache and
//! lock directories, its socket. The daemon starts and serves, or refuses with an error naming the
//! path; it never hangs (every wait in these rows is bounded).

use std::net::IpAddr;
use std::os::unix::fs::{FileTypeExt as _, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use test_support::process::output;

use super::{
    Row, assert_serving, exits_within, finish_clean, flags_with, install_plugins, mkfifo,
    run_table, spawn_in_node, stop_and_remove_all, within,
};
use crate::e2e_support::{GATEWAY, Node, ready_ip};

/// Sandbox IDs for planted files: names the daemon takes for its own.
fn planted_id(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    ConfDirEntries,
    ConfigFifo,
    ConfigDevice,
    StateFiles,
    StateLock,
    CacheEntries,
    LockDir,
    NetnsDirEntries,
    NetnsLinkToMount,
    PluginDirEntries,
    Socket,
    SocketLock,
    ConfDirIsFifo,
    StateDirIsFifo,
    RunDirIsFifo,
    NamespacesDirIsFifo,
    CacheDirIsFifo,
    CniRunDirIsFifo,
}

impl Input {
    /// The rows whose FIFO stands for a whole directory the daemon needs for pods: it starts, but
    /// a pod may fail (naming the path) until the directory is fixed.
    fn breaks_a_dir(self) -> bool {
        matches!(
            self,
            Input::ConfDirIsFifo | Input::CacheDirIsFifo | Input::CniRunDirIsFifo
        )
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "a table: one row per fault, read top to bottom"
)]
fn rows() -> Vec<Row<Input>> {
    let starts = "the daemon starts within 20 s, recovers, serves; a pod runs, stops and is \
                  removed; nothing leaks";
    let refuses = "exits non-zero within 10 s with an error naming the path";
    let broken_dir = "the daemon starts and serves; RunPodSandbox fails naming the path (or \
                      works); once the path is a directory again a restart leaves nothing behind";
    vec![
        Row {
            name: "CNI conf dir: FIFO and device files",
            fast: true,
            injected: "net.d holds a FIFO 10-fifo.conflist and x.conflist -> /dev/zero; another \
                       FIFO appears while the daemon runs",
            asserted: "the daemon starts and serves; pods get the built-in network; nothing leaks",
            known: None,
            case: Input::ConfDirEntries,
        },
        Row {
            name: "--config is a FIFO",
            fast: true,
            injected: "--config names a FIFO with no writer",
            asserted: refuses,
            known: None,
            case: Input::ConfigFifo,
        },
        Row {
            name: "--config is a device",
            fast: false,
            injected: "--config names a symlink to /dev/zero",
            asserted: refuses,
            known: None,
            case: Input::ConfigDevice,
        },
        Row {
            name: "state files: FIFO and device",
            fast: true,
            injected: "state/sandboxes holds <id>.json as a FIFO, <id>.json -> /dev/zero and a \
                       FIFO .<id>.json.tmp",
            asserted: "the daemon starts; the unreadable ones are rolled back and deleted; a pod \
                       runs; nothing leaks",
            known: None,
            case: Input::StateFiles,
        },
        Row {
            name: "state lock is a FIFO",
            fast: false,
            injected: "state/crio-lite.lock is a FIFO",
            asserted: refuses,
            known: None,
            case: Input::StateLock,
        },
        Row {
            name: "CNI cache: FIFO and device entries",
            fast: false,
            injected: "cache/results holds entries that are a FIFO and a link to /dev/zero, the \
                       pending dir a FIFO entry",
            asserted: starts,
            known: None,
            case: Input::CacheEntries,
        },
        Row {
            name: "CNI lock dir: the GC lock is a FIFO",
            fast: false,
            injected: "run/cni/locks/gc.lock is a FIFO",
            asserted: starts,
            known: None,
            case: Input::LockDir,
        },
        Row {
            name: "netns dir: FIFO and device named like pins",
            fast: false,
            injected: "run/netns/<id> is a FIFO, another <id> a link to /dev/zero",
            asserted: starts,
            known: None,
            case: Input::NetnsDirEntries,
        },
        Row {
            name: "netns dir: a link named like a pin, to a mount elsewhere",
            fast: false,
            injected: "run/netns/<id> is a symlink to a directory outside with a tmpfs mounted",
            asserted: "the daemon starts and does not unmount what the link points to",
            known: None,
            case: Input::NetnsLinkToMount,
        },
        Row {
            name: "plugin dir: FIFO and device named like plugins",
            fast: false,
            injected: "the first plugin dir holds bridge and host-local as FIFOs, portmap -> \
                       /dev/zero",
            asserted: "the daemon starts; the real plugins of the next dir are used; a pod runs; \
                       nothing leaks",
            known: None,
            case: Input::PluginDirEntries,
        },
        Row {
            name: "socket path is a FIFO",
            fast: false,
            injected: "--listen names a FIFO",
            asserted: refuses,
            known: None,
            case: Input::Socket,
        },
        Row {
            name: "socket lock is a FIFO",
            fast: false,
            injected: "<socket>.lock is a FIFO",
            asserted: refuses,
            known: None,
            case: Input::SocketLock,
        },
        Row {
            name: "CNI conf dir is a FIFO",
            fast: false,
            injected: "--cni-config-dir names a FIFO",
            asserted: broken_dir,
            known: None,
            case: Input::ConfDirIsFifo,
        },
        Row {
            name: "state dir is a FIFO",
            fast: false,
            injected: "--root names a FIFO",
            asserted: refuses,
            known: None,
            case: Input::StateDirIsFifo,
        },
        Row {
            name: "run dir is a FIFO",
            fast: false,
            injected: "--runroot names a FIFO",
            asserted: refuses,
            known: None,
            case: Input::RunDirIsFifo,
        },
        Row {
            name: "namespaces dir is a FIFO",
            fast: false,
            injected: "--namespaces-dir names a FIFO (pins go in its netns subdirectory)",
            asserted: refuses,
            known: None,
            case: Input::NamespacesDirIsFifo,
        },
        Row {
            name: "CNI cache dir is a FIFO",
            fast: false,
            injected: "--cache-dir names a FIFO (results and host-local's leases live there)",
            asserted: broken_dir,
            known: None,
            case: Input::CacheDirIsFifo,
        },
        Row {
            name: "CNI run dir is a FIFO",
            fast: false,
            injected: "--cni-run-dir names a FIFO (pod locks and pending cache entries)",
            asserted: broken_dir,
            known: None,
            case: Input::CniRunDirIsFifo,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns: cargo xtask test"]
async fn fifos_and_devices_in_every_input() {
    run_table("inputs", rows(), input_case).await;
}

fn link_to_zero(path: &Path) {
    symlink("/dev/zero", path).unwrap_or_else(|e| panic!("symlink {}: {e}", path.display()));
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

async fn input_case(tag: String, input: Input) {
    let mut node = Node::new(&tag);
    match input {
        Input::ConfigFifo => {
            let config = node.path("fifo.conf");
            mkfifo(&config);
            refused(
                &node,
                &[("--config", config.display().to_string())],
                &config,
            )
            .await;
        }
        Input::ConfigDevice => {
            let config = node.path("zero.conf");
            link_to_zero(&config);
            refused(
                &node,
                &[("--config", config.display().to_string())],
                &config,
            )
            .await;
        }
        Input::StateLock => {
            let lock = node.state_dir().join("crio-lite.lock");
            mkfifo(&lock);
            refused(&node, &[], &lock).await;
        }
        Input::Socket => {
            mkfifo(&node.socket());
            refused(&node, &[], &node.socket()).await;
        }
        Input::SocketLock => {
            let lock = node.path("run/crio-lite.sock.lock");
            mkfifo(&lock);
            refused(&node, &[], &lock).await;
        }
        Input::StateDirIsFifo => {
            let dir = node.path("state-fifo");
            mkfifo(&dir);
            refused(&node, &[("--root", dir.display().to_string())], &dir).await;
        }
        Input::RunDirIsFifo => {
            let dir = node.path("run-fifo");
            mkfifo(&dir);
            refused(&node, &[("--runroot", dir.display().to_string())], &dir).await;
        }
        Input::NamespacesDirIsFifo => {
            let dir = node.path("ns-fifo");
            mkfifo(&dir);
            let flag = ("--namespaces-dir", dir.display().to_string());
            refused(&node, &[flag], &dir).await;
        }
        _ => Box::pin(starts(&mut node, input)).await,
    }
}

/// The directory a "breaks a dir" row replaces with a FIFO.
fn broken_dir(node: &Node, input: Input) -> PathBuf {
    match input {
        Input::ConfDirIsFifo => node.network_dir(),
        Input::CacheDirIsFifo => node.cache_dir(),
        _ => node.path("run/cni"),
    }
}

/// The daemon refuses to start: it exits non-zero, soon, naming `path`, and leaves no socket.
async fn refused(node: &Node, replaced: &[(&str, String)], path: &Path) {
    let mut args = flags_with(node, replaced);
    args.push("run".to_owned());
    let out = exits_within(spawn_in_node(node, &args), 10, "crio-lite").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "crio-lite must refuse: {stderr}");
    assert!(
        stderr.contains(&path.display().to_string()),
        "the error names {}: {stderr}",
        path.display()
    );
    let socket = std::fs::symlink_metadata(node.socket());
    assert!(
        socket.is_err() || path == node.socket(),
        "no socket is made: {socket:?}"
    );
}

/// What [`plant`] put in the node's directories.
struct Planted {
    /// Files the daemon may leave (they are not its to remove), removed before the leak check.
    left: Vec<PathBuf>,
    /// Files recovery must delete (they name sandboxes it cannot read).
    rolled_back: Vec<PathBuf>,
    /// A tmpfs a planted link points to, which must stay mounted.
    mount: Option<TmpfsMount>,
}

/// Plants the row's FIFOs, links and mounts before the daemon starts.
fn plant(node: &mut Node, input: Input) -> Planted {
    let mut left: Vec<PathBuf> = Vec::new();
    let mut rolled_back: Vec<PathBuf> = Vec::new();
    let mut mount = None;
    match input {
        Input::ConfDirEntries => {
            let dir = node.network_dir();
            mkfifo(&dir.join("10-fifo.conflist"));
            link_to_zero(&dir.join("x.conflist"));
            left.extend([dir.join("10-fifo.conflist"), dir.join("x.conflist")]);
        }
        Input::StateFiles => {
            let dir = node.state_dir().join("sandboxes");
            std::fs::create_dir_all(&dir).expect("create the state dir");
            let fifo = dir.join(format!("{}.json", planted_id(1)));
            let zero = dir.join(format!("{}.json", planted_id(2)));
            let tmp = dir.join(format!(".{}.json.tmp", planted_id(3)));
            mkfifo(&fifo);
            link_to_zero(&zero);
            mkfifo(&tmp);
            rolled_back.extend([fifo, zero, tmp]);
        }
        Input::CacheEntries => {
            let results = node.cache_dir().join("results");
            let pending = node.path("run/cni/pending");
            for dir in [&results, &pending] {
                std::fs::create_dir_all(dir).expect("create a cache dir");
            }
            let fifo = results.join(format!("ocicni-default-{}-eth0", planted_id(4)));
            let zero = results.join(format!("ocicni-default-{}-eth0", planted_id(5)));
            let pend = pending.join(format!("ocicni-default-{}-eth0", planted_id(6)));
            mkfifo(&fifo);
            link_to_zero(&zero);
            mkfifo(&pend);
            left.extend([fifo, zero, pend]);
        }
        Input::LockDir => {
            let locks = node.path("run/cni/locks");
            std::fs::create_dir_all(&locks).expect("create the lock dir");
            mkfifo(&locks.join("gc.lock"));
        }
        Input::NetnsDirEntries => {
            std::fs::create_dir_all(node.netns_dir()).expect("create the netns dir");
            let fifo = node.netns_dir().join(planted_id(7));
            let zero = node.netns_dir().join(planted_id(8));
            mkfifo(&fifo);
            link_to_zero(&zero);
            left.extend([fifo, zero]);
        }
        Input::NetnsLinkToMount => {
            std::fs::create_dir_all(node.netns_dir()).expect("create the netns dir");
            let target = node.path("elsewhere");
            mount = Some(TmpfsMount::new(&target));
            let link = node.netns_dir().join(planted_id(9));
            symlink(&target, &link).expect("plant the link");
            left.push(link);
        }
        Input::PluginDirEntries => {
            let bad = node.path("bad-plugins");
            std::fs::create_dir_all(&bad).expect("create the plugin dir");
            mkfifo(&bad.join("bridge"));
            mkfifo(&bad.join("host-local"));
            link_to_zero(&bad.join("portmap"));
            node.add_flags(["--cni-plugin-dir".to_owned(), bad.display().to_string()]);
        }
        Input::ConfDirIsFifo | Input::CacheDirIsFifo | Input::CniRunDirIsFifo => {
            let dir = broken_dir(node, input);
            if dir.exists() {
                std::fs::remove_dir(&dir).expect("remove the directory");
            }
            mkfifo(&dir);
        }
        _ => unreachable!("{input:?} is refused, not started"),
    }
    Planted {
        left,
        rolled_back,
        mount,
    }
}

/// The planted files the daemon had no business with are still what they were; then removed.
fn assert_left_alone(left: &[PathBuf]) {
    for path in left {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            let kind = meta.file_type();
            assert!(
                kind.is_fifo() || kind.is_symlink(),
                "{} was replaced by {kind:?}",
                path.display()
            );
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Plants the row's files, starts the daemon, runs a pod through its life, and checks the
/// planted files were handled.
async fn starts(node: &mut Node, input: Input) {
    let Planted {
        mut left,
        rolled_back,
        mount,
    } = plant(node, input);
    let _reaper = install_plugins(node, None);

    node.start().await;
    node.wait_recovered().await;
    let mut client = node.client().await;
    assert_serving(&mut client).await;
    for path in &rolled_back {
        assert!(
            std::fs::symlink_metadata(path).is_err(),
            "recovery deleted {} (unreadable: rolled back)",
            path.display()
        );
    }
    if let Some(mount) = &mount {
        assert!(
            mount.is_mounted(),
            "recovery took {} for a stray pin and unmounted the tmpfs at {} that this symlink \
             points to: a link in the netns dir must never make the daemon detach a mount",
            node.netns_dir().join(planted_id(9)).display(),
            mount.path.display()
        );
    }
    if input == Input::ConfDirEntries {
        let late = node.network_dir().join("40-late.conflist");
        mkfifo(&late);
        left.push(late);
        // The watcher's quiet window, so the reload sees the FIFO before the pod runs.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_serving(&mut client).await;
    }

    let created = within(30, "RunPodSandbox", async {
        client
            .run_pod_sandbox(crate::e2e_support::pod("p", Some(8080)))
            .await
            .map(|r| r.into_inner().pod_sandbox_id)
    })
    .await;
    match created {
        Ok(id) => {
            let ip = ready_ip(&mut client, &id).await;
            node.ping(&id, IpAddr::V4(GATEWAY))
                .expect("the pod reaches its gateway");
            assert!(ip.is_ipv4());
        }
        // Without the directory the pod may get no network; the error must say where it failed.
        Err(status) if input.breaks_a_dir() => {
            let dir = broken_dir(node, input).display().to_string();
            assert!(
                status.message().contains(&dir),
                "the error names {dir}: {status:?}"
            );
            eprintln!(
                "{input:?}: RunPodSandbox failed as it may: {}",
                status.message()
            );
        }
        Err(status) => panic!("RunPodSandbox: {status:?}\n{}", node.logs()),
    }
    let ids = stop_and_remove_all(&mut client).await;
    assert_serving(&mut client).await;
    drop(client);
    assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");

    assert_left_alone(&left);
    if input.breaks_a_dir() {
        // Fixed, a restart must finish whatever the broken directory left half done.
        let dir = broken_dir(node, input);
        assert!(is_fifo(&dir), "{} is still the FIFO", dir.display());
        std::fs::remove_file(&dir).expect("remove the FIFO");
        std::fs::create_dir(&dir).expect("make the directory again");
        node.start().await;
        node.wait_recovered().await;
        let mut client = node.client().await;
        assert_serving(&mut client).await;
        let more = stop_and_remove_all(&mut client).await;
        assert!(
            more.is_empty(),
            "no sandbox is listed after the fix: {more:?}"
        );
        drop(client);
        assert!(node.sigterm().await, "the daemon exits cleanly on SIGTERM");
    }
    if input == Input::LockDir {
        let gc = node.path("run/cni/locks/gc.lock");
        assert!(is_fifo(&gc) || gc.is_file(), "the GC lock is still there");
    }
    let all_ids: Vec<String> = ids.into_iter().chain((1..=9).map(planted_id)).collect();
    finish_clean(node, &all_ids).await;
    drop(mount);
}

/// A tmpfs mounted on a directory of the test's own, unmounted when dropped.
struct TmpfsMount {
    path: PathBuf,
}

impl TmpfsMount {
    fn new(path: &Path) -> TmpfsMount {
        std::fs::create_dir_all(path).expect("create the mount point");
        let path_text = path.display().to_string();
        let out = output(
            "mount",
            &["-t", "tmpfs", "-o", "size=1m", "faults", &path_text],
        );
        assert!(
            out.status.success(),
            "mount a tmpfs on {path_text}: {out:?}"
        );
        TmpfsMount {
            path: path.to_owned(),
        }
    }

    fn is_mounted(&self) -> bool {
        test_support::fs::is_mount_point(&self.path)
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        while self.is_mounted() {
            let out = output("umount", &["-l", &self.path.display().to_string()]);
            if !out.status.success() {
                eprintln!("cannot unmount {}: {out:?}", self.path.display());
                break;
            }
        }
    }
}

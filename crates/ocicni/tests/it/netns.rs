//! Pinned network namespaces, for real: create, enter, configure, inspect, remove.
//!
//! Every test pins its namespaces under a temporary directory of its own; the guard removes them (and
//! the directory's self-bind) on drop, also when the test fails. Only the tests themselves run `ip` and
//! `nsenter` (test-support's `must_in`), to build fixtures and to look from a child process; the
//! library runs nothing.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ipnet::IpNet;
use ocicni::netns::{self, Error, InterfaceInfo};
use test_support::fs::mounts_at_or_below;
use test_support::netns::must_in;

/// A temporary directory for pins; everything pinned in it is removed on drop.
struct PinDir {
    dir: tempfile::TempDir,
}

impl PinDir {
    fn new() -> Self {
        Self {
            dir: test_support::temp_dir("ocicni-netns"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A new namespace pinned at `<dir>/<name>`; fails the test when it cannot be created.
    fn pin(&self, name: &str) -> PathBuf {
        let path = self.path().join(name);
        netns::create_pinned(&path).expect("create a pinned network namespace");
        path
    }

    /// How many mounts sit at or under the directory.
    fn mounts(&self) -> usize {
        mounts_at_or_below(self.path()).len()
    }
}

impl Drop for PinDir {
    fn drop(&mut self) {
        if let Ok(entries) = std::fs::read_dir(self.path()) {
            for entry in entries.flatten() {
                let _ = netns::remove_pinned(&entry.path());
            }
        }
        let _ = netns::release_dir(self.path());
    }
}

/// A namespace as `ip netns add` leaves it (lo down), as a runtime other than ocicni makes them,
/// with the eth0 fixture the netlink tests read back.
pub(crate) struct NamedNetns {
    ns: test_support::netns::NetNs,
}

impl NamedNetns {
    /// Adds `ocicni-it-<what>-<pid>-<n>`; fails the test when it cannot.
    pub(crate) fn new(what: &str) -> Self {
        Self {
            ns: test_support::netns::NetNs::bare(&format!("ocicni-it-{what}")),
        }
    }

    /// The file `ip netns add` pinned the namespace at.
    pub(crate) fn path(&self) -> PathBuf {
        self.ns.path()
    }

    /// Runs `ip <args>` inside (test fixtures only) and returns its stdout.
    pub(crate) fn ip(&self, args: &[&str]) -> String {
        self.ns.must(&[&["ip"][..], args].concat())
    }

    /// What [`NamedNetns::add_eth0`] puts on eth0, sorted.
    pub(crate) const ETH0_ADDRESSES: [&str; 3] = ["10.77.0.2/24", "10.78.0.1/32", "fd00:77::2/64"];

    /// Adds the veth pair eth0/peer0 (both ends inside) with this MAC, and on eth0 the addresses
    /// of [`NamedNetns::ETH0_ADDRESSES`], one the local end of a point-to-point pair whose peer
    /// is 10.78.0.9.
    pub(crate) fn add_eth0(&self, mac: &str) {
        let veth = ["link", "add", "eth0", "address", mac, "type", "veth"];
        self.ip(&[&veth[..], &["peer", "name", "peer0"]].concat());
        self.ip(&["addr", "add", "10.77.0.2/24", "dev", "eth0"]);
        let ptp = ["addr", "add", "10.78.0.1", "peer", "10.78.0.9/32"];
        self.ip(&[&ptp[..], &["dev", "eth0"]].concat());
        self.ip(&["addr", "add", "fd00:77::2/64", "dev", "eth0", "nodad"]);
    }
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").ino()
}

fn own_thread_netns() -> PathBuf {
    std::fs::read_link("/proc/thread-self/ns/net").expect("readlink own netns")
}

fn find<'a>(list: &'a [InterfaceInfo], name: &str) -> &'a InterfaceInfo {
    list.iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no {name} in {list:?}"))
}

fn net(s: &str) -> IpNet {
    s.parse().expect("network literal")
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_new_pin_is_a_fresh_namespace_with_only_lo_down() {
    let dir = PinDir::new();
    let path = dir.pin("fresh");

    assert!(netns::exists(&path));
    assert!(netns::is_netns(&path).expect("inspect pin"));
    assert_ne!(inode(&path), inode(Path::new("/proc/self/ns/net")));

    let before = own_thread_netns();
    let (seen, thread) =
        netns::with_netns(&path, || (own_thread_netns(), std::thread::current().id()))
            .expect("enter pin");
    assert_eq!(seen, PathBuf::from(format!("net:[{}]", inode(&path))));
    assert_ne!(thread, std::thread::current().id());
    assert_eq!(
        own_thread_netns(),
        before,
        "the calling thread must not move"
    );

    let list = netns::interfaces(&path).expect("interfaces");
    assert_eq!(list.len(), 1, "{list:?}");
    let lo = find(&list, "lo");
    assert!(lo.loopback && !lo.up, "{lo:?}");
    assert!(lo.addresses.is_empty(), "{lo:?}");
    assert_eq!(lo.index, 1);
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn loopback_comes_up_with_its_address_and_a_second_call_is_fine() {
    let dir = PinDir::new();
    let path = dir.pin("lo");

    netns::bring_up_loopback(&path).expect("bring lo up");
    netns::bring_up_loopback(&path).expect("bring lo up again");

    let list = netns::interfaces(&path).expect("interfaces");
    let lo = find(&list, "lo");
    assert!(lo.up, "{lo:?}");
    assert!(lo.addresses.contains(&net("127.0.0.1/8")), "{lo:?}");
    assert_eq!(lo.mac.as_deref(), Some("00:00:00:00:00:00"));
    // and the kernel agrees, seen from a separate process
    let out = must_in(&path, &["ip", "-o", "-4", "addr", "show", "dev", "lo"]);
    assert!(out.contains("127.0.0.1/8"), "{out}");
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn interfaces_report_links_with_mac_mtu_state_and_addresses() {
    let dir = PinDir::new();
    let path = dir.pin("links");
    // Both ends of the veth stay inside the test's namespace.
    must_in(
        &path,
        &[
            "ip",
            "link",
            "add",
            "eth0",
            "address",
            "02:00:00:aa:bb:cc",
            "mtu",
            "1400",
            "type",
            "veth",
            "peer",
            "name",
            "peer0",
        ],
    );
    must_in(&path, &["ip", "addr", "add", "10.99.0.2/24", "dev", "eth0"]);
    must_in(
        &path,
        &["ip", "addr", "add", "fd00:99::2/64", "dev", "eth0", "nodad"],
    );
    must_in(&path, &["ip", "link", "set", "eth0", "up"]);
    let ip_line = must_in(&path, &["ip", "-o", "link", "show", "eth0"]);
    let want_index: u32 = ip_line
        .split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("index in {ip_line:?}"));

    let list = netns::interfaces(&path).expect("interfaces");
    let eth0 = find(&list, "eth0");
    assert_eq!(eth0.index, want_index);
    assert_eq!(eth0.mac.as_deref(), Some("02:00:00:aa:bb:cc"));
    assert_eq!(eth0.mtu, Some(1400));
    assert!(eth0.up && !eth0.loopback, "{eth0:?}");
    assert!(eth0.addresses.contains(&net("10.99.0.2/24")), "{eth0:?}");
    assert!(eth0.addresses.contains(&net("fd00:99::2/64")), "{eth0:?}");
    let peer = find(&list, "peer0");
    assert!(!peer.up && peer.addresses.is_empty(), "{peer:?}");
    let indexes: Vec<u32> = list.iter().map(|i| i.index).collect();
    assert!(indexes.is_sorted(), "{indexes:?}");
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn removing_a_pin_makes_it_gone_and_twice_is_fine() {
    let dir = PinDir::new();
    let path = dir.pin("gone");

    netns::remove_pinned(&path).expect("remove");
    assert!(!netns::exists(&path));
    assert!(mounts_at_or_below(&path).is_empty());
    netns::remove_pinned(&path).expect("remove again");

    let err = netns::with_netns(&path, || ()).expect_err("entering a removed pin");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot enter network namespace {}: No such file or directory (os error 2)",
            path.display()
        )
    );
    let err = netns::is_netns(&path).expect_err("inspecting a removed pin");
    assert!(err.is_not_found(), "{err}");
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn an_unmounted_pin_is_not_a_namespace_and_can_be_removed() {
    let dir = PinDir::new();
    let path = dir.pin("after-reboot");
    // What a reboot leaves behind: the file without the mount.
    nix_umount(&path);
    assert!(netns::exists(&path));
    assert!(!netns::is_netns(&path).expect("inspect bare file"));
    let err = netns::interfaces(&path).expect_err("enter a bare file");
    assert!(matches!(err, Error::NotNetns { .. }), "{err}");
    assert!(!err.is_not_found());
    netns::remove_pinned(&path).expect("remove the bare file");
    assert!(!netns::exists(&path));
}

/// Test-only: unmount a pin behind the library's back.
fn nix_umount(path: &Path) {
    let status = Command::new("umount")
        .arg(path)
        .status()
        .expect("run umount");
    assert!(status.success(), "umount {}", path.display());
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn pinning_over_an_existing_path_fails_and_keeps_the_first() {
    let dir = PinDir::new();
    let path = dir.pin("taken");
    let first = inode(&path);

    let err = netns::create_pinned(&path).expect_err("second pin at one path");
    match &err {
        Error::Create { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(inode(&path), first);
    assert_eq!(
        mounts_at_or_below(&path).len(),
        1,
        "no mount stacked on the pin"
    );
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn child_processes_see_the_pinned_namespace() {
    let dir = PinDir::new();
    let path = dir.pin("shared");
    let want = inode(&path);

    // A child resolves the path to the namespace, not to the empty file under the mount...
    let out = Command::new("stat")
        .args(["-L", "-c", "%i"])
        .arg(&path)
        .output()
        .expect("run stat");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        want.to_string()
    );
    // ...and can join it.
    let seen = must_in(&path, &["readlink", "/proc/self/ns/net"]);
    assert_eq!(seen.trim(), format!("net:[{want}]"));
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn the_directory_becomes_a_shared_mount_point_and_is_released() {
    let dir = PinDir::new();
    let _path = dir.pin("one");
    let lines = mounts_at_or_below(dir.path());
    let own = lines
        .iter()
        .find(|m| m.point == dir.path().to_string_lossy())
        .unwrap_or_else(|| panic!("the directory is not a mount point: {lines:?}"));
    assert!(
        own.optional.iter().any(|o| o.starts_with("shared:")),
        "{own:?}"
    );

    netns::prepare_dir(dir.path()).expect("prepare again");
    assert_eq!(
        dir.mounts(),
        2,
        "directory + pin, nothing stacked: {lines:?}"
    );

    netns::release_dir(dir.path()).expect("release");
    assert_eq!(dir.mounts(), 0);
    netns::release_dir(dir.path()).expect("release again");
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn concurrent_create_remove_cycles_leak_no_mounts() {
    let dir = PinDir::new();
    netns::prepare_dir(dir.path()).expect("prepare");
    let before = dir.mounts();
    assert_eq!(before, 1);

    let inodes = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let dir = &dir;
                scope.spawn(move || {
                    let mut seen = Vec::new();
                    for cycle in 0..5 {
                        let path = dir.path().join(format!("w{worker}-c{cycle}"));
                        netns::create_pinned(&path).expect("create");
                        assert!(netns::is_netns(&path).expect("inspect"));
                        netns::bring_up_loopback(&path).expect("lo up");
                        seen.push(inode(&path));
                        netns::remove_pinned(&path).expect("remove");
                        assert!(!netns::exists(&path));
                    }
                    seen
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect::<Vec<_>>()
    });

    assert_eq!(inodes.len(), 20);
    assert_eq!(dir.mounts(), before, "{:?}", mounts_at_or_below(dir.path()));
    assert_eq!(std::fs::read_dir(dir.path()).expect("read dir").count(), 0);
    // Namespaces alive at the same time are distinct; the kernel may reuse an inode once freed.
    assert!(inodes.iter().collect::<HashSet<_>>().len() > 1);
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs root + netns: cargo xtask test"]
async fn async_variants_work_without_moving_the_runtime_thread() {
    let dir = PinDir::new();
    let path = dir.path().join("async");
    let before = own_thread_netns();

    netns::create_pinned_async(&path).await.expect("create");
    netns::bring_up_loopback_async(&path).await.expect("lo up");
    let list = netns::interfaces_async(&path).await.expect("interfaces");
    assert!(find(&list, "lo").up);
    let seen = netns::with_netns_async(&path, own_thread_netns)
        .await
        .expect("enter");
    assert_eq!(seen, PathBuf::from(format!("net:[{}]", inode(&path))));
    assert_eq!(own_thread_netns(), before);

    netns::remove_pinned_async(&path).await.expect("remove");
    assert!(!netns::exists(&path));
    let err = netns::with_netns_async(&path, || ())
        .await
        .expect_err("removed");
    assert!(err.is_not_found(), "{err}");
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn removing_a_pin_with_a_mount_stacked_on_it_peels_both() {
    let dir = PinDir::new();
    let path = dir.pin("stacked");
    let other = dir.pin("other");
    let status = Command::new("mount")
        .arg("--bind")
        .arg(&other)
        .arg(&path)
        .status()
        .expect("run mount");
    assert!(status.success(), "mount --bind");
    assert_eq!(mounts_at_or_below(&path).len(), 2);

    netns::remove_pinned(&path).expect("remove");
    assert!(!netns::exists(&path));
    assert!(mounts_at_or_below(&path).is_empty());
    assert!(netns::is_netns(&other).expect("the other pin is untouched"));
}

/// The netlink path against what `ip` (a separate process) made and sees, in a namespace that
/// `ip netns add` made: lo comes up with its addresses, and a link's index, MAC, MTU and every
/// address are read back, the local address of a point-to-point pair and not its peer's.
#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn netlink_sets_and_reads_what_ip_sees_in_a_namespace_ip_made() {
    let ns = NamedNetns::new("netlink");
    let path = ns.path();

    let lo = find(&netns::interfaces(&path).expect("interfaces"), "lo").clone();
    assert!(lo.loopback && !lo.up && lo.addresses.is_empty(), "{lo:?}");
    netns::bring_up_loopback(&path).expect("bring lo up");
    netns::bring_up_loopback(&path).expect("bring lo up again");
    let flags = ns.ip(&["-o", "link", "show", "lo"]);
    assert!(flags.contains(",UP"), "ip sees lo down: {flags}");
    let lo = find(&netns::interfaces(&path).expect("interfaces"), "lo").clone();
    assert!(lo.up, "{lo:?}");
    assert!(lo.addresses.contains(&net("127.0.0.1/8")), "{lo:?}");
    if ns
        .ip(&["-o", "-6", "addr", "show", "dev", "lo"])
        .contains("::1/128")
    {
        assert!(lo.addresses.contains(&net("::1/128")), "{lo:?}");
    }

    ns.add_eth0("02:00:00:00:00:42");
    ns.ip(&["link", "set", "eth0", "mtu", "1280"]);
    ns.ip(&["addr", "add", "10.77.0.3/24", "dev", "eth0"]);
    let want_index: u32 = ns
        .ip(&["-o", "link", "show", "eth0"])
        .split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .expect("index from ip");

    let list = netns::interfaces(&path).expect("interfaces");
    let eth0 = find(&list, "eth0");
    assert_eq!(eth0.index, want_index);
    assert_eq!(eth0.mac.as_deref(), Some("02:00:00:00:00:42"));
    assert_eq!(eth0.mtu, Some(1280));
    assert!(!eth0.up && !eth0.loopback, "{eth0:?}");
    let mut got: Vec<String> = eth0.addresses.iter().map(ToString::to_string).collect();
    got.sort();
    let mut want = NamedNetns::ETH0_ADDRESSES.to_vec();
    want.push("10.77.0.3/24");
    want.sort_unstable();
    assert_eq!(got, want, "the peer 10.78.0.9 is not ours");
    assert!(find(&list, "peer0").addresses.is_empty());
}

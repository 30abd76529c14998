//! Installing the Debian packages the tests, demo and benchmarks need.

use std::process::Command;

use anyhow::{Result, bail};

use crate::cmd::{is_root, run_step};

/// The Go CNI plugins: the reference the real-plugin, differential and interop tests, critest
/// and the benchmarks run against. The demo does not need them: crio-lite runs `bridge`,
/// `host-local` and `loopback` built in where they are missing.
pub(crate) const PLUGIN_PACKAGES: &[(&str, &str)] = &[(
    "containernetworking-plugins",
    "the real CNI plugins in /usr/lib/cni",
)];

/// Where [`PLUGIN_PACKAGES`] puts the plugins.
pub(crate) const PLUGIN_DIR: &str = "/usr/lib/cni";

/// Packages every privileged test, the demo and the benchmarks rely on, with why.
pub(crate) const NETWORK_PACKAGES: &[(&str, &str)] = &[
    ("iptables", "used by the bridge and portmap plugins"),
    ("iproute2", "ip netns for the tests' node namespaces"),
    ("iputils-ping", "ping between test pods"),
    (
        "prometheus",
        "promtool, a real scraper's linter for what /metrics serves",
    ),
];

/// Packages the image tests need: a local registry to pull from, and the binary their test
/// images are built from.
pub(crate) const IMAGE_PACKAGES: &[(&str, &str)] = &[
    (
        "docker-registry",
        "a local OCI distribution registry for the image-store tests",
    ),
    (
        "busybox-static",
        "/bin/busybox, the test images' root file system",
    ),
];

/// Packages the container tests need: the OCI runtimes oci-container drives and the monitor it
/// drives them through.
pub(crate) const CONTAINER_PACKAGES: &[(&str, &str)] = &[
    ("crun", "the default OCI runtime oci-container drives"),
    (
        "runc",
        "the second OCI runtime the container tests run against",
    ),
    (
        "conmon",
        "the container monitor: runs <runtime> create, writes CRI logs and exit codes",
    ),
];

/// What a node running crio-lite's pods and containers needs (the demo's set; critest adds
/// [`PLUGIN_PACKAGES`]): no CNI plugin binaries, crio-lite has the ones it needs built in.
pub(crate) fn node_packages() -> Vec<(&'static str, &'static str)> {
    NETWORK_PACKAGES
        .iter()
        .chain(IMAGE_PACKAGES)
        .chain(CONTAINER_PACKAGES)
        .copied()
        .collect()
}

/// [`NETWORK_PACKAGES`] and [`PLUGIN_PACKAGES`]: the tests' and benchmarks' network set.
pub(crate) fn network_and_plugin_packages() -> Vec<(&'static str, &'static str)> {
    NETWORK_PACKAGES
        .iter()
        .chain(PLUGIN_PACKAGES)
        .copied()
        .collect()
}

/// Packages the Go peers in the tests need (a crictl-era CRI client, libcni), built offline from
/// Debian's sources. libcni was only in [`PEER_PACKAGES`] once: a machine that had never run the
/// benchmarks failed the interop tests.
pub(crate) const GO_PEER_PACKAGES: &[(&str, &str)] = &[
    ("golang-go", "the Go compiler, for the Go CRI client test"),
    (
        "golang-google-grpc-dev",
        "grpc-go 1.33, the generation crictl < 1.31 is built on",
    ),
    (
        "golang-google-protobuf-dev",
        "protowire, for the Go CRI client",
    ),
    (
        "golang-github-appc-cni-dev",
        "libcni's sources, for the tests that share a cache with Go libcni",
    ),
    (
        "golang-github-docker-spdystream-dev",
        "moby/spdystream, the SPDY/3.1 peer of cri-streaming's interop tests",
    ),
];

/// Packages the peer benchmark (containerd's go-cni, built from Debian's sources) needs.
pub(crate) const PEER_PACKAGES: &[(&str, &str)] = &[
    (
        "golang-go",
        "the Go compiler, for the go-cni peer benchmark",
    ),
    ("golang-github-containerd-go-cni-dev", "go-cni's sources"),
    ("golang-github-appc-cni-dev", "libcni's sources"),
];

/// The peers of the image pull benchmark (Debian 12: skopeo 1.9, umoci 0.4.7, containerd 1.6,
/// whose package ships `ctr`). The registry and busybox come from [`IMAGE_PACKAGES`].
pub(crate) const IMAGE_PEER_PACKAGES: &[(&str, &str)] = &[
    (
        "skopeo",
        "skopeo copy docker:// -> oci:, the first half of the skopeo + umoci peer",
    ),
    (
        "umoci",
        "umoci unpack, the second half of the skopeo + umoci peer",
    ),
    (
        "containerd",
        "containerd 1.6 and its ctr client: `ctr images pull` unpacks into the overlayfs snapshotter",
    ),
];

/// What the containers benchmark needs beyond [`CONTAINER_PACKAGES`] and [`IMAGE_PACKAGES`]
/// (runc, conmon, the registry, busybox): its peer, Debian 12's containerd 1.6 (the CRI plugin
/// built in, `containerd-shim-runc-v2`, runc as a dependency), and a reaper.
pub(crate) const CONTAINER_BENCH_PACKAGES: &[(&str, &str)] = &[
    (
        "containerd",
        "containerd 1.6 with its CRI plugin and runc shim, started privately beside crio-lite",
    ),
    (
        "tini",
        "`tini -s`: reaps the bench's orphaned monitors at once, as a node's init does",
    ),
];

/// Packages `cargo xtask dist` needs to make the `.deb` files (dpkg-deb itself is in dpkg, which
/// every Debian system has).
pub(crate) const DEB_PACKAGES: &[(&str, &str)] = &[
    (
        "dpkg-dev",
        "dpkg-shlibdeps: the shared libraries' packages for Depends",
    ),
    ("binutils", "strip, as Debian's policy wants binaries"),
];

/// The `.deb` files' linter, for `cargo xtask dist --check`.
pub(crate) const LINTIAN_PACKAGES: &[(&str, &str)] =
    &[("lintian", "Debian's verdict on the .deb files")];

/// Installs whichever of `wanted` are missing, when running as root; otherwise says what is missing.
///
/// # Errors
///
/// When packages are missing and cannot be installed.
pub(crate) fn ensure(wanted: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&(&str, &str)> = wanted.iter().filter(|(name, _)| !installed(name)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    for (name, why) in &missing {
        println!("xtask: package {name} is missing ({why})");
    }
    if !is_root() {
        bail!(
            "missing Debian packages: {}; run as root to let xtask install them",
            missing
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    println!("xtask: installing them with apt-get (running as root)");
    run_step(
        "apt-get update",
        Command::new("apt-get").args(["update", "-q"]),
    )?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    install.args(missing.iter().map(|(n, _)| *n));
    run_step("apt-get install", &mut install)
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"))
}

//! `cargo xtask critest`: Kubernetes' CRI validation suite (cri-tools' critest) against
//! crio-lite, in a node network namespace of its own.
//!
//! critest is not packaged by Debian 12 and cri-tools needs a newer Go than Debian's 1.19, so it
//! is not part of `cargo xtask test`: the caller builds it (the usage says how, from Debian's
//! bookworm-backports Go and cri-tools' vendored source) and names it with `--critest`. The rest is
//! the demo's set-up: the node namespace, a local registry (test-support's `test-registry`, which
//! pushes busybox-static look-alikes under the names the suite's images file gives), crio-lite
//! with every directory under a temporary one; a guard removes all of it, also on failure.

use std::fmt::Write as _;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::cmd::{cargo, is_root, run_step, target_dir};
use crate::demo::{Demo, REGISTRY, indent, shown, step};
use crate::packages;

/// The suite's two configurable images (its --test-images-file), pushed under these names.
pub(crate) const BUSYBOX: &str = "critest/busybox:1.29-2";
const WEB_SERVER: &str = "critest/nginx:1.14-2";
/// The registries whose names the suite's other specs pull; the local registry mirrors both.
const MIRRORED: [&str; 2] = ["registry.k8s.io", "gcr.io"];
/// Look-alikes of the images those specs pull by name (`REPO:TAG=KIND[@USER]`, as
/// test-support's test-registry takes them), served through the mirrors.
const LOOK_ALIKES: &[&str] = &[
    "e2e-test-images/busybox:1.29-2=busybox",
    "e2e-test-images/nginx:1.14-2=nginx",
    "e2e-test-images/httpd:2.4.39-4=httpd",
    "k8s-staging-cri-tools/hostnet-nginx-amd64:latest=hostnet-nginx",
    "k8s-staging-cri-tools/test-image-predefined-group:latest=predefined-group",
    "k8s-staging-cri-tools/test-image-latest:latest=busybox",
    "k8s-staging-cri-tools/test-image-tag:test=busybox",
    "k8s-staging-cri-tools/test-image-tag:all=busybox",
    "k8s-staging-cri-tools/test-image-1:latest=busybox",
    "k8s-staging-cri-tools/test-image-2:latest=busybox",
    "k8s-staging-cri-tools/test-image-3:latest=busybox",
    "k8s-staging-cri-tools/test-image-tags:1=busybox",
    "k8s-staging-cri-tools/test-image-tags:2=busybox",
    "k8s-staging-cri-tools/test-image-tags:3=busybox",
    "k8s-staging-cri-tools/test-image-user-uid:latest=busybox@1002",
    "k8s-staging-cri-tools/test-image-user-username:latest=busybox@www-data",
    "k8s-staging-cri-tools/test-image-user-uid-group:latest=busybox@1003:1003",
    "k8s-staging-cri-tools/test-image-user-username-group:latest=busybox@www-data:www-data",
];

/// The specs left out unless `--skip` says otherwise, and why: four need an image this
/// offline set-up cannot make.
const SKIPPED: [(&str, &str); 4] = [
    (
        "public image with digest",
        "pins the digest of an image on gcr.io, which no image built here can have",
    ),
    (
        "should support ContainerPID",
        "reads nginx's process title (\"master process\"); a busybox look-alike cannot set one",
    ),
    (
        "should support MaskedPaths",
        "Debian's busybox-static runs `ls` as a built-in applet, never the masked /bin/ls",
    ),
    (
        r"Security Context NoNewPrivs",
        "needs the nonewprivs image's setuid helper; busybox drops setuid privileges itself",
    ),
];

pub(crate) const USAGE: &str =
    "usage: cargo xtask critest --critest PATH [--focus REGEX] [--skip REGEX]

Runs cri-tools' critest (the CRI validation suite) against crio-lite, as root, in a node network
namespace of its own, with a local registry serving busybox-static look-alikes of the suite's
test images (its --test-images-file). Installs the Debian packages the demo needs.

--critest PATH   the critest binary (not packaged by Debian 12). To build it offline from
                 cri-tools v1.31.1's vendored source with Go 1.23 from bookworm-backports:
                   apt-get download golang-1.23-go golang-1.23-src  (bookworm-backports)
                   dpkg -x each into DIR; PATH=DIR/usr/lib/go-1.23/bin:$PATH
                   GOTOOLCHAIN=local GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0 \\
                     go test -c -o critest ./cmd/critest     (in the cri-tools tree)
--focus REGEX    the specs to run (default: all)
--skip REGEX     the specs to leave out (default: four that need an image that cannot be
                 built offline; the run prints them with the reasons)";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut critest = None;
    let mut focus = ".".to_owned();
    let mut skip = SKIPPED
        .iter()
        .map(|(pattern, _)| format!("({pattern})"))
        .collect::<Vec<_>>()
        .join("|");
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .with_context(|| format!("{arg} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--critest" => critest = Some(PathBuf::from(value()?)),
            "--focus" => focus = value()?,
            "--skip" => {
                skip = value()?;
                println!("    --skip replaces the default skips");
            }
            other => bail!("critest: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    let Some(critest) = critest else {
        bail!("critest: --critest PATH is required\n\n{USAGE}");
    };
    let critest = std::fs::canonicalize(&critest)
        .with_context(|| format!("critest binary {}", critest.display()))?;
    if !is_root() {
        bail!("critest creates network namespaces and runs containers: run it as root");
    }
    // critest's host-port specs need portmap, which is not built in.
    on_node(packages::PLUGIN_PACKAGES, "critest", |node, _| {
        run_suite(node, &critest, &focus, &skip)
    })
}

/// What `critest` and `crictl` share: the Debian packages (the node's and `extra`), crio-lite and
/// test-registry built, then a node namespace with the local registry of the suite's images and
/// crio-lite serving in it (see [`start_node`]), `body` run on it with the target directory, and
/// everything removed after, also on failure (the daemon's log printed then).
pub(crate) fn on_node(
    extra: &[(&'static str, &'static str)],
    what: &str,
    body: impl FnOnce(&mut Demo, &Path) -> Result<()>,
) -> Result<()> {
    let mut wanted = packages::node_packages();
    wanted.extend_from_slice(extra);
    step("Checking the Debian packages (installed with apt-get when missing)");
    packages::ensure(&wanted)?;
    run_step(
        "Building crio-lite and the local registry of test images (test-support's test-registry)",
        cargo().args([
            "build",
            "-p",
            "crio-lite",
            "--bin",
            "crio-lite",
            "-p",
            "test-support",
            "--bin",
            "test-registry",
        ]),
    )?;
    let target = target_dir().join("debug");

    let started = Instant::now();
    let mut node = Demo::new()?;
    let segments = shm_segments();
    let outcome = start_node(&mut node, &target).and_then(|()| body(&mut node, &target));
    // The HostIpc specs make shared memory segments on the host (ipcmk) and leave them.
    for id in shm_segments().difference(&segments) {
        let _ = Command::new("ipcrm").args(["-m", id]).status();
    }
    if let Err(e) = &outcome {
        println!("\n==> FAILED: {e:#}");
        if let Ok(log) = std::fs::read_to_string(node.path("crio-lite.log")) {
            let tail: Vec<&str> = log.lines().rev().take(600).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            println!(
                "    the daemon's log (last lines):\n{}",
                indent(&tail.join("\n"))
            );
        }
    }
    step("Cleaning up: the node namespace, pins and temporary directories");
    drop(node);
    outcome?;
    println!(
        "\n==> {what} passed in {:.1} s after the build",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The node namespace, test-registry in it with the suite's images (and their look-alikes
/// behind the mirrored registries' names), the node's registries.conf and policy, and crio-lite
/// serving in it.
fn start_node(node: &mut Demo, target: &Path) -> Result<()> {
    node.create_node()?;
    let mut registry = Command::new("nsenter");
    registry
        .arg(format!("--net=/run/netns/{}", node.node()))
        .arg("--")
        .arg(target.join("test-registry"))
        .args(["--addr", REGISTRY])
        .args(["--image", &format!("{BUSYBOX}=busybox")])
        .args(["--image", &format!("{WEB_SERVER}=nginx")]);
    for image in LOOK_ALIKES {
        registry.args(["--image", image]);
    }
    step(&format!(
        "Starting the local registry with the suite's images in the node namespace\n    {}",
        shown(&registry)
    ));
    let mut child = registry
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start test-registry")?;
    let mut first = String::new();
    let stdout = child.stdout.take().context("test-registry's stdout")?;
    node.registry = Some(child);
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .context("reading test-registry's answer")?;
    let pushed: serde_json::Value = serde_json::from_str(first.trim())
        .with_context(|| format!("test-registry printed no JSON: {first:?}"))?;
    println!("    {pushed}");

    // The suite checks the CRI's meaning of a request without a seccomp profile (unconfined);
    // crio-lite, as CRI-O, gives such containers the default profile unless told otherwise.
    // The names the suite pulls are served by the local registry, as mirrors serve a node
    // that cannot reach the internet; and accepted by the node's policy.
    let mut mirrors = String::new();
    for name in MIRRORED {
        writeln!(
            mirrors,
            "[[registry]]\nprefix = \"{name}\"\nlocation = \"{name}\"\n\
             [[registry.mirror]]\nlocation = \"{REGISTRY}\"\ninsecure = true\n"
        )?;
    }
    std::fs::write(node.path("registries.conf"), mirrors)?;
    let accepted: Vec<String> = std::iter::once(REGISTRY)
        .chain(MIRRORED)
        .map(|scope| format!("\"{scope}\": [{{\"type\": \"insecureAcceptAnything\"}}]"))
        .collect();
    std::fs::write(
        node.path("policy.json"),
        format!(
            "{{\"default\": [{{\"type\": \"reject\"}}],\n \"transports\": {{\"docker\": {{{}}}}}}}\n",
            accepted.join(", ")
        ),
    )?;
    std::fs::write(
        node.path("crio-lite.conf.d/20-critest.conf"),
        "# critest checks that a container without a seccomp profile is unconfined (CRI).\n\
         [crio.runtime]\nseccomp_use_default_when_empty = false\nlog_level = \"oci_container=debug,cri_streaming=debug,crio_lite::streams=debug,info\"\n",
    )?;
    node.start_daemon(&target.join("crio-lite"))
}

fn run_suite(node: &Demo, critest: &Path, focus: &str, skip: &str) -> Result<()> {
    let images = node.path("critest-images.yaml");
    std::fs::write(
        &images,
        format!(
            "defaultTestContainerImage: {REGISTRY}/{BUSYBOX}\nwebServerTestImage: {REGISTRY}/{WEB_SERVER}\n"
        ),
    )?;
    let endpoint = format!("unix://{}", node.socket().display());
    let mut suite = Command::new("nsenter");
    suite
        .arg(format!("--net=/run/netns/{}", node.node()))
        .arg("--")
        .arg(critest)
        .arg(format!("--runtime-endpoint={endpoint}"))
        .arg(format!("--image-endpoint={endpoint}"))
        .arg(format!("--test-images-file={}", images.display()))
        .arg(format!("--ginkgo.focus={focus}"))
        .arg(format!("--ginkgo.skip={skip}"))
        .arg("--ginkgo.no-color")
        .current_dir(node.path(""));
    step(&format!("Running critest\n    {}", shown(&suite)));
    println!("    left out by default, and why:");
    for (pattern, why) in SKIPPED {
        println!("      {pattern}: {why}");
    }
    let status = suite
        .stdin(Stdio::null())
        .status()
        .context("cannot run critest")?;
    if !status.success() {
        bail!("critest failed ({status})");
    }
    Ok(())
}

/// The ids of the host's System V shared memory segments.
fn shm_segments() -> std::collections::BTreeSet<String> {
    std::fs::read_to_string("/proc/sysvipc/shm")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

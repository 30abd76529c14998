//! `cargo xtask vm`: a cgroup v2 + systemd node in a QEMU virtual machine, made from Debian
//! packages only, that runs test binaries built on the host.
//!
//! This machine is cgroup v1 (hybrid) without systemd; production nodes are the unified
//! hierarchy under systemd. The VM is such a node: a debootstrapped bookworm with systemd as
//! init, crun, runc, conmon and the CNI plugins, Debian's kernel and initramfs, in an ext4 image
//! made with `mkfs.ext4 -d`. It runs under TCG (no usable KVM here), so nothing is ever compiled
//! inside it: binaries are built on the host and reach it, with the checkout, over virtio-9p at
//! the same absolute path.
//!
//! The image is cached in `<target>/vm/<recipe hash>/` and made again when its recipe (the
//! package list, the set-up script, the unit) changes. Each boot runs from a copy-on-write
//! snapshot (`-snapshot`): the image never changes after it is made.
//!
//! A job is a shell script the VM's `xtask-job.service` runs as root once systemd reaches
//! `multi-user.target`; its output goes to the host (a file on the shared job directory) and to
//! the serial console, its exit code to a file, and the VM powers off after it.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::cmd::{ScratchDir, is_root, run_step, target_dir, workspace_root};
use crate::packages;

pub(crate) const USAGE: &str = "usage: cargo xtask vm <build | run | script | test> [options] ...

A cgroup v2 + systemd node (Debian 12, crun, runc, conmon, the CNI plugins) in a QEMU virtual
machine under software emulation, made from Debian packages and cached in <target>/vm/. Run
as root (debootstrap, mkfs.ext4 -d); missing host packages (debootstrap, qemu-system-x86) are
installed with apt-get.

  build           make the image if its recipe changed (else say where it is)
  run -- P ARGS   boot, run P (a program built on the host; the checkout is shared at its own
                  path, the current directory kept) as root, print its output, exit with its code
  script FILE     boot and run the shell script FILE as root, likewise
  suite           the VM step of `cargo xtask test` alone: oci-container's privileged tests,
                  crio-lite's on crun with systemd and on runc with cgroupfs
  test CARGO-ARGS [-- TEST-ARGS]
                  build test binaries on the host (cargo test --no-run CARGO-ARGS), then
                  boot once and run each with TEST-ARGS in the VM, from its crate's directory

options:
  --timeout SECS  give up (and fail) after this long, boot included (default 1800)
  --memory MIB    the VM's memory (default 3072)
  --only CRATES   vm test: run only the binaries of these crates (comma-separated), so that
                  `--workspace --tests` reuses what cargo xtask test built
  --env NAME=VAL  vm test: set for the test binaries (repeatable)";

/// Host packages the VM needs.
const HOST_PACKAGES: &[(&str, &str)] = &[
    ("debootstrap", "makes the VM's Debian 12 root file system"),
    ("qemu-system-x86", "runs the VM (software emulation)"),
    (
        "e2fsprogs",
        "mkfs.ext4 -d: the root file system as an image",
    ),
];

/// What the VM's root file system holds beyond debootstrap's minbase.
const VM_PACKAGES: &[&str] = &[
    "linux-image-amd64",
    "initramfs-tools",
    "systemd",
    "systemd-sysv",
    "dbus",
    "udev",
    "kmod",
    "procps",
    "iproute2",
    "iputils-ping",
    "iptables",
    "ca-certificates",
    "crun",
    "runc",
    "conmon",
    "containernetworking-plugins",
    "busybox-static",
    "docker-registry",
];

/// Run inside the new root file system (chrooted) once the packages are in: a node that boots
/// quietly to the job.
const SETUP: &str = r"set -eu
echo xtask-vm > /etc/hostname
printf '127.0.0.1 localhost xtask-vm\n::1 localhost\n' > /etc/hosts
passwd -d root
# Nothing waits on a network the VM does not have, no getty competes with the job's output.
systemctl mask serial-getty@ttyS0.service getty@tty1.service systemd-networkd-wait-online.service \
    systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
    fstrim.timer man-db.timer docker-registry.service 2>/dev/null || true
systemctl enable xtask-job.service
mkdir -p /work
# The kernel and initramfs are taken out for QEMU's -kernel/-initrd.
ls /boot
";

/// The unit that runs a job once the node is up.
const JOB_UNIT: &str = "[Unit]
Description=xtask vm job
After=multi-user.target
Wants=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/xtask-job
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
";

/// Mounts the shares, runs the job, records its code, powers off.
const JOB_RUNNER: &str = r#"#!/bin/sh
mkdir -p /xtask-job
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 job /xtask-job || { echo "xtask-vm: no job share"; systemctl poweroff; exit 1; }
src=$(cat /xtask-job/source)
mkdir -p "$src"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose src "$src" || echo "xtask-vm: no source share"
echo "xtask-vm: cgroup $(stat -fc %T /sys/fs/cgroup), init $(cat /proc/1/comm), kernel $(uname -r)" > /xtask-job/node
cd "$(cat /xtask-job/cwd)" 2>/dev/null || cd /
/bin/sh /xtask-job/job.sh > /xtask-job/output 2>&1
echo $? > /xtask-job/rc
sync
systemctl poweroff --no-block
"#;

pub(crate) fn run(args: &[String]) -> Result<()> {
    let (command, rest) = args
        .split_first()
        .map_or(("", &[][..]), |(c, r)| (c.as_str(), r));
    match command {
        "build" => {
            let image = build()?;
            println!("xtask vm: image ready in {}", image.dir.display());
            Ok(())
        }
        "run" => {
            let (options, program) = Options::parse(rest)?;
            if program.is_empty() {
                bail!("vm run: no program given\n\n{USAGE}");
            }
            let mut script = String::from("exec");
            for arg in program {
                let _ = write!(script, " {}", shell_quote(arg));
            }
            script.push('\n');
            exit_with(run_job(&script, &options)?)
        }
        "script" => {
            let (options, files) = Options::parse(rest)?;
            let [file] = files else {
                bail!("vm script: one script file, please\n\n{USAGE}");
            };
            let script =
                std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
            exit_with(run_job(&script, &options)?)
        }
        "test" => {
            let (options, rest) = Options::parse(rest)?;
            let split = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
            let (cargo_args, test_args) = (&rest[..split], rest.get(split + 1..).unwrap_or(&[]));
            let pass = Pass {
                label: "tests".to_owned(),
                only: options.only.clone(),
                env: options.env.clone(),
                test_args: test_args.to_vec(),
            };
            let script = test_script(cargo_args, &[pass])?;
            exit_with(run_job(&script, &options)?)
        }
        "suite" => {
            if !rest.is_empty() {
                bail!("vm suite: no arguments\n\n{USAGE}");
            }
            crate::test::vm_tests()
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("vm: unknown command {other:?}\n\n{USAGE}"),
    }
}

/// One run of test binaries in the VM: which crates' binaries (all when empty), with which
/// environment and test arguments.
#[derive(Debug, Clone)]
pub(crate) struct Pass {
    /// What the output calls it.
    pub(crate) label: String,
    /// The crates whose binaries run; all when empty.
    pub(crate) only: Vec<String>,
    /// `NAME=VALUE` pairs set for the binaries.
    pub(crate) env: Vec<(String, String)>,
    /// The test harness's arguments.
    pub(crate) test_args: Vec<String>,
}

/// Builds the test binaries `cargo test --no-run` makes with `cargo_args` once and returns a
/// script that runs, pass after pass, each binary of the pass's crates with its environment and
/// test arguments from its crate's directory (as `cargo test` does), failing when any fails.
pub(crate) fn test_script(cargo_args: &[String], passes: &[Pass]) -> Result<String> {
    println!("xtask vm: building the test binaries on the host");
    let out = crate::cmd::cargo()
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(cargo_args)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo test --no-run")?;
    if !out.status.success() {
        bail!("cargo test --no-run failed");
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(exe), Some(manifest)) =
            (msg["executable"].as_str(), msg["manifest_path"].as_str())
        else {
            continue;
        };
        if msg["profile"]["test"] != true {
            continue;
        }
        let dir = Path::new(manifest).parent().unwrap_or(Path::new("/"));
        binaries.push((dir.to_path_buf(), exe.to_owned()));
    }
    let mut script = String::from("failed=0\n");
    for pass in passes {
        let mut count = 0;
        let _ = writeln!(
            script,
            "echo \"xtask-vm: pass {}\"",
            shell_quote(&pass.label)
        );
        for (dir, exe) in &binaries {
            let crate_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if !pass.only.is_empty() && !pass.only.iter().any(|o| o == crate_name) {
                continue;
            }
            let mut run = format!("cd {} && env", shell_quote(&dir.to_string_lossy()));
            for (name, value) in &pass.env {
                let _ = write!(run, " {}", shell_quote(&format!("{name}={value}")));
            }
            let _ = write!(run, " {}", shell_quote(exe));
            for arg in &pass.test_args {
                let _ = write!(run, " {}", shell_quote(arg));
            }
            let _ = writeln!(script, "echo \"xtask-vm: {exe}\"\n{run} || failed=1");
            count += 1;
        }
        if count == 0 {
            bail!(
                "cargo test --no-run {} built no test binary for pass {}",
                cargo_args.join(" "),
                pass.label
            );
        }
    }
    script.push_str("exit $failed\n");
    Ok(script)
}

fn exit_with(code: i32) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        bail!("the job in the VM exited with {code}")
    }
}

/// How a job runs.
pub(crate) struct Options {
    pub(crate) timeout: Duration,
    pub(crate) memory_mib: u32,
    /// `vm test`: run only these crates' binaries.
    pub(crate) only: Vec<String>,
    /// `vm test`: set for the test binaries.
    pub(crate) env: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs(1800),
            memory_mib: 3072,
            only: Vec::new(),
            env: Vec::new(),
        }
    }
}

impl Options {
    /// Options first, then `--`, then the rest.
    fn parse(args: &[String]) -> Result<(Options, &[String])> {
        let mut options = Options::default();
        let mut i = 0;
        while i < args.len() {
            let value = |i: usize| {
                args.get(i + 1)
                    .with_context(|| format!("{} needs a value", args[i]))
            };
            match args[i].as_str() {
                "--timeout" => {
                    options.timeout = Duration::from_secs(value(i)?.parse().context("--timeout")?);
                    i += 2;
                }
                "--memory" => {
                    options.memory_mib = value(i)?.parse().context("--memory")?;
                    i += 2;
                }
                "--only" => {
                    options.only = value(i)?.split(',').map(str::to_owned).collect();
                    i += 2;
                }
                "--env" => {
                    let pair = value(i)?;
                    let (name, val) = pair
                        .split_once('=')
                        .with_context(|| format!("--env {pair:?}: NAME=VALUE"))?;
                    options.env.push((name.to_owned(), val.to_owned()));
                    i += 2;
                }
                "--" => return Ok((options, &args[i + 1..])),
                _ => return Ok((options, &args[i..])),
            }
        }
        Ok((options, &[]))
    }
}

/// A made image: its directory, root file system, kernel and initramfs.
pub(crate) struct Image {
    pub(crate) dir: PathBuf,
    rootfs: PathBuf,
    kernel: PathBuf,
    initrd: PathBuf,
}

/// FNV-1a: enough to tell recipes apart (not a defence against anyone).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn recipe() -> String {
    format!(
        "bookworm minbase\n{}\n{SETUP}\n{JOB_UNIT}\n{JOB_RUNNER}\nv1",
        VM_PACKAGES.join(",")
    )
}

/// The Debian mirror the host uses, so the VM's packages come from where the host's do.
fn mirror() -> String {
    let sources = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources")
        .or_else(|_| std::fs::read_to_string("/etc/apt/sources.list"))
        .unwrap_or_default();
    sources
        .lines()
        .filter(|l| l.starts_with("URIs:") || l.starts_with("deb "))
        .flat_map(str::split_whitespace)
        .find(|w| w.starts_with("http") && !w.contains("security"))
        .unwrap_or("http://deb.debian.org/debian")
        .to_owned()
}

/// Makes the image unless one of this recipe is there.
pub(crate) fn build() -> Result<Image> {
    let vm_dir = target_dir().join("vm");
    let dir = vm_dir.join(format!("{:016x}", fnv1a(&recipe())));
    let image = Image {
        rootfs: dir.join("rootfs.ext4"),
        kernel: dir.join("vmlinuz"),
        initrd: dir.join("initrd.img"),
        dir,
    };
    if image.dir.join("done").is_file() {
        return Ok(image);
    }
    if !is_root() {
        bail!("making the VM image needs root (debootstrap, mkfs.ext4 -d)");
    }
    packages::ensure(HOST_PACKAGES)?;
    println!(
        "xtask vm: making the VM image in {} (Debian packages, several minutes)",
        image.dir.display()
    );
    if image.dir.exists() {
        std::fs::remove_dir_all(&image.dir)?;
    }
    let root = image.dir.join("root");
    let cache = vm_dir.join("debs");
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(&cache)?;
    let cache = cache.canonicalize()?;
    run_step(
        "debootstrap (the VM's root file system)",
        Command::new("debootstrap")
            .arg("--variant=minbase")
            .arg(format!("--include={}", VM_PACKAGES.join(",")))
            .arg(format!("--cache-dir={}", cache.display()))
            .args(["bookworm"])
            .arg(&root)
            .arg(mirror())
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    std::fs::write(root.join("etc/systemd/system/xtask-job.service"), JOB_UNIT)?;
    let runner = root.join("usr/local/sbin/xtask-job");
    std::fs::write(&runner, JOB_RUNNER)?;
    set_mode(&runner, 0o755)?;
    run_step(
        "set-up inside the root file system",
        Command::new("chroot")
            .arg(&root)
            .args(["/bin/sh", "-c", SETUP]),
    )?;
    // QEMU boots the kernel and initramfs directly; the image keeps its copies too.
    let boot = root.join("boot");
    let pick = |prefix: &str| -> Result<PathBuf> {
        std::fs::read_dir(&boot)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .with_context(|| format!("no {prefix}* in {}", boot.display()))
    };
    std::fs::copy(pick("vmlinuz-")?, &image.kernel)?;
    std::fs::copy(pick("initrd.img-")?, &image.initrd)?;
    // The apt lists and downloaded packages are not needed at run time.
    let _ = std::fs::remove_dir_all(root.join("var/cache/apt/archives"));
    let _ = std::fs::remove_dir_all(root.join("var/lib/apt/lists"));
    run_step(
        "mkfs.ext4 -d (the root file system as an image)",
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-L", "xtask-vm", "-d"])
            .arg(&root)
            .arg(&image.rootfs)
            .arg("4G"),
    )?;
    std::fs::remove_dir_all(&root)?;
    std::fs::write(image.dir.join("done"), recipe())?;
    Ok(image)
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", path.display()))
}

fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Boots the VM, runs `script` as root inside it (in the current directory, which must be
/// under the workspace), prints its output and returns its exit code.
///
/// # Errors
///
/// When the image cannot be made, QEMU cannot start, or the job does not finish in time.
pub(crate) fn run_job(script: &str, options: &Options) -> Result<i32> {
    let image = build()?;
    packages::ensure(HOST_PACKAGES)?;
    let job = ScratchDir::new("vm-job")?;
    let source = workspace_root().canonicalize()?;
    let cwd = std::env::current_dir()?;
    std::fs::write(job.path().join("job.sh"), script)?;
    std::fs::write(
        job.path().join("source"),
        source.as_os_str().as_encoded_bytes(),
    )?;
    std::fs::write(job.path().join("cwd"), cwd.as_os_str().as_encoded_bytes())?;
    let console = job.path().join("console.log");
    let started = Instant::now();
    let mut qemu = qemu_command(&image, job.path(), &source, options);
    println!("xtask vm: booting (software emulation: a minute or two before the job starts)");
    let mut child = qemu.spawn().context("cannot start qemu-system-x86_64")?;
    // The console goes to a file and, once the job runs, to our output.
    let stdout = child.stdout.take().context("qemu's stdout")?;
    let log = console.clone();
    let echo = std::thread::spawn(move || {
        let mut file = std::fs::File::create(log).ok();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(f) = file.as_mut() {
                use std::io::Write as _;
                let _ = writeln!(f, "{line}");
            }
            if line.contains("xtask-vm") || line.contains("Kernel panic") {
                println!("vm| {line}");
            }
        }
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > options.timeout {
            let _ = child.kill();
            let _ = child.wait();
            let _ = echo.join();
            print_tail(&console);
            bail!(
                "the VM did not finish in {} s (console above)",
                options.timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = echo.join();
    let took = started.elapsed().as_secs_f64();
    if let Ok(node) = std::fs::read_to_string(job.path().join("node")) {
        print!("{node}");
    }
    if let Ok(output) = std::fs::read_to_string(job.path().join("output")) {
        print!("{output}");
    }
    let Ok(rc) = std::fs::read_to_string(job.path().join("rc")) else {
        print_tail(&console);
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read as _;
            let _ = e.read_to_string(&mut err);
        }
        bail!("the VM stopped ({status}) without the job's exit code: console above; {err}");
    };
    println!("xtask vm: job done in {took:.0} s (boot included)");
    rc.trim()
        .parse()
        .with_context(|| format!("the job's exit code {rc:?}"))
}

/// QEMU under TCG booting `image`, with the job directory and the checkout over virtio-9p.
fn qemu_command(image: &Image, job: &Path, source: &Path, options: &Options) -> Command {
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args([
        "-machine",
        "q35",
        "-accel",
        "tcg,thread=multi",
        "-cpu",
        "max",
    ])
    .args(["-smp", "2", "-m", &options.memory_mib.to_string()])
    .args(["-nographic", "-no-reboot", "-nic", "none", "-snapshot"])
    .arg("-kernel")
    .arg(&image.kernel)
    .arg("-initrd")
    .arg(&image.initrd)
    .args([
        "-append",
        "root=/dev/vda rw console=ttyS0 quiet systemd.unified_cgroup_hierarchy=1 \
             systemd.show_status=false panic=-1",
    ])
    .arg("-drive")
    .arg(format!(
        "file={},format=raw,if=virtio,cache=unsafe",
        image.rootfs.display()
    ))
    .arg("-virtfs")
    .arg(format!(
        "local,path={},mount_tag=job,security_model=none,id=job",
        job.display()
    ))
    .arg("-virtfs")
    .arg(format!(
        "local,path={},mount_tag=src,security_model=none,id=src",
        source.display()
    ))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    qemu
}

fn print_tail(console: &Path) {
    let text = std::fs::read_to_string(console).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(60)..] {
        println!("vm| {line}");
    }
}

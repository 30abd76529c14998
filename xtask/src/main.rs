//! Project automation, run as `cargo xtask <command>`.
//!
//! - `test`: everything CI runs: the tidy checks, rustfmt, clippy, rustdoc, unit, integration and doc tests, and the
//!   tests that need root and network namespaces.
//! - `tidy`: the architecture's invariants, checked mechanically (ARCHITECTURE.md says which).
//! - `demo`: the main job, end to end, in network namespaces of its own.
//! - `critest`: cri-tools' CRI validation suite against crio-lite (critest is not in Debian 12:
//!   its usage says how to build it offline).
//! - `crictl`: crio-lite's streaming (exec -it in a terminal, exec -i, attach, port-forward)
//!   through an unmodified crictl, built by the caller as critest is.
//! - `bench`: the benchmarks, printed as tables and JSON.
//! - `fresh`: the README's test command in a clean clone, as a new machine runs it.
//! - `fuzz`: the cargo-fuzz targets (config, results, cache entries, CNI_ARGS, CRI requests,
//!   sysctls) for N seconds each.
//! - `faults`: crio-lite's whole fault-injection suite (kill -9 at each step, a second daemon,
//!   FIFOs and devices in every input path, misbehaving plugins).
//! - `dist`: the release binaries with their completions, manual pages, systemd unit and default
//!   configuration in `target/dist/` (a staging root), and the Debian packages built from it in
//!   `target/deb/`; `--check` inspects them (dpkg-deb, systemd-analyze verify, lintian).
//! - `vm`: a cgroup v2 + systemd node in a QEMU virtual machine made from Debian packages, which
//!   runs programs built on the host (the checkout shared at its own path).
//!
//! Each command installs the Debian packages it needs when they are missing and it runs as root, and
//! says so. xtask depends on no workspace crate, so it starts before anything is installed.

mod bench;
mod cmd;
mod crictl;
mod critest;
mod demo;
mod dist;
mod faults;
mod fresh;
mod fuzz;
mod packages;
mod test;
mod tidy;
mod tools;
mod vm;

use anyhow::{Result, bail};

const USAGE: &str =
    "usage: cargo xtask <command> [options]   (cargo xtask <command> --help for more)

commands:
  test     everything CI runs: tidy, rustfmt, clippy, rustdoc, every test (privileged ones too, as root)
  tidy     the architecture's invariants (dependency graph, domain types, who spawns and mounts, lints)
  demo     crio-lite end to end, as root, in network namespaces of its own
  critest  cri-tools' CRI validation suite against crio-lite, as root (critest built by you)
  crictl   Exec, Attach and PortForward through an unmodified crictl (SPDY), as root
  bench    the benchmarks beside their peers, as root
  fresh    the README's test command in a clean clone with no protoc, as a new machine runs it
  faults   crio-lite's fault-injection suite, every row, as root (its fast part is in `test`)
  fuzz     the cargo-fuzz targets for N seconds each, with their executions and crashes
  dist     release binaries, completions, man pages, unit and config in target/dist/, and .deb
           packages in target/deb/ (--check: dpkg-deb, systemd-analyze and lintian verdicts)
  vm       a cgroup v2 + systemd node in a QEMU VM (Debian packages), running host-built binaries";

/// A command's entry point.
type Command = fn(&[String]) -> Result<()>;

fn main() {
    if let Err(err) = run() {
        eprintln!("xtask: error: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let (usage, run): (&str, Command) = match command.as_str() {
        "test" => (test::USAGE, test::run),
        "tidy" => (tidy::USAGE, tidy::run),
        "demo" => (demo::USAGE, demo::run),
        "critest" => (critest::USAGE, critest::run),
        "crictl" => (crictl::USAGE, crictl::run),
        "bench" => (bench::USAGE, bench::run),
        "fresh" => (fresh::USAGE, fresh::run),
        "faults" => (faults::USAGE, faults::run),
        "fuzz" => (fuzz::USAGE, fuzz::run),
        "dist" => (dist::USAGE, dist::run),
        "vm" => (vm::USAGE, vm::run),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return Ok(());
        }
        "" => bail!("no command given\n\n{USAGE}"),
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    };
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        println!("{usage}");
        return Ok(());
    }
    run(&rest)
}

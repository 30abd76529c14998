//! `cargo xtask faults`: the whole fault-injection table of crio-lite.

use anyhow::{Result, bail};

use crate::cmd::{cargo, is_root, run_step};
use crate::packages;

pub(crate) const USAGE: &str = "usage: cargo xtask faults

The fault-injection suite of crio-lite, every row (as root): kill -9 of the daemon at each step of
RunPodSandbox, StopPodSandbox and RemovePodSandbox; a second daemon on the same state dir or
socket; FIFOs and devices in every path the daemon reads; plugins that hang, fork, crash, print
junk or print too much. Each row ends by checking that nothing was lost or leaked, and each table
is printed with every row's outcome and time. `cargo xtask test` runs the fast rows only.
Missing Debian packages are installed with apt-get.";

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(arg) = args.first() {
        bail!("faults: unknown option {arg:?}\n\n{USAGE}");
    }
    if !is_root() {
        bail!(
            "faults: the fault-injection suite needs root (network namespaces, real CNI plugins); \
             run it as root"
        );
    }
    packages::ensure(&packages::network_and_plugin_packages())?;
    run_step(
        "fault-injection suite (every row)",
        cargo()
            .args([
                "test",
                "-p",
                "crio-lite",
                "--test",
                "it",
                "faults::",
                "--",
                "--ignored",
                "--test-threads=2",
                "--nocapture",
            ])
            .env("CRIO_LITE_FAULTS", "full")
            .env("CNI_PRIVILEGED_TESTS", "1"),
    )?;
    println!("\nxtask: every fault row passed");
    Ok(())
}

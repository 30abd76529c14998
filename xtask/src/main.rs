//! Project automation, run as `cargo xtask <command>`.
//!
//! - `test`: everything CI runs: rustfmt, clippy, rustdoc, unit, integration and doc tests, and the
//!   tests that need root and network namespaces.
//! - `demo`: the main job, end to end, in network namespaces of its own.
//! - `bench`: the benchmarks, printed as tables and JSON.
//!
//! Each command installs the Debian packages it needs when they are missing and it runs as root, and
//! says so.

mod bench;
mod cmd;
mod demo;
mod packages;
mod test;

use anyhow::{Result, bail};

const USAGE: &str = "usage: cargo xtask <test|demo|bench> [options]

  test     rustfmt, clippy, rustdoc, every test (privileged ones too, as root)
           --no-privileged   skip the tests that need root and network namespaces
  demo     crio-lite end to end, as root: three pods in a namespace of its own,
           pinged, removed, checked for leaks
  bench    the benchmarks beside their peers, as root
           --quick           fewer pods and repeats
           --only watch|peer|crio one benchmark";

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
    match command.as_str() {
        "test" => test::run(&rest),
        "demo" => demo::run(&rest),
        "bench" => bench::run(&rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        "" => bail!("no command given\n{USAGE}"),
        other => bail!("unknown command {other:?}\n{USAGE}"),
    }
}

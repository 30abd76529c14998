//! Cargo tools the test run uses that the Rust toolchain does not ship, installed from crates.io
//! into `target/tools` the first time they are needed.

use std::path::PathBuf;

use anyhow::{Context as _, Result};

use crate::cmd::{cargo, on_path, run_step, workspace_root};

/// The cargo-machete release the checks are written against; pinned so a new release cannot
/// change what `cargo xtask test` reports.
const MACHETE_VERSION: &str = "0.9.2";

/// The `cargo-machete` binary: one on PATH, else the one in `target/tools`, else installed there
/// now (once per checkout; it takes a few minutes on two cores).
pub(crate) fn cargo_machete() -> Result<PathBuf> {
    if let Some(found) = on_path("cargo-machete") {
        return Ok(found);
    }
    let root = workspace_root().join("target/tools");
    let binary = root.join("bin/cargo-machete");
    if binary.is_file() {
        return Ok(binary);
    }
    println!(
        "\nxtask: cargo-machete is not installed; installing cargo-machete {MACHETE_VERSION} from \
         crates.io into {} (once per checkout)",
        root.display()
    );
    run_step(
        "install cargo-machete",
        cargo()
            .args([
                "install",
                "--locked",
                "--quiet",
                "--version",
                MACHETE_VERSION,
                "--root",
            ])
            .arg(&root)
            .arg("cargo-machete"),
    )
    .context("cannot install cargo-machete (the unused-dependency check needs it)")?;
    Ok(binary)
}

//! Records what `crio-lite version` reports about the build: the git commit and whether the tree
//! was clean, the build date (SOURCE_DATE_EPOCH when set, for reproducible builds), the rustc
//! version and the enabled cargo features. Nothing here fails the build: what cannot be found is
//! reported as "unknown".

use std::path::Path;
use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    let tree = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if changes.is_empty() => "clean",
        Some(_) => "dirty",
        None => "unknown",
    };
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_lowercase().replace('_', "-"))
        })
        .collect();
    features.sort();

    println!("cargo:rustc-env=CRIO_LITE_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=CRIO_LITE_GIT_TREE_STATE={tree}");
    println!("cargo:rustc-env=CRIO_LITE_BUILD_EPOCH={epoch}");
    println!("cargo:rustc-env=CRIO_LITE_RUSTC_VERSION={rustc_version}");
    println!("cargo:rustc-env=CRIO_LITE_FEATURES={}", features.join(","));
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit or checkout changes what is reported; the date alone does not rebuild.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!(
                "cargo:rerun-if-changed={}",
                git_dir.join(head_ref).display()
            );
        }
        println!("cargo:rerun-if-changed={}", git_dir.join("index").display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}

//! Directory listings, executable scripts and mount points.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use test_support::fs::{file_names, is_mount_point, mounts_at_or_below, write_executable};

#[test]
fn file_names_are_sorted_and_a_missing_directory_has_none() {
    let dir = test_support::temp_dir("tsup-names");
    for name in ["b", "a", "c.conf"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    assert_eq!(file_names(dir.path()), ["a", "b", "c.conf"]);
    assert!(file_names(&dir.path().join("missing")).is_empty());
    assert!(
        file_names(&dir.path().join("a")).is_empty(),
        "a file lists nothing"
    );
}

#[test]
fn a_written_script_is_executable_and_runs() {
    let dir = test_support::temp_dir("tsup-script");
    let path = dir.path().join("hello");
    write_executable(&path, "#!/bin/sh\necho hi\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    let out = test_support::process::must(&path.display().to_string(), &[]);
    assert_eq!(out, "hi\n");
}

#[test]
fn the_root_is_a_mount_point_and_a_temporary_directory_is_not() {
    assert!(is_mount_point(Path::new("/")));
    assert!(!mounts_at_or_below(Path::new("/")).is_empty());
    let dir = test_support::temp_dir("tsup-mounts");
    assert!(!is_mount_point(dir.path()));
    assert!(mounts_at_or_below(dir.path()).is_empty());
}

#[test]
fn unique_names_carry_the_pid_and_differ() {
    let pid = std::process::id();
    let a = test_support::unique_name("x");
    let b = test_support::unique_name("x");
    assert_ne!(a, b);
    assert!(a.starts_with(&format!("x-{pid}-")), "{a}");
    let dir = test_support::temp_dir("tsup");
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with(&format!("tsup-{pid}-")), "{name}");
}

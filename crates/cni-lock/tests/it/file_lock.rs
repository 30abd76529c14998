//! FileLock: one exclusive lock on one file, and what it refuses to lock.

use cni_lock::{Error, FileLock};

fn io_error_text(err: &Error) -> String {
    match err {
        Error::Io { source, .. } => source.to_string(),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn held_is_distinct_from_io_errors_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.lock");
    let held = FileLock::try_exclusive(&path).unwrap();
    let err = FileLock::try_exclusive(&path).unwrap_err();
    assert!(
        matches!(&err, Error::Held { path: p } if *p == path),
        "{err}"
    );
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    drop(held);
    let _again = FileLock::try_exclusive(&path).expect("released on drop");
}

#[test]
fn a_fifo_at_the_path_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planted.lock");
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("run mkfifo");
    assert!(status.success());
    // Without O_NONBLOCK this open would wait for a reader forever.
    let err = FileLock::try_exclusive(&path).unwrap_err();
    assert_eq!(io_error_text(&err), "not a regular file");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
}

#[test]
fn a_symlink_at_the_path_is_refused_and_its_target_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    let path = dir.path().join("link.lock");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let err = FileLock::try_exclusive(&path).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(!target.exists(), "the link's target must not be created");
}

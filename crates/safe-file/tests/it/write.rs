//! Writing: atomic replacement with the given mode, nothing left behind on failure.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use safe_file::{AtomicFile, Durability, Error, Symlinks, TempName, read_regular, write_atomic};

use crate::names;

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_write_replaces_the_file_and_leaves_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    for durability in [Durability::Synced, Durability::Unsynced] {
        write_atomic(&path, b"first", 0o600, durability).unwrap();
        write_atomic(&path, b"second", 0o600, durability).unwrap();
        assert_eq!(
            read_regular(&path, 100, Symlinks::Refuse).unwrap(),
            b"second"
        );
        assert_eq!(names(dir.path()), ["state.json"], "no temporary file left");
    }
}

#[test]
fn the_mode_is_honoured_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    // 0666 has bits that any usual umask (022, 077) would take away.
    for mode in [0o600, 0o640, 0o666, 0o400] {
        write_atomic(&path, b"x", mode, Durability::Synced).unwrap();
        assert_eq!(mode_of(&path), mode, "{mode:o}");
    }
    // The old file's mode does not carry over either.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    write_atomic(&path, b"y", 0o600, Durability::Unsynced).unwrap();
    assert_eq!(mode_of(&path), 0o600);
}

#[test]
fn a_failed_rename_removes_the_temporary_file_and_keeps_the_target() {
    let dir = tempfile::tempdir().unwrap();
    // A non-empty directory where the file should go: the rename fails.
    let path = dir.path().join("taken");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("inside"), b"keep").unwrap();
    let err = write_atomic(&path, b"new", 0o600, Durability::Synced).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Io {
                op: "rename into place",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.path(), path);
    assert!(
        err.to_string()
            .starts_with(&format!("{}: cannot rename into place: ", path.display()))
    );
    assert_eq!(names(dir.path()), ["taken"], "the temporary file is gone");
    assert_eq!(names(&path), ["inside"]);
}

#[test]
fn a_missing_directory_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing/f");
    let err = write_atomic(&path, b"x", 0o600, Durability::Synced).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(err.path(), path);
    assert_eq!(names(dir.path()), Vec::<String>::new());
    let err = AtomicFile::create("/", 0o600).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

#[test]
fn an_abandoned_write_leaves_nothing_and_the_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"old").unwrap();
    let mut atomic = AtomicFile::create(&path, 0o600).unwrap();
    atomic.write_all(b"half of the new").unwrap();
    let temp = atomic.temp_path().to_owned();
    assert!(temp.exists());
    drop(atomic);
    assert!(!temp.exists());
    assert_eq!(names(dir.path()), ["f"]);
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
}

#[test]
fn content_can_be_streamed_then_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blob");
    let mut atomic = AtomicFile::create(&path, 0o644).unwrap();
    assert_eq!(atomic.target(), path);
    // Until the commit, readers still see no file.
    std::io::copy(&mut &b"streamed "[..], &mut atomic).unwrap();
    assert!(!path.exists());
    atomic.commit(b"and appended", Durability::Synced).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"streamed and appended");
    assert_eq!(mode_of(&path), 0o644);
}

#[test]
fn concurrent_writers_of_one_file_never_share_a_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let a = AtomicFile::create(&path, 0o600).unwrap();
    let b = AtomicFile::create(&path, 0o600).unwrap();
    assert_ne!(a.temp_path(), b.temp_path());
    for atomic in [&a, &b] {
        let name = atomic.temp_path().file_name().unwrap().to_str().unwrap();
        let parsed = TempName::parse(name).expect("a temporary file name");
        assert_eq!((parsed.target, parsed.pid), ("f", std::process::id()));
    }
    b.commit(b"b", Durability::Unsynced).unwrap();
    a.commit(b"a", Durability::Unsynced).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"a", "the last rename wins");
    assert_eq!(names(dir.path()), ["f"]);
}

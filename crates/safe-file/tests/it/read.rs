//! Reading: only regular files, never blocking, never more than the cap.

use std::os::unix::net::UnixListener;
use std::path::Path;

use safe_file::{Error, FileKind, Symlinks, open_regular, read_regular};

use crate::{fifo, within};

fn not_regular_kind(err: &Error) -> Option<FileKind> {
    match err {
        Error::NotRegular { kind, .. } => Some(*kind),
        _ => None,
    }
}

#[test]
fn a_fifo_is_refused_without_blocking_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = fifo(dir.path(), "planted");
    for symlinks in [Symlinks::Follow, Symlinks::Refuse] {
        let p = path.clone();
        let err = within(move || read_regular(&p, 1 << 20, symlinks).unwrap_err());
        assert_eq!(not_regular_kind(&err), Some(FileKind::Fifo), "{err}");
        assert_eq!(
            err.to_string(),
            format!("{}: not a regular file (fifo)", path.display())
        );
        assert_eq!(err.path(), path);
    }
    // A link to the FIFO, followed, is refused as the FIFO it leads to.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let err = within(move || open_regular(&link, Symlinks::Follow).unwrap_err());
    assert_eq!(not_regular_kind(&err), Some(FileKind::Fifo), "{err}");
}

#[test]
fn a_symlink_is_followed_or_refused_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real");
    std::fs::write(&target, b"content").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    assert_eq!(
        read_regular(&link, 100, Symlinks::Follow).unwrap(),
        b"content"
    );
    let err = read_regular(&link, 100, Symlinks::Refuse).unwrap_err();
    assert_eq!(not_regular_kind(&err), Some(FileKind::Symlink), "{err}");
    assert_eq!(
        err.to_string(),
        format!("{}: not a regular file (symbolic link)", link.display())
    );
    // A dangling link is missing when followed, a link when refused.
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("none"), &dangling).unwrap();
    assert!(
        read_regular(&dangling, 100, Symlinks::Follow)
            .unwrap_err()
            .is_not_found()
    );
    let err = read_regular(&dangling, 100, Symlinks::Refuse).unwrap_err();
    assert_eq!(not_regular_kind(&err), Some(FileKind::Symlink), "{err}");
    // Links in the directories above are followed either way.
    let dir_link = dir.path().join("dir-link");
    std::os::unix::fs::symlink(dir.path(), &dir_link).unwrap();
    assert_eq!(
        read_regular(&dir_link.join("real"), 100, Symlinks::Refuse).unwrap(),
        b"content"
    );
}

#[test]
fn sockets_devices_and_directories_are_refused_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let cases = [
        (socket.as_path(), FileKind::Socket),
        (Path::new("/dev/null"), FileKind::CharDevice),
        (Path::new("/dev/zero"), FileKind::CharDevice),
        (dir.path(), FileKind::Directory),
    ];
    for (path, kind) in cases {
        let err = read_regular(path, 10, Symlinks::Follow).unwrap_err();
        assert_eq!(not_regular_kind(&err), Some(kind), "{err}");
        assert_eq!(err.path(), path);
    }
}

#[test]
fn the_cap_is_the_callers_and_bounds_what_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    assert_eq!(
        read_regular(&path, 8192, Symlinks::Refuse).unwrap().len(),
        8192
    );
    let err = read_regular(&path, 4096, Symlinks::Refuse).unwrap_err();
    assert!(matches!(err, Error::TooLarge { limit: 4096, .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("{}: larger than 4 KiB", path.display())
    );
    let io = err.into_io();
    assert_eq!(io.kind(), std::io::ErrorKind::FileTooLarge);
    assert_eq!(io.to_string(), "larger than 4 KiB");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(
        read_regular(&empty, 0, Symlinks::Refuse)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_missing_file_is_not_found_and_keeps_its_os_error() {
    let err =
        read_regular(Path::new("/nonexistent/safe-file/x"), 10, Symlinks::Follow).unwrap_err();
    assert!(err.is_not_found());
    assert!(matches!(err, Error::Io { op: "open", .. }), "{err}");
    assert_eq!(err.into_io().raw_os_error(), Some(libc::ENOENT));
}

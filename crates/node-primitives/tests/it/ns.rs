//! Namespace pins: the unprivileged checks, then pinning for real (root).

use std::ffi::OsStr;
use std::os::fd::AsFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use node_primitives::ns::{self, Existing, NsKind, Pins};
use node_primitives::{Error, PinStep, mounts};

#[test]
fn namespace_files_are_told_by_kind_and_plain_files_are_none() {
    assert!(ns::is_namespace(Path::new("/proc/self/ns/net"), NsKind::Net).unwrap());
    assert!(ns::is_namespace(Path::new("/proc/self/ns/uts"), NsKind::Uts).unwrap());
    assert!(!ns::is_namespace(Path::new("/proc/self/ns/uts"), NsKind::Net).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("stale");
    std::fs::write(&plain, b"").unwrap();
    assert!(!ns::is_namespace(&plain, NsKind::Net).unwrap());
    let missing = ns::is_namespace(&dir.path().join("gone"), NsKind::Net).unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    assert!(ns::open_namespace(&plain).unwrap().is_none());
    let own = ns::open_namespace(Path::new("/proc/self/ns/ipc"))
        .unwrap()
        .unwrap();
    assert_eq!(ns::namespace_kind(own.as_fd()).unwrap(), Some(NsKind::Ipc));
}

#[test]
fn unpinning_what_is_not_there_or_a_bare_file_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!ns::unpin(&dir.path().join("never-created")).unwrap());
    assert!(!ns::unpin(&dir.path().join("no/such/dir/ns")).unwrap());
    let stale = dir.path().join("after-reboot");
    std::fs::write(&stale, b"").unwrap();
    assert!(ns::unpin(&stale).unwrap());
    assert!(!stale.exists());
}

#[test]
fn pin_files_are_refused_or_reused_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pin");
    assert!(ns::create_file(&path, Existing::Refuse).unwrap());
    let again = ns::create_file(&path, Existing::Refuse).unwrap_err();
    assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(!ns::create_file(&path, Existing::Reuse).unwrap());
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(
        ns::create_file(&link, Existing::Reuse).is_err(),
        "no link followed"
    );
}

#[test]
fn a_pid_namespace_cannot_be_made_for_a_pin() {
    let dir = tempfile::tempdir().unwrap();
    let err = Pins::new(dir.path())
        .pin_new(
            &[(NsKind::Pid, OsStr::new("pid"))],
            Existing::Refuse,
            || Ok(()),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::Pin { step: PinStep::Unshare, path, .. } if path.ends_with("pid")),
        "{err}"
    );
    assert!(!dir.path().join("pid").exists());
}

fn privileged() {
    assert!(
        rustix::process::geteuid().is_root(),
        "CNI_PRIVILEGED_TESTS asks for the privileged tests: run them as root"
    );
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn new_namespaces_are_pinned_set_up_and_unpinned() {
    privileged();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap().join("pins");
    let pins = Pins::shared(&dir);
    let hostname = "pinned-host";
    pins.pin_new(
        &[
            (NsKind::Net, OsStr::new("net")),
            (NsKind::Uts, OsStr::new("uts")),
        ],
        Existing::Refuse,
        || rustix::system::sethostname(hostname.as_bytes()).map_err(Into::into),
    )
    .unwrap();
    assert!(
        mounts::is_mount_point(&dir).unwrap(),
        "the directory is a mount point"
    );
    let table = mounts::read_own().unwrap();
    let own = table.iter().rfind(|m| m.mount_point == dir).unwrap();
    assert!(
        own.optional.iter().any(|o| o.starts_with("shared:")),
        "shared: {own:?}"
    );
    let (net, uts) = (pins.path("net"), pins.path("uts"));
    assert!(ns::is_namespace(&net, NsKind::Net).unwrap());
    assert!(ns::is_namespace(&uts, NsKind::Uts).unwrap());
    assert!(!ns::is_namespace(&net, NsKind::Uts).unwrap());
    assert!(mounts::is_mount_point(&net).unwrap());
    // the caller's own namespaces did not move
    assert!(ns::is_namespace(Path::new("/proc/self/ns/net"), NsKind::Net).unwrap());
    assert_ne!(
        std::fs::metadata(&net).unwrap().ino(),
        std::fs::metadata("/proc/self/ns/net").unwrap().ino()
    );
    // the hostname is the pinned UTS namespace's, not ours
    assert_ne!(
        rustix::system::uname().nodename().to_bytes(),
        hostname.as_bytes()
    );

    // a pin is never stacked on
    let err = pins
        .pin_new(
            &[(NsKind::Net, OsStr::new("net"))],
            Existing::Refuse,
            || Ok(()),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::Pin { step: PinStep::CreateFile, source, .. }
            if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{err}"
    );
    assert!(ns::is_namespace(&net, NsKind::Net).unwrap(), "left alone");

    for pin in [&net, &uts] {
        assert!(ns::unpin(pin).unwrap());
        assert!(!pin.exists());
        assert!(!ns::unpin(pin).unwrap());
    }
    pins.release().unwrap();
    assert!(!mounts::is_mount_point(&dir).unwrap());
    pins.release().unwrap();
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_failed_set_up_leaves_nothing() {
    privileged();
    let tmp = tempfile::tempdir().unwrap();
    let pins = Pins::new(tmp.path());
    let err = pins
        .pin_new(
            &[
                (NsKind::Ipc, OsStr::new("ipc")),
                (NsKind::Uts, OsStr::new("uts")),
            ],
            Existing::Reuse,
            || Err(std::io::Error::other("no hostname")),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::Pin { step: PinStep::Setup, path, .. } if path.ends_with("uts")),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "cannot set up the namespace of {}: no hostname",
            pins.path("uts").display()
        )
    );
    assert!(!pins.path("ipc").exists() && !pins.path("uts").exists());
    assert!(
        !mounts::is_mount_point(tmp.path()).unwrap(),
        "not made shared"
    );
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_processs_namespace_is_pinned_from_its_descriptor() {
    privileged();
    let tmp = tempfile::tempdir().unwrap();
    let pins = Pins::new(tmp.path());
    let own = std::fs::File::open("/proc/self/ns/pid").unwrap();
    let pin = pins.pin_from(own.as_fd(), "pid", Existing::Reuse).unwrap();
    assert!(ns::is_namespace(&pin, NsKind::Pid).unwrap());
    assert_eq!(
        std::fs::metadata(&pin).unwrap().ino(),
        own.metadata().unwrap().ino()
    );
    assert!(ns::unpin(&pin).unwrap());
    assert!(!pin.exists());
}

/// Unpins and releases on drop, so a failing test leaves no mount behind.
struct PinGuard(Pins, Vec<std::path::PathBuf>);

impl Drop for PinGuard {
    fn drop(&mut self) {
        for pin in &self.1 {
            let _ = ns::unpin(pin);
        }
        let _ = self.0.release();
    }
}

#[test]
#[ignore = "needs root + netns: cargo xtask test"]
fn a_connection_is_opened_on_the_loopback_of_a_pinned_namespace() {
    use std::io::{Read as _, Write as _};
    use std::net::{Ipv4Addr, TcpListener};
    use std::sync::Mutex;
    use std::time::Duration;

    privileged();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap().join("pins");
    let pins = Pins::new(&dir);
    let net = pins.path("net");
    let guard = PinGuard(pins.clone(), vec![net.clone()]);
    // The listener is made inside the new namespace (a socket keeps the namespace it was made
    // in), and so is `ip`, a child of the thread that entered it.
    let listener: Mutex<Option<TcpListener>> = Mutex::new(None);
    pins.pin_new(
        &[(NsKind::Net, OsStr::new("net"))],
        Existing::Refuse,
        || {
            let up = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status()?;
            if !up.success() {
                return Err(std::io::Error::other("ip link set lo up failed"));
            }
            *listener.lock().unwrap() = Some(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?);
            Ok(())
        },
    )
    .unwrap();
    let listener = listener.into_inner().unwrap().unwrap();
    let port = listener.local_addr().unwrap().port();
    // the same port on the test's own loopback is (almost surely) free: only the pod's answers
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = [0u8; 4];
        conn.read_exact(&mut got).unwrap();
        conn.write_all(b"pong").unwrap();
        got
    });

    let mut stream = ns::connect_loopback(&net, port, Duration::from_secs(5)).unwrap();
    stream.write_all(b"ping").unwrap();
    let mut answer = [0u8; 4];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"pong");
    assert_eq!(&server.join().unwrap(), b"ping");
    // the caller's thread is still in the machine's namespace
    assert_ne!(
        std::fs::metadata(&net).unwrap().ino(),
        std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino()
    );

    // nothing listens any more: both addresses tried, refused
    let err = ns::connect_loopback(&net, port, Duration::from_secs(5)).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&net.display().to_string())
            && text.contains(&format!("127.0.0.1:{port}"))
            && text.contains(&format!("[::1]:{port}")),
        "{text}"
    );
    assert_eq!(err.into_io().kind(), std::io::ErrorKind::ConnectionRefused);
    drop(guard);
}

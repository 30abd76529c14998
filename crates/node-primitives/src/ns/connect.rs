//! A TCP connection opened from inside a network namespace, as a port forward needs one: the
//! socket is made in the namespace (so `127.0.0.1` is the pod's loopback), then used from any
//! thread of the caller's, in whatever namespace that thread is.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::fd::AsFd as _;
use std::path::Path;
use std::time::Duration;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use crate::error::{Error, Result};
use crate::ns::{NsKind, namespace_kind, open_namespace};

/// Opens a TCP connection to `port` on the loopback address inside the network namespace pinned
/// at `netns`: `127.0.0.1` first, then `[::1]`, as containerd's CRI port forward dials
/// `tcp4` then `tcp6` to `localhost`. Each attempt is given `timeout`.
///
/// A thread of its own enters the namespace (`setns(2)`), connects and ends; the caller's
/// thread never moves, and no thread that moved is ever reused. The returned stream is a
/// socket like any other: hand it to tokio with `TcpStream::from_std` (after
/// `set_nonblocking(true)`).
///
/// # Errors
///
/// [`Error::Connect`] naming the namespace and the port: it cannot be opened or is no network
/// namespace, it cannot be entered, the thread cannot start, or neither address accepts the
/// connection (the IPv4 error kept, `ConnectionRefused` when nothing listens).
pub fn connect_loopback(netns: &Path, port: u16, timeout: Duration) -> Result<TcpStream> {
    let err = |what: String, source: io::Error| Error::Connect {
        netns: netns.to_owned(),
        port,
        what,
        source,
    };
    let ns = open_namespace(netns)
        .map_err(|e| err("cannot open the namespace".to_owned(), e))?
        .ok_or_else(|| {
            err(
                "not a namespace".to_owned(),
                io::Error::from(io::ErrorKind::InvalidInput),
            )
        })?;
    // Kernels before 4.11 cannot tell the kind; setns below still refuses another kind.
    if let Ok(Some(kind)) = namespace_kind(ns.as_fd())
        && kind != NsKind::Net
    {
        return Err(err(
            format!("a {} namespace, not a network one", kind.proc_name()),
            io::Error::from(io::ErrorKind::InvalidInput),
        ));
    }
    let job = move || -> std::result::Result<TcpStream, (String, io::Error)> {
        move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network))
            .map_err(|e| ("cannot enter the namespace".to_owned(), e.into()))?;
        let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let first = match TcpStream::connect_timeout(&v4, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => e,
        };
        let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
        TcpStream::connect_timeout(&v6, timeout).map_err(|second| {
            (
                format!("cannot connect to {v4} ({first}) or to {v6} ({second})"),
                first,
            )
        })
    };
    let handle = std::thread::Builder::new()
        .name("netns-connect".to_owned())
        .spawn(job)
        .map_err(|e| err("cannot start a thread to enter it".to_owned(), e))?;
    match handle.join() {
        // The thread ends here, in the namespace it entered: nothing else ever runs on it.
        Ok(done) => done.map_err(|(what, source)| err(what, source)),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_no_namespace_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"").unwrap();
        let e = connect_loopback(&file, 80, Duration::from_secs(1)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("plain") && text.contains("port 80"), "{text}");
        assert!(text.contains("not a namespace"), "{text}");

        let e = connect_loopback(&dir.path().join("none"), 80, Duration::from_secs(1)).unwrap_err();
        assert!(e.is_not_found(), "{e}");
    }

    #[test]
    fn another_kind_of_namespace_is_refused() {
        let e = connect_loopback(Path::new("/proc/self/ns/uts"), 80, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a uts namespace, not a network one"), "{e}");
    }
}

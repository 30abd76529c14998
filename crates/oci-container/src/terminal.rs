//! Pseudo-terminals for interactive execs: one of our own for a runtime that proxies its own
//! terminal (runc), or the container's, received from the runtime over a console socket
//! (`SCM_RIGHTS`, crun); either way a master we read, write and resize.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use rustix::pty::OpenptFlags;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A terminal's size in character cells, as a client's resize message gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// Opens a new pseudo-terminal: `(master, slave)`, neither made anyone's controlling terminal.
pub(crate) fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let slave = rustix::pty::ioctl_tiocgptpeer(
        &master,
        OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
    )?;
    Ok((master, slave))
}

/// Sets the size of the terminal whose master (or slave) is `fd` (`TIOCSWINSZ`); the kernel
/// sends SIGWINCH to its foreground process group when the size changed.
pub(crate) fn set_size(fd: impl AsFd, size: TerminalSize) -> io::Result<()> {
    let winsize = rustix::termios::Winsize {
        ws_row: size.height,
        ws_col: size.width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    Ok(rustix::termios::tcsetwinsize(fd, winsize)?)
}

/// Receives the one descriptor a runtime sends on an accepted console-socket connection and
/// checks it is a terminal. Other descriptors sent along are closed.
pub(crate) async fn receive_console(stream: &tokio::net::UnixStream) -> io::Result<OwnedFd> {
    loop {
        stream.readable().await?;
        match stream.try_io(tokio::io::Interest::READABLE, || receive_fd(stream)) {
            Ok(fd) => {
                if !rustix::termios::isatty(&fd) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the runtime sent a descriptor that is not a terminal",
                    ));
                }
                return Ok(fd);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

fn receive_fd(socket: impl AsFd) -> io::Result<OwnedFd> {
    // runc and crun send the terminal's name as the data; only the descriptor matters
    let mut data = [0u8; 256];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        socket,
        &mut [io::IoSliceMut::new(&mut data)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut found = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for fd in fds {
                found.get_or_insert(fd);
            }
        }
    }
    found.ok_or_else(|| {
        let what = if got.bytes == 0 {
            "the runtime closed the console socket without sending a terminal"
        } else {
            "the runtime's console-socket message carries no descriptor"
        };
        io::Error::new(io::ErrorKind::UnexpectedEof, what)
    })
}

/// `fd` (non-blocking) registered with the tokio reactor; needs one.
pub(crate) fn watch(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns the descriptor: it stays open, and the same, until the AsyncFd
    // is dropped, and nothing here swaps it through `get_mut`.
    unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// A terminal master, read and written without blocking the executor. Reading it after every
/// slave was closed (the command and whatever held its terminal are gone) is the end: `EIO`
/// reads as EOF.
#[derive(Clone)]
pub(crate) struct Master(Arc<AsyncFd<OwnedFd>>);

impl Master {
    /// Takes `fd`, made non-blocking; needs a tokio reactor.
    pub(crate) fn new(fd: OwnedFd) -> io::Result<Master> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        Ok(Master(Arc::new(watch(fd)?)))
    }

    pub(crate) fn resize(&self, size: TerminalSize) -> io::Result<()> {
        set_size(self.0.get_ref(), size)
    }
}

impl AsyncRead for Master {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *unfilled)?)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Poll::Ready(Ok(())),
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for Master {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), buf)?)) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::BorrowedFd;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn a_master_carries_bytes_both_ways_resizes_and_ends_with_its_slave() {
        let (master, slave) = open_pty().unwrap();
        let mut m = Master::new(master).unwrap();
        m.resize(TerminalSize {
            width: 100,
            height: 40,
        })
        .unwrap();
        let size = rustix::termios::tcgetwinsize(&slave).unwrap();
        assert_eq!((size.ws_row, size.ws_col), (40, 100));

        rustix::termios::tcsetattr(&slave, rustix::termios::OptionalActions::Now, &{
            let mut t = rustix::termios::tcgetattr(&slave).unwrap();
            t.make_raw();
            t
        })
        .unwrap();
        m.write_all(b"in").await.unwrap();
        let mut got = [0u8; 2];
        let n = rustix::io::read(&slave, &mut got).unwrap();
        assert_eq!(&got[..n], b"in");
        rustix::io::write(&slave, b"out").unwrap();
        let mut got = [0u8; 3];
        m.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"out");

        drop(slave);
        let mut rest = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(5), m.read_to_end(&mut rest))
            .await
            .expect("the master reads EOF once the slave is gone")
            .unwrap();
        assert!(rest.is_empty());
    }

    /// Sends `fd` over `socket` as a runtime sends its console.
    fn send_fd(socket: impl AsFd, fd: BorrowedFd<'_>) {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
        let fds = [fd];
        assert!(control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            socket,
            &[io::IoSlice::new(b"/dev/pts/x")],
            &mut control,
            rustix::net::SendFlags::empty(),
        )
        .unwrap();
    }

    #[tokio::test]
    async fn a_console_socket_yields_the_terminal_sent_over_it() {
        let (runtime, ours) = tokio::net::UnixStream::pair().unwrap();
        let (master, _slave) = open_pty().unwrap();
        send_fd(&runtime, master.as_fd());
        let got = receive_console(&ours).await.unwrap();
        assert!(rustix::termios::isatty(&got));

        // a plain file is refused; a socket closed without a descriptor says so
        let (runtime, ours) = tokio::net::UnixStream::pair().unwrap();
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        send_fd(&runtime, file.as_fd());
        let err = receive_console(&ours).await.unwrap_err();
        assert!(err.to_string().contains("not a terminal"), "{err}");
        let (runtime, ours) = tokio::net::UnixStream::pair().unwrap();
        drop(runtime);
        let err = receive_console(&ours).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}

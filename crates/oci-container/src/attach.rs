//! Attaching to a container's main process through its conmon, as CRI-O does (conmon 2.1's
//! src/conn_sock.c, src/ctr_stdio.c, src/ctrl.c):
//!
//! - conmon binds a `SOCK_SEQPACKET` socket `attach` in the bundle (reached through the link
//!   `<--socket-dir-path>/<id>` it makes; paths past `sun_path`'s 108 bytes are reached through
//!   `/proc/self/fd/<dir>/attach`, as conmon binds it). Every attacher gets all output from the
//!   moment conmon accepts it: each message is one read of the container's stdout or stderr,
//!   its first byte saying which (2 stdout, 3 stderr). What an attacher sends goes to the
//!   container's stdin, if conmon was given `--stdin`.
//! - An attacher's EOF (it shut down its writing side, or closed) makes conmon close the
//!   container's stdin, unless it was started with `--leave-stdin-open`: a `stdin_once`
//!   container's stdin ends with the first attacher that leaves.
//! - conmon keeps writing the log meanwhile: attaching changes nothing there.
//! - A resize is `1 <height> <width>\n` on the `ctl` FIFO in the bundle.

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::net::{
    AddressFamily, RecvFlags, SendFlags, Shutdown, SocketAddrUnix, SocketFlags, SocketType,
};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::error::{Error, Result, validate_id};
use crate::monitor::write_control;
use crate::runtime::Runtime;
use crate::streams::{Output, Streams, next_size};
use crate::terminal::{TerminalSize, watch};

/// conmon reads at most `CONN_SOCK_BUF_SIZE - 1` (32767) bytes of a message and drops the rest;
/// input is sent in pieces well below that.
const INPUT_CHUNK: usize = 8192;
/// The largest message conmon sends: the stream byte and one read of `STDIO_BUF_SIZE` (8192).
const OUTPUT_MESSAGE: usize = 8192 + 1;
/// conmon's stream bytes (`stdpipe_t`: `NO_PIPE`, `STDIN_PIPE`, `STDOUT_PIPE`, `STDERR_PIPE`;
/// CRI-O's `AttachPipeStdout` and `AttachPipeStderr`).
const STDOUT: u8 = 2;
const STDERR: u8 = 3;

impl Runtime {
    /// Attaches `streams` to the container's main process through its conmon until the
    /// process's output ends (it exited and conmon closed the socket), or the caller detaches:
    /// its stdin ended, unless the container is `stdin_once` (whose stdin that EOF closes: its
    /// output goes on until the process ends), or it wants no output. Several attachers may
    /// be attached at once, each seeing all output from when it attached.
    ///
    /// The caller's stdin goes to the process's (only if the container was created with
    /// [`ContainerStdio::stdin`](crate::ContainerStdio)); its EOF, as much as dropping the
    /// returned future, ends this attacher's input, which closes the process's stdin for a
    /// `stdin_once` container (conmon's rule). Sizes from `streams.resize` resize the
    /// container's terminal, if it has one (they are ignored otherwise).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; [`Error::File`] or [`Error::Corrupt`] when the record cannot be
    /// read (not found for a container this runtime does not have); [`Error::NotRunning`] when
    /// its conmon is gone (no attach socket, or nobody accepts on it); [`Error::Io`] naming
    /// the socket; [`Error::Stream`] when a stream fails (a caller's stdout that cannot be
    /// written, the socket broken).
    pub async fn attach(&self, id: &str, streams: Streams) -> Result<()> {
        validate_id(id)?;
        let rec = self.record(id)?;
        let socket = connect(id, &rec.bundle)?;
        let ctl = rec.bundle.join("ctl");
        let Streams {
            stdin,
            mut stdout,
            mut stderr,
            mut resize,
        } = streams;
        let wants_output = stdout.is_some() || stderr.is_some();
        let output = async {
            let mut buf = vec![0u8; OUTPUT_MESSAGE];
            loop {
                let n = receive(&socket, &mut buf)
                    .await
                    .map_err(|e| Error::stream(id, "read from conmon's attach socket", e))?;
                let Some((&kind, data)) = buf[..n].split_first() else {
                    return Ok(());
                };
                let to: Option<&mut Output> = match kind {
                    STDOUT => stdout.as_mut(),
                    STDERR => stderr.as_mut(),
                    _ => None,
                };
                if let Some(to) = to
                    && !data.is_empty()
                {
                    let written = async {
                        to.write_all(data).await?;
                        to.flush().await
                    };
                    written
                        .await
                        .map_err(|e| Error::stream(id, "write the attached output", e))?;
                }
            }
        };
        // whether the caller had a stdin, which ended
        let input = async {
            let Some(mut stdin) = stdin else {
                return Ok(false);
            };
            let mut buf = vec![0u8; INPUT_CHUNK];
            loop {
                let n = stdin
                    .read(&mut buf)
                    .await
                    .map_err(|e| Error::stream(id, "read the attached stdin", e))?;
                if n == 0 {
                    break;
                }
                send(&socket, &buf[..n])
                    .await
                    .map_err(|e| Error::stream(id, "write to conmon's attach socket", e))?;
            }
            // conmon reads this as the attacher's EOF: stdin closed unless left open.
            rustix::net::shutdown(socket.get_ref(), Shutdown::Write).map_err(|e| {
                Error::stream(id, "close stdin on conmon's attach socket", e.into())
            })?;
            Ok(true)
        };
        tokio::pin!(output, input);
        let mut input_done = false;
        loop {
            tokio::select! {
                done = &mut output => return done,
                done = &mut input, if !input_done => {
                    let had_stdin = done?;
                    input_done = true;
                    // Without stdin_once the caller's EOF is a detach (crictl's ctrl-p ctrl-q,
                    // docker's): the process runs on, its stdin open for the next attacher.
                    // With it, conmon closed the process's stdin: its last output still comes.
                    tracing::debug!(container = id, had_stdin, "attacher's input ended");
                    if !wants_output || (had_stdin && !rec.stdio.stdin_once) {
                        return Ok(());
                    }
                }
                size = next_size(&mut resize) => {
                    if rec.stdio.terminal
                        && let Err(e) = resize_through(id, &ctl, size)
                    {
                        tracing::debug!(container = id, error = %e, "resize not passed on");
                    }
                }
            }
        }
    }

    /// Resizes the terminal of the container `id` (created with
    /// [`ContainerStdio::terminal`](crate::ContainerStdio)) through its conmon's control FIFO.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`]; those of reading the record; [`Error::InvalidConfig`] when the
    /// container has no terminal; [`Error::NotRunning`] when its conmon has exited;
    /// [`Error::Io`] or [`Error::Corrupt`] naming the FIFO.
    pub fn resize_terminal(&self, id: &str, size: TerminalSize) -> Result<()> {
        validate_id(id)?;
        let rec = self.record(id)?;
        if !rec.stdio.terminal {
            return Err(Error::config(id, "resize: the container has no terminal"));
        }
        resize_through(id, &rec.bundle.join("ctl"), size)
    }
}

fn resize_through(id: &str, ctl: &Path, size: TerminalSize) -> Result<()> {
    let message = format!("1 {} {}\n", size.height, size.width);
    write_control(id, ctl, message.as_bytes())
}

/// Connects to `<bundle>/attach`, through `/proc/self/fd` so a long bundle path still fits.
fn connect(id: &str, bundle: &Path) -> Result<AsyncFd<OwnedFd>> {
    let path = bundle.join("attach");
    let io_err = |op, e: io::Error| Error::io(id, op, &path, e);
    let dir = rustix::fs::open(
        bundle,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open the bundle of", e.into()))?;
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| io_err("create a socket for", e.into()))?;
    let via = format!("/proc/self/fd/{}/attach", dir.as_raw_fd());
    let addr = SocketAddrUnix::new(via.as_str()).map_err(|e| io_err("address", e.into()))?;
    match rustix::net::connect(&socket, &addr) {
        Ok(()) => {}
        Err(e @ (rustix::io::Errno::NOENT | rustix::io::Errno::CONNREFUSED)) => {
            tracing::debug!(container = id, error = %e, "no attach socket");
            return Err(Error::NotRunning {
                container: id.to_owned(),
                state: "its conmon has exited".to_owned(),
            });
        }
        Err(e) => return Err(io_err("connect to", e.into())),
    }
    watch(socket).map_err(|e| io_err("watch", e))
}

/// One message; 0 at EOF (conmon never sends an empty one).
async fn receive(socket: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        let mut ready = socket.readable().await?;
        match ready
            .try_io(|fd| Ok(rustix::net::recv(fd.get_ref(), &mut *buf, RecvFlags::empty())?.0))
        {
            Ok(got) => return got,
            Err(_would_block) => {}
        }
    }
}

/// Sends `data` as one message (never an empty one: conmon would take it for EOF).
async fn send(socket: &AsyncFd<OwnedFd>, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    loop {
        let mut ready = socket.writable().await?;
        match ready.try_io(|fd| Ok(rustix::net::send(fd.get_ref(), data, SendFlags::NOSIGNAL)?)) {
            Ok(sent) => return sent.map(drop),
            Err(_would_block) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn attaching_where_conmon_is_gone_says_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let err = connect("c1", dir.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "container c1: not running (its conmon has exited)"
        );
        // a socket file nobody listens on (conmon died)
        let path = dir.path().join("attach");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let err = connect("c1", dir.path()).unwrap_err();
        assert!(matches!(err, Error::NotRunning { .. }), "{err}");
    }

    #[tokio::test]
    async fn messages_are_split_by_stream_and_input_is_sent_whole() {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )
        .unwrap();
        let ours = watch(ours).unwrap();
        rustix::net::send(&theirs, b"\x02out", SendFlags::empty()).unwrap();
        let mut buf = [0u8; OUTPUT_MESSAGE];
        let n = receive(&ours, &mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"\x02out");
        send(&ours, b"typed").await.unwrap();
        send(&ours, b"").await.unwrap();
        let mut got = [0u8; 16];
        let (n, _) = rustix::net::recv(&theirs, &mut got[..], RecvFlags::empty()).unwrap();
        assert_eq!(&got[..n], b"typed");
        drop(theirs);
        assert_eq!(receive(&ours, &mut buf).await.unwrap(), 0);
    }
}

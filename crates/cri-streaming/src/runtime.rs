//! The seam between the streaming server and a container runtime: the three operations a
//! runtime plugs in, and the byte streams it is handed.
//!
//! The server owns the wire (SPDY or WebSocket, channels, resize messages, the exit status on
//! the error stream); the runtime owns the process. Each operation is a future the server
//! drives for as long as the client is connected. When the client goes away, the stream idles
//! out or the server shuts down, the server **drops** the future: an implementation must make
//! dropping it end what it started (kill an exec'd process and its group, close its side of an
//! attach socket), so nothing outlives the stream.

use std::io;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::resize::TerminalSize;

/// A byte source handed to the runtime (the client's stdin).
pub type Reader = Pin<Box<dyn AsyncRead + Send>>;

/// A byte sink handed to the runtime (the client's stdout or stderr). Writes wait while the
/// client is slow to read: the server's buffers are bounded, so a runtime that copies into it
/// is held back instead of growing the daemon's memory.
pub type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// A connection into a pod, both ways (what [`StreamRuntime::port_forward`] returns).
pub trait Duplex: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Duplex for T {}

/// The client's streams for one exec or attach. A stream the client did not ask for is `None`.
/// With a TTY there is no `stderr` (the terminal carries both) and `resize` delivers the
/// client's terminal sizes, the first one as soon as the client sends it.
pub struct Streams {
    /// What the client types; ends (EOF) when the client closes its stdin.
    pub stdin: Option<Reader>,
    /// The process's standard output (or the terminal, with a TTY).
    pub stdout: Option<Writer>,
    /// The process's standard error; `None` with a TTY.
    pub stderr: Option<Writer>,
    /// Terminal sizes, with a TTY; the sender is dropped when the client's resize stream ends.
    pub resize: Option<mpsc::Receiver<TerminalSize>>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .field("resize", &self.resize.is_some())
            .finish()
    }
}

/// An exec request as CRI's `ExecRequest` carries it, checked by the runtime when the URL was
/// handed out and stored behind its token until the client comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The container to run the command in.
    pub container_id: String,
    /// The command and its arguments.
    pub cmd: Vec<String>,
    /// Whether the command runs on a terminal.
    pub tty: bool,
    /// Whether the client sends stdin.
    pub stdin: bool,
    /// Whether the client wants stdout.
    pub stdout: bool,
    /// Whether the client wants stderr (never with `tty`).
    pub stderr: bool,
}

/// An attach request as CRI's `AttachRequest` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachRequest {
    /// The container whose main process to join.
    pub container_id: String,
    /// Whether the container was created with a terminal.
    pub tty: bool,
    /// Whether the client sends stdin.
    pub stdin: bool,
    /// Whether the client wants stdout.
    pub stdout: bool,
    /// Whether the client wants stderr (never with `tty`).
    pub stderr: bool,
}

/// A port forward request as CRI's `PortForwardRequest` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortForwardRequest {
    /// The pod whose network namespace the ports are in.
    pub pod_sandbox_id: String,
    /// The ports the client may open, as the request listed them; empty means any (the port
    /// comes with each stream then, as kubelet allows).
    pub ports: Vec<u16>,
}

/// Why an operation failed, as the client is told on the error stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The container or pod is gone or not running.
    #[error("{0}")]
    NotFound(String),
    /// The operation could not be carried out (the runtime's own message).
    #[error("{0}")]
    Failed(String),
    /// Reading or writing one of the streams failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: io::Error,
    },
}

/// What a container runtime plugs into the streaming server.
#[async_trait::async_trait]
pub trait StreamRuntime: Send + Sync + 'static {
    /// Runs `req.cmd` in the container with the given streams until it exits, and returns its
    /// exit code. Dropping the future kills the command (and what it started).
    async fn exec(&self, req: ExecRequest, streams: Streams) -> Result<i32, RuntimeError>;

    /// Joins the container's main process until it exits or the client detaches (stdin
    /// closed and output no longer wanted). Dropping the future detaches.
    async fn attach(&self, req: AttachRequest, streams: Streams) -> Result<(), RuntimeError>;

    /// Opens a TCP connection to `localhost:port` inside the pod's network namespace. The
    /// server copies bytes both ways and closes it when the client's streams end.
    async fn port_forward(
        &self,
        pod_sandbox_id: &str,
        port: u16,
    ) -> Result<Box<dyn Duplex>, RuntimeError>;
}

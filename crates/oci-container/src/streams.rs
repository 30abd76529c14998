//! The byte streams an interactive exec or an attach is given: a caller's stdin, stdout and
//! stderr (any `AsyncRead`/`AsyncWrite`: a streaming server's channels, a test's pipes) and
//! the terminal sizes it asks for.

use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use crate::terminal::TerminalSize;

/// A byte source: what the caller types.
pub type Input = Pin<Box<dyn AsyncRead + Send>>;
/// A byte sink: where the process's output goes.
pub type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// The caller's side of an exec or an attach. A stream left `None` is not wanted: the
/// process gets no stdin (`/dev/null` for an exec), its output of that kind is read and
/// dropped. With a terminal there is one output stream, `stdout`.
#[derive(Default)]
pub struct Streams {
    /// What the caller types; its EOF closes the process's stdin (an exec without a terminal,
    /// or an attach to a `stdin_once` container).
    pub stdin: Option<Input>,
    /// The process's standard output (the terminal, with one).
    pub stdout: Option<Output>,
    /// The process's standard error; unused with a terminal.
    pub stderr: Option<Output>,
    /// Sizes for the terminal, applied as they come; the sender dropped means no more.
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

/// Copies `from` to `to` until EOF, then flushes; `to` of `None` drops what is read. A write
/// error (the caller went away) ends the copy, and with it the reading, as a caller that is
/// gone wants nothing more.
pub(crate) async fn copy_out(from: impl AsyncRead + Unpin, to: Option<&mut Output>) {
    let mut from = from;
    match to {
        Some(to) => {
            if tokio::io::copy(&mut from, to).await.is_ok() {
                let _ = to.flush().await;
            }
        }
        None => {
            let _ = tokio::io::copy(&mut from, &mut tokio::io::sink()).await;
        }
    }
}

/// Waits for the next size, or forever once there are none (so a `select!` branch on it never
/// ends the loop it is in).
pub(crate) async fn next_size(resize: &mut Option<mpsc::Receiver<TerminalSize>>) -> TerminalSize {
    if let Some(rx) = resize {
        if let Some(size) = rx.recv().await {
            return size;
        }
        *resize = None;
    }
    std::future::pending().await
}

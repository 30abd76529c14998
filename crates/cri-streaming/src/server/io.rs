//! What both transports do the same way: run exec or attach and turn its end into an exit
//! status, and deliver resize messages to the runtime without letting a storm of them grow
//! memory.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Pending;
use crate::resize::{ResizeDecoder, TerminalSize};
use crate::runtime::{AttachRequest, ExecRequest, StreamRuntime, Streams};
use crate::spdy::StreamReader;
use crate::status::ExitStatus;

/// Terminal sizes queued for the runtime; beyond it sizes are coalesced to the latest.
pub(super) const RESIZE_QUEUE: usize = 4;

/// The streams a remote command asked for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wanted {
    pub(super) stdin: bool,
    pub(super) stdout: bool,
    pub(super) stderr: bool,
    pub(super) tty: bool,
}

/// Exec or attach, as a token stored it.
#[derive(Debug)]
pub(super) enum RemoteCommand {
    Exec(ExecRequest),
    Attach(AttachRequest),
}

impl RemoteCommand {
    pub(super) fn from_pending(pending: Pending) -> Option<RemoteCommand> {
        match pending {
            Pending::Exec(req) => Some(RemoteCommand::Exec(req)),
            Pending::Attach(req) => Some(RemoteCommand::Attach(req)),
            Pending::PortForward(_) => None,
        }
    }

    pub(super) fn wanted(&self) -> Wanted {
        match self {
            RemoteCommand::Exec(r) => Wanted {
                stdin: r.stdin,
                stdout: r.stdout,
                stderr: r.stderr && !r.tty,
                tty: r.tty,
            },
            RemoteCommand::Attach(r) => Wanted {
                stdin: r.stdin,
                stdout: r.stdout,
                stderr: r.stderr && !r.tty,
                tty: r.tty,
            },
        }
    }

    /// Runs the operation to its end, as kubelet's `ServeExec` and `ServeAttach` map it.
    pub(super) async fn run(self, runtime: Arc<dyn StreamRuntime>, streams: Streams) -> ExitStatus {
        match self {
            RemoteCommand::Exec(req) => {
                let container = req.container_id.clone();
                match runtime.exec(req, streams).await {
                    Ok(code) => ExitStatus::exit_code(code),
                    Err(e) => {
                        tracing::debug!(container, "exec failed: {e}");
                        ExitStatus::Internal {
                            error: e.to_string(),
                        }
                    }
                }
            }
            RemoteCommand::Attach(req) => {
                let container = req.container_id.clone();
                match runtime.attach(req, streams).await {
                    Ok(()) => ExitStatus::Success,
                    Err(e) => {
                        tracing::debug!(container, "attach failed: {e}");
                        ExitStatus::AttachFailed {
                            error: e.to_string(),
                        }
                    }
                }
            }
        }
    }
}

/// Reads resize messages from `source` and hands the sizes to the runtime through `sizes`
/// (a channel of [`RESIZE_QUEUE`]), in order while it has room. When it is full, only the
/// latest size waits: a client that sends thousands costs nothing more. Returns when the source ends or
/// sends something that is not a terminal size (kubelet's decoder loop ends there too); the
/// last size is delivered first, and dropping `sizes` then tells the runtime no more come.
pub(super) async fn feed_resizes(mut source: StreamReader, sizes: mpsc::Sender<TerminalSize>) {
    let mut decoder = ResizeDecoder::default();
    let mut latest: Option<TerminalSize> = None;
    loop {
        tokio::select! {
            chunk = source.next_chunk() => {
                let Some(chunk) = chunk else { break };
                match decoder.push(&chunk) {
                    Ok(got) => {
                        for size in got {
                            // Queued in order while there is room; past it (or behind a size
                            // already waiting) only the latest waits.
                            if latest.is_some() {
                                latest = Some(size);
                                continue;
                            }
                            match sizes.try_send(size) {
                                Ok(()) => {}
                                Err(mpsc::error::TrySendError::Full(size)) => latest = Some(size),
                                Err(mpsc::error::TrySendError::Closed(_)) => return,
                            }
                        }
                    }
                    Err(e) => {
                        tracing::debug!("resize stream ends: {e}");
                        break;
                    }
                }
            }
            permit = sizes.reserve(), if latest.is_some() => {
                let Ok(permit) = permit else { return };
                if let Some(size) = latest.take() {
                    permit.send(size);
                }
            }
        }
    }
    if let Some(size) = latest {
        let _ = sizes.send(size).await;
    }
}

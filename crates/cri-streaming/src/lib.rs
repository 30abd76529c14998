//! The wire protocols of CRI streaming: what a container runtime speaks to serve `kubectl exec`,
//! `attach` and `port-forward` the way kubelet's `k8s.io/kubelet/pkg/cri/streaming` server does
//! for CRI-O and containerd.
//!
//! Built so far, each without I/O and bounded on every length a client controls:
//!
//! - [`spdy`]: SPDY/3.1 frames and their codec, with the shared zlib header compression
//!   contexts and limits on frame length, inflated header blocks and header counts; and the
//!   server side of a session over tokio ([`spdy::Session`]): streams accepted and replied to,
//!   bounded buffers with backpressure, PING answers, GOAWAY, idle and write timeouts;
//! - [`token`]: the cache of pending streaming requests behind single-use, 128-bit random URL
//!   tokens, with a time to live and a cap on entries;
//! - [`channel`]: the Kubernetes channel protocols: subprotocol names and negotiation, the
//!   WebSocket channel byte (binary, `base64.channel.k8s.io`, v5's close signal), the stream
//!   headers SPDY clients send, port forward's port prefix;
//! - [`status`]: what the error stream carries at the end of an exec (v4's `metav1.Status` JSON,
//!   the plain text of v1 to v3);
//! - [`resize`]: terminal size messages, read from the resize stream with a cap;
//! - [`runtime`]: the seam a container runtime plugs exec, attach and port forward into
//!   ([`runtime::StreamRuntime`]), and the streams it is handed.
//!
//! Not yet: the HTTP server that hands out URLs, upgrades connections (SPDY and WebSocket) and
//! hands streams to the runtime, and the WebSocket transport. This crate knows nothing of crio-lite; the
//! runtime plugs exec, attach and port forward in through [`runtime::StreamRuntime`].
//!
//! # Example
//!
//! ```
//! use cri_streaming::spdy::{Frame, FrameDecoder, FrameEncoder, Headers, Limits, SynStream};
//!
//! // What a client's SYN_STREAM for stdout looks like on the wire, and back.
//! let syn = Frame::SynStream(SynStream {
//!     stream_id: 1,
//!     associated_to: 0,
//!     priority: 0,
//!     slot: 0,
//!     fin: false,
//!     unidirectional: false,
//!     headers: Headers::new().with("streamtype", "stdout"),
//! });
//! let mut wire = Vec::new();
//! FrameEncoder::new().encode(&syn, &mut wire)?;
//!
//! let mut decoder = FrameDecoder::new(Limits::default());
//! assert_eq!(decoder.decode(&wire[..5])?, None, "a partial frame waits for more");
//! let (frame, used) = decoder.decode(&wire)?.expect("a whole frame");
//! assert_eq!((frame, used), (syn, wire.len()));
//! # Ok::<(), cri_streaming::Error>(())
//! ```

pub mod channel;
mod error;
pub mod resize;
pub mod runtime;
pub mod server;
pub mod spdy;
pub mod status;
pub mod token;

pub use error::{Error, Result};

//! The wire protocols of CRI streaming, and the server that speaks them: what a container
//! runtime serves `kubectl exec`, `attach` and `port-forward` with, the way kubelet's
//! `k8s.io/kubelet/pkg/cri/streaming` server does for CRI-O and containerd.
//!
//! - [`server`]: the HTTP/1.1 streaming server ([`server::Server::start`]): single-use URLs for
//!   exec, attach and port forward, the SPDY/3.1 and WebSocket upgrades with kubelet's
//!   negotiation and refusals, optional TLS with a client CA, the runtime's operations driven
//!   over the client's streams, counts of open streams, and a shutdown that ends them all;
//! - [`runtime`]: the seam a container runtime plugs exec, attach and port forward into
//!   ([`runtime::StreamRuntime`]), and the streams it is handed. Dropping an operation's future
//!   ends it: the server drops it when the client leaves, idles out or breaks a limit, and at
//!   shutdown;
//!
//! and the pieces below it, each without I/O and bounded on every length a client controls:
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
//! - [`resize`]: terminal size messages, read from the resize stream with a cap.
//!
//! This crate knows nothing of crio-lite or CRI's gRPC types: the daemon maps CRI's
//! `ExecRequest` and friends to [`runtime::ExecRequest`] and back to the URL, and
//! [`Error::InvalidRequest`] and [`Error::TooManyInFlight`] to InvalidArgument and
//! ResourceExhausted.
//!
//! # Serving
//!
//! ```no_run
//! use std::sync::Arc;
//! use cri_streaming::runtime::{PortForwardRequest, StreamRuntime};
//! use cri_streaming::server::{Config, Server};
//!
//! # async fn serve(runtime: Arc<dyn StreamRuntime>) -> cri_streaming::Result<()> {
//! let server = Server::start(Config::default(), runtime).await?;
//! let url = server.get_port_forward(PortForwardRequest {
//!     pod_sandbox_id: "p1".into(),
//!     ports: vec![8080],
//! })?;
//! assert!(url.starts_with(&format!("{}/portforward/", server.base_url())));
//! println!("{:?}", server.open_streams());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
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

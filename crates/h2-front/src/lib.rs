//! h2-front: serve HTTP/1.1 and HTTP/2 (gRPC) on a unix socket, with what a daemon's socket needs
//! and `axum::serve` does not give.
//!
//! Two parts, usable together or apart:
//!
//! - [`serve`]: the accept loop. Each connection's peer is identified by its credentials
//!   (`SO_PEERCRED`: `pid 1234 uid 0`, named in every log line about it); a client that connects
//!   and says nothing is closed after [`Limits::first_byte`]; connections are capped overall and
//!   per client (a root peer counted per process, any other per user), refusals logged at most
//!   once a minute per client; a connection with no request in flight for
//!   [`Limits::idle_timeout`] is closed (HTTP/2 with GOAWAY); HTTP/2 connections are pinged;
//!   HTTP/1 headers have a deadline; stopping lets requests in flight finish for a grace period.
//!   HTTP/1.1 and HTTP/2 with prior knowledge are told apart per connection.
//! - [`NormalizedStream`]: the HTTP/2 front every served connection passes through. Go gRPC
//!   clients of 2020-2024 send the unix socket's path as `:authority`, which h2 (so hyper, tonic,
//!   axum) refuses with `RST_STREAM(PROTOCOL_ERROR)`. The front decodes each client header block
//!   (HPACK, its own decoder), replaces an `:authority` h2 would refuse with `localhost`, and
//!   re-encodes the block without the dynamic table before h2 reads it; every other byte passes
//!   unchanged, and a block it cannot parse reaches h2 as one h2 must refuse, so h2 stays the only
//!   judge of protocol errors. It also logs the `RST_STREAM` and `GOAWAY` errors h2 sends.
//!
//! What it does not do: TLS, TCP listeners, routing, or any HTTP/2 of its own beyond header
//! blocks (h2 does the protocol). It knows nothing of what is served: the caller hands it an
//! [`axum::Router`] (tonic services become one with `Routes::into_axum_router`).
//!
//! Logging goes through `tracing` under this crate's targets (`h2_front::connections`,
//! `h2_front::front::stream`): refusals, silent clients and h2's errors at warn, rewrites and idle
//! closes at debug.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
//! use tokio::net::{UnixListener, UnixStream};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let socket = dir.path().join("api.sock");
//! let router = axum::Router::new().route("/ping", axum::routing::get(|| async { "pong" }));
//! let limits = h2_front::Limits {
//!     max_per_client: 16,
//!     ..h2_front::Limits::default()
//! };
//! let stop = CancellationToken::new();
//! let listener = UnixListener::bind(&socket)?;
//! let server = tokio::spawn(h2_front::serve(
//!     listener,
//!     router,
//!     limits,
//!     stop.clone(),
//!     Duration::from_secs(5),
//! ));
//!
//! let mut client = UnixStream::connect(&socket).await?;
//! client
//!     .write_all(b"GET /ping HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
//!     .await?;
//! let mut answer = String::new();
//! client.read_to_string(&mut answer).await?;
//! assert!(answer.ends_with("pong"));
//!
//! stop.cancel();
//! server.await?;
//! # Ok(())
//! # }
//! ```
//!
//! A server with an accept loop of its own wraps each accepted stream instead:
//! `NormalizedStream::new(stream, "pid 42 uid 0".into(), true)` reads and writes like the stream
//! it wraps, and goes to hyper (through `hyper_util::rt::TokioIo`) in its place.

mod connections;
mod front;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use connections::{Limits, serve};
pub use front::NormalizedStream;

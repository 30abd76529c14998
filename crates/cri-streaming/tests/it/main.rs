//! cri-streaming's public API: the SPDY codec against the spec's byte layouts and against
//! moby/spdystream (Go), the token cache, the channel protocols, exit statuses, resizes; the
//! streaming server over SPDY and WebSocket against a fake runtime.

mod channels;
mod resize;
mod server_lifecycle;
mod server_spdy;
mod server_support;
mod server_ws;
mod spdy_frames;
mod spdy_go;
mod spdy_limits;
mod spdy_session;
mod status;
mod tokens;

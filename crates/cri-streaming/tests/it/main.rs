//! cri-streaming's public API: the SPDY codec against the spec's byte layouts and against
//! moby/spdystream (Go), the token cache, the channel protocols, exit statuses, resizes.

mod channels;
mod resize;
mod spdy_frames;
mod spdy_go;
mod spdy_limits;
mod spdy_session;
mod status;
mod tokens;

//! A thin HTTP/2 "front" placed between an accepted socket and h2.
//!
//! Go gRPC clients of 2020-2024 send the unix socket path as `:authority`
//! (`/var/run/crio-lite/crio-lite.sock`), which h2's server rejects as a
//! malformed authority with `RST_STREAM(PROTOCOL_ERROR)`. We cannot patch
//! h2/hyper/tonic, so each client header block is decoded here, an invalid
//! `:authority` is replaced with `localhost`, and the block is re-encoded
//! with a table-free encoder before h2 sees it. Everything else is passed on
//! byte for byte; anything we cannot parse is turned into a header block h2
//! is certain to reject, so h2 stays the only judge of protocol errors.
//!
//! Server-to-client bytes are only observed, so that `RST_STREAM`/`GOAWAY`
//! errors h2 sends are visible in the log at warn level.
//!
//! Choices worth knowing:
//! - A re-emitted block keeps the HEADERS frame's priority fields (h2 still
//!   checks them) and `END_STREAM`, drops padding, and is cut into frames of
//!   at most 16384 bytes, however the client had split it.
//! - Our decoder assumes the table size h2 advertises by default (4096) and
//!   swallows the client's table size updates; our encoder never indexes.
//! - The decoder is our own (`hpack_in`, `huffman`): it sits on every
//!   request, and loona-hpack rebuilt its Huffman table for each Huffman
//!   string (~20 µs each, ~120 µs for a tonic client's first request); ours
//!   is built at compile time.
//! - A block we cannot accept (bad HPACK, over 256 KiB, over 32 frames, a
//!   stray CONTINUATION, bad padding, a HEADERS/CONTINUATION frame over
//!   16384 bytes) reaches h2 as the block `0x80` (indexed field 0), which h2
//!   0.4 answers with `GOAWAY(PROTOCOL_ERROR)`; from then on the connection is
//!   passed through untouched.

mod frame;
pub(crate) mod hpack_in;
pub(crate) mod hpack_out;
mod huffman;
mod stream;

pub use stream::NormalizedStream;

use hpack_in::DecodeError;

/// Value substituted for an `:authority` h2 would reject.
pub(crate) const LOCALHOST: &[u8] = b"localhost";

/// Dynamic table limit of our decoder: the HTTP/2 default, which is what h2
/// advertises unless `header_table_size` is configured (`serve` must not
/// configure it, or this has to follow).
pub(crate) const HEADER_TABLE_SIZE: usize = 4096;

/// Upper bound on one re-encoded header block. Re-encoding grows Huffman
/// strings by at most 1.6x but indexed fields much more (30x for the longest
/// static entry, ~4 KiB per octet through the dynamic table), so the input
/// cap alone does not bound it. 1 MiB is far above what h2 accepts anyway
/// (hyper's default header list limit is 16 KiB; h2 sends GOAWAY above 4x).
pub(crate) const MAX_ENCODED_BLOCK: usize = 1024 * 1024;

/// Longest original `:authority` kept for the debug log.
const LOGGED_AUTHORITY_MAX: usize = 256;

/// Whether h2 accepts `value` as `:authority` as it is.
///
/// h2 0.4 parses it with `http::uri::Authority::from_maybe_shared`; the
/// `TryFrom<&[u8]>` impl runs the same validation, so this is exact: the
/// value must be non-empty ASCII authority syntax with no `/`, `?`, `#` and
/// no `%` outside the userinfo or an IPv6 zone (so a percent-encoded socket
/// path such as `%2Fvar%2Frun%2Fx.sock` is rejected too).
#[must_use]
pub(crate) fn authority_is_valid(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// What a successful block rewrite changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RewriteOutcome {
    /// Number of `:authority` fields replaced with `localhost`.
    pub(crate) replaced: usize,
    /// The first replaced value, cut to 256 bytes, for the log.
    pub(crate) original: Vec<u8>,
}

/// Per-connection HPACK state: decodes client header blocks and re-encodes
/// them without the dynamic table.
pub(crate) struct BlockRewriter {
    decoder: hpack_in::Decoder,
    /// Set once a block failed: the decoder's table may then differ from
    /// the client's, so nothing more is decoded.
    poisoned: bool,
}

impl Default for BlockRewriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockRewriter {
    /// A decoder in the state HTTP/2 mandates at connection start.
    #[must_use]
    pub(crate) fn new() -> Self {
        Self {
            decoder: hpack_in::Decoder::new(HEADER_TABLE_SIZE, MAX_ENCODED_BLOCK),
            poisoned: false,
        }
    }

    /// Decodes one complete header block and appends its re-encoded form to
    /// `out`, replacing every `:authority` that h2 would reject.
    ///
    /// # Errors
    /// A static reason when the block must not reach h2 as a valid block:
    /// HPACK decoding failed, a size update came after a field, or the
    /// output would exceed [`MAX_ENCODED_BLOCK`]. The decoder state is then
    /// unusable and later calls fail.
    pub(crate) fn rewrite(
        &mut self,
        block: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<RewriteOutcome, &'static str> {
        if self.poisoned {
            return Err("hpack decoder unusable after an earlier error");
        }
        let start = out.len();
        let mut outcome = RewriteOutcome::default();
        let result = self.decoder.decode(block, |name, value| {
            let value = if name == b":authority" && !authority_is_valid(value) {
                if outcome.replaced == 0 {
                    let keep = value.len().min(LOGGED_AUTHORITY_MAX);
                    outcome.original.extend_from_slice(&value[..keep]);
                }
                outcome.replaced += 1;
                LOCALHOST
            } else {
                value
            };
            if out.len() - start + hpack_out::encoded_field_len(name, value) > MAX_ENCODED_BLOCK {
                return Err(DecodeError::TooLarge);
            }
            hpack_out::encode_field(out, name, value);
            Ok(())
        });
        match result {
            Ok(()) => Ok(outcome),
            Err(e) => {
                self.poisoned = true;
                Err(match e {
                    DecodeError::SizeUpdateAfterField => {
                        "dynamic table size update after a header field"
                    }
                    DecodeError::TooLarge => "decoded header block larger than 1 MiB",
                    _ => "hpack decoding failed",
                })
            }
        }
    }
}

/// Name of an HTTP/2 error code (RFC 9113 §7) for log lines.
#[must_use]
pub(crate) fn error_code_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "UNKNOWN_ERROR_CODE",
    }
}

#[cfg(test)]
mod frame_tests;
#[cfg(test)]
mod hpack_in_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod tests;

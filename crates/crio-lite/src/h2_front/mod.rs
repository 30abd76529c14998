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
//! errors h2 sends are visible in the daemon's log at warn level.
//!
//! Choices worth knowing:
//! - A re-emitted block keeps the HEADERS frame's priority fields (h2 still
//!   checks them) and `END_STREAM`, drops padding, and is cut into frames of
//!   at most 16384 bytes, however the client had split it.
//! - Our decoder assumes the table size h2 advertises by default (4096) and
//!   swallows the client's table size updates; our encoder never indexes.
//! - A block we cannot accept (bad HPACK, over 256 KiB, over 32 frames, a
//!   stray CONTINUATION, bad padding, a HEADERS/CONTINUATION frame over
//!   16384 bytes) reaches h2 as the block `0x80` (indexed field 0), which h2
//!   0.4 answers with `GOAWAY(PROTOCOL_ERROR)`; from then on the connection is
//!   passed through untouched.

mod frame;
pub(crate) mod hpack_out;
mod stream;

pub(crate) use stream::NormalizedStream;

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Value substituted for an `:authority` h2 would reject.
pub(crate) const LOCALHOST: &[u8] = b"localhost";

/// Dynamic table limit of our decoder: the HTTP/2 default, which is what h2
/// advertises unless `header_table_size` is configured (crio-lite must not
/// configure it, or this has to follow).
pub(crate) const HEADER_TABLE_SIZE: usize = 4096;

/// Upper bound on one re-encoded header block. Re-encoding grows Huffman
/// strings by at most 1.6x but indexed fields much more (30x for the longest
/// static entry, ~4 KiB per octet through the dynamic table), so the input
/// cap alone does not bound it. 1 MiB is far above what h2 accepts anyway
/// (hyper's default header list limit is 16 KiB; h2 sends GOAWAY above 4x).
pub(crate) const MAX_ENCODED_BLOCK: usize = 1024 * 1024;

/// loona-hpack 0.4 rebuilds its Huffman code table (nested `HashMap`s) for
/// every Huffman-coded string, ~20 µs each in a release build, so the count
/// per block is bounded to keep a hostile block's CPU cost near 5 ms. A first
/// gRPC request carries about six; later ones reuse the dynamic table.
pub(crate) const MAX_HUFFMAN_STRINGS: usize = 256;

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
    decoder: loona_hpack::Decoder<'static>,
    /// Set once the decoder panicked; its table can no longer be trusted.
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
        let mut decoder = loona_hpack::Decoder::new();
        // Without this loona accepts any size update and the table (fed by
        // the client) could grow without bound.
        decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        Self {
            decoder,
            poisoned: false,
        }
    }

    /// Decodes one complete header block and appends its re-encoded form to
    /// `out`, replacing every `:authority` that h2 would reject.
    ///
    /// # Errors
    /// A static reason when the block must not reach h2 as a valid block:
    /// HPACK decoding failed, a size update came after a field, too many
    /// Huffman strings, or the output would exceed [`MAX_ENCODED_BLOCK`].
    /// The decoder state is then unusable and the caller must stop decoding.
    pub(crate) fn rewrite(
        &mut self,
        block: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<RewriteOutcome, &'static str> {
        if self.poisoned {
            return Err("hpack decoder unusable after an earlier panic");
        }
        let huffman = prescan(block)?;
        if huffman > MAX_HUFFMAN_STRINGS {
            return Err("too many Huffman-coded strings in one header block");
        }
        let start = out.len();
        let mut outcome = RewriteOutcome::default();
        let mut too_big = false;
        let decoder = &mut self.decoder;
        let result = catch_unwind(AssertUnwindSafe(|| {
            decoder.decode_with_cb(block, |name, value| {
                let value: &[u8] = if name.as_ref() == b":authority" && !authority_is_valid(&value)
                {
                    if outcome.replaced == 0 {
                        let keep = value.len().min(LOGGED_AUTHORITY_MAX);
                        outcome.original.extend_from_slice(&value[..keep]);
                    }
                    outcome.replaced += 1;
                    LOCALHOST
                } else {
                    &value
                };
                if too_big
                    || out.len() - start + hpack_out::encoded_field_len(&name, value)
                        > MAX_ENCODED_BLOCK
                {
                    // loona's callback cannot abort decoding: stop writing
                    // and fail once it returns.
                    too_big = true;
                    return;
                }
                hpack_out::encode_field(out, &name, value);
            })
        }));
        match result {
            Ok(Ok(())) if too_big => Err("decoded header block larger than 1 MiB"),
            Ok(Ok(())) => Ok(outcome),
            Ok(Err(_)) => Err("hpack decoding failed"),
            Err(_) => {
                self.poisoned = true;
                Err("hpack decoder panicked")
            }
        }
    }
}

/// Walks the block's structure without decoding strings: rejects a dynamic
/// table size update that follows a field (RFC 7541 §4.2; loona does not
/// check this, h2 does), and counts Huffman-coded strings.
fn prescan(block: &[u8]) -> Result<usize, &'static str> {
    const MALFORMED: &str = "hpack decoding failed";
    let mut pos = 0;
    let mut seen_field = false;
    let mut huffman = 0;
    while let Some(&first) = block.get(pos) {
        if first & 0x80 != 0 {
            pos += integer(&block[pos..], 7).ok_or(MALFORMED)?.1;
            seen_field = true;
            continue;
        }
        if first & 0xe0 == 0x20 {
            if seen_field {
                return Err("dynamic table size update after a header field");
            }
            pos += integer(&block[pos..], 5).ok_or(MALFORMED)?.1;
            continue;
        }
        let prefix = if first & 0x40 != 0 { 6 } else { 4 };
        let (name_index, used) = integer(&block[pos..], prefix).ok_or(MALFORMED)?;
        pos += used;
        let strings = if name_index == 0 { 2 } else { 1 };
        for _ in 0..strings {
            let rest = block.get(pos..).ok_or(MALFORMED)?;
            let huff = rest.first().is_some_and(|b| b & 0x80 != 0);
            let (len, used) = integer(rest, 7).ok_or(MALFORMED)?;
            pos = pos
                .checked_add(used)
                .and_then(|p| p.checked_add(len))
                .ok_or(MALFORMED)?;
            if pos > block.len() {
                return Err(MALFORMED);
            }
            huffman += usize::from(huff);
        }
        seen_field = true;
    }
    Ok(huffman)
}

/// Decodes an HPACK integer; `None` when truncated or longer than the four
/// continuation octets loona-hpack accepts.
fn integer(buf: &[u8], prefix_bits: u8) -> Option<(usize, usize)> {
    let mask = u8::MAX >> (8 - prefix_bits);
    let mut value = usize::from(*buf.first()? & mask);
    if value < usize::from(mask) {
        return Some((value, 1));
    }
    for (i, &b) in buf.iter().enumerate().skip(1).take(4) {
        value += usize::from(b & 0x7f) << (7 * (i - 1));
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
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
mod tests;

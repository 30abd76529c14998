//! What we write toward h2: header blocks and their frames.
//!
//! The smallest HPACK encoder that is always correct: every field is sent as
//! "literal header field without indexing, new name" (RFC 7541 §6.2.2), with
//! plain (non-Huffman) strings.
//!
//! Never touching the dynamic table is the point: the peer decoder's table
//! (h2's) stays empty for the whole connection, so it can never drift from
//! the client's table, which only our decoder tracks.

use super::frame::{
    FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PRIORITY, MAX_FRAME, TYPE_CONTINUATION, TYPE_HEADERS,
};

/// Appends `value` as an HPACK integer (RFC 7541 §5.1) whose first octet
/// carries `flags` in the bits above a `prefix_bits`-bit prefix.
///
/// `prefix_bits` must be in `1..=8`; callers pass constants.
pub(crate) fn encode_integer(out: &mut Vec<u8>, flags: u8, prefix_bits: u8, value: usize) {
    debug_assert!((1..=8).contains(&prefix_bits));
    let max_prefix = u8::MAX >> (8 - prefix_bits);
    if let Ok(small) = u8::try_from(value)
        && small < max_prefix
    {
        out.push(flags | small);
        return;
    }
    out.push(flags | max_prefix);
    let mut rest = value - usize::from(max_prefix);
    while rest >= 0x80 {
        out.push(low_octet(rest) | 0x80);
        rest >>= 7;
    }
    out.push(low_octet(rest));
}

/// The seven low bits of `v`.
fn low_octet(v: usize) -> u8 {
    v.to_le_bytes()[0] & 0x7f
}

/// Appends a non-Huffman string literal (RFC 7541 §5.2): H bit clear,
/// 7-bit prefix length, then the raw octets.
pub(crate) fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    encode_integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// Appends one header field as a literal without indexing with a literal
/// name (first octet `0x00`).
pub(crate) fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    encode_string(out, name);
    encode_string(out, value);
}

/// Bytes `encode_field` appends for this field; lets callers bound output
/// before writing it.
#[must_use]
pub(crate) fn encoded_field_len(name: &[u8], value: &[u8]) -> usize {
    1 + string_len(name) + string_len(value)
}

fn string_len(s: &[u8]) -> usize {
    integer_len(7, s.len()) + s.len()
}

fn integer_len(prefix_bits: u8, value: usize) -> usize {
    let max_prefix: usize = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        return 1;
    }
    let mut rest = value - max_prefix;
    let mut n = 2;
    while rest >= 0x80 {
        rest >>= 7;
        n += 1;
    }
    n
}

/// Frames `block` as HEADERS + CONTINUATION frames of at most
/// 16384 payload bytes, ending with `END_HEADERS`. The HEADERS frame carries
/// `END_STREAM` when asked and the client's priority fields when it had them
/// (kept so h2 still applies its own checks to them); padding is not
/// reproduced.
pub(crate) fn emit_block(
    out: &mut Vec<u8>,
    stream_id: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    block: &[u8],
) {
    let mut rest = block;
    let mut first = true;
    loop {
        let priority = if first { priority } else { None };
        let prio_len = priority.map_or(0, |p| p.len());
        let (chunk, tail) = rest.split_at((MAX_FRAME - prio_len).min(rest.len()));
        let mut flags = 0;
        if first && end_stream {
            flags |= FLAG_END_STREAM;
        }
        if priority.is_some() {
            flags |= FLAG_PRIORITY;
        }
        if tail.is_empty() {
            flags |= FLAG_END_HEADERS;
        }
        let kind = if first {
            TYPE_HEADERS
        } else {
            TYPE_CONTINUATION
        };
        push_head(out, chunk.len() + prio_len, kind, flags, stream_id);
        if let Some(p) = priority {
            out.extend_from_slice(&p);
        }
        out.extend_from_slice(chunk);
        if tail.is_empty() {
            return;
        }
        rest = tail;
        first = false;
    }
}

/// Appends a 9-byte frame header; `len` is at most 16384 by construction.
pub(crate) fn push_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream_id: u32) {
    let len = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    out.extend_from_slice(&len[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integer_examples_from_rfc7541_appendix_c1() {
        let mut out = Vec::new();
        encode_integer(&mut out, 0, 5, 10);
        assert_eq!(out, [0x0a]);

        out.clear();
        encode_integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);

        out.clear();
        encode_integer(&mut out, 0, 8, 42);
        assert_eq!(out, [0x2a]);
    }

    #[test]
    fn integer_boundaries_of_a_7_bit_prefix() {
        let cases: [(usize, &[u8]); 4] = [
            (126, &[0x7e]),
            (127, &[0x7f, 0x00]),
            (128, &[0x7f, 0x01]),
            (127 + 128, &[0x7f, 0x80, 0x01]),
        ];
        for (value, want) in cases {
            let mut out = Vec::new();
            encode_integer(&mut out, 0, 7, value);
            assert_eq!(out, want, "value {value}");
            assert_eq!(integer_len(7, value), want.len());
        }
    }

    #[test]
    fn field_layout_is_literal_without_indexing_new_name() {
        let mut out = Vec::new();
        encode_field(&mut out, b"te", b"trailers");
        assert_eq!(out, b"\x00\x02te\x08trailers");
    }

    proptest! {
        #[test]
        fn round_trips_through_loona_hpack(
            fields in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..40),
                 proptest::collection::vec(any::<u8>(), 0..300)),
                0..12,
            )
        ) {
            let mut block = Vec::new();
            let mut expected_len = 0;
            for (name, value) in &fields {
                encode_field(&mut block, name, value);
                expected_len += encoded_field_len(name, value);
            }
            prop_assert_eq!(block.len(), expected_len);

            let mut decoder = loona_hpack::Decoder::new();
            let decoded = decoder.decode(&block);
            prop_assert_eq!(decoded.ok(), Some(fields));
        }
    }
}

//! `spdy_frames`: the bytes a client sends on a SPDY/3.1 connection to the streaming server,
//! through cri-streaming's frame decoder.
//!
//! Input: one control byte, then the rest. With bit 0 of the control byte clear, the rest is the
//! client's bytes as they arrive. With it set, the rest is raw header blocks, each behind its
//! 16-bit little-endian length, that are compressed here (one zlib stream with the SPDY
//! dictionary, flushed after each, as a client's framer does) into SYN_STREAMs: the fuzzer
//! reaches the header block parser without having to invent zlib streams. The control byte also
//! seeds the sizes the bytes arrive in.
//!
//! - decoding never panics, and every error message is short;
//! - what decodes, and how decoding ends (an error, or a frame still incomplete), does not
//!   depend on how the bytes arrived;
//! - every frame decoded re-encodes (the decoder accepts nothing the encoder refuses), and a
//!   connection's worth of them, through one encoder and one decoder, comes back equal.

use cri_streaming::spdy::{DICTIONARY, Frame, FrameDecoder, FrameEncoder, Limits};
use flate2::{Compress, Compression, FlushCompress};

/// Bit 0 of the control byte: the rest is raw header blocks to wrap (see the module docs).
pub const WRAP_BLOCKS: u8 = 0x1;

/// The limits the server under test uses, smaller frames than the default to keep runs fast.
pub const LIMITS: Limits = Limits {
    max_frame_len: 256 * 1024,
    max_header_block: 64 * 1024,
    max_headers: 64,
    max_name_len: 256,
    max_value_len: 16 * 1024,
};

/// How decoding a connection's bytes ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// All bytes made whole frames.
    Clean,
    /// This many bytes wait for the rest of a frame.
    Pending(usize),
    /// The decoder refused a frame.
    Error(String),
}

/// Reads `data` as a control byte and a client's bytes (see the module docs) and checks them.
pub fn check(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let wire = if control & WRAP_BLOCKS == 0 {
        rest.to_vec()
    } else {
        wrap_blocks(rest)
    };

    let (frames, end) = decode(&wire, &mut |_| usize::MAX);
    let mut seed = u64::from(control) | 0x9e37_79b9_7f4a_7c00;
    let (split, split_end) = decode(&wire, &mut |left| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % 64 + 1).unwrap_or(1).min(left)
    });
    assert_eq!(frames, split, "frames depend on how the bytes arrived");
    assert_eq!(end, split_end, "the end depends on how the bytes arrived");
    if let End::Error(e) = &end {
        assert!(e.len() < 1024, "an error of {} bytes: {e:.200}", e.len());
    }

    let sendable: Vec<&Frame> = frames
        .iter()
        .filter(|f| !matches!(f, Frame::Unknown { .. }))
        .collect();
    let mut encoder = FrameEncoder::new();
    let mut out = Vec::new();
    for frame in &sendable {
        encoder
            .encode(frame, &mut out)
            .unwrap_or_else(|e| panic!("a decoded frame does not encode: {e}: {frame:?}"));
    }
    let (back, back_end) = decode(&out, &mut |_| usize::MAX);
    assert_eq!(back_end, End::Clean, "re-encoded frames do not decode");
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        sendable,
        "frames change through encode and decode"
    );
}

/// Decodes `wire` fed in pieces whose sizes `next` picks (0 means at least 1) from what is left.
fn decode(wire: &[u8], next: &mut dyn FnMut(usize) -> usize) -> (Vec<Frame>, End) {
    let mut decoder = FrameDecoder::new(LIMITS);
    let mut frames = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    while fed < wire.len() {
        let n = next(wire.len() - fed).clamp(1, wire.len() - fed);
        buf.extend_from_slice(&wire[fed..fed + n]);
        fed += n;
        loop {
            match decoder.decode(&buf) {
                Ok(Some((frame, used))) => {
                    assert!(
                        used >= 8 && used <= buf.len(),
                        "took {used} of {}",
                        buf.len()
                    );
                    frames.push(frame);
                    buf.drain(..used);
                }
                Ok(None) => {
                    assert!(
                        buf.len() < 8 + LIMITS.max_frame_len as usize,
                        "{} bytes buffered for one frame",
                        buf.len()
                    );
                    break;
                }
                Err(e) => return (frames, End::Error(e.to_string())),
            }
        }
    }
    let end = if buf.is_empty() {
        End::Clean
    } else {
        End::Pending(buf.len())
    };
    (frames, end)
}

/// Raw header blocks behind 16-bit lengths, compressed into SYN_STREAMs 1, 3, 5...
#[must_use]
pub fn wrap_blocks(mut rest: &[u8]) -> Vec<u8> {
    let mut z = Compress::new(Compression::fast(), true);
    z.set_dictionary(&DICTIONARY)
        .expect("a fresh stream takes a dictionary");
    let mut wire = Vec::new();
    let mut stream_id = 1u32;
    while let Some((len, tail)) = rest.split_first_chunk::<2>() {
        let n = usize::from(u16::from_le_bytes(*len)).min(tail.len());
        let (block, tail) = tail.split_at(n);
        rest = tail;
        let compressed = deflate(&mut z, block);
        let len = u32::try_from(10 + compressed.len())
            .unwrap_or(u32::MAX)
            .min(0xff_ffff);
        wire.extend_from_slice(&[0x80, 3, 0, 1, 0]);
        wire.extend_from_slice(&len.to_be_bytes()[1..]);
        wire.extend_from_slice(&stream_id.to_be_bytes());
        wire.extend_from_slice(&[0; 6]);
        wire.extend_from_slice(&compressed);
        stream_id = stream_id.wrapping_add(2) & 0x7fff_ffff;
    }
    wire
}

/// One block through the shared stream, flushed.
pub fn deflate(z: &mut Compress, block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 64);
    let mut used = 0;
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity() + 64);
        }
        let before = z.total_in();
        z.compress_vec(&block[used..], &mut out, FlushCompress::Sync)
            .expect("zlib compresses");
        used += usize::try_from(z.total_in() - before).expect("fits");
        if used == block.len() && out.capacity() - out.len() >= 64 {
            return out;
        }
    }
}

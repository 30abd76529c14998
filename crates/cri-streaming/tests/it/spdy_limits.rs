//! Every length from the wire is capped: frames, inflated header blocks, header counts, names
//! and values; malformed frames are errors that name the frame.

use std::time::{Duration, Instant};

use cri_streaming::Error;
use cri_streaming::spdy::{Frame, FrameDecoder, FrameEncoder, Headers, Limits, SynStream};
use flate2::{Compress, Compression, FlushCompress};

fn syn(headers: Headers) -> Frame {
    Frame::SynStream(SynStream {
        stream_id: 1,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers,
    })
}

/// The first header block of a connection, compressed by zlib directly (not our encoder, so
/// the decoder's bounds are tested on what any peer may send).
fn compress_first(block: &[u8]) -> Vec<u8> {
    let mut z = Compress::new(Compression::best(), true);
    z.set_dictionary(DICTIONARY).unwrap();
    let mut out = Vec::with_capacity(block.len() / 100 + 1024);
    let mut used = 0;
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve(64 * 1024);
        }
        let before = z.total_in();
        z.compress_vec(&block[used..], &mut out, FlushCompress::Sync)
            .unwrap();
        used += usize::try_from(z.total_in() - before).unwrap();
        if used == block.len() && out.capacity() - out.len() >= 1024 {
            return out;
        }
    }
}

/// The SPDY/3 dictionary as moby/spdystream ships it (`spdy/dictionary.go`, from Chromium),
/// dumped byte for byte: a copy independent of the crate's, which builds it from the spec's
/// word list.
const DICTIONARY: &[u8] = include_bytes!("../../testdata/spdy3-dictionary.bin");

#[test]
fn a_block_compressed_by_another_zlib_decodes() {
    let raw = b"\0\0\0\x01\0\0\0\x04port\0\0\0\x048080";
    let (frame, _) = FrameDecoder::new(Limits::default())
        .decode(&syn_frame(&compress_first(raw)))
        .unwrap()
        .unwrap();
    assert_eq!(frame, syn(Headers::new().with("port", "8080")));
}

fn syn_frame(compressed: &[u8]) -> Vec<u8> {
    let len = u32::try_from(10 + compressed.len()).unwrap();
    let mut out = vec![0x80, 3, 0, 1, 0];
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(compressed);
    out
}

#[test]
fn a_frame_over_the_limit_is_refused_from_its_header() {
    let limits = Limits {
        max_frame_len: 1024,
        ..Limits::default()
    };
    for (head, kind) in [
        ([0x80, 3, 0, 1, 0, 0xff, 0xff, 0xff], "SYN_STREAM"),
        ([0, 0, 0, 1, 0, 0, 4, 1], "data"),
    ] {
        let err = FrameDecoder::new(limits).decode(&head).unwrap_err();
        assert!(
            matches!(err, Error::FrameTooLarge { limit: 1024, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("spdy {kind} frame of ")),
            "{err}"
        );
    }
    // At the limit is fine.
    let mut at = vec![0, 0, 0, 1, 0, 0, 4, 0];
    at.resize(8 + 1024, 0);
    assert!(FrameDecoder::new(limits).decode(&at).unwrap().is_some());
}

#[test]
fn a_zlib_bomb_stops_at_the_block_limit() {
    // 16 MiB of one header value compresses to about 16 KiB; it must cost at most the limit.
    let mut block = Vec::new();
    block.extend_from_slice(&1u32.to_be_bytes());
    block.extend_from_slice(&1u32.to_be_bytes());
    block.push(b'a');
    let huge = 16 * 1024 * 1024;
    block.extend_from_slice(&u32::try_from(huge).unwrap().to_be_bytes());
    block.resize(block.len() + huge, b'x');
    let compressed = compress_first(&block);
    drop(block);
    assert!(compressed.len() < 256 * 1024, "{}", compressed.len());
    let wire = syn_frame(&compressed);

    let started = Instant::now();
    let err = FrameDecoder::new(Limits::default())
        .decode(&wire)
        .unwrap_err();
    assert!(
        matches!(err, Error::HeaderBlockTooLarge { limit: 65536, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "spdy SYN_STREAM header block inflates past the limit of 65536 bytes"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn header_counts_names_and_values_are_capped() {
    let limits = Limits {
        max_headers: 2,
        max_name_len: 8,
        max_value_len: 16,
        ..Limits::default()
    };
    let cases = [
        (
            Headers::new().with("a", "1").with("b", "2").with("c", "3"),
            "spdy SYN_STREAM header block has 3 headers, over the limit of 2",
        ),
        (
            Headers::new().with("streamtype", "x"),
            "spdy SYN_STREAM header name of 10 bytes is over the limit of 8 bytes",
        ),
        (
            Headers::new().with("port", &"9".repeat(17)),
            "spdy SYN_STREAM header value of 17 bytes is over the limit of 16 bytes",
        ),
    ];
    for (headers, want) in cases {
        let mut wire = Vec::new();
        FrameEncoder::new()
            .encode(&syn(headers), &mut wire)
            .unwrap();
        let err = FrameDecoder::new(limits).decode(&wire).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn a_block_counting_more_headers_than_it_holds_is_refused() {
    // Claims 4 billion headers in 4 bytes: refused by the count limit before any allocation.
    let err = FrameDecoder::new(Limits::default())
        .decode(&syn_frame(&compress_first(&[0xff; 4])))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooManyHeaders {
                count: u32::MAX,
                ..
            }
        ),
        "{err}"
    );
    // Claims one header, holds none.
    let err = FrameDecoder::new(Limits::default())
        .decode(&syn_frame(&compress_first(&[0, 0, 0, 1])))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spdy SYN_STREAM header block: ends inside the length of a name"
    );
}

#[test]
fn header_blocks_that_break_the_spec_are_refused() {
    let block = |pairs: &[(&[u8], &[u8])]| {
        let mut b = u32::try_from(pairs.len()).unwrap().to_be_bytes().to_vec();
        for (n, v) in pairs {
            b.extend_from_slice(&u32::try_from(n.len()).unwrap().to_be_bytes());
            b.extend_from_slice(n);
            b.extend_from_slice(&u32::try_from(v.len()).unwrap().to_be_bytes());
            b.extend_from_slice(v);
        }
        b
    };
    let cases: [(Vec<u8>, &str); 5] = [
        (block(&[(b"", b"x")]), "an empty header name"),
        (block(&[(b"Port", b"80")]), "names are lower-case ascii"),
        (block(&[(b"a", b"1"), (b"a", b"2")]), "header \"a\" twice"),
        (block(&[(b"a", b"\xff")]), "the value of \"a\" is not utf-8"),
        (
            [block(&[(b"a", b"1")]), vec![0]].concat(),
            "1 bytes after the last header",
        ),
    ];
    for (raw, want) in cases {
        let err = FrameDecoder::new(Limits::default())
            .decode(&syn_frame(&compress_first(&raw)))
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err} lacks {want:?}");
    }
}

#[test]
fn a_block_compressed_with_another_dictionary_is_refused() {
    let mut z = Compress::new(Compression::best(), true);
    z.set_dictionary(b"not the spdy dictionary").unwrap();
    let mut out = Vec::with_capacity(256);
    z.compress_vec(&[0, 0, 0, 0], &mut out, FlushCompress::Sync)
        .unwrap();
    let err = FrameDecoder::new(Limits::default())
        .decode(&syn_frame(&out))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not spdy/3's 0xe3c6a7c2"), "{err}");
}

#[test]
fn malformed_frames_name_the_frame_and_the_fault() {
    let cases: [(&[u8], &str); 9] = [
        (
            &[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1],
            "spdy PING frame of version 2: only version 3 is spoken",
        ),
        (
            &[0x80, 3, 0, 6, 0, 0, 0, 3, 0, 0, 0],
            "spdy PING frame: 3 bytes where it has 4",
        ),
        (
            &[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 5],
            "spdy RST_STREAM frame: stream id 0",
        ),
        (
            &[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0],
            "spdy RST_STREAM frame: status 0",
        ),
        (
            &[0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 1, 0x80, 0, 0, 0],
            "spdy WINDOW_UPDATE frame: a delta of 0",
        ),
        (
            &[0x80, 3, 0, 4, 0, 0, 0, 4, 0, 0, 0, 1],
            "spdy SETTINGS frame: 1 entries in 4 bytes",
        ),
        (
            &[0x80, 3, 0, 1, 0, 0, 0, 2, 0, 0],
            "spdy SYN_STREAM frame: 2 bytes, fewer than the 10 it needs",
        ),
        (
            &[0x80, 3, 0, 7, 0, 0, 0, 4, 0, 0, 0, 0],
            "spdy GOAWAY frame: 4 bytes where it has 8",
        ),
        (&[0, 0, 0, 0, 0, 0, 0, 0], "spdy data frame: stream id 0"),
    ];
    for (wire, want) in cases {
        let err = FrameDecoder::new(Limits::default())
            .decode(wire)
            .unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn tiny_and_huge_block_limits_hold() {
    let mut wire = Vec::new();
    FrameEncoder::new()
        .encode(&syn(Headers::new().with("port", "80")), &mut wire)
        .unwrap();
    // The block: count, "port", "80" with their lengths: 18 bytes.
    for limit in [0, 1, 17] {
        let limits = Limits {
            max_header_block: limit,
            ..Limits::default()
        };
        let err = FrameDecoder::new(limits).decode(&wire).unwrap_err();
        assert!(
            matches!(err, Error::HeaderBlockTooLarge { .. }),
            "{limit}: {err}"
        );
    }
    for limit in [18, usize::MAX] {
        let limits = Limits {
            max_header_block: limit,
            ..Limits::default()
        };
        assert!(
            FrameDecoder::new(limits).decode(&wire).unwrap().is_some(),
            "{limit}"
        );
    }
}

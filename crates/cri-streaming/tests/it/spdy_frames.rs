//! Frames against byte layouts computed by hand from the SPDY/3.1 spec, and round trips.

use cri_streaming::spdy::{
    Frame, FrameDecoder, FrameEncoder, Headers, Limits, Setting, SynStream, goaway, rst,
};
use proptest::prelude::*;

fn decode_all(bytes: &[u8]) -> Vec<Frame> {
    let mut decoder = FrameDecoder::new(Limits::default());
    let mut frames = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (frame, used) = decoder
            .decode(&bytes[at..])
            .expect("valid frames")
            .expect("whole frames");
        frames.push(frame);
        at += used;
    }
    frames
}

fn encode(frame: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    FrameEncoder::new()
        .encode(frame, &mut out)
        .expect("encodes");
    out
}

fn syn(stream_id: u32, headers: Headers) -> Frame {
    Frame::SynStream(SynStream {
        stream_id,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers,
    })
}

/// Frames without header blocks: (frame, its bytes as section 2.6 lays them out).
fn fixed_layouts() -> Vec<(Frame, Vec<u8>)> {
    vec![
        (
            Frame::Ping { id: 1 },
            vec![0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1],
        ),
        (
            Frame::RstStream {
                stream_id: 1,
                status: rst::CANCEL,
            },
            vec![0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 5],
        ),
        (
            Frame::WindowUpdate {
                stream_id: 1,
                delta: 0x1_0000,
            },
            vec![0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 1, 0, 1, 0, 0],
        ),
        (
            Frame::WindowUpdate {
                stream_id: 0,
                delta: 0x7fff_ffff,
            },
            vec![
                0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff,
            ],
        ),
        (
            Frame::GoAway {
                last_good_stream_id: 3,
                status: goaway::PROTOCOL_ERROR,
            },
            vec![0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 1],
        ),
        (
            Frame::Settings {
                clear: false,
                entries: vec![
                    Setting {
                        flags: 1,
                        id: 7,
                        value: 0x1_0000,
                    },
                    Setting {
                        flags: 0,
                        id: 4,
                        value: 100,
                    },
                ],
            },
            vec![
                0x80, 3, 0, 4, 0, 0, 0, 20, 0, 0, 0, 2, 1, 0, 0, 7, 0, 1, 0, 0, 0, 0, 0, 4, 0, 0,
                0, 100,
            ],
        ),
        (
            Frame::Data {
                stream_id: 1,
                fin: true,
                data: b"hi".to_vec(),
            },
            vec![0, 0, 0, 1, 1, 0, 0, 2, b'h', b'i'],
        ),
        (
            Frame::Data {
                stream_id: 0x7fff_ffff,
                fin: false,
                data: Vec::new(),
            },
            vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        ),
    ]
}

#[test]
fn fixed_frames_have_the_specs_layout() {
    for (frame, bytes) in fixed_layouts() {
        assert_eq!(encode(&frame), bytes, "{frame:?}");
        assert_eq!(decode_all(&bytes), vec![frame]);
    }
}

/// A header block a hand-written zlib stream carries: the zlib header with FDICT and the SPDY
/// dictionary's id, then the block in stored (uncompressed) deflate blocks, no zlib involved.
fn stored(block: &[u8], first: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if first {
        // CMF 0x78, FLG 0xbb: FDICT set, level 2, check bits; then DICTID.
        out.extend_from_slice(&[0x78, 0xbb, 0xe3, 0xc6, 0xa7, 0xc2]);
    }
    let len = u16::try_from(block.len()).unwrap();
    out.push(0); // BFINAL 0, BTYPE 00 (stored), padded to the byte
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(block);
    out
}

fn syn_stream_bytes(stream_id: u32, compressed: &[u8]) -> Vec<u8> {
    let len = 10 + compressed.len();
    let mut out = vec![0x80, 3, 0, 1, 0];
    out.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes()[1..]);
    out.extend_from_slice(&stream_id.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(compressed);
    out
}

/// `{"streamtype": "error"}` as section 2.6.10 lays out a block.
const ERROR_BLOCK: &[u8] = b"\0\0\0\x01\0\0\0\x0astreamtype\0\0\0\x05error";
const STDOUT_BLOCK: &[u8] = b"\0\0\0\x01\0\0\0\x0astreamtype\0\0\0\x06stdout";

#[test]
fn syn_streams_share_one_compression_context() {
    let first = syn_stream_bytes(1, &stored(ERROR_BLOCK, true));
    let second = syn_stream_bytes(3, &stored(STDOUT_BLOCK, false));
    let mut wire = first.clone();
    wire.extend_from_slice(&second);
    assert_eq!(
        decode_all(&wire),
        vec![
            syn(1, Headers::new().with("streamtype", "error")),
            syn(3, Headers::new().with("streamtype", "stdout")),
        ]
    );
    // The second block has no zlib header: it only reads as the stream's continuation.
    let mut fresh = FrameDecoder::new(Limits::default());
    let err = fresh.decode(&second).unwrap_err().to_string();
    assert!(
        err.contains("SYN_STREAM header block does not inflate"),
        "{err}"
    );
}

#[test]
fn the_first_header_block_names_the_spdy_dictionary() {
    let wire = encode(&syn(1, Headers::new().with("streamtype", "stdin")));
    assert_eq!(&wire[..4], &[0x80, 3, 0, 1]);
    assert_eq!(usize::from(wire[7]) + 8, wire.len(), "the length field");
    // zlib header with FDICT (0x20 in FLG), then the Adler-32 of the dictionary.
    assert_eq!(wire[18], 0x78);
    assert_ne!(wire[19] & 0x20, 0);
    assert_eq!(&wire[20..24], &[0xe3, 0xc6, 0xa7, 0xc2]);
}

#[test]
fn a_frame_split_anywhere_waits_for_the_rest() {
    let mut encoder = FrameEncoder::new();
    let mut wire = Vec::new();
    let frames = [
        syn(1, Headers::new().with("streamtype", "error")),
        Frame::Data {
            stream_id: 1,
            fin: false,
            data: b"out".to_vec(),
        },
    ];
    for f in &frames {
        encoder.encode(f, &mut wire).unwrap();
    }
    let first_len = wire.len() - 11;
    for cut in 0..first_len {
        let mut decoder = FrameDecoder::new(Limits::default());
        assert_eq!(decoder.decode(&wire[..cut]).unwrap(), None, "cut at {cut}");
    }
    assert_eq!(decode_all(&wire), frames);
}

#[test]
fn unknown_control_frames_are_skipped_with_their_payload() {
    // Type 10 (SPDY/3's CREDENTIAL, gone in 3.1) with 3 bytes, then a PING.
    let wire = [
        0x80, 3, 0, 10, 0, 0, 0, 3, 1, 2, 3, 0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 9,
    ];
    assert_eq!(
        decode_all(&wire),
        vec![
            Frame::Unknown {
                frame_type: 10,
                flags: 0
            },
            Frame::Ping { id: 9 }
        ]
    );
}

#[test]
fn repeated_values_travel_nul_separated() {
    let headers = Headers::new().with("x-multi", "a\0b").with("empty", "");
    let frame = Frame::Headers {
        stream_id: 5,
        fin: true,
        headers: headers.clone(),
    };
    let back = decode_all(&encode(&frame));
    assert_eq!(back, vec![frame]);
    assert_eq!(headers.get("X-Multi"), Some("a"));
    assert_eq!(headers.get("empty"), Some(""));
}

#[test]
fn what_cannot_be_encoded_is_refused_and_leaves_the_context_alone() {
    let mut encoder = FrameEncoder::new();
    let mut out = vec![0xaa];
    for bad in [
        syn(0, Headers::new()),
        syn(1, Headers::new().with("StreamType", "x")),
        syn(1, Headers::new().with("", "x")),
        syn(1, Headers::new().with("a", "1").with("a", "2")),
        Frame::RstStream {
            stream_id: 1,
            status: 0,
        },
        Frame::WindowUpdate {
            stream_id: 1,
            delta: 0,
        },
        Frame::Unknown {
            frame_type: 5,
            flags: 0,
        },
    ] {
        let err = encoder.encode(&bad, &mut out).unwrap_err().to_string();
        assert!(err.starts_with("cannot encode spdy "), "{err}");
        assert_eq!(out, [0xaa], "nothing appended for {bad:?}");
    }
    // The context is as new: what follows still decodes from a fresh decoder.
    let good = syn(1, Headers::new().with("a", "1"));
    encoder.encode(&good, &mut out).unwrap();
    assert_eq!(decode_all(&out[1..]), vec![good]);
}

fn header_name() -> impl Strategy<Value = String> {
    "[a-z0-9-]{1,12}"
}

fn headers() -> impl Strategy<Value = Headers> {
    proptest::collection::btree_map(header_name(), "[ -~]{0,40}", 0..6)
        .prop_map(|m| Headers(m.into_iter().collect()))
}

fn frame() -> impl Strategy<Value = Frame> {
    let id = 1u32..=0x7fff_ffff;
    prop_oneof![
        (
            id.clone(),
            0u32..=0x7fff_ffff,
            0u8..8,
            any::<u8>(),
            any::<bool>(),
            any::<bool>(),
            headers()
        )
            .prop_map(
                |(stream_id, associated_to, priority, slot, fin, unidirectional, headers)| {
                    Frame::SynStream(SynStream {
                        stream_id,
                        associated_to,
                        priority,
                        slot,
                        fin,
                        unidirectional,
                        headers,
                    })
                }
            ),
        (id.clone(), any::<bool>(), headers()).prop_map(|(stream_id, fin, headers)| {
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            }
        }),
        (id.clone(), any::<bool>(), headers()).prop_map(|(stream_id, fin, headers)| {
            Frame::Headers {
                stream_id,
                fin,
                headers,
            }
        }),
        (id.clone(), 1u32..).prop_map(|(stream_id, status)| Frame::RstStream { stream_id, status }),
        any::<u32>().prop_map(|id| Frame::Ping { id }),
        (0u32..=0x7fff_ffff, any::<u32>()).prop_map(|(last_good_stream_id, status)| {
            Frame::GoAway {
                last_good_stream_id,
                status,
            }
        }),
        (0u32..=0x7fff_ffff, 1u32..=0x7fff_ffff)
            .prop_map(|(stream_id, delta)| Frame::WindowUpdate { stream_id, delta }),
        (
            any::<bool>(),
            proptest::collection::vec((any::<u8>(), 0u32..0x100_0000, any::<u32>()), 0..4)
        )
            .prop_map(|(clear, e)| Frame::Settings {
                clear,
                entries: e
                    .into_iter()
                    .map(|(flags, id, value)| Setting { flags, id, value })
                    .collect()
            }),
        (
            id,
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..200)
        )
            .prop_map(|(stream_id, fin, data)| Frame::Data {
                stream_id,
                fin,
                data
            }),
    ]
}

proptest! {
    /// A connection's worth of frames, through one encoder and one decoder, comes back equal.
    #[test]
    fn frames_round_trip_through_one_connection(frames in proptest::collection::vec(frame(), 1..12)) {
        let mut encoder = FrameEncoder::new();
        let mut wire = Vec::new();
        for f in &frames {
            encoder.encode(f, &mut wire).unwrap();
        }
        prop_assert_eq!(decode_all(&wire), frames);
    }
}

//! Tests of the read-side machine: pass-through, rewriting, re-framing,
//! faults, and independence from how input and output are split.

use super::LOCALHOST;
use super::frame::{
    FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PADDED, FLAG_PRIORITY, Inbound, InboundEvent, PREFACE,
};
use super::hpack_out::push_head;
use super::tests::{SOCK, block, frame, request_block};
use proptest::prelude::*;
use tokio::io::ReadBuf;

/// Runs `input` through a fresh machine, `chunk` input bytes and at most
/// `dst_len` output bytes per call, the way a reader with a tiny buffer would.
fn run(input: &[u8], chunk: usize, dst_len: usize) -> (Vec<u8>, Vec<InboundEvent>) {
    let mut machine = Inbound::new(true);
    let mut events = Vec::new();
    let mut output = Vec::new();
    let mut scratch = vec![0u8; dst_len];
    for piece in input.chunks(chunk) {
        let mut pos = 0;
        loop {
            let mut dst = ReadBuf::new(&mut scratch);
            pos += machine.process(&piece[pos..], &mut dst, &mut events);
            output.extend_from_slice(dst.filled());
            if dst.filled().is_empty() {
                assert_eq!(pos, piece.len(), "no output yet input left over");
                break;
            }
        }
    }
    (output, events)
}

/// Splits `bytes` (server-to-client side) into frames: (type, flags, stream, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let sid = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        out.push((bytes[3], bytes[4], sid, bytes[9..9 + len].to_vec()));
        bytes = &bytes[9 + len..];
    }
    assert!(bytes.is_empty(), "trailing partial frame");
    out
}

fn decode_all(block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    loona_hpack::Decoder::new()
        .decode(block)
        .expect("re-encoded block decodes")
}

#[test]
fn http1_passes_through_untouched() {
    let req = b"POST /info HTTP/1.1\r\nHost: x\r\n\r\n";
    let (out, events) = run(req, 3, 5);
    assert_eq!(out, req);
    assert!(events.is_empty());
}

#[test]
fn frames_pass_and_headers_are_rewritten() {
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
    input.extend(frame(0x1, FLAG_END_HEADERS, 1, &request_block(Some(SOCK))));
    input.extend(frame(0x0, FLAG_END_STREAM, 1, b"hello"));
    let (out, events) = run(&input, input.len(), 1 << 16);

    let mut want = PREFACE.to_vec();
    want.extend(frame(0x4, 0, 0, &[]));
    want.extend(frame(
        0x1,
        FLAG_END_HEADERS,
        1,
        &request_block(Some(LOCALHOST)),
    ));
    want.extend(frame(0x0, FLAG_END_STREAM, 1, b"hello"));
    assert_eq!(out, want);
    assert_eq!(
        events,
        vec![InboundEvent::Rewrote {
            stream_id: 1,
            original: SOCK.to_vec(),
            replaced: 1
        }]
    );
}

#[test]
fn padding_is_stripped_priority_kept_end_stream_preserved() {
    let blk = request_block(Some(b"localhost"));
    let mut payload = vec![3]; // pad length
    payload.extend_from_slice(&[0x80, 0, 0, 0, 7]); // exclusive, depends on 0, weight 7
    payload.extend_from_slice(&blk);
    payload.extend_from_slice(&[0, 0, 0]);
    let mut input = PREFACE.to_vec();
    input.extend(frame(
        0x1,
        FLAG_END_HEADERS | FLAG_END_STREAM | FLAG_PADDED | FLAG_PRIORITY,
        3,
        &payload,
    ));
    let (out, events) = run(&input, 1, 1);
    assert!(events.is_empty());
    let got = frames(&out[24..]);
    let mut want_payload = vec![0x80, 0, 0, 0, 7];
    want_payload.extend_from_slice(&blk);
    assert_eq!(
        got,
        vec![(
            0x1,
            FLAG_END_HEADERS | FLAG_END_STREAM | FLAG_PRIORITY,
            3,
            want_payload
        )]
    );
}

#[test]
fn continuations_are_joined_and_large_blocks_resplit() {
    let big = vec![b'a'; 40 * 1024];
    let blk = block(&[
        (b":method", b"POST"),
        (b":path", b"/x"),
        (b":authority", SOCK),
        (b"x-big", &big),
    ]);
    let mut input = PREFACE.to_vec();
    let parts: Vec<&[u8]> = blk.chunks(10_000).collect();
    for (i, part) in parts.iter().enumerate() {
        let kind = if i == 0 { 0x1 } else { 0x9 };
        let mut flags = if i == 0 { FLAG_END_STREAM } else { 0 };
        if i + 1 == parts.len() {
            flags |= FLAG_END_HEADERS;
        }
        input.extend(frame(kind, flags, 5, part));
    }
    let (out, events) = run(&input, 777, 1000);
    assert_eq!(events.len(), 1);
    let got = frames(&out[24..]);
    assert_eq!(got.len(), 3, "40 KiB re-split into 16 KiB frames");
    assert_eq!((got[0].0, got[0].1), (0x1, FLAG_END_STREAM));
    assert_eq!((got[1].0, got[1].1), (0x9, 0));
    assert_eq!((got[2].0, got[2].1), (0x9, FLAG_END_HEADERS));
    assert!(got.iter().all(|f| f.2 == 5 && f.3.len() <= 16_384));
    let joined: Vec<u8> = got.iter().flat_map(|f| f.3.clone()).collect();
    let fields = decode_all(&joined);
    assert_eq!(fields[2], (b":authority".to_vec(), b"localhost".to_vec()));
    assert_eq!(fields[3].1, big);
}

fn assert_fault(input_tail: &[u8], stream_id: u32, reason: &str) {
    let mut input = PREFACE.to_vec();
    input.extend_from_slice(input_tail);
    input.extend(frame(0x0, 0, 1, b"after")); // passes through raw
    let (out, events) = run(&input, 5, 7);
    assert!(
        matches!(&events[..], [InboundEvent::Fault { stream_id: s, reason: r }] if *s == stream_id && *r == reason),
        "{events:?}"
    );
    // Nothing of the faulty block reached h2 before the poisoned one, and
    // whatever follows the fault point is passed on raw.
    assert!(
        out[24..].starts_with(&frame(0x1, FLAG_END_HEADERS, stream_id, &[0x80])),
        "{:x?}",
        &out[24..]
    );
    assert!(out.ends_with(&frame(0x0, 0, 1, b"after")));
}

#[test]
fn faults_poison_the_block_and_switch_to_passthrough() {
    assert_fault(
        &frame(0x9, FLAG_END_HEADERS, 1, &[0x82]),
        1,
        "CONTINUATION without HEADERS",
    );
    assert_fault(
        &frame(0x1, FLAG_END_HEADERS, 1, &[0x80]),
        1,
        "hpack decoding failed",
    );
    assert_fault(
        &frame(0x1, FLAG_END_HEADERS | FLAG_PADDED, 1, &[9, 0x82]),
        1,
        "HEADERS padding longer than payload",
    );
    assert_fault(
        &frame(0x1, FLAG_END_HEADERS | FLAG_PADDED, 1, &[]),
        1,
        "PADDED HEADERS frame without pad length",
    );
    assert_fault(
        &frame(0x1, FLAG_END_HEADERS | FLAG_PRIORITY, 1, &[0, 0]),
        1,
        "HEADERS priority fields truncated",
    );
    let mut head = Vec::new();
    push_head(&mut head, 16_385, 0x1, 0, 7);
    assert_fault(&head, 7, "HEADERS frame larger than 16384 bytes");

    let mut interrupted = frame(0x1, 0, 3, &[0x82]);
    interrupted.extend(frame(0x0, 0, 3, b"x"));
    assert_fault(&interrupted, 3, "header block interrupted by another frame");
    let mut other_stream = frame(0x1, 0, 3, &[0x82]);
    other_stream.extend(frame(0x9, FLAG_END_HEADERS, 5, &[0x84]));
    assert_fault(&other_stream, 3, "CONTINUATION on a different stream");
    let mut flood = frame(0x1, 0, 3, &[0x82]);
    for _ in 0..40 {
        flood.extend(frame(0x9, 0, 3, &[]));
    }
    assert_fault(&flood, 3, "too many CONTINUATION frames");
}

#[test]
fn oversized_block_is_a_fault_without_buffering_it_all() {
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x1, 0, 1, &[0x82; 16_384]));
    for _ in 0..16 {
        input.extend(frame(0x9, 0, 1, &[0x82; 16_384]));
    }
    let (out, events) = run(&input, 4096, 4096);
    assert_eq!(
        events,
        vec![InboundEvent::Fault {
            stream_id: 1,
            reason: "header block larger than 256 KiB"
        }]
    );
    // Everything after the fault point (the last frame's payload) passes raw.
    assert_eq!(out.len(), 24 + 10);
}

/// One arbitrary frame: any type (biased to HEADERS/CONTINUATION), flags,
/// stream, and a payload of random or HPACK-looking bytes.
fn arb_frame() -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![Just(0x1u8), Just(0x9u8), Just(0x0u8), any::<u8>()];
    let payload = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        proptest::collection::vec(
            prop_oneof![
                Just(0x82u8),
                Just(0x41u8),
                Just(0xbeu8),
                Just(0x3fu8),
                any::<u8>()
            ],
            0..64
        ),
    ];
    (kind, any::<u8>(), 0u32..4, payload).prop_map(|(k, f, s, p)| frame(k, f, s, &p))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_after_preface_are_handled(
        tail in proptest::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..64,
        dst in 1usize..64,
    ) {
        let mut input = PREFACE.to_vec();
        input.extend_from_slice(&tail);
        let (out, _) = run(&input, chunk, dst);
        // Each input byte can at most become one reference to a full
        // dynamic-table entry (4096 - 32 bytes) plus encoding overhead; a
        // fault adds one 10-byte frame.
        prop_assert!(out.len() <= 24 + 10 + tail.len() * 4100);
    }

    #[test]
    fn arbitrary_frames_are_handled_the_same_whatever_the_split(
        frames in proptest::collection::vec(arb_frame(), 0..24),
        chunk in 1usize..40,
        dst in 1usize..40,
    ) {
        let mut input = PREFACE.to_vec();
        for f in &frames {
            input.extend_from_slice(f);
        }
        let whole = run(&input, input.len(), 1 << 20);
        let split = run(&input, chunk, dst);
        prop_assert!(whole.0.len() <= 24 + 10 + (input.len() - 24) * 4100);
        prop_assert_eq!(whole, split);
    }
}

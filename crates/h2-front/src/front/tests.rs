//! Unit tests of the authority rule, block rewriting and its robustness,
//! and the write-side observer. Read-side machine tests are in
//! `frame_tests.rs`, decoder tests in `hpack_in_tests.rs`. loona-hpack
//! (a dev-dependency) decodes our output as an independent check.

use super::frame::FLAG_END_HEADERS;
use super::hpack_out::{encode_field, encode_integer, push_head};
use super::stream::{ObservedError, WriteObserver};
use super::*;
use proptest::prelude::*;

pub(super) const SOCK: &[u8] = b"/var/run/crio-lite/crio-lite.sock";

pub(super) fn block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        encode_field(&mut out, n, v);
    }
    out
}

pub(super) fn request_block(authority: Option<&[u8]>) -> Vec<u8> {
    let mut fields: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/runtime.v1.RuntimeService/Version"),
    ];
    if let Some(a) = authority {
        fields.push((b":authority", a));
    }
    fields.push((b"te", b"trailers"));
    block(&fields)
}

pub(super) fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    push_head(&mut out, payload.len(), kind, flags, stream_id);
    out.extend_from_slice(payload);
    out
}

fn decode_all(block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    loona_hpack::Decoder::new()
        .decode(block)
        .expect("re-encoded block decodes")
}

#[test]
fn authority_rule_matches_h2() {
    for ok in [
        &b"localhost"[..],
        b"localhost:10250",
        b"127.0.0.1:1",
        b"[::1]:80",
        b"user@host",
        b"a-b.c_d~e",
    ] {
        assert!(authority_is_valid(ok), "{}", ok.escape_ascii());
    }
    let bad: [&[u8]; 8] = [
        SOCK,
        b"%2Fvar%2Frun%2Fcrio-lite%2Fcrio-lite.sock",
        b"",
        b"a b",
        b"unix:/x",
        b"h\xc3\xa9",
        b"a:1:2",
        b"x\n",
    ];
    for b in bad {
        assert!(!authority_is_valid(b), "{}", b.escape_ascii());
    }
}

#[test]
fn rewriter_replaces_only_invalid_authority() {
    let mut rw = BlockRewriter::new();
    for (authority, want, replaced) in [
        (Some(SOCK), Some(LOCALHOST), 1),
        (Some(&b"%2Fvar%2Frun%2Fx.sock"[..]), Some(LOCALHOST), 1),
        (Some(&b"localhost"[..]), Some(&b"localhost"[..]), 0),
        (None, None, 0),
    ] {
        let mut out = Vec::new();
        let outcome = rw
            .rewrite(&request_block(authority), &mut out)
            .expect("valid block");
        assert_eq!(outcome.replaced, replaced);
        if replaced > 0 {
            assert_eq!(outcome.original, authority.unwrap_or_default());
        }
        assert_eq!(out, request_block(want));
    }
}

#[test]
fn rewriter_keeps_table_in_sync_and_never_indexes() {
    // Literal with incremental indexing, indexed name 1 (:authority).
    let mut first = vec![0x82, 0x41];
    encode_integer(&mut first, 0, 7, SOCK.len());
    first.extend_from_slice(SOCK);
    let mut rw = BlockRewriter::new();
    let mut out = Vec::new();
    rw.rewrite(&first, &mut out).expect("first");
    // 0xbe = index 62, the entry just added by the client.
    let mut again = Vec::new();
    let outcome = rw.rewrite(&[0x82, 0xbe], &mut again).expect("second");
    assert_eq!(outcome.replaced, 1);
    assert_eq!(out, again);
    assert_eq!(
        decode_all(&again),
        vec![
            (b":method".to_vec(), b"GET".to_vec()),
            (b":authority".to_vec(), b"localhost".to_vec())
        ]
    );
}

#[test]
fn rewriter_rejects_what_h2_would_reject() {
    let cases: [(&[u8], &str); 5] = [
        (&[0x80], "hpack decoding failed"),
        (
            &[0x82, 0x3f, 0xe1, 0x1f],
            "dynamic table size update after a header field",
        ),
        (&[0x3f, 0xe2, 0x1f, 0x82], "hpack decoding failed"), // size update 4097 > 4096
        (&[0x00, 0x05, b'a'], "hpack decoding failed"),
        (&[0x20], "hpack decoding failed"), // size update at the end of the block
    ];
    for (input, reason) in cases {
        assert_eq!(
            BlockRewriter::new().rewrite(input, &mut Vec::new()),
            Err(reason),
            "{input:x?}"
        );
    }
    // A size update before the first field is fine.
    assert!(
        BlockRewriter::new()
            .rewrite(&[0x3f, 0xe1, 0x1f, 0x82], &mut Vec::new())
            .is_ok()
    );
}

#[test]
fn rewriter_bounds_output_not_huffman_strings() {
    // 5000 fields "literal without indexing, indexed name 1" with a
    // one-octet Huffman value (0x1f is 'a' (00011) padded with EOS bits):
    // Huffman strings cost no more than raw ones, so they are not counted.
    let mut many = Vec::new();
    for _ in 0..5000 {
        many.extend_from_slice(&[0x01, 0x81, 0x1f]);
    }
    let mut out = Vec::new();
    let outcome = BlockRewriter::new().rewrite(&many, &mut out);
    assert_eq!(outcome.map(|o| o.replaced), Ok(0));
    assert_eq!(decode_all(&out).len(), 5000);

    // Compression bomb: one 4000-byte entry, then referenced 300 times.
    let mut bomb = vec![0x40];
    hpack_out::encode_string(&mut bomb, b"x-big");
    hpack_out::encode_string(&mut bomb, &[b'v'; 4000]);
    bomb.extend(std::iter::repeat_n(0xbe, 300));
    let mut out = Vec::new();
    assert_eq!(
        BlockRewriter::new().rewrite(&bomb, &mut out),
        Err("decoded header block larger than 1 MiB")
    );
    assert!(out.len() <= MAX_ENCODED_BLOCK);
}

#[test]
fn rewriter_refuses_to_continue_after_an_error() {
    let mut rw = BlockRewriter::new();
    assert_eq!(
        rw.rewrite(&[0x80], &mut Vec::new()),
        Err("hpack decoding failed")
    );
    assert_eq!(
        rw.rewrite(&[0x82], &mut Vec::new()),
        Err("hpack decoder unusable after an earlier error")
    );
}

// Default config (256 cases): `PROPTEST_CASES=100000 cargo test --release
// rewriter_survives` runs the long version.
proptest! {

    #[test]
    fn rewriter_survives_random_input(
        blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..256), 1..6),
    ) {
        let mut rw = BlockRewriter::new();
        for b in &blocks {
            let mut out = Vec::new();
            if rw.rewrite(b, &mut out).is_ok() {
                prop_assert!(out.len() <= MAX_ENCODED_BLOCK);
            }
        }
    }

    #[test]
    fn rewriter_survives_hpack_shaped_input(
        blocks in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![
                Just(0x40u8), Just(0x00), Just(0x10), Just(0x3f), Just(0x7f), Just(0xff), Just(0x80),
                Just(0xbe), Just(0x9f), Just(0xe1), Just(0x1f), any::<u8>(),
            ], 0..256),
            1..6,
        ),
    ) {
        let mut rw = BlockRewriter::new();
        for b in &blocks {
            let mut out = Vec::new();
            if rw.rewrite(b, &mut out).is_ok() {
                // What h2 receives always decodes.
                prop_assert!(loona_hpack::Decoder::new().decode(&out).is_ok());
            }
        }
    }
}

fn observed(bytes: &[u8], splits: &[usize]) -> Vec<ObservedError> {
    let mut obs = WriteObserver::default();
    let mut events = Vec::new();
    let mut rest = bytes;
    for &s in splits {
        let (a, b) = rest.split_at(s.min(rest.len()));
        obs.observe(a, |e| events.push(e));
        rest = b;
    }
    obs.observe(rest, |e| events.push(e));
    events
}

fn server_bytes() -> (Vec<u8>, Vec<ObservedError>) {
    let mut goaway = vec![0, 0, 0, 5, 0, 0, 0, 9];
    goaway.extend(std::iter::repeat_n(b'\n', 300));
    let mut bytes = frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100]);
    bytes.extend(frame(0x1, FLAG_END_HEADERS, 1, &[0x88]));
    bytes.extend(frame(0x3, 0, 1, &[0, 0, 0, 8])); // CANCEL: quiet
    bytes.extend(frame(0x3, 0, 3, &[0, 0, 0, 1]));
    bytes.extend(frame(0x0, 0, 5, &[0x3; 40])); // DATA that looks like RST bytes
    bytes.extend(frame(0x3, 0, 7, &[0, 0])); // malformed: too short, ignored
    bytes.extend(frame(0x7, 0, 0, &[0, 0, 0, 5, 0, 0, 0, 0])); // NO_ERROR: quiet
    bytes.extend(frame(0x7, 0, 0, &goaway));
    bytes.extend(frame(0x7, 0, 0, &[0x80, 0, 0, 1, 0, 0, 0, 0xb]));
    let want = vec![
        ObservedError {
            frame_type: 0x3,
            stream_id: 3,
            code: 1,
            debug_data: vec![],
        },
        ObservedError {
            frame_type: 0x7,
            stream_id: 5,
            code: 9,
            debug_data: vec![b'\n'; 256],
        },
        ObservedError {
            frame_type: 0x7,
            stream_id: 1,
            code: 0xb,
            debug_data: vec![],
        },
    ];
    (bytes, want)
}

#[test]
fn observer_reports_errors_byte_by_byte() {
    let (bytes, want) = server_bytes();
    let ones: Vec<usize> = vec![1; bytes.len()];
    assert_eq!(observed(&bytes, &ones), want);
    assert_eq!(observed(&bytes, &[]), want);
}

proptest! {
    #[test]
    fn observer_reports_errors_whatever_the_split(splits in proptest::collection::vec(0usize..60, 0..40)) {
        let (bytes, want) = server_bytes();
        prop_assert_eq!(observed(&bytes, &splits), want);
    }
}

/// Appends `s` as a Huffman-coded string literal, as h2 and grpc-go send.
fn huffman_string(out: &mut Vec<u8>, s: &[u8]) {
    let mut coded = Vec::new();
    super::huffman::encode(s, &mut coded);
    encode_integer(out, 0x80, 7, coded.len());
    out.extend_from_slice(&coded);
}

/// A tonic client's first and later `Version` request blocks, encoded the
/// way h2 0.4 encodes them: the first indexes four fields, later ones
/// refer to them; `:path` is never indexed.
fn tonic_blocks() -> (Vec<u8>, Vec<u8>) {
    const PATH: &[u8] = b"/runtime.v1.RuntimeService/Version";
    let mut first = vec![0x83, 0x86, 0x04];
    huffman_string(&mut first, PATH);
    first.push(0x41);
    huffman_string(&mut first, b"localhost");
    first.push(0x5f);
    huffman_string(&mut first, b"application/grpc");
    first.push(0x7a);
    huffman_string(&mut first, b"tonic/0.14.9");
    first.extend_from_slice(&[0x40]);
    huffman_string(&mut first, b"te");
    huffman_string(&mut first, b"trailers");
    let mut later = vec![0x83, 0x86, 0x04];
    huffman_string(&mut later, PATH);
    later.extend_from_slice(&[0xc1, 0xc0, 0xbf, 0xbe]);
    (first, later)
}

#[test]
fn tonic_blocks_decode_to_the_same_request() {
    let (first, later) = tonic_blocks();
    let mut rw = BlockRewriter::new();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    rw.rewrite(&first, &mut a).expect("first");
    rw.rewrite(&later, &mut b).expect("later");
    assert_eq!(a, b);
    let fields = decode_all(&a);
    assert_eq!(fields.len(), 7);
    assert_eq!(fields[2].1, b"/runtime.v1.RuntimeService/Version");
    assert_eq!(fields[6], (b"te".to_vec(), b"trailers".to_vec()));
}

/// Per-block cost of the rewrite, for a release build:
/// `cargo test -j1 --release -p h2-front --lib front -- --ignored --nocapture`.
#[test]
#[ignore = "timing, meaningful in release: run with --ignored --nocapture"]
fn rewrite_cost_per_tonic_request() {
    use std::hint::black_box;
    use std::time::Instant;
    let (first, later) = tonic_blocks();
    let mut out = Vec::new();
    let rounds: u32 = 20_000;

    let start = Instant::now();
    for _ in 0..rounds {
        out.clear();
        let mut rw = BlockRewriter::new();
        black_box(rw.rewrite(black_box(&first), &mut out)).expect("first");
    }
    let new_connection = start.elapsed() / rounds;

    let mut rw = BlockRewriter::new();
    rw.rewrite(&first, &mut out).expect("first");
    let start = Instant::now();
    for _ in 0..rounds {
        out.clear();
        black_box(rw.rewrite(black_box(&later), &mut out)).expect("later");
    }
    let kept_alive = start.elapsed() / rounds;

    let mut path = Vec::new();
    super::huffman::encode(b"/runtime.v1.RuntimeService/Version", &mut path);
    let mut plain = Vec::new();
    let start = Instant::now();
    for _ in 0..rounds {
        plain.clear();
        black_box(super::huffman::decode(black_box(&path), &mut plain)).expect("path");
    }
    let string = start.elapsed() / rounds;

    println!(
        "rewrite per block: first request on a connection {new_connection:?} \
         ({} bytes), later request {kept_alive:?} ({} bytes); \
         one {}-byte Huffman string {string:?}",
        first.len(),
        later.len(),
        path.len()
    );
}

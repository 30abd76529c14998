//! Tests of the HPACK decoder: RFC 7541 Appendix C, integer and string
//! edge cases, errors, and properties (no panics, round trips through our
//! encoder, same results as loona-hpack).

use super::HEADER_TABLE_SIZE;
use super::hpack_in::{DecodeError, Decoder, integer};
use super::hpack_out::{encode_field, encode_integer, encode_string};
use super::huffman;
use proptest::prelude::*;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;
type Field = (&'static str, &'static str);

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut fields = Vec::new();
    d.decode(block, |n, v| {
        fields.push((n.to_vec(), v.to_vec()));
        Ok(())
    })?;
    Ok(fields)
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

fn assert_table(d: &Decoder, want: &[(&str, &str)], size: usize) {
    let entries: Fields = d.entries().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    assert_eq!(entries, fields(want));
    assert_eq!(d.table_size(), size);
}

#[test]
fn rfc7541_c2_single_representations() {
    type Case = (&'static str, Field, &'static [Field], usize);
    let cases: [Case; 4] = [
        (
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            ("custom-key", "custom-header"),
            &[("custom-key", "custom-header")],
            55,
        ),
        (
            "040c 2f73 616d 706c 652f 7061 7468",
            (":path", "/sample/path"),
            &[],
            0,
        ),
        (
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            ("password", "secret"),
            &[],
            0,
        ),
        ("82", (":method", "GET"), &[], 0),
    ];
    for (block, field, table, size) in cases {
        let mut d = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
        assert_eq!(decode(&mut d, &hex(block)), Ok(fields(&[field])), "{block}");
        assert_table(&d, table, size);
    }
}

/// A block, the fields it decodes to, the table after it, the table's size.
type Step = (&'static str, &'static [Field], &'static [Field], usize);

const AUTH: (&str, &str) = (":authority", "www.example.com");
const NO_CACHE: (&str, &str) = ("cache-control", "no-cache");
const CUSTOM: (&str, &str) = ("custom-key", "custom-value");
const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    AUTH,
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    AUTH,
    NO_CACHE,
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    AUTH,
    CUSTOM,
];

/// Requests of C.3 (raw strings) and C.4 (Huffman): same fields, same tables.
const C3: [Step; 3] = [
    (
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        REQ1,
        &[AUTH],
        57,
    ),
    (
        "8286 84be 5808 6e6f 2d63 6163 6865",
        REQ2,
        &[NO_CACHE, AUTH],
        110,
    ),
    (
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        REQ3,
        &[CUSTOM, NO_CACHE, AUTH],
        164,
    ),
];
const C4: [Step; 3] = [
    (
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        C3[0].1,
        C3[0].2,
        57,
    ),
    ("8286 84be 5886 a8eb 1064 9cbf", C3[1].1, C3[1].2, 110),
    (
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        C3[2].1,
        C3[2].2,
        164,
    ),
];

const S302: (&str, &str) = (":status", "302");
const S307: (&str, &str) = (":status", "307");
const PRIVATE: (&str, &str) = ("cache-control", "private");
const DATE1: (&str, &str) = ("date", "Mon, 21 Oct 2013 20:13:21 GMT");
const DATE2: (&str, &str) = ("date", "Mon, 21 Oct 2013 20:13:22 GMT");
const LOCATION: (&str, &str) = ("location", "https://www.example.com");
const GZIP: (&str, &str) = ("content-encoding", "gzip");
const COOKIE: (&str, &str) = (
    "set-cookie",
    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
);

/// Responses of C.5 (raw) and C.6 (Huffman) with a 256-octet table, so
/// entries are evicted.
const C5: [Step; 3] = [
    (
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        &[S302, PRIVATE, DATE1, LOCATION],
        &[LOCATION, DATE1, PRIVATE, S302],
        222,
    ),
    (
        "4803 3330 37c1 c0bf",
        &[S307, PRIVATE, DATE1, LOCATION],
        &[S307, LOCATION, DATE1, PRIVATE],
        222,
    ),
    (
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
        &[(":status", "200"), PRIVATE, DATE2, LOCATION, GZIP, COOKIE],
        &[COOKIE, GZIP, DATE2],
        215,
    ),
];
const C6: [Step; 3] = [
    (
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        C5[0].1,
        C5[0].2,
        222,
    ),
    ("4883 640e ffc1 c0bf", C5[1].1, C5[1].2, 222),
    (
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        C5[2].1,
        C5[2].2,
        215,
    ),
];

#[test]
fn rfc7541_c3_to_c6_sequences_and_tables() {
    for (name, table_size, steps) in [
        ("C.3", HEADER_TABLE_SIZE, C3),
        ("C.4", HEADER_TABLE_SIZE, C4),
        ("C.5", 256, C5),
        ("C.6", 256, C6),
    ] {
        let mut d = Decoder::new(table_size, usize::MAX);
        for (i, (block, want, table, size)) in steps.into_iter().enumerate() {
            let got = decode(&mut d, &hex(block));
            assert_eq!(got, Ok(fields(want)), "{name}.{}", i + 1);
            assert_table(&d, table, size);
        }
    }
}

#[test]
fn integers_rfc7541_c1_and_edges() {
    let u32_max = usize::try_from(u32::MAX).expect("usize holds u32");
    let mut max = Vec::new();
    encode_integer(&mut max, 0xe0, 5, u32_max);
    let mut over = Vec::new();
    encode_integer(&mut over, 0, 5, u32_max + 1);
    // Input, prefix bits, value, octets left after it.
    type Case<'a> = (&'a [u8], u8, Result<usize, DecodeError>, usize);
    let cases: [Case<'_>; 14] = [
        (&[0x0a], 5, Ok(10), 0),
        (&[0xea], 5, Ok(10), 0), // flag bits above the prefix ignored
        (&[0x1f, 0x9a, 0x0a, 0x55], 5, Ok(1337), 1),
        (&[0x2a], 8, Ok(42), 0),
        (&[0x1e], 5, Ok(30), 0),
        (&[0x1f, 0x00], 5, Ok(31), 0),
        (&[0x7f, 0x01], 7, Ok(128), 0),
        (&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x00], 5, Ok(31), 0), // 5 continuations
        (
            &[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
            5,
            Err(DecodeError::IntegerOverflow),
            0,
        ),
        (&max, 5, Ok(u32_max), 0),
        (&over, 5, Err(DecodeError::IntegerOverflow), 0),
        (&[], 5, Err(DecodeError::Truncated), 0),
        (&[0x1f], 5, Err(DecodeError::Truncated), 0),
        (&[0x1f, 0xff, 0xff], 5, Err(DecodeError::Truncated), 0),
    ];
    for (input, prefix, want, left) in cases {
        let mut rest = input;
        assert_eq!(integer(&mut rest, prefix), want, "{input:x?}");
        if want.is_ok() {
            assert_eq!(rest.len(), left, "{input:x?}");
        }
    }
}

#[test]
fn malformed_blocks_are_rejected() {
    let huffman_pad = vec![0x00, 0x01, b'x', 0x81, 0x18]; // 'a' + 000
    let huffman_eos = vec![0x00, 0x01, b'x', 0x84, 0xff, 0xff, 0xff, 0xff];
    let mut big_index = vec![];
    encode_integer(&mut big_index, 0x00, 4, 62); // literal, name index 62
    encode_string(&mut big_index, b"v");
    let cases: [(&[u8], DecodeError); 11] = [
        (&[0x80], DecodeError::Index(0)),
        (&[0xbe], DecodeError::Index(62)),
        (&[0xff, 0x80, 0x01], DecodeError::Index(255)),
        (&big_index, DecodeError::Index(62)),
        (&huffman_pad, DecodeError::HuffmanPadding),
        (&huffman_eos, DecodeError::HuffmanEos),
        (&[0x82, 0x20, 0x82], DecodeError::SizeUpdateAfterField),
        (
            &[0x3f, 0xe2, 0x1f, 0x82],
            DecodeError::SizeUpdateTooLarge(4097),
        ),
        (&[0x20], DecodeError::SizeUpdateAtEnd),
        (&[0x40, 0x01, b'a', 0x05, b'b'], DecodeError::Truncated),
        (&[0x40, 0x01], DecodeError::Truncated),
    ];
    for (block, want) in cases {
        let mut d = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
        assert_eq!(decode(&mut d, block), Err(want), "{block:x?}");
    }
}

#[test]
fn size_updates_at_the_start_resize_the_table() {
    let mut d = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
    let mut add = vec![0x40];
    encode_string(&mut add, b"x-a");
    encode_string(&mut add, b"1");
    decode(&mut d, &add).expect("add");
    assert_table(&d, &[("x-a", "1")], 36);
    // Two updates (down to 0, then back up) before the first field evict
    // everything (RFC 7541 §4.2, §4.3).
    let got = decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]);
    assert_eq!(got, Ok(fields(&[(":method", "GET")])));
    assert_table(&d, &[], 0);
    assert_eq!(decode(&mut d, &[0xbe]), Err(DecodeError::Index(62)));
}

#[test]
fn insertion_evicts_oldest_and_keeps_a_name_it_refers_to() {
    let mut d = Decoder::new(100, usize::MAX);
    let mut block = vec![0x40];
    encode_string(&mut block, b"a");
    encode_string(&mut block, &[b'x'; 30]); // 63 octets
    // Indexed name 62 (the entry above), which must be evicted to make room.
    block.push(0x7e);
    encode_string(&mut block, &[b'y'; 30]);
    let got = decode(&mut d, &block).expect("valid");
    assert_eq!(got[1], (b"a".to_vec(), vec![b'y'; 30]));
    let y = "y".repeat(30);
    assert_table(&d, &[("a", &y)], 63);

    // An entry larger than the whole table empties it and is not added,
    // but the field is still decoded (RFC 7541 §4.4).
    let mut big = vec![0x40];
    encode_string(&mut big, b"b");
    encode_string(&mut big, &[b'z'; 100]);
    assert_eq!(decode(&mut d, &big).map(|f| f.len()), Ok(1));
    assert_table(&d, &[], 0);
}

#[test]
fn decoded_size_is_capped_and_callback_errors_stop_decoding() {
    let mut d = Decoder::new(HEADER_TABLE_SIZE, 20);
    // :method GET is 10 octets: two fit, the third does not.
    assert_eq!(decode(&mut d, &[0x82, 0x82]).map(|f| f.len()), Ok(2));
    assert_eq!(
        decode(&mut d, &[0x82, 0x82, 0x82]),
        Err(DecodeError::TooLarge)
    );

    let mut d = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
    let mut calls = 0;
    let result = d.decode(&[0x82, 0x86, 0x84], |_, _| {
        calls += 1;
        if calls == 2 {
            Err(DecodeError::TooLarge)
        } else {
            Ok(())
        }
    });
    assert_eq!((result, calls), (Err(DecodeError::TooLarge), 2));
}

/// Header fields with names and values of any octets, Huffman or not, in
/// every literal representation, with indexed references to what came before.
fn arbitrary_block() -> impl Strategy<Value = Vec<(u8, bool, Vec<u8>, Vec<u8>)>> {
    proptest::collection::vec(
        (
            0u8..4,
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::collection::vec(any::<u8>(), 0..100),
        ),
        0..12,
    )
}

fn push_string(out: &mut Vec<u8>, s: &[u8], huffman: bool) {
    if huffman {
        let mut coded = Vec::new();
        huffman::encode(s, &mut coded);
        encode_integer(out, 0x80, 7, coded.len());
        out.extend_from_slice(&coded);
    } else {
        encode_string(out, s);
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
    ) {
        let mut d = Decoder::new(HEADER_TABLE_SIZE, 1 << 20);
        for b in &blocks {
            let mut total = 0;
            let ok = d.decode(b, |n, v| {
                total += n.len() + v.len();
                Ok(())
            });
            prop_assert!(total <= 1 << 20);
            prop_assert!(d.table_size() <= HEADER_TABLE_SIZE);
            if ok.is_err() {
                break;
            }
        }
    }

    #[test]
    fn literal_encoder_round_trips(
        list in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..40),
             proptest::collection::vec(any::<u8>(), 0..300)),
            0..12,
        )
    ) {
        let mut block = Vec::new();
        for (n, v) in &list {
            encode_field(&mut block, n, v);
        }
        let mut d = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
        prop_assert_eq!(decode(&mut d, &block), Ok(list));
        prop_assert_eq!(d.table_size(), 0);
    }

    #[test]
    fn same_results_as_loona_hpack(blocks in proptest::collection::vec(arbitrary_block(), 1..4)) {
        let mut ours = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
        let mut loona = loona_hpack::Decoder::new();
        loona.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        for fields in blocks {
            let mut block = Vec::new();
            for (kind, huff, name, value) in fields {
                match kind {
                    // Indexed, maybe past the end of the table.
                    0 => encode_integer(&mut block, 0x80, 7, 1 + name.len() * 4),
                    // Literal with incremental indexing, new name.
                    1 => block.push(0x40),
                    // Without indexing, name from the table (dynamic if any).
                    2 => encode_integer(&mut block, 0x00, 4, 60 + name.len() % 4),
                    _ => block.push(0x10),
                }
                if kind == 0 {
                    continue;
                }
                if kind != 2 {
                    push_string(&mut block, &name, huff);
                }
                push_string(&mut block, &value, !huff);
            }
            let got = decode(&mut ours, &block);
            let want = loona.decode(&block).map_err(|_| ());
            prop_assert_eq!(got.clone().map_err(|_| ()), want, "{:x?}", block);
            if got.is_err() {
                break;
            }
        }
    }

    #[test]
    fn same_results_as_loona_hpack_on_hpack_shaped_bytes(
        blocks in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![
                Just(0x40u8), Just(0x00), Just(0x10), Just(0x3f), Just(0x7f), Just(0xff), Just(0x80),
                Just(0xbe), Just(0x9f), Just(0xe1), Just(0x1f), Just(0x20), any::<u8>(),
            ], 0..64),
            1..4,
        ),
    ) {
        let mut ours = Decoder::new(HEADER_TABLE_SIZE, usize::MAX);
        let mut loona = loona_hpack::Decoder::new();
        loona.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        for block in &blocks {
            let got = decode(&mut ours, block);
            if got == Err(DecodeError::SizeUpdateAfterField) {
                // loona-hpack accepts these; h2 does not.
                break;
            }
            let want = loona.decode(block).map_err(|_| ());
            prop_assert_eq!(got.clone().map_err(|_| ()), want, "{:x?}", block);
            if got.is_err() {
                break;
            }
        }
    }
}

//! HPACK's Huffman code (RFC 7541 §5.2, Appendix B) and its decoder.
//!
//! The decoder is a state machine that consumes four bits per step. Its
//! states are the 256 inner nodes of the code tree; one table lookup gives
//! the next state and the symbol completed on the way, if any (codes are at
//! least five bits long, so a nibble completes at most one). The table is
//! built at compile time, so decoding a string costs two lookups per octet
//! and nothing per string.

/// Code length in bits of every symbol, octets 0..=255 then EOS (256), as
/// listed in RFC 7541 Appendix B. The code is canonical (within a length,
/// codes follow symbol order), so the lengths define it.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 16
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 32 ' '
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 48 '0'
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 64 '@'
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 80 'P'
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 96 '`'
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 112 'p'
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240
    30, // EOS
];

const EOS: u16 = 256;
const MAX_LEN: u8 = 30;

/// Codes of all symbols, right-aligned, derived from [`LENGTHS`].
const CODES: [u32; 257] = canonical_codes();

/// A decoding step: `next` state; `EMIT` means `sym` was completed, `FAIL`
/// that the nibble contained EOS.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

const EMIT: u8 = 1;
const FAIL: u8 = 2;

struct Machine {
    steps: [[Step; 16]; 256],
    /// States where the input may end: the root, or at most seven bits into
    /// the all-ones path (the prefix of EOS that pads the last octet).
    accepting: [bool; 256],
}

static MACHINE: Machine = build_machine();

/// Why a Huffman-coded string was rejected (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HuffmanError {
    /// The data contains the EOS symbol.
    Eos,
    /// The padding is longer than seven bits or not a prefix of EOS.
    Padding,
}

/// Appends the decoding of `src` to `out`.
///
/// # Errors
/// When `src` contains EOS or ends with invalid padding; `out` then holds a
/// partial result.
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    // The shortest code has five bits: at most 8/5 symbols per octet.
    out.reserve(src.len() + src.len() / 2 + src.len() / 8 + 1);
    let mut state = 0u8;
    for &octet in src {
        for nibble in [octet >> 4, octet & 0x0f] {
            let step = MACHINE.steps[usize::from(state)][usize::from(nibble)];
            if step.flags & FAIL != 0 {
                return Err(HuffmanError::Eos);
            }
            if step.flags & EMIT != 0 {
                out.push(step.sym);
            }
            state = step.next;
        }
    }
    if MACHINE.accepting[usize::from(state)] {
        Ok(())
    } else {
        Err(HuffmanError::Padding)
    }
}

/// Huffman-encodes `src` (tests only: the front never emits Huffman).
#[cfg(test)]
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut bits: u64 = 0;
    let mut count = 0u32;
    for &b in src {
        let len = LENGTHS[usize::from(b)];
        bits = (bits << len) | u64::from(CODES[usize::from(b)]);
        count += u32::from(len);
        while count >= 8 {
            count -= 8;
            out.push((bits >> count).to_le_bytes()[0]);
        }
    }
    if count > 0 {
        let pad = 8 - count;
        out.push(((bits << pad) | ((1 << pad) - 1)).to_le_bytes()[0]);
    }
}

const fn canonical_codes() -> [u32; 257] {
    let mut codes = [0u32; 257];
    let mut next = 0u32;
    let mut len = 1;
    while len <= MAX_LEN {
        let mut sym = 0;
        while sym < codes.len() {
            if LENGTHS[sym] == len {
                codes[sym] = next;
                next += 1;
            }
            sym += 1;
        }
        next <<= 1;
        len += 1;
    }
    // A complete prefix code ends exactly on 2^31 after the last shift.
    assert!(
        next == 1 << (MAX_LEN + 1),
        "Huffman lengths are not a complete code"
    );
    codes
}

/// Child links of the code tree: an inner node's id, or `LEAF | symbol`.
const LEAF: u16 = 0x1000;
const NONE: u16 = u16::MAX;

const fn build_machine() -> Machine {
    // The tree: 257 leaves, so 256 inner nodes, numbered in creation order
    // from the root (0).
    let mut children = [[NONE; 2]; 256];
    let mut nodes = 1;
    let mut sym = 0;
    while sym < LENGTHS.len() {
        let (code, len) = (CODES[sym], LENGTHS[sym]);
        let mut node = 0;
        let mut i = len;
        while i > 0 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            if i == 0 {
                children[node][bit] = LEAF | sym as u16;
            } else {
                if children[node][bit] == NONE {
                    children[node][bit] = nodes as u16;
                    nodes += 1;
                }
                node = children[node][bit] as usize;
            }
        }
        sym += 1;
    }
    assert!(nodes == 256, "Huffman tree must have 256 inner nodes");

    let mut accepting = [false; 256];
    let mut node = 0;
    let mut depth = 0;
    loop {
        accepting[node] = true;
        if depth == 7 {
            break;
        }
        node = children[node][1] as usize;
        depth += 1;
    }

    let blank = Step {
        next: 0,
        sym: 0,
        flags: 0,
    };
    let mut steps = [[blank; 16]; 256];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut step = blank;
            let mut node = state;
            let mut i = 4;
            while i > 0 {
                i -= 1;
                let child = children[node][(nibble >> i) & 1];
                if child & LEAF == 0 {
                    node = child as usize;
                } else if child & !LEAF == EOS {
                    step.flags = FAIL;
                    break;
                } else {
                    step.flags = EMIT;
                    step.sym = (child & 0xff) as u8;
                    node = 0;
                }
            }
            step.next = node as u8;
            steps[state][nibble] = step;
            nibble += 1;
        }
        state += 1;
    }
    Machine { steps, accepting }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn codes_match_rfc7541_appendix_b_samples() {
        let cases: [(u16, u32); 7] = [
            (0, 0x1ff8),
            (u16::from(b' '), 0x14),
            (u16::from(b'0'), 0x0),
            (u16::from(b'a'), 0x3),
            (u16::from(b'z'), 0x7b),
            (255, 0x3ff_ffee),
            (EOS, 0x3fff_ffff),
        ];
        for (sym, code) in cases {
            assert_eq!(CODES[usize::from(sym)], code, "symbol {sym}");
        }
    }

    #[test]
    fn strings_of_rfc7541_appendix_c4_and_c6() {
        let cases = [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
                "https://www.example.com",
            ),
            ("9bd9 ab", "gzip"),
            ("", ""),
        ];
        for (coded, plain) in cases {
            let mut out = Vec::new();
            assert_eq!(decode(&hex(coded), &mut out), Ok(()), "{plain}");
            assert_eq!(out, plain.as_bytes());
            out.clear();
            encode(plain.as_bytes(), &mut out);
            assert_eq!(out, hex(coded), "{plain}");
        }
    }

    #[test]
    fn rejects_eos_and_bad_padding() {
        let cases: [(&[u8], HuffmanError); 6] = [
            // EOS (30 ones) then padding.
            (&[0xff, 0xff, 0xff, 0xff], HuffmanError::Eos),
            // 'a' (00011) then EOS.
            (&[0x1f, 0xff, 0xff, 0xff, 0xff], HuffmanError::Eos),
            // 'a' padded with zeros.
            (&[0x18], HuffmanError::Padding),
            // 'a' padded with 101.
            (&[0x1d], HuffmanError::Padding),
            // A whole octet of padding after '0' (00000) + 111.
            (&[0x07, 0xff], HuffmanError::Padding),
            // Eight ones alone: padding longer than seven bits.
            (&[0xff], HuffmanError::Padding),
        ];
        for (input, want) in cases {
            assert_eq!(decode(input, &mut Vec::new()), Err(want), "{input:x?}");
        }
        // Padding of exactly seven ones is fine: '0' is 00000, then 1 + ...
        let mut out = Vec::new();
        assert_eq!(decode(&[0x07], &mut out), Ok(()));
        assert_eq!(out, b"0");
        // A 13-bit symbol (octet 0) then three bits of padding.
        out.clear();
        assert_eq!(decode(&[0xff, 0xc7], &mut out), Ok(()));
        assert_eq!(out, [0]);
    }

    proptest! {
        #[test]
        fn round_trips_every_octet(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut coded = Vec::new();
            encode(&data, &mut coded);
            let mut out = Vec::new();
            prop_assert_eq!(decode(&coded, &mut out), Ok(()));
            prop_assert_eq!(out, data);
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut out = Vec::new();
            let _ = decode(&data, &mut out);
            prop_assert!(out.len() <= data.len() * 8 / 5);
        }
    }
}

//! HPACK decoding (RFC 7541) of the client's header blocks.
//!
//! Complete for decoding: integers, raw and Huffman strings, indexed fields,
//! the three literal representations, dynamic table size updates, and the
//! dynamic table with its size accounting and evictions. Every read is
//! checked, so no input can panic; allocation is bounded by the block's
//! length, the table's size and a cap on the decoded bytes per block.

use std::collections::VecDeque;

use super::huffman::{self, HuffmanError};

/// Why a block was rejected; any error leaves the table unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// The block ends inside a representation.
    #[error("truncated representation")]
    Truncated,
    /// An integer over 2^32 - 1 or with more than five continuation octets.
    #[error("integer too large")]
    IntegerOverflow,
    /// Index 0, or beyond the static and dynamic tables.
    #[error("invalid index {0}")]
    Index(usize),
    /// A Huffman string contains EOS.
    #[error("EOS in a Huffman string")]
    HuffmanEos,
    /// A Huffman string's padding is over seven bits or not all ones.
    #[error("invalid Huffman padding")]
    HuffmanPadding,
    /// A table size update after the first field (RFC 7541 §4.2).
    #[error("dynamic table size update after a header field")]
    SizeUpdateAfterField,
    /// A table size update above the limit the decoder was created with.
    #[error("dynamic table size update to {0}, above the limit")]
    SizeUpdateTooLarge(usize),
    /// The block ends with a table size update, which precedes no field.
    /// h2 would accept it, loona-hpack did not; such a block has no
    /// pseudo-headers, so h2 would refuse the request anyway.
    #[error("dynamic table size update at the end of a block")]
    SizeUpdateAtEnd,
    /// The decoded fields (or the caller's output) exceed the cap.
    #[error("decoded header block too large")]
    TooLarge,
}

impl From<HuffmanError> for DecodeError {
    fn from(e: HuffmanError) -> Self {
        match e {
            HuffmanError::Eos => Self::HuffmanEos,
            HuffmanError::Padding => Self::HuffmanPadding,
        }
    }
}

/// Continuation octets accepted after an integer's prefix: enough for any
/// value below 2^32.
const MAX_CONTINUATION: usize = 5;

/// Entry overhead of RFC 7541 §4.1.
const ENTRY_OVERHEAD: usize = 32;

/// The static table (RFC 7541 Appendix A); index 1 is the first entry.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// One dynamic table entry, name and value in one allocation.
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn field(&self) -> (&[u8], &[u8]) {
        self.bytes.split_at(self.name_len.min(self.bytes.len()))
    }

    fn size(&self) -> usize {
        ENTRY_OVERHEAD + self.bytes.len()
    }
}

/// An HPACK decoder: the dynamic table of one direction of a connection.
pub(crate) struct Decoder {
    /// Newest first: index 62 is `entries[0]`.
    entries: VecDeque<Entry>,
    /// Sum of the entries' sizes (RFC 7541 §4.1).
    size: usize,
    /// Current maximum, as last set by a size update.
    max_size: usize,
    /// What the peer was told (SETTINGS_HEADER_TABLE_SIZE): size updates
    /// above it are errors.
    limit: usize,
    /// Cap on the name and value octets of one block's fields.
    max_decoded: usize,
}

impl Decoder {
    /// A decoder whose table starts at, and may never exceed, `table_size`,
    /// and which rejects blocks decoding to over `max_decoded` octets.
    #[must_use]
    pub(crate) fn new(table_size: usize, max_decoded: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            size: 0,
            max_size: table_size,
            limit: table_size,
            max_decoded,
        }
    }

    /// Decodes one complete header block, calling `field(name, value)` for
    /// each field in order. An error `field` returns stops decoding and is
    /// returned.
    ///
    /// # Errors
    /// Any [`DecodeError`]; the table is then in an undefined state and the
    /// connection must not be decoded further.
    pub(crate) fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let mut rest = block;
        let mut seen_field = false;
        let mut last_was_update = false;
        let mut decoded = 0usize;
        let mut name = Vec::new();
        let mut value = Vec::new();
        while let Some(&first) = rest.first() {
            last_was_update = false;
            if first & 0x80 != 0 {
                let index = integer(&mut rest, 7)?;
                let (n, v) = self.get(index)?;
                decoded = account(decoded, n.len() + v.len(), self.max_decoded)?;
                field(n, v)?;
            } else if first & 0xe0 == 0x20 {
                if seen_field {
                    return Err(DecodeError::SizeUpdateAfterField);
                }
                let size = integer(&mut rest, 5)?;
                if size > self.limit {
                    return Err(DecodeError::SizeUpdateTooLarge(size));
                }
                self.max_size = size;
                self.evict_to(size);
                last_was_update = true;
                continue;
            } else {
                // 01 incremental indexing (6-bit index), 0000 without
                // indexing and 0001 never indexed (4-bit index).
                let indexing = first & 0x40 != 0;
                let index = integer(&mut rest, if indexing { 6 } else { 4 })?;
                name.clear();
                if index == 0 {
                    string(&mut rest, &mut name)?;
                } else {
                    name.extend_from_slice(self.get(index)?.0);
                }
                value.clear();
                string(&mut rest, &mut value)?;
                decoded = account(decoded, name.len() + value.len(), self.max_decoded)?;
                field(&name, &value)?;
                if indexing {
                    self.insert(&name, &value);
                }
            }
            seen_field = true;
        }
        if last_was_update {
            return Err(DecodeError::SizeUpdateAtEnd);
        }
        Ok(())
    }

    /// The field at `index` (1-based, static table first).
    fn get(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        if let Some(i) = index.checked_sub(1)
            && let Some(&entry) = STATIC.get(i)
        {
            return Ok(entry);
        }
        index
            .checked_sub(STATIC.len() + 1)
            .and_then(|i| self.entries.get(i))
            .map(Entry::field)
            .ok_or(DecodeError::Index(index))
    }

    /// Adds an entry, evicting the oldest ones to make room (RFC 7541 §4.4);
    /// an entry larger than the table empties it and is not added.
    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = ENTRY_OVERHEAD + name.len() + value.len();
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries.push_front(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += size;
    }

    /// Evicts the oldest entries until the table's size is at most `max`.
    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(old) = self.entries.pop_back() else {
                self.size = 0;
                return;
            };
            self.size = self.size.saturating_sub(old.size());
        }
    }

    /// Entries newest first, for tests.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries.iter().map(Entry::field)
    }

    /// The table's size as RFC 7541 §4.1 counts it, for tests and the fuzz target.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn table_size(&self) -> usize {
        self.size
    }
}

/// Adds `len` to the block's decoded total, failing above `max`.
fn account(total: usize, len: usize, max: usize) -> Result<usize, DecodeError> {
    total
        .checked_add(len)
        .filter(|&t| t <= max)
        .ok_or(DecodeError::TooLarge)
}

/// Reads an integer with a `prefix_bits`-bit prefix (RFC 7541 §5.1) from the
/// front of `buf` and advances past it.
pub(crate) fn integer(buf: &mut &[u8], prefix_bits: u8) -> Result<usize, DecodeError> {
    let (&first, mut rest) = buf.split_first().ok_or(DecodeError::Truncated)?;
    let mask = u8::MAX >> (8 - prefix_bits.clamp(1, 8));
    let mut value = u64::from(first & mask);
    if value == u64::from(mask) {
        let mut shift = 0;
        loop {
            let (&octet, tail) = rest.split_first().ok_or(DecodeError::Truncated)?;
            rest = tail;
            value += u64::from(octet & 0x7f) << shift;
            shift += 7;
            if octet & 0x80 == 0 {
                break;
            }
            if shift >= 7 * MAX_CONTINUATION {
                return Err(DecodeError::IntegerOverflow);
            }
        }
    }
    *buf = rest;
    u32::try_from(value)
        .ok()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or(DecodeError::IntegerOverflow)
}

/// Reads a string literal (RFC 7541 §5.2) from the front of `buf` into
/// `out` and advances past it.
fn string(buf: &mut &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let huffman = buf.first().is_some_and(|b| b & 0x80 != 0);
    let len = integer(buf, 7)?;
    if len > buf.len() {
        return Err(DecodeError::Truncated);
    }
    let (data, rest) = buf.split_at(len);
    *buf = rest;
    if huffman {
        huffman::decode(data, out)?;
    } else {
        out.extend_from_slice(data);
    }
    Ok(())
}

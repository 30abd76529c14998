//! For the fuzz target `h2_front` in `fuzz/` only (feature `fuzzing`); not an API.
//!
//! The front's HPACK decoder and block rewriter, set up as a connection sets them up, so the
//! target can hold them against an independent decoder. The byte stream itself is fuzzed through
//! the public [`NormalizedStream`](crate::NormalizedStream).

use crate::front::hpack_in::{self, DecodeError};
use crate::front::{self, BlockRewriter};

/// The dynamic table size the front's decoder assumes (the HTTP/2 default).
pub const HEADER_TABLE_SIZE: usize = front::HEADER_TABLE_SIZE;

/// Header fields, name and value, in block order.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Why the front's decoder refused a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A dynamic table size update after a field: h2 refuses it, loona-hpack does not.
    SizeUpdateAfterField,
    /// The fields decode to more than the front's cap (1 MiB); loona-hpack has no cap.
    TooLarge,
    /// Anything else, as the decoder words it.
    Other(String),
}

/// The front's HPACK decoder: the client's table of one connection.
pub struct Decoder(hpack_in::Decoder);

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A connection's decoder at its start.
    pub fn new() -> Self {
        Self(hpack_in::Decoder::new(
            front::HEADER_TABLE_SIZE,
            front::MAX_ENCODED_BLOCK,
        ))
    }

    /// The fields of one complete header block.
    ///
    /// # Errors
    ///
    /// When the decoder refuses the block; the table is then unusable.
    pub fn decode(&mut self, block: &[u8]) -> Result<Fields, Refused> {
        let mut fields = Vec::new();
        let decoded = self.0.decode(block, |name, value| {
            fields.push((name.to_vec(), value.to_vec()));
            Ok(())
        });
        match decoded {
            Ok(()) => Ok(fields),
            Err(DecodeError::SizeUpdateAfterField) => Err(Refused::SizeUpdateAfterField),
            Err(DecodeError::TooLarge) => Err(Refused::TooLarge),
            Err(e) => Err(Refused::Other(e.to_string())),
        }
    }

    /// The dynamic table's size as RFC 7541 §4.1 counts it.
    pub fn table_size(&self) -> usize {
        self.0.table_size()
    }
}

/// The front's block rewriter: decodes a block, replaces the `:authority` values h2 would refuse
/// and re-encodes it without the dynamic table.
#[derive(Default)]
pub struct Rewriter(BlockRewriter);

impl Rewriter {
    /// Appends the re-encoded `block` to `out`; returns how many `:authority` fields it replaced.
    ///
    /// # Errors
    ///
    /// The reason the front would give h2 a block it must refuse instead.
    pub fn rewrite(&mut self, block: &[u8], out: &mut Vec<u8>) -> Result<usize, &'static str> {
        self.0.rewrite(block, out).map(|outcome| outcome.replaced)
    }
}

/// Whether h2 accepts `value` as `:authority` as it is.
pub fn authority_is_valid(value: &[u8]) -> bool {
    front::authority_is_valid(value)
}

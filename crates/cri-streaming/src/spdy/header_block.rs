//! Header blocks (section 2.6.10): a count, then length-prefixed names and values, all 32-bit
//! big-endian, compressed by one zlib stream per direction that starts from the SPDY
//! dictionary and is flushed (Z_SYNC_FLUSH) at the end of every block.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::dictionary::{ADLER32, DICTIONARY};
use super::{FrameKind, Headers, Limits};
use crate::{Error, Result};

/// The receiving direction's zlib context.
pub(crate) struct Inflater {
    z: Decompress,
}

impl Inflater {
    pub(crate) fn new() -> Inflater {
        Inflater {
            z: Decompress::new(true),
        }
    }

    /// Inflates one frame's compressed header block into at most `limit` bytes. All of `input`
    /// must be used: the next frame's block continues the same stream.
    pub(crate) fn inflate(
        &mut self,
        input: &[u8],
        limit: usize,
        frame: FrameKind,
    ) -> Result<Vec<u8>> {
        let bad = |what: String| Error::Inflate { frame, what };
        // Grown as output arrives, never past limit + 1: the byte past the limit is what tells
        // "too large" from "exactly the limit".
        let cap = limit.saturating_add(1);
        let mut out = Vec::with_capacity(input.len().saturating_mul(4).max(64).min(cap));
        let mut used = 0;
        loop {
            if out.len() == out.capacity() {
                if out.len() > limit {
                    return Err(Error::HeaderBlockTooLarge { frame, limit });
                }
                let more = out.capacity().max(64).min(cap - out.len());
                out.reserve_exact(more);
            }
            let (in_before, out_before) = (self.z.total_in(), out.len());
            match self
                .z
                .decompress_vec(&input[used..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::StreamEnd) => {
                    return Err(bad("the zlib stream ended, which spdy never does".into()));
                }
                Ok(Status::Ok | Status::BufError) => {}
                Err(e) => match e.needs_dictionary() {
                    Some(ADLER32) => {
                        self.z
                            .set_dictionary(&DICTIONARY)
                            .map_err(|e| bad(e.to_string()))?;
                    }
                    Some(other) => {
                        return Err(bad(format!(
                            "it asks for dictionary {other:#010x}, not spdy/3's {ADLER32:#010x}"
                        )));
                    }
                    None => return Err(bad(e.to_string())),
                },
            }
            let took = usize::try_from(self.z.total_in() - in_before).unwrap_or(usize::MAX);
            used = used.saturating_add(took).min(input.len());
            if out.len() > limit {
                return Err(Error::HeaderBlockTooLarge { frame, limit });
            }
            if used == input.len() && out.len() < out.capacity() {
                // All input taken and room left over: zlib holds nothing more back.
                return Ok(out);
            }
            if took == 0 && out.len() == out_before && out.len() < out.capacity() {
                return Err(bad("zlib makes no progress on the block".into()));
            }
        }
    }
}

/// The sending direction's zlib context.
pub(crate) struct Deflater {
    z: Compress,
}

impl Deflater {
    pub(crate) fn new() -> Deflater {
        let mut z = Compress::new(Compression::default(), true);
        // Cannot fail on a fresh stream; should it, the first block says so.
        let _ = z.set_dictionary(&DICTIONARY);
        Deflater { z }
    }

    /// Compresses one block and flushes, appending to `out`.
    pub(crate) fn deflate(
        &mut self,
        block: &[u8],
        out: &mut Vec<u8>,
        frame: FrameKind,
    ) -> Result<()> {
        let mut used = 0;
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(block.len() - used + 64);
            }
            let before = self.z.total_in();
            self.z
                .compress_vec(&block[used..], out, FlushCompress::Sync)
                .map_err(|e| Error::Encode {
                    frame,
                    what: format!("zlib: {e}"),
                })?;
            let took = usize::try_from(self.z.total_in() - before).unwrap_or(usize::MAX);
            used = used.saturating_add(took).min(block.len());
            if used == block.len() && out.len() < out.capacity() {
                return Ok(());
            }
        }
    }
}

/// Serialises `headers`, checking what the spec asks of names.
pub(crate) fn encode(headers: &Headers, frame: FrameKind) -> Result<Vec<u8>> {
    let bad = |what: String| Error::Encode { frame, what };
    let len =
        |n: usize| u32::try_from(n).map_err(|_| bad(format!("{n} bytes do not fit in 32 bits")));
    let mut block = Vec::with_capacity(
        4 + headers
            .0
            .iter()
            .map(|(n, v)| 8 + n.len() + v.len())
            .sum::<usize>(),
    );
    block.extend_from_slice(&len(headers.len())?.to_be_bytes());
    for (i, (name, value)) in headers.0.iter().enumerate() {
        check_name(name.as_bytes()).map_err(&bad)?;
        if headers.0[..i].iter().any(|(n, _)| n == name) {
            return Err(bad(format!("header {name:?} twice: join values with NUL")));
        }
        block.extend_from_slice(&len(name.len())?.to_be_bytes());
        block.extend_from_slice(name.as_bytes());
        block.extend_from_slice(&len(value.len())?.to_be_bytes());
        block.extend_from_slice(value.as_bytes());
    }
    Ok(block)
}

/// What the spec asks of a name: not empty, lower-case US-ASCII, no NUL.
fn check_name(name: &[u8]) -> Result<(), String> {
    if name.is_empty() {
        return Err("an empty header name".into());
    }
    if let Some(&c) = name
        .iter()
        .find(|c| !c.is_ascii() || c.is_ascii_uppercase() || c.is_ascii_control())
    {
        return Err(format!(
            "header name {:?} has {c:#04x}: names are lower-case ascii",
            String::from_utf8_lossy(name)
        ));
    }
    Ok(())
}

/// Parses an inflated block within `limits`.
pub(crate) fn decode(block: &[u8], limits: &Limits, frame: FrameKind) -> Result<Headers> {
    let bad = |what: String| Error::InvalidHeaderBlock { frame, what };
    let mut r = Reader(block);
    let count = r
        .u32()
        .ok_or_else(|| bad("ends inside the header count".into()))?;
    if usize::try_from(count).map_or(true, |c| c > limits.max_headers) {
        return Err(Error::TooManyHeaders {
            frame,
            count,
            limit: limits.max_headers,
        });
    }
    let mut headers: Vec<(String, String)> = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let name = r.field(limits.max_name_len, "name", frame)?;
        check_name(name).map_err(bad)?;
        // check_name lets only ASCII through
        let name = String::from_utf8_lossy(name).into_owned();
        if headers.iter().any(|(n, _)| *n == name) {
            return Err(bad(format!("header {name:?} twice")));
        }
        let value = r.field(limits.max_value_len, "value", frame)?;
        let value = String::from_utf8(value.to_vec())
            .map_err(|_| bad(format!("the value of {name:?} is not utf-8")))?;
        headers.push((name, value));
    }
    if !r.0.is_empty() {
        return Err(bad(format!("{} bytes after the last header", r.0.len())));
    }
    Ok(Headers(headers))
}

/// The unread rest of a block.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (head, tail) = self.0.split_first_chunk::<4>()?;
        self.0 = tail;
        Some(u32::from_be_bytes(*head))
    }

    /// A length-prefixed name or value, its length checked against `limit` first.
    fn field(&mut self, limit: usize, part: &'static str, frame: FrameKind) -> Result<&'a [u8]> {
        let len = self.u32().ok_or_else(|| Error::InvalidHeaderBlock {
            frame,
            what: format!("ends inside the length of a {part}"),
        })?;
        let n = usize::try_from(len).unwrap_or(usize::MAX);
        if n > limit {
            return Err(Error::HeaderTooLong {
                frame,
                part,
                len,
                limit,
            });
        }
        if self.0.len() < n {
            return Err(Error::InvalidHeaderBlock {
                frame,
                what: format!("a {part} of {len} bytes with {} left", self.0.len()),
            });
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
}

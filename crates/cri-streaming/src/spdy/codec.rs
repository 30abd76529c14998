//! Frames from bytes and back (sections 2.2 and 2.6).

use super::header_block::{self, Deflater, Inflater};
use super::{
    FLAG_FIN, FLAG_SETTINGS_CLEAR, FLAG_UNIDIRECTIONAL, FRAME_HEADER_LEN, Frame, FrameKind,
    Headers, Limits, MAX_WIRE_LEN, Setting, SynStream, VERSION,
};
use crate::{Error, Result};

const STREAM_ID_MASK: u32 = 0x7fff_ffff;
/// A raw header block this side sends is at most this long, so its deflated form (at most a few
/// bytes per 16 KiB more) always fits the 24-bit length: checked before the shared compression
/// context is touched, which an encoding error must leave as it was.
const MAX_RAW_BLOCK: usize = 8 * 1024 * 1024;

/// Reads frames from the bytes a peer sent, in order, holding the receiving direction's header
/// compression context.
pub struct FrameDecoder {
    limits: Limits,
    inflater: Inflater,
}

impl FrameDecoder {
    /// A decoder for a new connection.
    pub fn new(limits: Limits) -> FrameDecoder {
        FrameDecoder {
            limits,
            inflater: Inflater::new(),
        }
    }

    /// The limits it enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Decodes the frame at the front of `buf`: the frame and how many bytes it took, or `None`
    /// while `buf` holds only part of it. A frame whose length is over the limit is refused as
    /// soon as its 8-byte header is in, so a caller never buffers more than
    /// `FRAME_HEADER_LEN + limits.max_frame_len` bytes.
    ///
    /// # Errors
    ///
    /// Any error is fatal to the connection (the header compression context is shared): a
    /// frame over a limit, of another version, malformed, or a header block that does not
    /// inflate or parse within the limits.
    pub fn decode(&mut self, buf: &[u8]) -> Result<Option<(Frame, usize)>> {
        let Some(head) = buf.first_chunk::<FRAME_HEADER_LEN>() else {
            return Ok(None);
        };
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]);
        let control = word & 0x8000_0000 != 0;
        let kind = if control {
            FrameKind::control((word & 0xffff) as u16)
        } else {
            FrameKind::Data
        };
        if len > self.limits.max_frame_len {
            return Err(Error::FrameTooLarge {
                frame: kind,
                len,
                limit: self.limits.max_frame_len,
            });
        }
        if control {
            let version = ((word >> 16) & 0x7fff) as u16;
            if version != VERSION {
                return Err(Error::UnsupportedVersion {
                    frame: kind,
                    version,
                });
            }
        }
        let total = FRAME_HEADER_LEN + len as usize;
        let Some(payload) = buf.get(FRAME_HEADER_LEN..total) else {
            return Ok(None);
        };
        let frame = if control {
            self.control(kind, flags, payload)?
        } else {
            let stream_id = word & STREAM_ID_MASK;
            nonzero_stream(kind, stream_id)?;
            Frame::Data {
                stream_id,
                fin: flags & FLAG_FIN != 0,
                data: payload.to_vec(),
            }
        };
        Ok(Some((frame, total)))
    }

    fn control(&mut self, kind: FrameKind, flags: u8, p: &[u8]) -> Result<Frame> {
        let fin = flags & FLAG_FIN != 0;
        Ok(match kind {
            FrameKind::SynStream => {
                at_least(kind, p, 10)?;
                let stream_id = be32(p, 0) & STREAM_ID_MASK;
                let headers = self.headers(kind, &p[10..])?;
                nonzero_stream(kind, stream_id)?;
                Frame::SynStream(SynStream {
                    stream_id,
                    associated_to: be32(p, 4) & STREAM_ID_MASK,
                    priority: p[8] >> 5,
                    slot: p[9],
                    fin,
                    unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                    headers,
                })
            }
            FrameKind::SynReply | FrameKind::Headers => {
                at_least(kind, p, 4)?;
                let stream_id = be32(p, 0) & STREAM_ID_MASK;
                let headers = self.headers(kind, &p[4..])?;
                nonzero_stream(kind, stream_id)?;
                if kind == FrameKind::SynReply {
                    Frame::SynReply {
                        stream_id,
                        fin,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        fin,
                        headers,
                    }
                }
            }
            FrameKind::RstStream => {
                exactly(kind, p, 8)?;
                let stream_id = be32(p, 0) & STREAM_ID_MASK;
                nonzero_stream(kind, stream_id)?;
                let status = be32(p, 4);
                if status == 0 {
                    return Err(invalid(kind, "status 0".into()));
                }
                Frame::RstStream { stream_id, status }
            }
            FrameKind::Settings => {
                at_least(kind, p, 4)?;
                let count = be32(p, 0);
                if u64::from(count) * 8 + 4 != p.len() as u64 {
                    return Err(invalid(
                        kind,
                        format!("{count} entries in {} bytes", p.len()),
                    ));
                }
                let entries = p[4..]
                    .chunks_exact(8)
                    .map(|e| {
                        let first = be32(e, 0);
                        Setting {
                            flags: (first >> 24) as u8,
                            id: first & 0x00ff_ffff,
                            value: be32(e, 4),
                        }
                    })
                    .collect();
                Frame::Settings {
                    clear: flags & FLAG_SETTINGS_CLEAR != 0,
                    entries,
                }
            }
            FrameKind::Ping => {
                exactly(kind, p, 4)?;
                Frame::Ping { id: be32(p, 0) }
            }
            FrameKind::GoAway => {
                exactly(kind, p, 8)?;
                Frame::GoAway {
                    last_good_stream_id: be32(p, 0) & STREAM_ID_MASK,
                    status: be32(p, 4),
                }
            }
            FrameKind::WindowUpdate => {
                exactly(kind, p, 8)?;
                let delta = be32(p, 4) & STREAM_ID_MASK;
                if delta == 0 {
                    return Err(invalid(kind, "a delta of 0".into()));
                }
                Frame::WindowUpdate {
                    stream_id: be32(p, 0) & STREAM_ID_MASK,
                    delta,
                }
            }
            FrameKind::Unknown(frame_type) => Frame::Unknown { frame_type, flags },
            FrameKind::Data => return Err(invalid(kind, "read as a control frame".into())),
        })
    }

    fn headers(&mut self, kind: FrameKind, compressed: &[u8]) -> Result<Headers> {
        let block = self
            .inflater
            .inflate(compressed, self.limits.max_header_block, kind)?;
        header_block::decode(&block, &self.limits, kind)
    }
}

/// Writes frames to send to a peer, in order, holding the sending direction's header
/// compression context.
pub struct FrameEncoder {
    deflater: Deflater,
}

impl Default for FrameEncoder {
    fn default() -> Self {
        FrameEncoder::new()
    }
}

impl FrameEncoder {
    /// An encoder for a new connection.
    pub fn new() -> FrameEncoder {
        FrameEncoder {
            deflater: Deflater::new(),
        }
    }

    /// Appends `frame` to `out`.
    ///
    /// # Errors
    ///
    /// When the frame breaks the spec (a zero stream id where one is needed, a priority over 7,
    /// a header name that is not lower-case ASCII or comes twice, a payload over 16 MiB - 1, an
    /// unknown frame). Nothing is appended then, and the compression context is untouched.
    pub fn encode(&mut self, frame: &Frame, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        let result = self.encode_into(frame, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_into(&mut self, frame: &Frame, out: &mut Vec<u8>) -> Result<()> {
        let kind = frame.kind();
        let start = out.len();
        match frame {
            Frame::SynStream(s) => {
                nonzero_stream_out(kind, s.stream_id)?;
                if s.priority > 7 {
                    return Err(encode_err(kind, format!("priority {} over 7", s.priority)));
                }
                let flags = (u8::from(s.fin) * FLAG_FIN)
                    | (u8::from(s.unidirectional) * FLAG_UNIDIRECTIONAL);
                let mut fixed = [0; 10];
                fixed[..4].copy_from_slice(&s.stream_id.to_be_bytes());
                fixed[4..8].copy_from_slice(&(s.associated_to & STREAM_ID_MASK).to_be_bytes());
                fixed[8..].copy_from_slice(&[s.priority << 5, s.slot]);
                self.header_frame(kind, flags, &fixed, &s.headers, out)?;
            }
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            }
            | Frame::Headers {
                stream_id,
                fin,
                headers,
            } => {
                nonzero_stream_out(kind, *stream_id)?;
                let flags = u8::from(*fin) * FLAG_FIN;
                self.header_frame(kind, flags, &stream_id.to_be_bytes(), headers, out)?;
            }
            Frame::RstStream { stream_id, status } => {
                nonzero_stream_out(kind, *stream_id)?;
                if *status == 0 {
                    return Err(encode_err(kind, "status 0".into()));
                }
                control_header(out, kind, 0, 8);
                out.extend_from_slice(&stream_id.to_be_bytes());
                out.extend_from_slice(&status.to_be_bytes());
            }
            Frame::Settings { clear, entries } => settings(*clear, entries, out)?,
            Frame::Ping { id } => {
                control_header(out, kind, 0, 4);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                if *last_good_stream_id > STREAM_ID_MASK {
                    return Err(encode_err(kind, "stream id over 31 bits".into()));
                }
                control_header(out, kind, 0, 8);
                out.extend_from_slice(&last_good_stream_id.to_be_bytes());
                out.extend_from_slice(&status.to_be_bytes());
            }
            Frame::WindowUpdate { stream_id, delta } => {
                if *stream_id > STREAM_ID_MASK || *delta == 0 || *delta > STREAM_ID_MASK {
                    return Err(encode_err(
                        kind,
                        format!("stream {stream_id}, delta {delta}"),
                    ));
                }
                control_header(out, kind, 0, 8);
                out.extend_from_slice(&stream_id.to_be_bytes());
                out.extend_from_slice(&delta.to_be_bytes());
            }
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                nonzero_stream_out(kind, *stream_id)?;
                let len = u32::try_from(data.len())
                    .ok()
                    .filter(|n| *n <= MAX_WIRE_LEN)
                    .ok_or_else(|| encode_err(kind, format!("{} bytes of data", data.len())))?;
                out.extend_from_slice(&stream_id.to_be_bytes());
                out.push(u8::from(*fin) * FLAG_FIN);
                out.extend_from_slice(&len.to_be_bytes()[1..]);
                out.extend_from_slice(data);
            }
            Frame::Unknown { frame_type, .. } => {
                return Err(encode_err(
                    kind,
                    format!("type {frame_type} has no layout to encode"),
                ));
            }
        }
        // The header-block frames learn their length once compressed.
        let len = out.len() - start - FRAME_HEADER_LEN;
        let len = u32::try_from(len).unwrap_or(u32::MAX).min(MAX_WIRE_LEN);
        out[start + 5..start + 8].copy_from_slice(&len.to_be_bytes()[1..]);
        Ok(())
    }
}

impl FrameEncoder {
    /// A frame whose fixed fields are followed by a compressed header block.
    fn header_frame(
        &mut self,
        kind: FrameKind,
        flags: u8,
        fixed: &[u8],
        headers: &Headers,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let block = raw_block(headers, kind)?;
        control_header(out, kind, flags, 0);
        out.extend_from_slice(fixed);
        self.deflater.deflate(&block, out, kind)
    }
}

fn settings(clear: bool, entries: &[Setting], out: &mut Vec<u8>) -> Result<()> {
    let kind = FrameKind::Settings;
    let len = entries
        .len()
        .checked_mul(8)
        .and_then(|n| n.checked_add(4))
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n <= MAX_WIRE_LEN)
        .ok_or_else(|| encode_err(kind, format!("{} entries", entries.len())))?;
    if let Some(e) = entries.iter().find(|e| e.id > 0x00ff_ffff) {
        return Err(encode_err(
            kind,
            format!("setting id {} over 24 bits", e.id),
        ));
    }
    control_header(out, kind, u8::from(clear) * FLAG_SETTINGS_CLEAR, len);
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(&((u32::from(e.flags) << 24) | e.id).to_be_bytes());
        out.extend_from_slice(&e.value.to_be_bytes());
    }
    Ok(())
}

fn control_header(out: &mut Vec<u8>, kind: FrameKind, flags: u8, len: u32) {
    let frame_type = kind.control_type().unwrap_or(0);
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&frame_type.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
}

fn raw_block(headers: &Headers, kind: FrameKind) -> Result<Vec<u8>> {
    let block = header_block::encode(headers, kind)?;
    if block.len() > MAX_RAW_BLOCK {
        return Err(encode_err(
            kind,
            format!("a header block of {} bytes", block.len()),
        ));
    }
    Ok(block)
}

fn be32(p: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    if let Some(bytes) = p.get(at..at + 4) {
        word.copy_from_slice(bytes);
    }
    u32::from_be_bytes(word)
}

fn at_least(kind: FrameKind, p: &[u8], min: usize) -> Result<()> {
    if p.len() < min {
        return Err(invalid(
            kind,
            format!("{} bytes, fewer than the {min} it needs", p.len()),
        ));
    }
    Ok(())
}

fn exactly(kind: FrameKind, p: &[u8], len: usize) -> Result<()> {
    if p.len() != len {
        return Err(invalid(
            kind,
            format!("{} bytes where it has {len}", p.len()),
        ));
    }
    Ok(())
}

fn nonzero_stream(kind: FrameKind, stream_id: u32) -> Result<()> {
    if stream_id == 0 {
        return Err(invalid(kind, "stream id 0".into()));
    }
    Ok(())
}

fn nonzero_stream_out(kind: FrameKind, stream_id: u32) -> Result<()> {
    if stream_id == 0 || stream_id > STREAM_ID_MASK {
        return Err(encode_err(
            kind,
            format!("stream id {stream_id} outside 1..2^31"),
        ));
    }
    Ok(())
}

fn invalid(frame: FrameKind, what: String) -> Error {
    Error::InvalidFrame { frame, what }
}

fn encode_err(frame: FrameKind, what: String) -> Error {
    Error::Encode { frame, what }
}

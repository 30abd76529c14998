//! Terminal size messages on the resize stream (SPDY `streamtype: resize`, WebSocket channel 4).
//!
//! The client writes client-go's `TerminalSize` as JSON objects one after another,
//! `{"Width":80,"Height":24}`, and kubelet reads them with one `json.Decoder` for the stream's
//! life: so a message may arrive split across frames, or several in one, and keys match without
//! regard to case. The first message that is not a terminal size ends the stream's resizes, as
//! kubelet's decoder loop ends. Bytes of an unfinished message are held up to a cap.

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::{Error, Result};

/// The bytes of one unfinished message held at most: a terminal size is 30-odd bytes.
pub const DEFAULT_MAX_MESSAGE: usize = 4096;

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// Reads terminal sizes from the resize stream's bytes as they come.
#[derive(Debug)]
pub struct ResizeDecoder {
    pending: Vec<u8>,
    max_message: usize,
}

impl Default for ResizeDecoder {
    fn default() -> Self {
        ResizeDecoder::new(DEFAULT_MAX_MESSAGE)
    }
}

impl ResizeDecoder {
    /// A decoder that holds at most `max_message` bytes of an unfinished message.
    pub fn new(max_message: usize) -> ResizeDecoder {
        ResizeDecoder {
            pending: Vec::new(),
            max_message: max_message.max(1),
        }
    }

    /// Feeds the next bytes of the stream; returns the sizes they complete, in order.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidResize`] for a message that is not JSON, not an object, whose width or
    /// height is not an integer from 0 to 65535, or that grows past the cap unfinished. The
    /// stream's resizes end there.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<TerminalSize>> {
        let mut sizes = Vec::new();
        for chunk in bytes.chunks(self.max_message) {
            self.pending.extend_from_slice(chunk);
            self.drain(&mut sizes)?;
            if self.pending.len() > self.max_message {
                return Err(Error::InvalidResize(format!(
                    "a message over {} bytes",
                    self.max_message
                )));
            }
        }
        Ok(sizes)
    }

    fn drain(&mut self, sizes: &mut Vec<TerminalSize>) -> Result<()> {
        let mut used = 0;
        let result = loop {
            let rest = &self.pending[used..];
            let start = rest
                .iter()
                .position(|c| !c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            if start == rest.len() {
                used = self.pending.len();
                break Ok(());
            }
            let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<GoSize>();
            match values.next() {
                Some(Ok(GoSize(size))) => {
                    used += values.byte_offset();
                    sizes.push(size);
                }
                Some(Err(e)) if e.is_eof() => {
                    used += start;
                    break Ok(());
                }
                Some(Err(e)) => break Err(Error::InvalidResize(e.to_string())),
                None => {
                    used = self.pending.len();
                    break Ok(());
                }
            }
        };
        self.pending.drain(..used);
        result
    }
}

/// A `TerminalSize` as Go's `encoding/json` fills one: keys matched without regard to case,
/// the last in the message wins, `null` leaves a field as it was, other keys are skipped, and a
/// width or height that is not an integer from 0 to 65535 is an error.
struct GoSize(TerminalSize);

impl<'de> Deserialize<'de> for GoSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<GoSize, D::Error> {
        deserializer.deserialize_map(SizeVisitor)
    }
}

struct SizeVisitor;

impl<'de> Visitor<'de> for SizeVisitor {
    type Value = GoSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a terminal size object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoSize, A::Error> {
        let mut size = TerminalSize::default();
        while let Some(key) = map.next_key::<String>()? {
            let field = if key.eq_ignore_ascii_case("width") {
                &mut size.width
            } else if key.eq_ignore_ascii_case("height") {
                &mut size.height
            } else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if let Some(cells) = map.next_value::<Option<u16>>()? {
                *field = cells;
            }
        }
        Ok(GoSize(size))
    }
}

//! A layer's bytes handed from its download to its unpack as they arrive: a bounded channel
//! between the async download loop and a blocking reader, so a slow unpack slows the download
//! down instead of piling the blob up in memory.

use std::io::{self, Read};

use bytes::Bytes;
use tokio::sync::mpsc;

/// The largest piece sent at once: chunks from the network are cut to this size.
const PIECE: usize = 64 * 1024;
/// Pieces in flight: with [`PIECE`], at most 2 MiB queued between a download and its unpack.
const PIECES: usize = 32;

enum Piece {
    Bytes(Bytes),
    /// The blob is whole and verified: the reader may report its end.
    End,
}

/// A download's end of the channel.
pub(crate) struct Feed {
    tx: mpsc::Sender<Piece>,
    closed: bool,
}

/// An unpack's end of the channel: a [`Read`] that blocks (call it off the async threads).
pub(crate) struct FeedReader {
    rx: mpsc::Receiver<Piece>,
    current: Bytes,
    ended: bool,
}

/// A new channel.
pub(crate) fn channel() -> (Feed, FeedReader) {
    let (tx, rx) = mpsc::channel(PIECES);
    (
        Feed { tx, closed: false },
        FeedReader {
            rx,
            current: Bytes::new(),
            ended: false,
        },
    )
}

impl Feed {
    /// Hands `chunk` to the reader, waiting while the channel is full. False once the reader is
    /// gone (the unpack stopped: it failed or was cancelled).
    pub(crate) async fn send(&mut self, mut chunk: Bytes) -> bool {
        while !chunk.is_empty() && !self.closed {
            let piece = chunk.split_to(chunk.len().min(PIECE));
            if self.tx.send(Piece::Bytes(piece)).await.is_err() {
                self.closed = true;
            }
        }
        !self.closed
    }

    /// Tells the reader the blob is whole and verified: only then does it read an end of file.
    /// Dropping a feed without it makes the reader fail instead.
    pub(crate) async fn end(&mut self) {
        if !self.closed && self.tx.send(Piece::End).await.is_err() {
            self.closed = true;
        }
    }

    /// Whether the reader went away before the feed ended.
    pub(crate) fn closed(&self) -> bool {
        self.closed
    }
}

impl Read for FeedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if self.ended {
                return Ok(0);
            }
            match self.rx.blocking_recv() {
                Some(Piece::Bytes(bytes)) => self.current = bytes,
                Some(Piece::End) => self.ended = true,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the blob's download stopped",
                    ));
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_gets_every_byte_then_the_end() {
        let (mut feed, mut reader) = channel();
        let read = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).map(|_| all)
        });
        let data: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        for chunk in data.chunks(100_000) {
            assert!(feed.send(Bytes::copy_from_slice(chunk)).await);
        }
        feed.end().await;
        assert_eq!(read.await.unwrap().unwrap(), data);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_feed_dropped_before_its_end_is_an_error_not_an_end() {
        let (mut feed, mut reader) = channel();
        let read = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all)
        });
        assert!(feed.send(Bytes::from_static(b"half a layer")).await);
        drop(feed);
        let err = read.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_feed_learns_the_reader_is_gone_and_never_blocks_on_it() {
        let (mut feed, reader) = channel();
        drop(reader);
        assert!(!feed.send(Bytes::from(vec![0u8; 10 * PIECE])).await);
        assert!(feed.closed());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_reader_holds_the_sender_back() {
        let (mut feed, _reader) = channel();
        // The channel holds PIECES pieces; one more waits for the reader, which never reads.
        for _ in 0..PIECES {
            assert!(feed.send(Bytes::from(vec![0u8; PIECE])).await);
        }
        let more = feed.send(Bytes::from(vec![0u8; PIECE]));
        let waited = tokio::time::timeout(std::time::Duration::from_millis(100), more).await;
        assert!(waited.is_err(), "a full channel makes the download wait");
    }
}

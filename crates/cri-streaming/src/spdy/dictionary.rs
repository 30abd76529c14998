//! The zlib dictionary every SPDY/3 header block stream starts from (SPDY/3.1, section 2.6.10.1).
//!
//! Written as the spec lays it out: 65 words, each behind its 32-bit big-endian length, then one
//! run of status codes, reason phrases, dates and media types with no lengths. Assembled at
//! compile time; the tests hold its length (1423) and Adler-32 (the DICTID a peer's zlib stream
//! names) to the spec's.

/// The length-prefixed part.
const WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The unprefixed part that ends the dictionary.
const TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

const fn dictionary_len() -> usize {
    let mut len = TAIL.len();
    let mut i = 0;
    while i < WORDS.len() {
        len += 4 + WORDS[i].len();
        i += 1;
    }
    len
}

/// The dictionary's length in bytes.
pub(crate) const LEN: usize = dictionary_len();

/// The SPDY/3 header compression dictionary (1423 bytes, Adler-32 `0xe3c6a7c2`): every header
/// block stream starts from it, in both directions.
pub static DICTIONARY: [u8; LEN] = build();

/// The Adler-32 of [`DICTIONARY`]: the DICTID in the zlib header of every header block stream.
pub(crate) const ADLER32: u32 = 0xe3c6_a7c2;

const fn build() -> [u8; LEN] {
    let mut out = [0u8; LEN];
    let mut at = 0;
    let mut i = 0;
    while i < WORDS.len() {
        let word = WORDS[i].as_bytes();
        let len = (word.len() as u32).to_be_bytes();
        let mut k = 0;
        while k < 4 {
            out[at] = len[k];
            at += 1;
            k += 1;
        }
        let mut k = 0;
        while k < word.len() {
            out[at] = word[k];
            at += 1;
            k += 1;
        }
        i += 1;
    }
    let tail = TAIL.as_bytes();
    let mut k = 0;
    while k < tail.len() {
        out[at] = tail[k];
        at += 1;
        k += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adler-32 as RFC 1950 defines it, so the test does not lean on the zlib under test.
    fn adler32(data: &[u8]) -> u32 {
        let (mut a, mut b) = (1u32, 0u32);
        for &byte in data {
            a = (a + u32::from(byte)) % 65_521;
            b = (b + a) % 65_521;
        }
        (b << 16) | a
    }

    #[test]
    fn is_the_specs_dictionary() {
        assert_eq!(LEN, 1423);
        assert_eq!(adler32(&DICTIONARY), ADLER32);
        assert!(DICTIONARY.starts_with(b"\0\0\0\x07options\0\0\0\x04head"));
        assert!(DICTIONARY.ends_with(b"utf-,*,enq=0."));
    }
}

//! Content digests (sha256 only) and chain ids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// A `sha256:<64 hex digits>` content digest, checked when made.
///
/// Only sha256 is accepted: it is what every registry and image builder uses, and a digest this
/// crate cannot verify would be a blob it has to trust.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<hex>`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDigest`] for another algorithm, a wrong length or upper-case or non-hex
    /// digits.
    pub fn parse(text: &str) -> Result<Digest> {
        let invalid = |reason| Error::InvalidDigest {
            digest: text.to_owned(),
            reason,
        };
        let Some((algorithm, hex)) = text.split_once(':') else {
            return Err(invalid("no algorithm"));
        };
        if algorithm != "sha256" {
            return Err(invalid("only sha256 digests are supported"));
        }
        Digest::from_hex(hex).ok_or_else(|| invalid("not 64 lower-case hex digits"))
    }

    /// A digest from its 64 lower-case hex digits; `None` if `hex` is not that.
    pub fn from_hex(hex: &str) -> Option<Digest> {
        is_sha256_hex(hex).then(|| Digest {
            hex: hex.to_owned(),
        })
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let mut hasher = Hasher::new();
        hasher.update(bytes);
        hasher.finish()
    }

    /// The 64 hex digits, without the algorithm: the file name under `blobs/sha256/`.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The chain id of a layer whose parent's chain id is `parent` and whose diff id is `self`,
    /// as the OCI image spec defines it: `sha256(parent + " " + diff_id)`; the first layer's
    /// chain id is its diff id.
    pub fn chain(parent: Option<&Digest>, diff_id: &Digest) -> Digest {
        match parent {
            None => diff_id.clone(),
            Some(parent) => Digest::of(format!("{parent} {diff_id}").as_bytes()),
        }
    }
}

/// Whether `hex` is 64 lower-case hex digits.
pub(crate) fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl FromStr for Digest {
    type Err = Error;

    fn from_str(s: &str) -> Result<Digest> {
        Digest::parse(s)
    }
}

impl TryFrom<String> for Digest {
    type Error = Error;

    fn try_from(s: String) -> Result<Digest> {
        Digest::parse(&s)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.to_string()
    }
}

/// A running sha256 over bytes as they stream past.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hasher {
    inner: Sha256,
}

impl Hasher {
    pub(crate) fn new() -> Hasher {
        Hasher::default()
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
    }

    pub(crate) fn finish(self) -> Digest {
        let out = self.inner.finalize();
        let mut hex = String::with_capacity(64);
        for b in &out {
            hex.push(char::from(HEX[usize::from(b >> 4)]));
            hex.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        Digest { hex }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_of_known_bytes() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn only_canonical_sha256_parses() {
        let good = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(Digest::parse(good).unwrap().to_string(), good);
        for bad in [
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:e3b0",
            "sha256:../../../../etc/passwd/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn chain_ids_follow_the_image_spec() {
        let a = Digest::of(b"a");
        let b = Digest::of(b"b");
        assert_eq!(Digest::chain(None, &a), a);
        assert_eq!(
            Digest::chain(Some(&a), &b),
            Digest::of(format!("{a} {b}").as_bytes())
        );
    }
}

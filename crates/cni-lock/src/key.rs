//! Lock keys and how they become file names.
//!
//! A key's file name must be safe whatever a container ID or network name contains: it never
//! holds `/`, is never `.` or `..`, and stays well under the usual 255-byte limit. Distinct keys
//! map to distinct names (up to a 128-bit hash collision for very long or empty parts, which would
//! only make two keys share a lock, never break exclusion).
//!
//! Each part (container ID, network name) is percent-encoded: bytes in `[A-Za-z0-9_.-]` stay as
//! they are, every other byte becomes `%XX`. Real container IDs (64 hex digits) stay readable. If
//! the encoded part is empty or longer than [`ENCODED_MAX`] bytes, it becomes up to
//! [`HASH_PREFIX_MAX`] of its safe bytes, `#`, and the FNV-1a 128-bit hash of the whole part in hex.
//! Percent-encoding never emits `#` or `@`, so the three forms and the `@` separators cannot be
//! confused with one another.
//!
//! The names are part of the cross-process protocol: two programs (or two versions of one) that
//! lock the same container must compute the same name, which is why the hash is spelled out here
//! rather than taken from `std`'s unspecified `DefaultHasher`.

use std::fmt::{self, Write as _};

/// Longest encoded part kept as percent-encoding; longer ones are hashed.
const ENCODED_MAX: usize = 96;
/// How many safe bytes of a hashed part are kept in front of the hash, for people reading `ls`.
const HASH_PREFIX_MAX: usize = 24;

/// What a lock protects: one container, one container on one network, or the global GC lock.
///
/// The key decides the lock file's name inside the lock directory; see [`LockKey::file_name`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockKey {
    kind: Kind,
    file_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    Container(String),
    Attachment { network: String, container: String },
    Gc,
}

impl LockKey {
    /// The lock for every CNI operation on one container (sandbox) ID.
    pub fn container(id: &str) -> Self {
        Self {
            file_name: format!("ctr@{}.lock", encode_part(id)),
            kind: Kind::Container(id.to_owned()),
        }
    }

    /// The lock for one container's attachment to one network, for callers that run different
    /// networks of the same container in parallel.
    pub fn attachment(network: &str, container: &str) -> Self {
        Self {
            file_name: format!(
                "att@{}@{}.lock",
                encode_part(network),
                encode_part(container)
            ),
            kind: Kind::Attachment {
                network: network.to_owned(),
                container: container.to_owned(),
            },
        }
    }

    /// The global lock that separates garbage collection from set-up and teardown.
    ///
    /// Set-up and teardown hold it *shared* (so they run in parallel with each other), GC holds
    /// it *exclusive*. Take it before any container or attachment lock, never after, so that the
    /// lock order is the same everywhere and cannot deadlock.
    pub fn gc() -> Self {
        Self {
            kind: Kind::Gc,
            file_name: "gc.lock".to_owned(),
        }
    }

    /// Whether this is the [GC lock](LockKey::gc), whose file is never removed: every set-up
    /// and teardown takes it, so removing it would only mean creating it again a moment later.
    pub fn is_gc(&self) -> bool {
        self.kind == Kind::Gc
    }

    /// The name of this key's lock file inside the lock directory.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }
}

impl fmt::Display for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Container(id) => write!(f, "container {id:?}"),
            Kind::Attachment { network, container } => {
                write!(f, "container {container:?} on network {network:?}")
            }
            Kind::Gc => f.write_str("garbage collection"),
        }
    }
}

fn is_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Encodes one part of a key (see the module docs).
fn encode_part(part: &str) -> String {
    let bytes = part.as_bytes();
    let mut out = String::with_capacity(bytes.len().min(ENCODED_MAX));
    for &b in bytes {
        if out.len() > ENCODED_MAX {
            break;
        }
        if is_safe(b) {
            out.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
    if !out.is_empty() && out.len() <= ENCODED_MAX {
        return out;
    }
    let prefix: String = bytes
        .iter()
        .copied()
        .filter(|&b| is_safe(b))
        .take(HASH_PREFIX_MAX)
        .map(char::from)
        .collect();
    format!("{prefix}#{:032x}", fnv1a_128(bytes))
}

/// FNV-1a, 128-bit: tiny, dependency-free and fixed forever, which is all a file name needs.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_safe_name(name: &str) {
        assert!(!name.contains('/'), "{name:?} contains a slash");
        assert!(name != "." && name != "..", "{name:?} is a dot entry");
        assert!(name.len() <= 255, "{name:?} is {} bytes", name.len());
        assert!(
            name.bytes()
                .all(|b| is_safe(b) || matches!(b, b'%' | b'#' | b'@')),
            "{name:?} has bytes outside the expected set"
        );
    }

    #[test]
    fn container_names() {
        let long_hex = "0123456789abcdef".repeat(4);
        let very_long = "x".repeat(5000);
        let cases: &[(&str, &str)] = &[
            ("abc", "ctr@abc.lock"),
            ("A-b_c.9", "ctr@A-b_c.9.lock"),
            ("..", "ctr@...lock"),
            ("../../etc/passwd", "ctr@..%2F..%2Fetc%2Fpasswd.lock"),
            ("a/b", "ctr@a%2Fb.lock"),
            ("a%2Fb", "ctr@a%252Fb.lock"),
            ("a b\n", "ctr@a%20b%0A.lock"),
            ("é", "ctr@%C3%A9.lock"),
            ("a@b#c", "ctr@a%40b%23c.lock"),
            ("\0", "ctr@%00.lock"),
            (&long_hex, ""),
            (&very_long, ""),
            ("", ""),
        ];
        for &(id, want) in cases {
            let name = LockKey::container(id).file_name().to_owned();
            assert_safe_name(&name);
            if want.is_empty() {
                continue;
            }
            assert_eq!(name, want, "container id {id:?}");
        }
        assert_eq!(
            LockKey::container(&long_hex).file_name(),
            format!("ctr@{long_hex}.lock"),
            "real container IDs stay readable"
        );
    }

    #[test]
    fn long_and_empty_parts_are_hashed_with_a_readable_prefix() {
        let cases = [
            "x".repeat(97),
            "x".repeat(5000),
            "/".repeat(40),
            "日本語".repeat(20),
            String::new(),
        ];
        for id in &cases {
            let name = LockKey::container(id).file_name().to_owned();
            assert_safe_name(&name);
            let (prefix, hash) = name
                .trim_start_matches("ctr@")
                .trim_end_matches(".lock")
                .split_once('#')
                .unwrap_or_else(|| panic!("{name:?} is not hashed"));
            assert!(prefix.len() <= HASH_PREFIX_MAX, "{name:?}");
            assert!(id.starts_with(prefix), "{name:?}");
            assert_eq!(hash.len(), 32, "{name:?}");
        }
    }

    #[test]
    fn distinct_keys_have_distinct_names() {
        let long_a = format!("{}a", "x".repeat(200));
        let long_b = format!("{}b", "x".repeat(200));
        let keys = [
            LockKey::container("a"),
            LockKey::container("b"),
            LockKey::container("a/b"),
            LockKey::container("a%2Fb"),
            LockKey::container("gc"),
            LockKey::container(""),
            LockKey::container(&long_a),
            LockKey::container(&long_b),
            LockKey::attachment("a", "b"),
            LockKey::attachment("b", "a"),
            LockKey::attachment("a@b", "c"),
            LockKey::attachment("a", "b@c"),
            LockKey::attachment("", "a"),
            LockKey::attachment("a", ""),
            LockKey::gc(),
        ];
        for (i, a) in keys.iter().enumerate() {
            assert_safe_name(a.file_name());
            for b in &keys[i + 1..] {
                assert_ne!(a.file_name(), b.file_name(), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn worst_case_attachment_name_fits_in_a_directory_entry() {
        let worst = "/".repeat(32); // 96 bytes once escaped, the most that is not hashed
        let name = LockKey::attachment(&worst, &worst).file_name().to_owned();
        assert!(!name.contains('#'), "{name:?}");
        assert_safe_name(&name);
    }

    #[test]
    fn fnv_matches_the_published_vectors() {
        assert_eq!(fnv1a_128(b""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_eq!(fnv1a_128(b"a"), 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
    }

    #[test]
    fn display_names_the_container_and_network() {
        assert_eq!(LockKey::container("c1").to_string(), "container \"c1\"");
        assert_eq!(
            LockKey::attachment("net", "c1").to_string(),
            "container \"c1\" on network \"net\""
        );
    }
}

//! CNI specification versions: parsing, ordering, and negotiation.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A CNI specification version such as `1.0.0`.
///
/// Ordered numerically, so `0.10.0 > 0.4.0`. A missing patch (`"0.3"`) is accepted as `.0`, as libcni
/// does; anything else that is not three dot-separated numbers is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Patch number.
    pub patch: u32,
}

impl Version {
    /// `0.1.0`, the version libcni assumes when a configuration has no `cniVersion`.
    pub const V0_1_0: Version = Version::new(0, 1, 0);
    /// `0.2.0`, the last version with the `ip4`/`ip6` result shape.
    pub const V0_2_0: Version = Version::new(0, 2, 0);
    /// `0.3.0`, the first version with `interfaces` and `ips`.
    pub const V0_3_0: Version = Version::new(0, 3, 0);
    /// `0.3.1`.
    pub const V0_3_1: Version = Version::new(0, 3, 1);
    /// `0.4.0`, the first version with CHECK.
    pub const V0_4_0: Version = Version::new(0, 4, 0);
    /// `1.0.0`.
    pub const V1_0_0: Version = Version::new(1, 0, 0);
    /// `1.1.0`, the first version with STATUS, GC and `cniVersions`.
    pub const V1_1_0: Version = Version::new(1, 1, 0);

    /// The newest version this library implements.
    pub const LATEST: Version = Version::V1_1_0;

    /// Builds a version from its numbers.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// Whether this library implements this exact version.
    pub fn is_supported(self) -> bool {
        SUPPORTED_VERSIONS.contains(&self)
    }

    /// Whether plugins of this version understand CHECK (0.4.0 and later).
    pub fn supports_check(self) -> bool {
        self >= Version::V0_4_0
    }

    /// Whether plugins of this version understand STATUS and GC (1.1.0 and later).
    pub fn supports_status_and_gc(self) -> bool {
        self >= Version::V1_1_0
    }
}

/// Every version this library implements, oldest first.
pub const SUPPORTED_VERSIONS: &[Version] = &[
    Version::V0_1_0,
    Version::V0_2_0,
    Version::V0_3_0,
    Version::V0_3_1,
    Version::V0_4_0,
    Version::V1_0_0,
    Version::V1_1_0,
];

impl FromStr for Version {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = |reason| Error::InvalidVersion {
            version: s.to_owned(),
            reason,
        };
        if s.is_empty() {
            return Err(invalid("empty"));
        }
        let mut parts = s.split('.');
        let mut next = |required: bool| -> Result<u32> {
            match parts.next() {
                None if required => Err(invalid("expected MAJOR.MINOR.PATCH")),
                None => Ok(0),
                Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => {
                    Err(invalid("each part must be a decimal number"))
                }
                Some(p) => p.parse().map_err(|_| invalid("number too large")),
            }
        };
        let version = Version::new(next(true)?, next(true)?, next(false)?);
        if parts.next().is_some() {
            return Err(invalid("more than three parts"));
        }
        Ok(version)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The answer to the VERSION command: the version the plugin speaks and every version it accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The version of this response.
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    /// Every version the plugin accepts in its configuration.
    #[serde(rename = "supportedVersions", default)]
    pub supported_versions: Vec<String>,
}

impl VersionInfo {
    /// The information a plugin from before VERSION existed is assumed to have: 0.1.0 and 0.2.0.
    pub fn legacy() -> Self {
        VersionInfo {
            cni_version: "0.1.0".to_owned(),
            supported_versions: vec!["0.1.0".to_owned(), "0.2.0".to_owned()],
        }
    }

    /// Parses a VERSION response.
    ///
    /// # Errors
    ///
    /// [`Error::Json`] when the bytes are not a VERSION response.
    pub fn from_slice(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|source| Error::Json {
            what: "VERSION response",
            source,
        })
    }

    /// The versions of `supported_versions` that parse, in their given order.
    pub fn versions(&self) -> impl Iterator<Item = Version> + '_ {
        self.supported_versions
            .iter()
            .filter_map(|v| v.parse().ok())
    }
}

/// The highest version present in both lists, if any.
pub fn highest_common(ours: &[Version], theirs: &[Version]) -> Option<Version> {
    ours.iter().filter(|v| theirs.contains(v)).max().copied()
}

/// Picks from a configuration's `cniVersions` array the highest version this library implements.
///
/// Entries that do not parse are ignored here (validation reports them separately).
pub fn pick_from_cni_versions<S: AsRef<str>>(cni_versions: &[S]) -> Option<Version> {
    cni_versions
        .iter()
        .filter_map(|v| v.as_ref().parse::<Version>().ok())
        .filter(|v| v.is_supported())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders_numerically() {
        let cases = [
            ("0.3.1", Version::V0_3_1),
            ("1.1.0", Version::V1_1_0),
            ("0.3", Version::V0_3_0),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Version>().unwrap(), want, "{text}");
        }
        assert!("0.10.0".parse::<Version>().unwrap() > Version::V0_4_0);
    }

    #[test]
    fn rejects_malformed_versions_with_the_reason() {
        let cases = [
            ("", "invalid CNI version \"\": empty"),
            ("1", "invalid CNI version \"1\": expected MAJOR.MINOR.PATCH"),
            (
                "1.0.0.0",
                "invalid CNI version \"1.0.0.0\": more than three parts",
            ),
            (
                "1.x.0",
                "invalid CNI version \"1.x.0\": each part must be a decimal number",
            ),
            (
                "v1.0.0",
                "invalid CNI version \"v1.0.0\": each part must be a decimal number",
            ),
            (
                "1..0",
                "invalid CNI version \"1..0\": each part must be a decimal number",
            ),
            (
                "99999999999.0.0",
                "invalid CNI version \"99999999999.0.0\": number too large",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<Version>().unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn negotiation_picks_the_highest_shared_version() {
        let theirs = [Version::V0_3_1, Version::V0_4_0, Version::V1_0_0];
        assert_eq!(
            highest_common(SUPPORTED_VERSIONS, &theirs),
            Some(Version::V1_0_0)
        );
        assert_eq!(highest_common(&[Version::V0_2_0], &theirs), None);
        assert_eq!(
            pick_from_cni_versions(&["1.0.0", "1.1.0", "2.0.0", "junk"]),
            Some(Version::V1_1_0)
        );
        assert_eq!(pick_from_cni_versions(&["2.0.0"]), None);
    }

    #[test]
    fn version_info_reads_plugin_output() {
        let info = VersionInfo::from_slice(
            br#"{"cniVersion":"1.0.0","supportedVersions":["0.1.0","0.2.0","0.3.0","0.3.1","0.4.0","1.0.0"]}"#,
        )
        .unwrap();
        assert_eq!(info.versions().max(), Some(Version::V1_0_0));
        assert!(VersionInfo::from_slice(b"nope").is_err());
    }
}

//! Platforms (os/architecture/variant) and choosing one manifest from an image index.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An OCI platform in Go's words: `linux/amd64`, `linux/arm64/v8`, `linux/arm/v7`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Platform {
    /// `GOOS`: `linux`.
    pub os: String,
    /// `GOARCH`: `amd64`, `arm64`, `arm`, `ppc64le`, `s390x`, `riscv64`, `386`.
    pub architecture: String,
    /// The CPU variant, `v7` for 32-bit ARM, `v8` for arm64; `None` when it does not matter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Platform {
    /// A platform from its parts.
    pub fn new(os: &str, architecture: &str, variant: Option<&str>) -> Platform {
        Platform {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.map(str::to_owned),
        }
    }

    /// The platform this program runs on, in Go's names (Rust's `x86_64` is Go's `amd64`).
    pub fn this_node() -> Platform {
        let (architecture, variant) = match std::env::consts::ARCH {
            "x86_64" => ("amd64", None),
            "aarch64" => ("arm64", Some("v8")),
            "arm" => ("arm", Some("v7")),
            "x86" => ("386", None),
            "powerpc64" if cfg!(target_endian = "little") => ("ppc64le", None),
            "powerpc64" => ("ppc64", None),
            "riscv64" => ("riscv64", None),
            "s390x" => ("s390x", None),
            "loongarch64" => ("loong64", None),
            other => (other, None),
        };
        Platform::new(std::env::consts::OS, architecture, variant)
    }

    /// Whether an index entry for `os`/`architecture`/`variant` runs here. Variants compare as
    /// containerd's matcher does: arm64's default is `v8`, arm's `v7`, amd64's `v1`.
    pub fn matches(&self, os: &str, architecture: &str, variant: Option<&str>) -> bool {
        self.os == os
            && self.architecture == architecture
            && normal_variant(&self.architecture, self.variant.as_deref())
                == normal_variant(architecture, variant)
    }
}

fn normal_variant<'a>(architecture: &str, variant: Option<&'a str>) -> Option<&'a str> {
    match (architecture, variant) {
        ("arm64", None | Some("" | "v8")) => Some("v8"),
        ("arm", None | Some("")) => Some("v7"),
        ("amd64", None | Some("" | "v1")) | (_, Some("")) => None,
        (_, v) => v,
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_default_as_containerd_does() {
        let arm64 = Platform::new("linux", "arm64", Some("v8"));
        assert!(arm64.matches("linux", "arm64", None));
        assert!(arm64.matches("linux", "arm64", Some("v8")));
        assert!(!arm64.matches("linux", "arm64", Some("v9")));
        let arm = Platform::new("linux", "arm", None);
        assert!(arm.matches("linux", "arm", Some("v7")));
        assert!(!arm.matches("linux", "arm", Some("v6")));
        let amd64 = Platform::new("linux", "amd64", None);
        assert!(amd64.matches("linux", "amd64", None));
        assert!(!amd64.matches("linux", "arm64", None));
        assert!(!amd64.matches("windows", "amd64", None));
    }

    #[test]
    fn this_node_is_in_go_terms() {
        let p = Platform::this_node();
        assert_eq!(p.os, "linux");
        assert_ne!(p.architecture, "x86_64");
        assert_ne!(p.architecture, "aarch64");
    }

    #[test]
    fn display_is_os_arch_variant() {
        assert_eq!(
            Platform::new("linux", "arm", Some("v7")).to_string(),
            "linux/arm/v7"
        );
        assert_eq!(
            Platform::new("linux", "amd64", None).to_string(),
            "linux/amd64"
        );
    }
}

//! `crio-lite version`: what was built, from what, with what, as `crio version` reports it.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cri::CRI_API_VERSION;

/// The build's identity (see `build.rs`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// The crate version.
    pub version: &'static str,
    /// The git commit built, or `unknown` outside a git checkout.
    pub git_commit: &'static str,
    /// `clean`, `dirty` (uncommitted changes to tracked files) or `unknown`.
    pub git_tree_state: &'static str,
    /// When it was built (UTC, RFC 3339; SOURCE_DATE_EPOCH for reproducible builds).
    pub build_date: String,
    /// `rustc --version` of the compiler that built it.
    pub rust_version: &'static str,
    /// `os/arch`, as Go's platform strings.
    pub platform: String,
    /// Enabled cargo features.
    pub features: Vec<&'static str>,
    /// The CRI API version served.
    pub cri_api_version: &'static str,
}

impl VersionInfo {
    /// This binary's.
    pub fn current() -> VersionInfo {
        let epoch: u64 = env!("CRIO_LITE_BUILD_EPOCH").parse().unwrap_or(0);
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "powerpc64" => "ppc64le",
            other => other,
        };
        VersionInfo {
            version: env!("CARGO_PKG_VERSION"),
            git_commit: env!("CRIO_LITE_GIT_COMMIT"),
            git_tree_state: env!("CRIO_LITE_GIT_TREE_STATE"),
            build_date: rfc3339_utc(epoch),
            rust_version: env!("CRIO_LITE_RUSTC_VERSION"),
            platform: format!("{}/{arch}", std::env::consts::OS),
            features: env!("CRIO_LITE_FEATURES")
                .split(',')
                .filter(|f| !f.is_empty())
                .collect(),
            cri_api_version: CRI_API_VERSION,
        }
    }

    /// The aligned `Key: value` lines `crio version` prints.
    pub fn to_text(&self) -> String {
        let features = if self.features.is_empty() {
            "none".to_owned()
        } else {
            self.features.join(", ")
        };
        let fields = [
            ("Version", self.version.to_owned()),
            ("GitCommit", self.git_commit.to_owned()),
            ("GitTreeState", self.git_tree_state.to_owned()),
            ("BuildDate", self.build_date.clone()),
            ("RustVersion", self.rust_version.to_owned()),
            ("Compiler", "rustc".to_owned()),
            ("Platform", self.platform.clone()),
            ("Features", features),
            ("CriApiVersion", self.cri_api_version.to_owned()),
        ];
        let mut out = String::new();
        for (key, value) in fields {
            let _ = writeln!(out, "{:<15} {value}", format!("{key}:"));
        }
        out
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil-from-days algorithm).
fn rfc3339_utc(epoch: u64) -> String {
    let days = i64::try_from(epoch / 86_400).unwrap_or(0);
    let secs = epoch % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_rfc3339() {
        for (epoch, want) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_796_298_045, "2026-12-03T11:40:45Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339_utc(epoch), want, "{epoch}");
        }
    }

    #[test]
    fn the_text_names_every_field() {
        let text = VersionInfo::current().to_text();
        for key in [
            "Version:",
            "GitCommit:",
            "GitTreeState:",
            "BuildDate:",
            "RustVersion:",
            "Platform:",
            "Features:",
        ] {
            assert!(text.lines().any(|l| l.starts_with(key)), "{key} in\n{text}");
        }
        assert!(text.contains(env!("CARGO_PKG_VERSION")));
    }
}

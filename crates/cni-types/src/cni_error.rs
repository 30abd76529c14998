//! The error object of the CNI spec, which plugins print on stdout when they fail.
//!
//! Codes 0-99 are reserved for the spec's well-known codes ([`WellKnownCode`]); plugins use 100 and
//! above for their own. [`CodeClass::of`] tells the three ranges apart.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The error a plugin reports: `{"cniVersion", "code", "msg", "details"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniError {
    /// The version of the error object; plugins usually set it, the spec does not require it.
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cni_version: Option<String>,
    /// Error code: see [`WellKnownCode`] and [`CodeClass`].
    pub code: u32,
    /// A short message.
    #[serde(default)]
    pub msg: String,
    /// A longer description; left out of the JSON when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// An error object without `cniVersion`.
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Self {
        CniError {
            cni_version: None,
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    /// Parses what a failing plugin printed.
    ///
    /// # Errors
    ///
    /// [`Error::Json`] when the bytes are not an error object (for instance when `code` is missing).
    pub fn from_slice(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|source| Error::Json {
            what: "CNI error object",
            source,
        })
    }

    /// The well-known code, when the code is one.
    pub fn well_known(&self) -> Option<WellKnownCode> {
        WellKnownCode::from_code(self.code)
    }

    /// The range the code is in.
    pub fn class(&self) -> CodeClass {
        CodeClass::of(self.code)
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "code {} ({}): {}",
            self.code,
            describe(self.code),
            self.msg
        )?;
        if !self.details.is_empty() {
            write!(f, "; {}", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}

/// The error codes the CNI spec defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WellKnownCode {
    /// 1: the plugin does not speak the configuration's version.
    IncompatibleCniVersion,
    /// 2: a field of the network configuration is not supported; the message names it.
    UnsupportedField,
    /// 3: the container is unknown, so there is nothing to clean up.
    UnknownContainer,
    /// 4: a required `CNI_*` environment variable is missing or invalid.
    InvalidEnvironmentVariables,
    /// 5: an I/O failure, such as reading the configuration from stdin.
    IoFailure,
    /// 6: content could not be decoded.
    DecodingFailure,
    /// 7: the network configuration did not validate.
    InvalidNetworkConfig,
    /// 11: a transient condition; the runtime should retry later.
    TryAgainLater,
    /// 50: the plugin cannot serve ADD requests (STATUS).
    PluginNotAvailable,
    /// 51: the plugin cannot serve ADD requests for lack of resources (STATUS).
    PluginNotAvailableLimitedResources,
}

impl WellKnownCode {
    /// Every well-known code, in numeric order.
    pub const ALL: [WellKnownCode; 10] = [
        WellKnownCode::IncompatibleCniVersion,
        WellKnownCode::UnsupportedField,
        WellKnownCode::UnknownContainer,
        WellKnownCode::InvalidEnvironmentVariables,
        WellKnownCode::IoFailure,
        WellKnownCode::DecodingFailure,
        WellKnownCode::InvalidNetworkConfig,
        WellKnownCode::TryAgainLater,
        WellKnownCode::PluginNotAvailable,
        WellKnownCode::PluginNotAvailableLimitedResources,
    ];

    /// The numeric code.
    pub fn code(self) -> u32 {
        match self {
            WellKnownCode::IncompatibleCniVersion => 1,
            WellKnownCode::UnsupportedField => 2,
            WellKnownCode::UnknownContainer => 3,
            WellKnownCode::InvalidEnvironmentVariables => 4,
            WellKnownCode::IoFailure => 5,
            WellKnownCode::DecodingFailure => 6,
            WellKnownCode::InvalidNetworkConfig => 7,
            WellKnownCode::TryAgainLater => 11,
            WellKnownCode::PluginNotAvailable => 50,
            WellKnownCode::PluginNotAvailableLimitedResources => 51,
        }
    }

    /// The well-known code with this number, if any.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// What the spec says the code means, lower-case.
    pub fn description(self) -> &'static str {
        match self {
            WellKnownCode::IncompatibleCniVersion => "incompatible CNI version",
            WellKnownCode::UnsupportedField => "unsupported field in network configuration",
            WellKnownCode::UnknownContainer => "container unknown or does not exist",
            WellKnownCode::InvalidEnvironmentVariables => "invalid necessary environment variables",
            WellKnownCode::IoFailure => "I/O failure",
            WellKnownCode::DecodingFailure => "failed to decode content",
            WellKnownCode::InvalidNetworkConfig => "invalid network config",
            WellKnownCode::TryAgainLater => "try again later",
            WellKnownCode::PluginNotAvailable => "the plugin is not available",
            WellKnownCode::PluginNotAvailableLimitedResources => {
                "the plugin is not available due to limited resources"
            }
        }
    }
}

/// The range an error code falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeClass {
    /// A code the spec defines.
    WellKnown(WellKnownCode),
    /// 0-99 without a meaning yet: reserved for the spec.
    Reserved,
    /// 100 and above: the plugin's own.
    PluginSpecific,
}

impl CodeClass {
    /// Classifies a code.
    pub fn of(code: u32) -> Self {
        match WellKnownCode::from_code(code) {
            Some(known) => CodeClass::WellKnown(known),
            None if code < 100 => CodeClass::Reserved,
            None => CodeClass::PluginSpecific,
        }
    }
}

/// A short lower-case description of any code.
pub fn describe(code: u32) -> &'static str {
    match CodeClass::of(code) {
        CodeClass::WellKnown(known) => known.description(),
        CodeClass::Reserved => "reserved code",
        CodeClass::PluginSpecific => "plugin-specific error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_their_numbers() {
        for known in WellKnownCode::ALL {
            assert_eq!(WellKnownCode::from_code(known.code()), Some(known));
        }
        let numbers: Vec<u32> = WellKnownCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5, 6, 7, 11, 50, 51]);
    }

    #[test]
    fn classifies_the_three_ranges() {
        let cases = [
            (0, CodeClass::Reserved),
            (7, CodeClass::WellKnown(WellKnownCode::InvalidNetworkConfig)),
            (8, CodeClass::Reserved),
            (99, CodeClass::Reserved),
            (100, CodeClass::PluginSpecific),
            (999, CodeClass::PluginSpecific),
        ];
        for (code, want) in cases {
            assert_eq!(CodeClass::of(code), want, "{code}");
        }
    }
}

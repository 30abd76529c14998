//! The crate's error type.

/// Everything that can go wrong when turning bytes into CNI data or converting between versions.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A version string is not of the form `MAJOR.MINOR.PATCH`.
    #[error("invalid CNI version {version:?}: {reason}")]
    InvalidVersion {
        /// The string as given.
        version: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A well-formed version that this library does not implement.
    #[error("unsupported CNI version {version}")]
    UnsupportedVersion {
        /// The version as given.
        version: String,
    },
    /// JSON that does not decode into the expected CNI object.
    #[error("invalid {what}: {source}")]
    Json {
        /// What was being decoded ("network configuration list", "result", ...).
        what: &'static str,
        /// The decoder's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A result that cannot be represented in the requested version.
    #[error("cannot convert result from {from} to {to}: {reason}")]
    Convert {
        /// The result's version.
        from: String,
        /// The requested version.
        to: String,
        /// What cannot be represented, naming the field.
        reason: String,
    },
    /// A result that holds something its own version cannot express, so it cannot be written out.
    #[error("cannot write result as {version}: {reason}")]
    Encode {
        /// The result's version.
        version: String,
        /// What cannot be written, naming the field.
        reason: String,
    },
    /// A result whose `cniVersion` is missing or differs from the version it is being read as.
    #[error("invalid result: {reason}")]
    InvalidResult {
        /// What is wrong with it.
        reason: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

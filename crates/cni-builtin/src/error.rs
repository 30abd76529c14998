//! The crate's error type.

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong outside a plugin run (a plugin's own failures come back as
/// [`cni_exec::Error::Failed`], as a failing plugin process's would).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A preference that is not `prefer-binary`, `prefer-builtin` or `never`.
    #[error(
        "invalid built-in plugin preference {value:?}: expected prefer-binary, prefer-builtin or never"
    )]
    InvalidPreference {
        /// The value as given.
        value: String,
    },
}

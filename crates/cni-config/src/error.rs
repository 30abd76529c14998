//! The crate's error type.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while reading, parsing or validating configurations.
///
/// Messages start with the file at fault (when there is one) and then the field, e.g.
/// `/etc/cni/net.d/10-x.conflist: plugins[1].type: must be a plain file name, got "../evil"`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration directory does not exist.
    #[error("{}: configuration directory does not exist", dir.display())]
    DirNotFound {
        /// The directory as given.
        dir: PathBuf,
    },
    /// The configuration directory exists but cannot be listed.
    #[error("{}: cannot read configuration directory: {source}", dir.display())]
    ReadDir {
        /// The directory as given.
        dir: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A file (or a plugin subdirectory) cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The bytes are not JSON (trailing commas, comments and truncated files end here).
    #[error("{}invalid JSON: {source}", located(path.as_deref(), ""))]
    Json {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// The decoder's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The JSON is well formed but a field is missing, has the wrong type, or breaks a rule.
    #[error("{}{reason}", located(path.as_deref(), field))]
    Invalid {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// The field path, e.g. `plugins[1].type`; empty when the whole document is at fault.
        field: String,
        /// What is wrong, lower-case.
        reason: String,
    },
}

fn located(path: Option<&Path>, field: &str) -> String {
    let mut out = String::new();
    if let Some(path) = path {
        let _ = write!(out, "{}: ", path.display());
    }
    if !field.is_empty() {
        let _ = write!(out, "{field}: ");
    }
    out
}

impl Error {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid {
            path: None,
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Names `path` as the file at fault, unless the error already names one.
    #[must_use]
    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        if let Error::Json { path, .. } | Error::Invalid { path, .. } = &mut self
            && path.is_none()
        {
            *path = Some(file.to_owned());
        }
        self
    }

    /// The file or directory at fault, if known.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Error::DirNotFound { dir } | Error::ReadDir { dir, .. } => Some(dir),
            Error::Read { path, .. } => Some(path),
            Error::Json { path, .. } | Error::Invalid { path, .. } => path.as_deref(),
        }
    }

    /// The field at fault (e.g. `plugins[1].type`), for [`Error::Invalid`].
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Invalid { field, .. } if !field.is_empty() => Some(field),
            _ => None,
        }
    }
}

impl From<cni_types::ConfigError> for Error {
    fn from(e: cni_types::ConfigError) -> Self {
        Error::invalid(e.field, e.reason)
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! What a configuration mistake says: where it is, which key, what is wrong.

use std::fmt;

/// Where a value, or a mistake, comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A configuration file (or text named like one), at a line when one is known.
    File {
        /// The file.
        path: String,
        /// The line, from 1.
        line: Option<usize>,
    },
    /// An environment variable.
    Env(String),
    /// A command-line flag.
    Flag(String),
    /// The built-in default.
    Default,
}

impl Origin {
    pub(crate) fn file(path: &str) -> Origin {
        Origin::File {
            path: path.to_owned(),
            line: None,
        }
    }

    pub(super) fn at_line(&self, line: usize) -> Origin {
        match self {
            Origin::File { path, .. } => Origin::File {
                path: path.clone(),
                line: Some(line),
            },
            other => other.clone(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File {
                path,
                line: Some(line),
            } => write!(f, "{path}:{line}"),
            Origin::File { path, line: None } => f.write_str(path),
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Default => f.write_str("the default"),
        }
    }
}

/// What is wrong, in a [`ConfigIssue`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IssueKind {
    /// The file or directory cannot be read.
    Unreadable(String),
    /// The text is not TOML.
    Syntax(String),
    /// crio-lite has no such key (or table, when `table`); `suggestion` is a known one with a
    /// close or equal name.
    UnknownKey {
        /// Whether the unknown name holds a table.
        table: bool,
        /// The known key or table meant, maybe.
        suggestion: Option<String>,
    },
    /// The value's TOML type is not the key's.
    WrongType {
        /// The key's type, with an article: `a string`.
        expected: &'static str,
        /// The value's type, likewise.
        found: &'static str,
    },
    /// The value has the right type but cannot be used.
    BadValue(String),
}

/// One mistake in a configuration: where, which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigIssue {
    /// Where it is.
    pub origin: Origin,
    /// The key, dotted (`crio.api.listen`); `None` when the whole file is at fault.
    pub key: Option<String>,
    /// What is wrong.
    pub kind: IssueKind,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = &self.origin;
        let key = self.key.as_deref().unwrap_or("");
        match &self.kind {
            IssueKind::Unreadable(why) => write!(f, "{origin}: cannot read: {why}"),
            IssueKind::Syntax(why) => write!(f, "{origin}: invalid TOML: {why}"),
            IssueKind::UnknownKey { table, suggestion } => {
                let what = if *table { "table" } else { "key" };
                write!(f, "{origin}: unknown {what} {key}")?;
                match suggestion {
                    Some(known) => write!(f, "; did you mean {known}?"),
                    None => Ok(()),
                }
            }
            IssueKind::WrongType { expected, found } => {
                write!(f, "{origin}: key {key} must be {expected}, not {found}")
            }
            IssueKind::BadValue(why) => write!(f, "{origin}: key {key}: {why}"),
        }
    }
}

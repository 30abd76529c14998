//! The command line.

use std::path::PathBuf;

use crate::config::Overrides;
use crate::status_cmd::StatusQuery;

/// `crio-lite [--config FILE] [flags] [run|config|status|version]`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "crio-lite",
    version,
    about = "A thin CRI daemon for pod sandboxes and their networks"
)]
pub struct Cli {
    /// The configuration file (default: /etc/crio-lite/crio-lite.conf when it exists).
    #[arg(long, short = 'c', value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// Flags that override the file.
    #[command(flatten)]
    pub overrides: Overrides,
    /// What to do; `run` when absent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum Command {
    /// Run the daemon (the default).
    Run,
    /// Print the effective configuration as commented TOML (the defaults when no file or flag is
    /// given).
    Config,
    /// Ask a running daemon through its socket (--socket).
    Status {
        /// What to ask.
        #[command(subcommand)]
        query: StatusQuery,
    },
    /// Print the version.
    Version,
}

/// An error and its causes on one line, as `context: cause: cause`, leaving out a cause whose text
/// the line already ends with (error types that print their source in their own message would
/// otherwise show it twice).
pub fn error_text(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

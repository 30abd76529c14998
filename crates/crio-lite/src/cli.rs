//! The command line.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::builder::{Resettable, StyledStr};
use clap::{CommandFactory as _, FromArgMatches as _, Subcommand as _};

use crate::config::{Loader, Overrides, path_or_empty};
use crate::status_cmd::StatusQuery;

/// `crio-lite [-c FILE] [-d DIR] [flags] [run|config|check-config|status|version|completions]`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "crio-lite",
    version,
    about = "A thin CRI daemon for pod sandboxes and their networks",
    after_help = "Configuration: /etc/crio-lite/crio-lite.conf, then \
                  /etc/crio-lite/crio-lite.conf.d/*.conf in lexical order; environment variables \
                  (CONTAINER_*, CRIO_LITE_*) override the files, flags override both. \
                  `crio-lite config` prints the result."
)]
pub struct Cli {
    /// The configuration file; "" for none [default: /etc/crio-lite/crio-lite.conf, read when it
    /// exists; env CONTAINER_CONFIG].
    #[arg(long, short = 'c', value_name = "FILE", global = true,
          value_parser = path_or_empty(), value_hint = clap::ValueHint::FilePath)]
    pub config: Option<PathBuf>,
    /// The drop-in directory: its *.conf files, in lexical order, override the configuration
    /// file key by key; "" for none [default: /etc/crio-lite/crio-lite.conf.d, read when it exists;
    /// env CONTAINER_CONFIG_DIR].
    #[arg(long, short = 'd', value_name = "DIR", global = true,
          value_parser = path_or_empty(), value_hint = clap::ValueHint::DirPath)]
    pub config_dir: Option<PathBuf>,
    /// Flags that override the files and the environment.
    #[command(flatten)]
    pub overrides: Overrides,
    /// What to do; `run` when absent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// The loader of the configuration these flags (and the environment) describe.
    pub fn loader(&self) -> Loader {
        Loader::new(
            self.config.clone(),
            self.config_dir.clone(),
            self.overrides.clone(),
        )
    }
}

/// The subcommands.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum Command {
    /// Run the daemon (the default).
    Run,
    /// Print the effective configuration (files, drop-ins, environment and flags) as commented
    /// TOML that reads back the same.
    Config {
        /// Print the defaults instead, whatever the files, environment and flags say.
        #[arg(long)]
        default: bool,
    },
    /// Check the configuration (file, drop-ins, environment and flags): print every mistake and
    /// exit 1, or exit 0.
    CheckConfig,
    /// Ask a running daemon through its socket.
    Status {
        /// The daemon's socket [default: the configuration's crio.api.listen].
        #[arg(long, short = 's', value_name = "PATH", global = true,
              value_hint = clap::ValueHint::FilePath)]
        socket: Option<PathBuf>,
        /// How to print the answer.
        #[arg(long, short = 'o', value_enum, default_value_t, global = true)]
        output: crate::status_cmd::OutputFormat,
        /// What to ask.
        #[command(subcommand)]
        query: StatusQuery,
    },
    /// Print the version.
    Version,
    /// Become the init of a pod's PID namespace (run by the daemon itself, never by hand, with
    /// where to confine the init on stdin).
    #[command(name = "pod-init", hide = true)]
    PodInit {
        /// The pod sandbox.
        pod: String,
        /// Where the init's identity is recorded.
        pid_file: PathBuf,
    },
}

/// The hidden subcommand the daemon runs itself as to start a pod's init
/// ([`oci_container::pod_init`]).
pub const POD_INIT_COMMAND: &str = "pod-init";

/// The commands that document the command line itself, answered by [`Docs::run`] before
/// [`crate::wiring::main`] sees the line: `crio-lite completions SHELL` and the hidden
/// `crio-lite man [--out-dir DIR]`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum Docs {
    /// Print the completion script for SHELL.
    Completions {
        /// The shell the script is for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page in roff, or write every page (one per command) into a directory.
    #[command(hide = true)]
    Man {
        /// Write crio-lite.1 and one page per command into DIR (created if missing), and print
        /// their paths.
        #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
        out_dir: Option<PathBuf>,
    },
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// The daemon's commands, for [`crate::wiring::main`].
    Cli(Box<Cli>),
    /// Documentation of the command line.
    Docs(Docs),
}

/// The whole command line: [`Cli`] and the [`Docs`] commands, which completions and pages
/// describe too.
pub fn command() -> clap::Command {
    let cli = Cli::command();
    let keep =
        |text: Option<&StyledStr>| text.cloned().map_or(Resettable::Reset, Resettable::Value);
    let (about, long_about) = (keep(cli.get_about()), keep(cli.get_long_about()));
    // Augmenting sets the description from the enum's doc comment; the binary keeps its own.
    Docs::augment_subcommands(cli)
        .about(about)
        .long_about(long_about)
}

/// Parses the process's arguments. Like `Cli::parse`, it exits on `--help` and `--version` (0)
/// and on a usage error (2).
pub fn parse() -> Invocation {
    let mut command = command();
    let matches = command.get_matches_mut();
    let parsed = if matches.subcommand_name().is_some_and(Docs::has_subcommand) {
        Docs::from_arg_matches(&matches).map(Invocation::Docs)
    } else {
        Cli::from_arg_matches(&matches).map(|cli| Invocation::Cli(Box::new(cli)))
    };
    parsed.unwrap_or_else(|e| e.format(&mut command).exit())
}

impl Docs {
    /// Prints the completion script or the manual page, or writes the pages.
    ///
    /// # Errors
    ///
    /// When stdout or a page cannot be written.
    pub fn run(&self) -> anyhow::Result<()> {
        let mut command = command();
        let out = match self {
            Docs::Completions { shell } => {
                let mut script = Vec::new();
                clap_complete::generate(*shell, &mut command, "crio-lite", &mut script);
                script
            }
            Docs::Man { out_dir } => {
                // clap's `help` command has no page; built, the commands know their page names.
                command = command.disable_help_subcommand(true);
                command.build();
                let mut out = Vec::new();
                match out_dir {
                    None => clap_mangen::Man::new(command).render(&mut out)?,
                    Some(dir) => {
                        std::fs::create_dir_all(dir)
                            .with_context(|| format!("cannot create {}", dir.display()))?;
                        for page in write_pages(&command, dir)? {
                            writeln!(out, "{}", page.display())?;
                        }
                    }
                }
                out
            }
        };
        std::io::stdout()
            .write_all(&out)
            .context("cannot write to stdout")
    }
}

/// The page of `command` and of each of its visible commands, recursively (crio-lite.1 names
/// crio-lite-status(1), which names crio-lite-status-info(1)); every footer names the binary and
/// its version, where clap_mangen would name the command alone.
fn write_pages(command: &clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut pages = Vec::new();
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        pages.extend(write_pages(sub, dir)?);
    }
    let man = clap_mangen::Man::new(command.clone())
        .source(format!("crio-lite {}", env!("CARGO_PKG_VERSION")));
    pages.push(
        man.generate_to(dir)
            .with_context(|| format!("cannot write a page into {}", dir.display()))?,
    );
    Ok(pages)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn the_binary_keeps_its_description() {
        assert_eq!(
            command().get_about().map(ToString::to_string),
            Cli::command().get_about().map(ToString::to_string)
        );
    }

    #[test]
    fn docs_commands_are_told_apart_from_the_daemons() {
        let matches = command()
            .try_get_matches_from(["crio-lite", "completions", "zsh"])
            .expect("completions zsh");
        assert!(matches.subcommand_name().is_some_and(Docs::has_subcommand));
        assert!(!Docs::has_subcommand("status"));
    }
}

//! `ocicnitool`: attach a network namespace to CNI networks, inspect or detach it, collect garbage
//! and list the configured networks, through the same [`ocicni::Ocicni`] a runtime uses.
//!
//! ```text
//! ocicnitool add    --id ID --netns PATH [--network NAME[:IFNAME]]... [pod flags]
//! ocicnitool del    --id ID [--netns PATH] [--network NAME[:IFNAME]]...
//! ocicnitool check  --id ID --netns PATH [--network NAME[:IFNAME]]...
//! ocicnitool status [--id ID --netns PATH]      (without --id: is the default network ready?)
//! ocicnitool gc     [--valid ID]...
//! ocicnitool list
//! ocicnitool completions <bash|zsh|fish|elvish|powershell>    (the script on stdout)
//! ocicnitool man    [--out-dir DIR]             (hidden: the roff page, or every page into DIR)
//! ```
//!
//! Flags go before or after the command, and every command accepts every flag. Exit status: 0 on
//! success, 1 when the operation failed, 2 for a usage error. With `--json` the answer on stdout
//! is JSON; errors always go to stderr.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::{OsStringValueParser, PossibleValuesParser, TypedValueParser as _};
use clap::error::ErrorKind;
use clap::{Args, CommandFactory as _, Parser, Subcommand, ValueHint};
use clap_complete::Shell;
use ocicni::cni_types::capabilities::PortMapping;
use ocicni::{
    AttachmentResult, CheckPolicy, CniArgsPolicy, CniPlugin, Implementation, NetworkReport,
    NetworkSelection, Ocicni, PodNetwork, Preference, RuntimeConfig, WatchPolicy,
};
use serde_json::{Value, json};

/// Attach a pod's network namespace to CNI networks, inspect or detach it, collect garbage and
/// list the configured networks, as a runtime does through ocicni.
///
/// Flags go before or after the command. Exit status: 0 on success, 1 when the operation failed,
/// 2 for a usage error. With --json the answer on stdout is JSON; errors always go to stderr.
#[derive(Debug, Parser)]
#[command(
    name = "ocicnitool",
    version,
    // A flag given twice keeps its last value, as the hand-written parser did.
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    #[command(flatten)]
    flags: Flags,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    #[command(flatten)]
    Op(Op),
    /// Print the completion script for SHELL
    Completions {
        /// The shell the script is for
        shell: Shell,
    },
    /// Print the manual page in roff, or write every page (one per command) into a directory
    #[command(hide = true)]
    Man {
        /// Write ocicnitool.1 and one page per command into DIR (created if missing)
        #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath)]
        out_dir: Option<PathBuf>,
    },
}

/// The commands that work on networks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
enum Op {
    /// Attach the pod's namespace to its networks (the default network when none is named)
    Add,
    /// Detach it (every cached attachment of the pod when no network is named)
    Del,
    /// Run CHECK on the pod's attachments and print their status
    Check,
    /// The pod's attachments (from the result cache, else read in the namespace); without --id,
    /// whether the default network is ready
    Status,
    /// Tear down cached attachments of pods not named with --valid, then run GC
    Gc,
    /// The configuration files with their networks, plugins and verdicts
    List,
}

impl Op {
    /// The command's name, as typed and as errors name it.
    fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Del => "del",
            Op::Check => "check",
            Op::Status => "status",
            Op::Gc => "gc",
            Op::List => "list",
        }
    }
}

/// The flags, global: the hand-written parser took any of them before or after any command.
#[derive(Debug, Args)]
struct Flags {
    /// Configuration directory (default /etc/cni/net.d)
    #[arg(long, global = true, value_name = "DIR", value_hint = ValueHint::DirPath)]
    conf_dir: Option<PathBuf>,
    /// Plugin directories, repeatable (default /opt/cni/bin,/usr/lib/cni)
    #[arg(
        long = "bin-dir",
        global = true,
        value_name = "DIR[,DIR...]",
        value_delimiter = ',',
        // Empty entries included (`/a,,/b`), which clap's path parser refuses: plugin_dirs()
        // drops them.
        value_parser = OsStringValueParser::new().map(PathBuf::from),
        value_hint = ValueHint::DirPath
    )]
    bin_dirs: Vec<PathBuf>,
    /// Result cache directory (default /var/lib/cni)
    #[arg(long, global = true, value_name = "DIR", value_hint = ValueHint::DirPath)]
    cache_dir: Option<PathBuf>,
    /// Locks and set-ups in progress (default /run/ocicni)
    #[arg(long, global = true, value_name = "DIR", value_hint = ValueHint::DirPath)]
    run_dir: Option<PathBuf>,
    /// Time limit for each plugin run (30s, 500ms; a bare number is seconds)
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        value_parser = plugin_timeout,
        // So that `-1` reaches the duration syntax and is refused there, not taken for a flag.
        allow_negative_numbers = true
    )]
    timeout: Option<Duration>,
    /// When plugins run built in (bridge, host-local, loopback) instead of as binaries:
    /// prefer-binary (default: the binary when a plugin directory has it), prefer-builtin, never
    #[arg(
        long,
        global = true,
        value_name = "PREFERENCE",
        value_parser = PossibleValuesParser::new(["prefer-binary", "prefer-builtin", "never"])
            .try_map(|name| name.parse::<Preference>())
    )]
    builtin_plugins: Option<Preference>,
    /// Print JSON
    #[arg(long, global = true)]
    json: bool,
    /// The sandbox (container) ID
    #[arg(long, global = true, value_name = "ID", help_heading = "Pod")]
    id: Option<String>,
    /// The pod's network namespace
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::FilePath, help_heading = "Pod")]
    netns: Option<String>,
    /// The pod's name (K8S_POD_NAME)
    #[arg(long, global = true, value_name = "NAME", help_heading = "Pod")]
    name: Option<String>,
    /// The pod's Kubernetes namespace (K8S_POD_NAMESPACE)
    #[arg(long, global = true, value_name = "NS", help_heading = "Pod")]
    namespace: Option<String>,
    /// The pod's UID (K8S_POD_UID)
    #[arg(long, global = true, value_name = "UID", help_heading = "Pod")]
    uid: Option<String>,
    /// A network to attach, repeatable, in order
    #[arg(long = "network", global = true, value_name = "NAME[:IFNAME]", value_parser = network, help_heading = "Pod")]
    networks: Vec<NetworkSelection>,
    /// A host port mapping (portMappings), repeatable
    #[arg(long = "port", global = true, value_name = "HOST:CONTAINER[/PROTO]", value_parser = port, help_heading = "Pod")]
    ports: Vec<PortMapping>,
    /// An extra CNI_ARGS pair, repeatable
    #[arg(long = "arg", global = true, value_name = "KEY=VALUE", value_parser = cni_arg, help_heading = "Pod")]
    args: Vec<(String, String)>,
    /// Pass the Kubernetes CNI_ARGS (K8S_POD_*, IgnoreUnknown=1)
    #[arg(long, global = true, help_heading = "Pod")]
    k8s_args: bool,
    /// (gc) A pod whose attachments are kept, repeatable
    #[arg(long, global = true, value_name = "ID", help_heading = "Pod")]
    valid: Vec<String>,
}

impl Flags {
    /// The pod the flags describe; a flag not given is empty, as in [`PodNetwork::default`].
    fn pod(&self) -> PodNetwork {
        let text = |flag: &Option<String>| flag.clone().unwrap_or_default();
        PodNetwork {
            id: text(&self.id),
            netns: text(&self.netns),
            name: text(&self.name),
            namespace: text(&self.namespace),
            uid: text(&self.uid),
            networks: self.networks.clone(),
            extra_args: self.args.clone(),
            ..PodNetwork::default()
        }
    }

    /// The `--bin-dir` directories without the empty entries of a list (`/a,,/b`, `/a,`).
    fn plugin_dirs(&self) -> Vec<PathBuf> {
        let given = self.bin_dirs.iter().filter(|d| !d.as_os_str().is_empty());
        given.cloned().collect()
    }
}

/// `--timeout`: the workspace's one duration syntax (as crio-lite's `plugin_timeout`), and longer
/// than zero. Never `Duration::from_secs_f64`, which panics on values a user can type (`1e300`).
fn plugin_timeout(text: &str) -> Result<Duration, String> {
    let duration = ocicni::duration::parse(text)?;
    if duration.is_zero() {
        return Err("must be longer than zero".to_owned());
    }
    Ok(duration)
}

fn port(text: &str) -> Result<PortMapping, String> {
    let bad = || "expected HOST:CONTAINER[/PROTO]".to_owned();
    let (ports, proto) = text.split_once('/').unwrap_or((text, "tcp"));
    let (host, container) = ports.split_once(':').ok_or_else(bad)?;
    let host_port: u16 = host.parse().map_err(|_| bad())?;
    let container_port: u16 = container.parse().map_err(|_| bad())?;
    if !matches!(proto, "tcp" | "udp" | "sctp") {
        return Err("protocol must be tcp, udp or sctp".to_owned());
    }
    serde_json::from_value(json!({
        "hostPort": host_port,
        "containerPort": container_port,
        "protocol": proto,
    }))
    .map_err(|e| e.to_string())
}

fn network(text: &str) -> Result<NetworkSelection, String> {
    let (name, ifname) = match text.split_once(':') {
        Some((name, ifname)) => (name, Some(ifname)),
        None => (text, None),
    };
    if name.is_empty() || ifname.is_some_and(str::is_empty) {
        return Err("expected NAME or NAME:IFNAME".to_owned());
    }
    Ok(NetworkSelection {
        name: name.to_owned(),
        ifname: ifname.map(str::to_owned),
    })
}

fn cni_arg(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| "expected KEY=VALUE".to_owned())?;
    Ok((key.to_owned(), value.to_owned()))
}

/// Checks that the command has the pod flags it needs.
fn require(pod: &PodNetwork, op: Op) -> Result<(), String> {
    let needs_id =
        matches!(op, Op::Add | Op::Del | Op::Check) || (op == Op::Status && !pod.netns.is_empty());
    let needs_netns = matches!(op, Op::Add | Op::Check) || (op == Op::Status && !pod.id.is_empty());
    if needs_id && pod.id.is_empty() {
        return Err(format!("{} needs --id", op.name()));
    }
    if needs_netns && pod.netns.is_empty() {
        return Err(format!("{} needs --netns", op.name()));
    }
    Ok(())
}

async fn build(flags: &Flags, op: Op) -> ocicni::Result<Ocicni> {
    let mut builder = Ocicni::builder()
        .watch(WatchPolicy::Off)
        .cni_args(if flags.k8s_args {
            CniArgsPolicy::Kubernetes
        } else {
            CniArgsPolicy::Plain
        });
    if let Some(dir) = &flags.conf_dir {
        builder = builder.conf_dir(dir);
    }
    let plugin_dirs = flags.plugin_dirs();
    if !plugin_dirs.is_empty() {
        builder = builder.plugin_dirs(plugin_dirs);
    }
    if let Some(dir) = &flags.cache_dir {
        builder = builder.cache_dir(dir);
    }
    if let Some(dir) = &flags.run_dir {
        builder = builder.run_dir(dir);
    }
    if let Some(timeout) = flags.timeout {
        builder = builder.plugin_timeout(timeout);
    }
    if let Some(preference) = flags.builtin_plugins {
        builder = builder.builtin_plugins(preference);
    }
    if op == Op::Check {
        builder = builder.check(CheckPolicy::Always);
    }
    builder.build().await
}

/// The pod with its port mappings attached to every network it names (or the default network).
fn pod_for(pod: &PodNetwork, ports: &[PortMapping], cni: &Ocicni) -> PodNetwork {
    let mut pod = pod.clone();
    if ports.is_empty() {
        return pod;
    }
    let names: Vec<String> = if pod.networks.is_empty() {
        cni.default_network_name().into_iter().collect()
    } else {
        pod.networks.iter().map(|n| n.name.clone()).collect()
    };
    for name in names {
        pod.runtime_config.insert(
            name,
            RuntimeConfig {
                port_mappings: ports.to_vec(),
                ..RuntimeConfig::default()
            },
        );
    }
    pod
}

fn attachment_json(att: &AttachmentResult) -> Value {
    json!({
        "network": att.network,
        "ifname": att.ifname,
        "result": att.result.to_json_value().unwrap_or(Value::Null),
    })
}

fn attachment_text(att: &AttachmentResult) -> String {
    let mut line = format!("{} {}", att.network, att.ifname);
    for ip in &att.result.ips {
        let _ = write!(line, " {}", ip.address);
        if let Some(gw) = ip.gateway {
            let _ = write!(line, " via {gw}");
        }
    }
    let mac = att
        .result
        .interfaces
        .iter()
        .find(|i| i.name == att.ifname && !i.sandbox.is_empty())
        .or_else(|| att.result.interfaces.iter().find(|i| i.name == att.ifname))
        .map(|i| i.mac.as_str())
        .filter(|m| !m.is_empty());
    if let Some(mac) = mac {
        let _ = write!(line, " mac {mac}");
    }
    line
}

fn report_text(report: &NetworkReport) -> String {
    let file = report
        .file
        .as_ref()
        .map_or_else(|| "(built-in)".to_owned(), |f| f.display().to_string());
    let mut line = format!(
        "{file}\t{}\t{}\t[{}]",
        report.network.as_deref().unwrap_or("-"),
        report.verdict,
        report.plugins.join(",")
    );
    if report.default {
        line.push_str("\tdefault");
    }
    let builtins: Vec<&str> = report
        .implementations
        .iter()
        .filter(|p| p.implementation == Implementation::Builtin)
        .map(|p| p.plugin.as_str())
        .collect();
    if !builtins.is_empty() {
        let _ = write!(line, "\tbuilt in: {}", builtins.join(","));
    }
    if let Some(reason) = &report.reason {
        let _ = write!(line, "\t{reason}");
    }
    line
}

/// Runs the command and returns what to print on success.
async fn run(flags: &Flags, pod: &PodNetwork, op: Op) -> ocicni::Result<String> {
    let cni = build(flags, op).await?;
    let out = match op {
        Op::List => {
            // The reports of a directory that cannot be read are empty: say why, and fail.
            cni.reload().await?;
            let reports = cni.networks();
            if flags.json {
                serde_json::to_string_pretty(&reports).unwrap_or_default()
            } else {
                reports
                    .iter()
                    .map(report_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        Op::Status if pod.id.is_empty() => {
            let status = cni.status().await;
            if flags.json {
                let mut obj = json!({
                    "ready": status.ready,
                    "defaultNetwork": cni.default_network_name(),
                });
                if !status.ready {
                    obj["reason"] = json!(status.reason);
                    obj["message"] = json!(status.message);
                }
                obj.to_string()
            } else if status.ready {
                format!(
                    "ready: default network {}",
                    cni.default_network_name().unwrap_or_default()
                )
            } else {
                format!("not ready: {}: {}", status.reason, status.message)
            }
        }
        Op::Add | Op::Check | Op::Status => {
            let pod = pod_for(pod, &flags.ports, &cni);
            let atts = if op == Op::Add {
                cni.setup_pod(&pod).await?
            } else {
                cni.pod_network_status(&pod).await?
            };
            if flags.json {
                let list: Vec<Value> = atts.iter().map(attachment_json).collect();
                serde_json::to_string_pretty(&list).unwrap_or_default()
            } else {
                atts.iter()
                    .map(attachment_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        Op::Del => {
            cni.teardown_pod(&pod_for(pod, &flags.ports, &cni)).await?;
            if flags.json {
                json!({"deleted": pod.id}).to_string()
            } else {
                format!("deleted {}", pod.id)
            }
        }
        Op::Gc => {
            let valid: Vec<PodNetwork> = flags
                .valid
                .iter()
                .map(|id| PodNetwork {
                    id: id.clone(),
                    ..PodNetwork::default()
                })
                .collect();
            cni.gc(&valid).await?;
            if flags.json {
                json!({"gc": "ok", "kept": flags.valid}).to_string()
            } else {
                "gc done".to_owned()
            }
        }
    };
    cni.shutdown().await;
    Ok(out)
}

fn main() -> ExitCode {
    // Usage errors exit with 2 here, --help and --version with 0.
    let Cli { cmd, flags } = Cli::parse();
    let op = match cmd {
        Cmd::Op(op) => op,
        Cmd::Completions { shell } => return completions(shell),
        Cmd::Man { out_dir } => return man(out_dir.as_deref()),
    };
    let pod = flags.pod();
    if let Err(msg) = require(&pod, op) {
        usage_error(op, msg);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("ocicnitool: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&flags, &pod, op)) {
        Ok(out) => {
            if !out.is_empty() {
                println!("{out}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ocicnitool: {}: {err}", op.name());
            ExitCode::FAILURE
        }
    }
}

/// Exits with status 2 and clap's rendering of `msg`, under the command's usage line.
fn usage_error(op: Op, msg: String) -> ! {
    let mut cli = Cli::command();
    // Built, the subcommand knows its full name (`ocicnitool add`) for the usage line.
    cli.build();
    let mut cmd = cli.find_subcommand(op.name()).cloned().unwrap_or(cli);
    cmd.error(ErrorKind::MissingRequiredArgument, msg).exit()
}

/// `ocicnitool completions SHELL`: the script, generated from the same [`Cli`] that parses.
fn completions(shell: Shell) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "ocicnitool", &mut script);
    emit("completions", std::io::stdout().write_all(&script))
}

/// `ocicnitool man`: the page on stdout, or with `--out-dir` every page into the directory, their
/// paths on stdout (`ocicnitool.1` names `ocicnitool-add(1)` and the others, so those are written
/// too).
fn man(out_dir: Option<&Path>) -> ExitCode {
    // clap's `help` command has no page of its own; `--help` is on every page.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Built, the commands know their page names (`ocicnitool-add`).
    cmd.build();
    let written = match out_dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .and_then(|()| std::io::stdout().write_all(&page))
        }
        Some(dir) => {
            let mut paths = Vec::new();
            std::fs::create_dir_all(dir)
                .and_then(|()| write_pages(&cmd, dir, &mut paths))
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
                .and_then(|()| {
                    let mut stdout = std::io::stdout().lock();
                    paths
                        .iter()
                        .try_for_each(|path| writeln!(stdout, "{}", path.display()))
                })
        }
    };
    emit("man", written)
}

/// The page of `cmd` and of each of its visible commands, recursively; every page's footer names
/// the binary and its version (clap_mangen would name the command alone: `add`).
fn write_pages(cmd: &clap::Command, dir: &Path, paths: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_pages(sub, dir, paths)?;
    }
    let source = format!("ocicnitool {}", env!("CARGO_PKG_VERSION"));
    paths.push(
        clap_mangen::Man::new(cmd.clone())
            .source(source)
            .generate_to(dir)?,
    );
    Ok(())
}

fn emit(what: &str, written: std::io::Result<()>) -> ExitCode {
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ocicnitool: {what}: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("ocicnitool").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn parse_flags(args: &[&str]) -> Flags {
        parse(args).flags
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_take_values_separately_or_inline_and_repeat() {
        let cli = parse(&[
            "add",
            "--bin-dir",
            "/a,/b",
            "--bin-dir=/c",
            "--network",
            "one",
            "--network=two:net1",
            "--id",
            "abc",
            "--netns=/run/netns/x",
            "--port",
            "8080:80",
            "--port=53:53/udp",
            "--arg",
            "FOO=bar",
            "--k8s-args",
            "--json",
        ]);
        assert!(matches!(cli.cmd, Cmd::Op(Op::Add)));
        let flags = cli.flags;
        assert_eq!(
            flags.bin_dirs,
            [
                PathBuf::from("/a"),
                PathBuf::from("/b"),
                PathBuf::from("/c")
            ]
        );
        let pod = flags.pod();
        assert_eq!(
            pod.networks,
            [
                NetworkSelection::new("one"),
                NetworkSelection {
                    name: "two".into(),
                    ifname: Some("net1".into())
                }
            ]
        );
        assert_eq!(pod.id, "abc");
        assert_eq!(pod.netns, "/run/netns/x");
        assert_eq!(flags.ports.len(), 2);
        assert_eq!(flags.ports[1].protocol, "udp");
        assert_eq!(flags.ports[1].host_port, 53);
        assert_eq!(pod.extra_args, [("FOO".to_owned(), "bar".to_owned())]);
        assert!(flags.k8s_args && flags.json);
        assert_eq!(
            parse_flags(&["gc", "--timeout", "1.5"]).timeout,
            Some(Duration::from_millis(1500))
        );
        // The syntax of crio-lite's plugin_timeout too.
        for (text, want) in [("500ms", 500), ("30s", 30_000), ("2m", 120_000)] {
            let flags = parse_flags(&["gc", "--timeout", text]);
            assert_eq!(flags.timeout, Some(Duration::from_millis(want)), "{text}");
        }
    }

    #[test]
    fn flags_go_anywhere_and_the_last_of_a_single_flag_wins() {
        let cli = parse(&[
            "--json", "--id", "a", "status", "--id", "b", "--netns", "/x",
        ]);
        assert!(matches!(cli.cmd, Cmd::Op(Op::Status)));
        assert!(cli.flags.json);
        assert_eq!(cli.flags.pod().id, "b");
        // Empty entries of a --bin-dir list are dropped, not refused.
        let flags = parse_flags(&["list", "--bin-dir", "/a,,/b,"]);
        assert_eq!(
            flags.plugin_dirs(),
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let cases: &[(&[&str], ErrorKind, &str)] = &[
            (&["frob"], ErrorKind::InvalidSubcommand, "'frob'"),
            (
                &["add", "--bogus", "1"],
                ErrorKind::UnknownArgument,
                "'--bogus'",
            ),
            (&["add", "--id"], ErrorKind::InvalidValue, "'--id <ID>'"),
            (&["add", "--json=yes"], ErrorKind::TooManyValues, "'--json'"),
            (&["add", "del"], ErrorKind::UnknownArgument, "'del'"),
            (
                &[],
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
                "Usage",
            ),
            (
                &["--json"],
                ErrorKind::MissingSubcommand,
                "requires a subcommand",
            ),
            (
                &["add", "--port", "80"],
                ErrorKind::ValueValidation,
                "'80' for '--port <HOST:CONTAINER[/PROTO]>': expected HOST:CONTAINER[/PROTO]",
            ),
            (
                &["add", "--port", "1:2/icmp"],
                ErrorKind::ValueValidation,
                "'1:2/icmp' for '--port <HOST:CONTAINER[/PROTO]>': protocol must be tcp, udp or sctp",
            ),
            (
                &["add", "--network", "x:"],
                ErrorKind::ValueValidation,
                "'x:' for '--network <NAME[:IFNAME]>': expected NAME or NAME:IFNAME",
            ),
            (
                &["add", "--arg", "FOO"],
                ErrorKind::ValueValidation,
                "'FOO' for '--arg <KEY=VALUE>': expected KEY=VALUE",
            ),
            (
                &["completions", "tcsh"],
                ErrorKind::InvalidValue,
                "'tcsh' for '<SHELL>'",
            ),
        ];
        for (args, kind, want) in cases {
            let args = std::iter::once("ocicnitool").chain(args.iter().copied());
            let err = Cli::try_parse_from(args).expect_err("a usage error");
            assert_eq!(err.kind(), *kind, "{err}");
            assert!(err.to_string().contains(want), "{want:?} in {err}");
        }
    }

    #[test]
    fn timeouts_use_the_one_duration_syntax_and_exclude_zero() {
        let syntax = "expected a number with ms, s, m or h (a bare number is seconds)";
        for (value, why) in [
            ("-1", syntax),
            ("1e300", syntax),
            ("inf", syntax),
            ("NaN", syntax),
            ("1e-300", syntax),
            ("soon", syntax),
            ("99999999999999999999h", "too long"),
            ("0", "must be longer than zero"),
        ] {
            let err = Cli::try_parse_from(["ocicnitool", "gc", "--timeout", value])
                .expect_err("a usage error");
            assert_eq!(err.kind(), ErrorKind::ValueValidation, "{value}: {err}");
            let want = format!("invalid value '{value}' for '--timeout <DURATION>': {why}");
            assert!(err.to_string().contains(&want), "{want:?} in {err}");
        }
    }

    #[test]
    fn commands_demand_the_pod_flags_they_use() {
        let pod = |args: &[&str]| parse_flags(args).pod();
        assert_eq!(
            require(&pod(&["add", "--id", "a"]), Op::Add),
            Err("add needs --netns".to_owned())
        );
        assert_eq!(
            require(&pod(&["del", "--netns", "/x"]), Op::Del),
            Err("del needs --id".to_owned())
        );
        assert_eq!(
            require(&pod(&["del", "--id", "a"]), Op::Del),
            Ok(()),
            "del works without the namespace"
        );
        assert_eq!(
            require(&pod(&["status"]), Op::Status),
            Ok(()),
            "status of the node"
        );
        assert_eq!(require(&pod(&["list"]), Op::List), Ok(()));
    }
}

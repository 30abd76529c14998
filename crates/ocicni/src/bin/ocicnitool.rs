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
//! ```
//!
//! Exit status: 0 on success, 1 when the operation failed, 2 for a usage error. With `--json` the
//! answer on stdout is JSON; errors always go to stderr.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ocicni::cni_types::capabilities::PortMapping;
use ocicni::{
    AttachmentResult, CheckPolicy, CniArgsPolicy, CniPlugin, NetworkReport, NetworkSelection,
    Ocicni, PodNetwork, RuntimeConfig, WatchPolicy,
};
use serde_json::{Value, json};

const USAGE: &str = "\
usage: ocicnitool <add|del|check|status|gc|list> [flags]

commands:
  add      attach the pod's namespace to its networks (the default network when none is named)
  del      detach it (every cached attachment of the pod when no network is named)
  check    run CHECK on the pod's attachments and print their status
  status   the pod's attachments (from the result cache, else read in the namespace);
           without --id, whether the default network is ready
  gc       tear down cached attachments of pods not named with --valid, then run GC
  list     the configuration files with their networks, plugins and verdicts

flags:
  --conf-dir DIR              configuration directory (default /etc/cni/net.d)
  --bin-dir DIR[,DIR...]      plugin directories, repeatable (default /opt/cni/bin,/usr/lib/cni)
  --cache-dir DIR             result cache directory (default /var/lib/cni)
  --run-dir DIR               locks and set-ups in progress (default /run/ocicni)
  --timeout DURATION          time limit for each plugin run (30s, 500ms; a bare number is seconds)
  --id ID                     the sandbox (container) ID
  --netns PATH                the pod's network namespace
  --name NAME                 the pod's name (K8S_POD_NAME)
  --namespace NS              the pod's Kubernetes namespace (K8S_POD_NAMESPACE)
  --uid UID                   the pod's UID (K8S_POD_UID)
  --network NAME[:IFNAME]     a network to attach, repeatable, in order
  --port HOST:CONTAINER[/PROTO]  a host port mapping (portMappings), repeatable
  --arg KEY=VALUE             an extra CNI_ARGS pair, repeatable
  --k8s-args                  pass the Kubernetes CNI_ARGS (K8S_POD_*, IgnoreUnknown=1)
  --valid ID                  (gc) a pod whose attachments are kept, repeatable
  --json                      print JSON
  -h, --help                  this text";

/// A usage error: what was wrong with the command line.
struct Usage(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Add,
    Del,
    Check,
    Status,
    Gc,
    List,
}

#[derive(Default)]
struct Cli {
    cmd: Option<Cmd>,
    conf_dir: Option<PathBuf>,
    bin_dirs: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    run_dir: Option<PathBuf>,
    timeout: Option<Duration>,
    pod: PodNetwork,
    ports: Vec<PortMapping>,
    k8s_args: bool,
    valid: Vec<String>,
    json: bool,
    help: bool,
}

fn parse_cmd(word: &str) -> Result<Cmd, Usage> {
    Ok(match word {
        "add" => Cmd::Add,
        "del" => Cmd::Del,
        "check" => Cmd::Check,
        "status" => Cmd::Status,
        "gc" => Cmd::Gc,
        "list" => Cmd::List,
        other => return Err(Usage(format!("unknown command {other:?}"))),
    })
}

fn parse_port(text: &str) -> Result<PortMapping, Usage> {
    let bad = || Usage(format!("--port {text:?}: expected HOST:CONTAINER[/PROTO]"));
    let (ports, proto) = text.split_once('/').unwrap_or((text, "tcp"));
    let (host, container) = ports.split_once(':').ok_or_else(bad)?;
    let host_port: u16 = host.parse().map_err(|_| bad())?;
    let container_port: u16 = container.parse().map_err(|_| bad())?;
    if !matches!(proto, "tcp" | "udp" | "sctp") {
        return Err(Usage(format!(
            "--port {text:?}: protocol must be tcp, udp or sctp"
        )));
    }
    serde_json::from_value(json!({
        "hostPort": host_port,
        "containerPort": container_port,
        "protocol": proto,
    }))
    .map_err(|e| Usage(format!("--port {text:?}: {e}")))
}

fn parse_network(text: &str) -> Result<NetworkSelection, Usage> {
    let (name, ifname) = match text.split_once(':') {
        Some((name, ifname)) => (name, Some(ifname)),
        None => (text, None),
    };
    if name.is_empty() || ifname.is_some_and(str::is_empty) {
        return Err(Usage(format!(
            "--network {text:?}: expected NAME or NAME:IFNAME"
        )));
    }
    Ok(NetworkSelection {
        name: name.to_owned(),
        ifname: ifname.map(str::to_owned),
    })
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, Usage> {
    let mut cli = Cli::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            cli.help = true;
            continue;
        }
        let Some(flag) = arg.strip_prefix("--") else {
            if cli.cmd.is_some() {
                return Err(Usage(format!("unexpected argument {arg:?}")));
            }
            cli.cmd = Some(parse_cmd(&arg)?);
            continue;
        };
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) => (f, Some(v.to_owned())),
            None => (flag, None),
        };
        match flag {
            "json" | "k8s-args" if inline.is_some() => {
                return Err(Usage(format!("--{flag} takes no value")));
            }
            "json" => cli.json = true,
            "k8s-args" => cli.k8s_args = true,
            _ => {
                let value = match inline {
                    Some(v) => v,
                    None => args
                        .next()
                        .ok_or_else(|| Usage(format!("--{flag} needs a value")))?,
                };
                set_flag(&mut cli, flag, value)?;
            }
        }
    }
    Ok(cli)
}

fn set_flag(cli: &mut Cli, flag: &str, value: String) -> Result<(), Usage> {
    match flag {
        "conf-dir" => cli.conf_dir = Some(value.into()),
        "cache-dir" => cli.cache_dir = Some(value.into()),
        "run-dir" => cli.run_dir = Some(value.into()),
        "bin-dir" => cli.bin_dirs.extend(
            value
                .split(',')
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
        ),
        "timeout" => cli.timeout = Some(parse_seconds(flag, &value)?),
        "id" => cli.pod.id = value,
        "netns" => cli.pod.netns = value,
        "name" => cli.pod.name = value,
        "namespace" => cli.pod.namespace = value,
        "uid" => cli.pod.uid = value,
        "network" => cli.pod.networks.push(parse_network(&value)?),
        "port" => cli.ports.push(parse_port(&value)?),
        "arg" => {
            let (k, v) = value
                .split_once('=')
                .ok_or_else(|| Usage(format!("--arg {value:?}: expected KEY=VALUE")))?;
            cli.pod.extra_args.push((k.to_owned(), v.to_owned()));
        }
        "valid" => cli.valid.push(value),
        other => return Err(Usage(format!("unknown flag --{other}"))),
    }
    Ok(())
}

/// A positive number of seconds, fractions allowed. Checked, never `Duration::from_secs_f64`:
/// that panics on values a user can type (`1e300`, `inf`, `NaN`).
fn parse_seconds(flag: &str, value: &str) -> Result<Duration, Usage> {
    let bad = |why: &str| Usage(format!("--{flag} {value:?}: {why}"));
    // The workspace's one duration syntax, as in crio-lite's configuration: `30s`, `500ms`, a
    // bare number of seconds.
    let duration = ocicni::duration::parse(value).map_err(|why| bad(&why))?;
    if duration.is_zero() {
        return Err(bad("must be longer than zero"));
    }
    Ok(duration)
}

/// Checks that the command has the pod flags it needs.
fn require(cli: &Cli, cmd: Cmd) -> Result<(), Usage> {
    let needs_id = matches!(cmd, Cmd::Add | Cmd::Del | Cmd::Check)
        || (cmd == Cmd::Status && !cli.pod.netns.is_empty());
    let needs_netns =
        matches!(cmd, Cmd::Add | Cmd::Check) || (cmd == Cmd::Status && !cli.pod.id.is_empty());
    if needs_id && cli.pod.id.is_empty() {
        return Err(Usage(format!("{cmd:?} needs --id").to_lowercase()));
    }
    if needs_netns && cli.pod.netns.is_empty() {
        return Err(Usage(format!("{cmd:?} needs --netns").to_lowercase()));
    }
    Ok(())
}

async fn build(cli: &Cli, cmd: Cmd) -> ocicni::Result<Ocicni> {
    let mut builder = Ocicni::builder()
        .watch(WatchPolicy::Off)
        .cni_args(if cli.k8s_args {
            CniArgsPolicy::Kubernetes
        } else {
            CniArgsPolicy::Plain
        });
    if let Some(dir) = &cli.conf_dir {
        builder = builder.conf_dir(dir);
    }
    if !cli.bin_dirs.is_empty() {
        builder = builder.plugin_dirs(cli.bin_dirs.iter().cloned());
    }
    if let Some(dir) = &cli.cache_dir {
        builder = builder.cache_dir(dir);
    }
    if let Some(dir) = &cli.run_dir {
        builder = builder.run_dir(dir);
    }
    if let Some(timeout) = cli.timeout {
        builder = builder.plugin_timeout(timeout);
    }
    if cmd == Cmd::Check {
        builder = builder.check(CheckPolicy::Always);
    }
    builder.build().await
}

/// The pod with its port mappings attached to every network it names (or the default network).
fn pod_for(cli: &Cli, cni: &Ocicni) -> PodNetwork {
    let mut pod = cli.pod.clone();
    if cli.ports.is_empty() {
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
                port_mappings: cli.ports.clone(),
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
    if let Some(reason) = &report.reason {
        let _ = write!(line, "\t{reason}");
    }
    line
}

/// Runs the command and returns what to print on success.
async fn run(cli: &Cli, cmd: Cmd) -> ocicni::Result<String> {
    let cni = build(cli, cmd).await?;
    let out = match cmd {
        Cmd::List => {
            // The reports of a directory that cannot be read are empty: say why, and fail.
            cni.reload().await?;
            let reports = cni.networks();
            if cli.json {
                serde_json::to_string_pretty(&reports).unwrap_or_default()
            } else {
                reports
                    .iter()
                    .map(report_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        Cmd::Status if cli.pod.id.is_empty() => {
            let status = cni.status().await;
            if cli.json {
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
        Cmd::Add | Cmd::Check | Cmd::Status => {
            let pod = pod_for(cli, &cni);
            let atts = if cmd == Cmd::Add {
                cni.setup_pod(&pod).await?
            } else {
                cni.pod_network_status(&pod).await?
            };
            if cli.json {
                let list: Vec<Value> = atts.iter().map(attachment_json).collect();
                serde_json::to_string_pretty(&list).unwrap_or_default()
            } else {
                atts.iter()
                    .map(attachment_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        Cmd::Del => {
            cni.teardown_pod(&pod_for(cli, &cni)).await?;
            if cli.json {
                json!({"deleted": cli.pod.id}).to_string()
            } else {
                format!("deleted {}", cli.pod.id)
            }
        }
        Cmd::Gc => {
            let valid: Vec<PodNetwork> = cli
                .valid
                .iter()
                .map(|id| PodNetwork {
                    id: id.clone(),
                    ..PodNetwork::default()
                })
                .collect();
            cni.gc(&valid).await?;
            if cli.json {
                json!({"gc": "ok", "kept": cli.valid}).to_string()
            } else {
                "gc done".to_owned()
            }
        }
    };
    cni.shutdown().await;
    Ok(out)
}

fn main() -> ExitCode {
    let cli = match parse_args(std::env::args().skip(1)) {
        Ok(cli) => cli,
        Err(Usage(msg)) => {
            eprintln!("ocicnitool: {msg}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if cli.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let Some(cmd) = cli.cmd else {
        eprintln!("ocicnitool: no command given\n\n{USAGE}");
        return ExitCode::from(2);
    };
    if let Err(Usage(msg)) = require(&cli, cmd) {
        eprintln!("ocicnitool: {msg}");
        return ExitCode::from(2);
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
    match runtime.block_on(run(&cli, cmd)) {
        Ok(out) => {
            if !out.is_empty() {
                println!("{out}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ocicnitool: {}: {err}", format!("{cmd:?}").to_lowercase());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, Usage> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    fn usage(args: &[&str]) -> String {
        match parse(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(Usage(msg)) => msg,
        }
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
        ])
        .unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert_eq!(cli.cmd, Some(Cmd::Add));
        assert_eq!(
            cli.bin_dirs,
            [
                PathBuf::from("/a"),
                PathBuf::from("/b"),
                PathBuf::from("/c")
            ]
        );
        assert_eq!(
            cli.pod.networks,
            [
                NetworkSelection::new("one"),
                NetworkSelection {
                    name: "two".into(),
                    ifname: Some("net1".into())
                }
            ]
        );
        assert_eq!(cli.pod.id, "abc");
        assert_eq!(cli.pod.netns, "/run/netns/x");
        assert_eq!(cli.ports.len(), 2);
        assert_eq!(cli.ports[1].protocol, "udp");
        assert_eq!(cli.ports[1].host_port, 53);
        assert_eq!(cli.pod.extra_args, [("FOO".to_owned(), "bar".to_owned())]);
        assert!(cli.k8s_args && cli.json);
        let cli = parse(&["gc", "--timeout", "1.5"]).unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert_eq!(cli.timeout, Some(Duration::from_millis(1500)));
        // The syntax of crio-lite's plugin_timeout too.
        for (text, want) in [("500ms", 500), ("30s", 30_000), ("2m", 120_000)] {
            let cli = parse(&["gc", "--timeout", text]).unwrap_or_else(|Usage(m)| panic!("{m}"));
            assert_eq!(cli.timeout, Some(Duration::from_millis(want)), "{text}");
        }
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let cases: &[(&[&str], &str)] = &[
            (&["frob"], "unknown command \"frob\""),
            (&["add", "--bogus", "1"], "unknown flag --bogus"),
            (&["add", "--id"], "--id needs a value"),
            (&["add", "--json=yes"], "--json takes no value"),
            (
                &["add", "--port", "80"],
                "--port \"80\": expected HOST:CONTAINER[/PROTO]",
            ),
            (
                &["add", "--port", "1:2/icmp"],
                "--port \"1:2/icmp\": protocol must be tcp, udp or sctp",
            ),
            (
                &["add", "--network", "x:"],
                "--network \"x:\": expected NAME or NAME:IFNAME",
            ),
            (
                &["add", "--arg", "FOO"],
                "--arg \"FOO\": expected KEY=VALUE",
            ),
            (&["add", "del"], "unexpected argument \"del\""),
            (
                &["gc", "--timeout", "-1"],
                "--timeout \"-1\": expected a number with ms, s, m or h (a bare number is seconds)",
            ),
            (
                &["gc", "--timeout", "1e300"],
                "--timeout \"1e300\": expected a number with ms, s, m or h (a bare number is seconds)",
            ),
            (
                &["gc", "--timeout", "inf"],
                "--timeout \"inf\": expected a number with ms, s, m or h (a bare number is seconds)",
            ),
            (
                &["gc", "--timeout", "99999999999999999999h"],
                "--timeout \"99999999999999999999h\": too long",
            ),
            (
                &["gc", "--timeout", "0"],
                "--timeout \"0\": must be longer than zero",
            ),
            (
                &["gc", "--timeout", "NaN"],
                "--timeout \"NaN\": expected a number with ms, s, m or h (a bare number is seconds)",
            ),
            (
                &["gc", "--timeout", "1e-300"],
                "--timeout \"1e-300\": expected a number with ms, s, m or h (a bare number is seconds)",
            ),
            (
                &["gc", "--timeout", "soon"],
                "--timeout \"soon\": expected a number with ms, s, m or h (a bare number is seconds)",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(usage(args), *want, "{args:?}");
        }
    }

    #[test]
    fn commands_demand_the_pod_flags_they_use() {
        let cli = parse(&["add", "--id", "a"]).unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert!(matches!(require(&cli, Cmd::Add), Err(Usage(m)) if m == "add needs --netns"));
        let cli = parse(&["del", "--netns", "/x"]).unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert!(matches!(require(&cli, Cmd::Del), Err(Usage(m)) if m == "del needs --id"));
        let cli = parse(&["del", "--id", "a"]).unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert!(
            require(&cli, Cmd::Del).is_ok(),
            "del works without the namespace"
        );
        let cli = parse(&["status"]).unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert!(require(&cli, Cmd::Status).is_ok(), "status of the node");
        let cli = parse(&["list"]).unwrap_or_else(|Usage(m)| panic!("{m}"));
        assert!(require(&cli, Cmd::List).is_ok());
    }
}

//! bridge's `ipMasq`: the `CNI-<hash>` chain in the nat table as the Go plugins' `ip.SetupIPMasq`
//! and `ip.TeardownIPMasq` make and remove it, with the same chain name, comment and rules, but
//! one `iptables-restore --noflush` per operation instead of one `iptables` process per rule.
//!
//! The table is read first (`iptables-save -t nat`) so that rules already there are not added
//! twice (Go's `AppendUnique`) and rules already gone are not deleted (Go tolerates both).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha512};

/// Go's `utils.FormatChainName`: `CNI-` and the SHA-512 of network name and container ID in
/// hex, 28 characters in all.
pub(crate) fn chain_name(network: &str, container_id: &str) -> String {
    hashed_chain_name("CNI-", network, container_id)
}

/// Go's `utils.MustFormatChainNameWithPrefix`: `prefix` (which starts with `CNI-`), then the
/// SHA-512 of network name and container ID in hex, cut at 28 characters.
pub(crate) fn hashed_chain_name(prefix: &str, network: &str, container_id: &str) -> String {
    let digest = Sha512::digest(format!("{network}{container_id}").as_bytes());
    let mut name = String::from(prefix);
    for byte in &digest {
        let _ = write!(name, "{byte:02x}");
    }
    name.truncate(28);
    name
}

/// Go's `utils.FormatComment`: `name: %q id: %q`.
pub(crate) fn comment(network: &str, container_id: &str) -> String {
    format!("name: {} id: {}", go_q(network), go_q(container_id))
}

/// Go's `%q` (strconv.Quote) for the strings a network name or container ID holds.
fn go_q(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A comment as iptables-save prints it: quoted, `"` and `\` escaped.
pub(crate) fn saved_comment(comment: &str) -> String {
    let escaped = comment.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// An address as iptables stores a `-s` or `-d`: the network of `ip/prefix`.
pub(crate) fn masked(ip: IpAddr, prefix: u8) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            format!(
                "{}/{prefix}",
                std::net::Ipv4Addr::from(u32::from(v4) & mask)
            )
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            format!(
                "{}/{prefix}",
                std::net::Ipv6Addr::from(u128::from(v6) & mask)
            )
        }
    }
}

/// Parses `a.b.c.d/n` as Go's `net.ParseCIDR` keeps it (the address with its host bits).
pub(crate) fn parse_v4(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, prefix) = cidr.split_once('/')?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((ip.parse().ok()?, prefix))
}

/// The rules of `-t nat` as `iptables-save` prints them: chain names and `-A` lines.
pub(crate) struct NatTable {
    pub(crate) chains: Vec<String>,
    pub(crate) rules: Vec<String>,
}

impl NatTable {
    pub(crate) fn parse(saved: &str) -> NatTable {
        let mut table = NatTable {
            chains: Vec::new(),
            rules: Vec::new(),
        };
        for line in saved.lines() {
            if let Some(rest) = line.strip_prefix(':') {
                if let Some(name) = rest.split(' ').next() {
                    table.chains.push(name.to_owned());
                }
            } else if line.starts_with("-A ") {
                table.rules.push(line.trim_end().to_owned());
            }
        }
        table
    }
}

fn read_nat(deadline: Instant) -> Result<NatTable, String> {
    read_table("iptables-save", deadline)
}

/// The nat table as `save` (`iptables-save` or `ip6tables-save`) prints it.
pub(crate) fn read_table(save: &str, deadline: Instant) -> Result<NatTable, String> {
    let saved = run_tool(save, &["-t", "nat"], b"", deadline)?;
    Ok(NatTable::parse(&saved))
}

/// `ip.SetupIPMasq` for every address of the result, in one batch: the chain (if missing), an
/// ACCEPT for each address's network, one MASQUERADE for what is not multicast, and a jump from
/// POSTROUTING for each address, each only if not there yet.
pub(crate) fn setup(
    addresses: &[(Ipv4Addr, u8)],
    chain: &str,
    comment: &str,
    deadline: Instant,
) -> Result<(), String> {
    if addresses.is_empty() {
        return Ok(());
    }
    let mut table = read_nat(deadline)?;
    let c = saved_comment(comment);
    let mut script = String::from("*nat\n");
    if !table.chains.iter().any(|name| name == chain) {
        let _ = writeln!(script, ":{chain} - [0:0]");
    }
    for &(ip, prefix) in addresses {
        let net = masked(ip.into(), prefix);
        for rule in [
            format!("-A {chain} -d {net} -m comment --comment {c} -j ACCEPT"),
            format!("-A {chain} ! -d 224.0.0.0/4 -m comment --comment {c} -j MASQUERADE"),
            format!("-A POSTROUTING -s {ip}/32 -m comment --comment {c} -j {chain}"),
        ] {
            if !table.rules.contains(&rule) {
                script.push_str(&rule);
                script.push('\n');
                table.rules.push(rule);
            }
        }
    }
    script.push_str("COMMIT\n");
    run_tool(
        "iptables-restore",
        &["-w", "--noflush"],
        script.as_bytes(),
        deadline,
    )
    .map(|_| ())
}

/// `ip.TeardownIPMasq` for every address the pod's interface had, in one batch: the jumps from
/// POSTROUTING (by address, and by network as older plugins wrote them), then the chain flushed
/// and deleted; whatever is already gone is skipped.
pub(crate) fn teardown(
    addresses: &[(Ipv4Addr, u8)],
    chain: &str,
    comment: &str,
    deadline: Instant,
) -> Result<(), String> {
    if addresses.is_empty() {
        return Ok(());
    }
    let table = read_nat(deadline)?;
    let c = saved_comment(comment);
    let mut script = String::from("*nat\n");
    let mut any = false;
    let mut deleted: Vec<String> = Vec::new();
    for &(ip, prefix) in addresses {
        let net = masked(ip.into(), prefix);
        for rule in [
            format!("-A POSTROUTING -s {ip}/32 -m comment --comment {c} -j {chain}"),
            format!("-A POSTROUTING -s {net} -m comment --comment {c} -j {chain}"),
        ] {
            if table.rules.contains(&rule) && !deleted.contains(&rule) {
                script.push_str(&rule.replacen("-A ", "-D ", 1));
                script.push('\n');
                deleted.push(rule);
                any = true;
            }
        }
    }
    if table.chains.iter().any(|name| name == chain) {
        // Only once: the first address's teardown removes the chain in Go too.
        let referenced = table
            .rules
            .iter()
            .any(|r| r.ends_with(&format!(" -j {chain}")) && !deleted.contains(r));
        if !referenced {
            let _ = write!(script, "-F {chain}\n-X {chain}\n");
            any = true;
        }
    }
    if !any {
        return Ok(());
    }
    script.push_str("COMMIT\n");
    run_tool(
        "iptables-restore",
        &["-w", "--noflush"],
        script.as_bytes(),
        deadline,
    )
    .map(|_| ())
}

/// Runs `program` with `stdin`, its output read while it runs, killed at `deadline`; its stdout,
/// or a message naming it with its stderr.
pub(crate) fn run_tool(
    program: &str,
    args: &[&str],
    stdin: &[u8],
    deadline: Instant,
) -> Result<String, String> {
    let named = || format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .spawn()
        .map_err(|e| format!("failed to run {}: {e}", named()))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut pipe) = pipe {
                // A cap: iptables-save of a busy node is large, never this large.
                let _ = pipe.by_ref().take(64 << 20).read_to_end(&mut out);
            }
            out
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    if let Some(mut pipe) = child.stdin.take() {
        // A failed write shows as the program's own error below.
        let _ = pipe.write_all(stdin);
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("{} did not finish before the deadline", named()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("failed to wait for {}: {e}", named())),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let status = status?;
    if status.success() {
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    } else {
        Err(format!(
            "{} failed ({status}): {}",
            named(),
            String::from_utf8_lossy(&stderr).trim()
        ))
    }
}

/// The IPv4 addresses among `addresses` (what the pod's interface had, or the result's).
pub(crate) fn v4_only(addresses: &[(IpAddr, u8)]) -> Vec<(Ipv4Addr, u8)> {
    addresses
        .iter()
        .filter_map(|&(ip, prefix)| match ip {
            IpAddr::V4(ip) => Some((ip, prefix)),
            IpAddr::V6(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_and_comment_as_go_formats_them() {
        // The digits themselves are checked against the Go bridge by the differential tests.
        let name = chain_name("pods", "abc");
        assert_eq!(name.len(), 28);
        assert!(name.starts_with("CNI-"));
        assert!(name[4..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(comment("pods", "abc"), "name: \"pods\" id: \"abc\"");
        assert_eq!(
            saved_comment(&comment("pods", "abc")),
            "\"name: \\\"pods\\\" id: \\\"abc\\\"\""
        );
        assert_eq!(go_q("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\x01\"");
    }

    #[test]
    fn networks_drop_host_bits_and_parse_refuses_garbage() {
        assert_eq!(
            masked(Ipv4Addr::new(10, 85, 3, 7).into(), 16),
            "10.85.0.0/16"
        );
        assert_eq!(masked(Ipv4Addr::new(10, 85, 3, 7).into(), 0), "0.0.0.0/0");
        assert_eq!(masked("fd00::1:2".parse().unwrap(), 112), "fd00::1:0/112");
        assert_eq!(
            parse_v4("10.1.2.3/24"),
            Some((Ipv4Addr::new(10, 1, 2, 3), 24))
        );
        for bad in ["10.1.2.3", "10.1.2.3/33", "x/8", "::1/64"] {
            assert_eq!(parse_v4(bad), None, "{bad}");
        }
    }

    #[test]
    fn saved_tables_give_chains_and_rules() {
        let table = NatTable::parse(
            "# Generated\n*nat\n:PREROUTING ACCEPT [0:0]\n:CNI-abc - [0:0]\n\
             -A POSTROUTING -s 10.0.0.2/32 -j CNI-abc\nCOMMIT\n",
        );
        assert_eq!(table.chains, ["PREROUTING", "CNI-abc"]);
        assert_eq!(table.rules, ["-A POSTROUTING -s 10.0.0.2/32 -j CNI-abc"]);
    }
}

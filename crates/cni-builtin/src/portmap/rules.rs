//! portmap's chains as the Go plugin's `portmap.go` describes them: the node-wide
//! `CNI-HOSTPORT-*` chains and each container's `CNI-DN-<hash>`, every rule rendered both as Go's
//! iptables arguments and as `iptables-save` prints it.

use std::fmt::Write as _;
use std::net::IpAddr;

use super::chain::{Chain, Rule};
use crate::ipmasq::{hashed_chain_name, masked, saved_comment};

/// The chain PREROUTING and OUTPUT jump to for local destinations.
pub(crate) const TOP_DNAT: &str = "CNI-HOSTPORT-DNAT";
/// The chain that marks a connection for masquerading.
pub(crate) const SET_MARK: &str = "CNI-HOSTPORT-SETMARK";
/// The chain POSTROUTING jumps to first, masquerading marked connections.
pub(crate) const MARK_MASQ: &str = "CNI-HOSTPORT-MASQ";
/// Where older plugins' per-container SNAT chains were entered from.
pub(crate) const OLD_TOP_SNAT: &str = "CNI-HOSTPORT-SNAT";

/// `-m multiport` takes at most 15 ports.
const PORTS_PER_RULE: usize = 15;
/// iptables' limit on a comment.
const COMMENT_MAX: usize = 255;

/// One entry of `runtimeConfig.portMappings`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) host_port: i64,
    pub(crate) container_port: i64,
    pub(crate) protocol: String,
    pub(crate) host_ip: String,
}

/// What the DNAT chain of a container depends on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    pub(crate) network: String,
    pub(crate) container_id: String,
    pub(crate) snat: bool,
    /// `externalSetMarkChain`, when given: the chain the mark rules jump to instead.
    pub(crate) external_mark_chain: Option<String>,
    /// `conditionsV4` or `conditionsV6`, for the container's family.
    pub(crate) conditions: Vec<String>,
    pub(crate) mappings: Vec<Mapping>,
}

/// Go's `%#x/%#x` of the mark bit.
fn mark(bit: u32) -> String {
    let value = 1u64 << bit.min(31);
    format!("{value:#x}/{value:#x}")
}

/// `genSetMarkChain`.
pub(crate) fn set_mark_chain(bit: u32) -> Chain {
    let m = mark(bit);
    let comment = "CNI portfwd masquerade mark";
    Chain {
        name: SET_MARK.to_owned(),
        entry_chains: Vec::new(),
        entry_rules: Vec::new(),
        rules: vec![Rule::new(
            &[
                "-m",
                "comment",
                "--comment",
                comment,
                "-j",
                "MARK",
                "--set-xmark",
                &m,
            ],
            format!(
                "-m comment --comment {} -j MARK --set-xmark {m}",
                saved_comment(comment)
            ),
        )],
        prepend_entry: false,
    }
}

/// `genMarkMasqChain`: its jump goes first in POSTROUTING, before any bridge's masquerading.
pub(crate) fn mark_masq_chain(bit: u32) -> Chain {
    let m = mark(bit);
    let comment = "CNI portfwd requiring masquerade";
    Chain {
        name: MARK_MASQ.to_owned(),
        entry_chains: vec!["POSTROUTING".to_owned()],
        entry_rules: vec![Rule::new(
            &["-m", "comment", "--comment", comment],
            format!("-m comment --comment {}", saved_comment(comment)),
        )],
        rules: vec![Rule::new(
            &["-m", "mark", "--mark", &m, "-j", "MASQUERADE"],
            format!("-m mark --mark {m} -j MASQUERADE"),
        )],
        prepend_entry: true,
    }
}

/// `genToplevelDnatChain`.
pub(crate) fn top_dnat_chain() -> Chain {
    Chain {
        name: TOP_DNAT.to_owned(),
        entry_chains: vec!["PREROUTING".to_owned(), "OUTPUT".to_owned()],
        entry_rules: vec![Rule::new(
            &["-m", "addrtype", "--dst-type", "LOCAL"],
            "-m addrtype --dst-type LOCAL".to_owned(),
        )],
        rules: Vec::new(),
        prepend_entry: false,
    }
}

/// `genDnatChain` without rules: enough to tear it down.
pub(crate) fn dnat_chain_name(network: &str, container_id: &str) -> String {
    hashed_chain_name("CNI-DN-", network, container_id)
}

/// `genOldSnatChain`: a chain no plugin makes any more, removed in case an old one did.
pub(crate) fn old_snat_chain(network: &str, container_id: &str) -> Chain {
    Chain {
        name: hashed_chain_name("CNI-SN-", network, container_id),
        entry_chains: vec![OLD_TOP_SNAT.to_owned()],
        entry_rules: Vec::new(),
        rules: Vec::new(),
        prepend_entry: false,
    }
}

/// `trimComment`.
fn trim_comment(comment: &str) -> String {
    if comment.len() <= COMMENT_MAX {
        return comment.to_owned();
    }
    let mut end = COMMENT_MAX - 2;
    while !comment.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &comment[..end])
}

/// A `-s`/`-d` operand as saved: a CIDR's network, a bare address with its full prefix;
/// anything else (a host name) as written.
fn saved_address(text: &str) -> String {
    let (ip, prefix) = match text.split_once('/') {
        Some((ip, prefix)) => (ip, prefix.parse::<u8>().ok()),
        None => (text, None),
    };
    match ip.parse::<IpAddr>() {
        Ok(ip) => {
            let full = if ip.is_ipv4() { 32 } else { 128 };
            masked(ip, prefix.unwrap_or(full).min(full))
        }
        Err(_) => text.to_owned(),
    }
}

/// A word as iptables-save writes it: quoted when it holds blanks or quotes.
fn saved_word(word: &str) -> String {
    if word.is_empty() || word.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\') {
        saved_comment(word)
    } else {
        word.to_owned()
    }
}

/// User conditions as iptables-save orders them: the addresses and interfaces (with their
/// `!`) go before `-p`, matches after the rule's own. Only these common shapes are put in
/// iptables' order; others are kept as written, which iptables still accepts.
pub(crate) fn split_conditions(conditions: &[String]) -> (String, String) {
    let mut basic: Vec<(usize, String)> = Vec::new();
    let mut rest = String::new();
    let mut negate = false;
    let mut words = conditions.iter();
    while let Some(word) = words.next() {
        let rank = match word.as_str() {
            "!" => {
                negate = true;
                continue;
            }
            "-s" | "--source" | "--src" => Some(0),
            "-d" | "--destination" | "--dst" => Some(1),
            "-i" | "--in-interface" => Some(2),
            "-o" | "--out-interface" => Some(3),
            _ => None,
        };
        let bang = if std::mem::take(&mut negate) {
            "! "
        } else {
            ""
        };
        match rank {
            Some(rank) => {
                let value = words.next().map_or_else(String::new, |v| {
                    if rank < 2 {
                        saved_address(v)
                    } else {
                        saved_word(v)
                    }
                });
                let flag = ["-s", "-d", "-i", "-o"][rank];
                basic.push((rank, format!("{bang}{flag} {value} ")));
            }
            None => {
                let _ = write!(rest, "{bang}{} ", saved_word(word));
            }
        }
    }
    basic.sort_by_key(|(rank, _)| *rank);
    (basic.into_iter().map(|(_, text)| text).collect(), rest)
}

/// `fillDnatRules` for the container's address `ip/prefix`: the DNAT chain of the container,
/// entered from `CNI-HOSTPORT-DNAT` once per protocol and 15 host ports.
pub(crate) fn dnat_chain(settings: &Settings, ip: IpAddr, prefix: u8) -> Chain {
    Chain {
        name: dnat_chain_name(&settings.network, &settings.container_id),
        entry_chains: vec![TOP_DNAT.to_owned()],
        entry_rules: dnat_entry_rules(settings),
        rules: dnat_rules(settings, ip, prefix),
        prepend_entry: false,
    }
}

/// The jumps into a container's chain: one per protocol and 15 host ports.
fn dnat_entry_rules(settings: &Settings) -> Vec<Rule> {
    let comment = trim_comment(&format!(
        "dnat name: \"{}\" id: \"{}\"",
        settings.network, settings.container_id
    ));
    // Protocols in Go's sort.Strings order, host ports in the order given.
    let mut protocols: Vec<&str> = settings
        .mappings
        .iter()
        .map(|m| m.protocol.as_str())
        .collect();
    protocols.sort_unstable();
    protocols.dedup();
    let (basic, rest) = split_conditions(&settings.conditions);
    let mut entry_rules = Vec::new();
    for protocol in protocols {
        let ports: Vec<String> = settings
            .mappings
            .iter()
            .filter(|m| m.protocol == protocol)
            .map(|m| m.host_port.to_string())
            .collect();
        for group in ports.chunks(PORTS_PER_RULE) {
            let list = group.join(",");
            let mut args = vec![
                "-m",
                "comment",
                "--comment",
                &comment,
                "-m",
                "multiport",
                "-p",
                protocol,
                "--destination-ports",
                &list,
            ];
            args.extend(settings.conditions.iter().map(String::as_str));
            entry_rules.push(Rule::new(
                &args,
                format!(
                    "{basic}-p {} -m comment --comment {} -m multiport --dports {list} {rest}",
                    protocol.to_ascii_lowercase(),
                    saved_comment(&comment)
                )
                .trim_end()
                .to_owned(),
            ));
        }
    }

    entry_rules
}

/// The rules of a container's chain: for each mapping of the container's family, the mark
/// rules (hairpin, and localhost for IPv4) when SNAT is on, then the DNAT.
fn dnat_rules(settings: &Settings, ip: IpAddr, prefix: u8) -> Vec<Rule> {
    let v6 = ip.is_ipv6();
    let mark_chain = settings
        .external_mark_chain
        .clone()
        .unwrap_or_else(|| SET_MARK.to_owned());
    let container_net = crate::host_local::Cidr {
        ip,
        prefix,
        v6_mask: v6,
    }
    .to_go_string();
    let source = masked(ip, prefix);
    let mut rules = Vec::new();
    for m in &settings.mappings {
        let mut destination = None;
        if !m.host_ip.is_empty() {
            // Go's net.ParseIP: what does not parse counts as IPv6.
            let host = m.host_ip.parse::<IpAddr>().ok().map(|h| h.to_canonical());
            if host.is_none_or(|h| h.is_ipv6()) != v6 {
                continue;
            }
            if !host.is_some_and(|h| h.is_unspecified()) {
                destination = Some(m.host_ip.as_str());
            }
        }
        let port = m.host_port.to_string();
        let mut base = vec!["-p", m.protocol.as_str(), "--dport", &port];
        let mut saved_dst = String::new();
        if let Some(d) = destination {
            base.extend(["-d", d]);
            saved_dst = format!("-d {} ", saved_address(d));
        }
        let p = m.protocol.to_ascii_lowercase();
        let matched = format!("{saved_dst}-p {p} -m {p} --dport {port}");
        if settings.snat {
            let mut hairpin = base.clone();
            hairpin.extend(["-s", &container_net, "-j", &mark_chain]);
            rules.push(Rule::new(
                &hairpin,
                format!("-s {source} {matched} -j {mark_chain}"),
            ));
            if !v6 {
                let mut local = base.clone();
                local.extend(["-s", "127.0.0.1", "-j", &mark_chain]);
                rules.push(Rule::new(
                    &local,
                    format!("-s 127.0.0.1/32 {matched} -j {mark_chain}"),
                ));
            }
        }
        let to = if v6 {
            format!("[{ip}]:{}", m.container_port)
        } else {
            format!("{ip}:{}", m.container_port)
        };
        let mut dnat = base.clone();
        dnat.extend(["-j", "DNAT", "--to-destination", &to]);
        rules.push(Rule::new(
            &dnat,
            format!("{matched} -j DNAT --to-destination {to}"),
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipmasq::NatTable;

    fn settings() -> Settings {
        Settings {
            network: "pmnet".into(),
            container_id: "ctr1".into(),
            snat: true,
            conditions: vec!["!".into(), "-s".into(), "1.2.3.4".into()],
            mappings: vec![
                Mapping {
                    host_port: 8080,
                    container_port: 80,
                    protocol: "tcp".into(),
                    host_ip: String::new(),
                },
                Mapping {
                    host_port: 5353,
                    container_port: 53,
                    protocol: "udp".into(),
                    host_ip: "10.77.0.1".into(),
                },
                Mapping {
                    host_port: 8081,
                    container_port: 81,
                    protocol: "tcp".into(),
                    host_ip: "0.0.0.0".into(),
                },
            ],
            ..Settings::default()
        }
    }

    #[test]
    fn the_dnat_chain_as_iptables_save_prints_what_go_makes() {
        // Copied from `iptables-save -t nat` after Debian's portmap 1.1.1 ran this config.
        let chain = dnat_chain(&settings(), "10.77.0.2".parse().unwrap(), 24);
        assert_eq!(chain.name, "CNI-DN-323d23e06ba2fdaccfbf7");
        let mut table = NatTable::parse("");
        let mut script = String::new();
        chain.setup(&mut table, &mut script);
        let expected = r#"-N CNI-DN-323d23e06ba2fdaccfbf7
-A CNI-DN-323d23e06ba2fdaccfbf7 -s 10.77.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-323d23e06ba2fdaccfbf7 -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-323d23e06ba2fdaccfbf7 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.77.0.2:80
-A CNI-DN-323d23e06ba2fdaccfbf7 -s 10.77.0.0/24 -d 10.77.0.1/32 -p udp -m udp --dport 5353 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-323d23e06ba2fdaccfbf7 -s 127.0.0.1/32 -d 10.77.0.1/32 -p udp -m udp --dport 5353 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-323d23e06ba2fdaccfbf7 -d 10.77.0.1/32 -p udp -m udp --dport 5353 -j DNAT --to-destination 10.77.0.2:53
-A CNI-DN-323d23e06ba2fdaccfbf7 -s 10.77.0.0/24 -p tcp -m tcp --dport 8081 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-323d23e06ba2fdaccfbf7 -s 127.0.0.1/32 -p tcp -m tcp --dport 8081 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-323d23e06ba2fdaccfbf7 -p tcp -m tcp --dport 8081 -j DNAT --to-destination 10.77.0.2:81
-A CNI-HOSTPORT-DNAT ! -s 1.2.3.4/32 -p tcp -m comment --comment "dnat name: \"pmnet\" id: \"ctr1\"" -m multiport --dports 8080,8081 -j CNI-DN-323d23e06ba2fdaccfbf7
-A CNI-HOSTPORT-DNAT ! -s 1.2.3.4/32 -p udp -m comment --comment "dnat name: \"pmnet\" id: \"ctr1\"" -m multiport --dports 5353 -j CNI-DN-323d23e06ba2fdaccfbf7
"#;
        assert_eq!(script, expected);
        // Set up again: nothing to add. Checked: fine.
        let mut again = String::new();
        chain.setup(&mut table, &mut again);
        assert_eq!(again, "");
        assert_eq!(chain.check(&table), Ok(()));
        // Torn down: the chain, then what jumps to it.
        let mut down = String::new();
        chain.teardown(&mut table, &mut down);
        assert!(down.starts_with("-F CNI-DN-323d23e06ba2fdaccfbf7\n-D CNI-HOSTPORT-DNAT ! -s"));
        assert!(
            down.ends_with("-X CNI-DN-323d23e06ba2fdaccfbf7\n"),
            "{down}"
        );
        assert!(table.rules.is_empty() && table.chains.is_empty());
        let missing = chain.check(&table).unwrap_err();
        assert_eq!(
            missing,
            "chain CNI-DN-323d23e06ba2fdaccfbf7 not found in iptables table nat"
        );
    }

    #[test]
    fn go_args_are_kept_for_messages() {
        let mut s = settings();
        s.mappings.truncate(1);
        s.conditions.clear();
        let chain = dnat_chain(&s, "10.77.0.2".parse().unwrap(), 24);
        let mut table = NatTable::parse(&format!(":{} - [0:0]\n", chain.name));
        assert_eq!(
            chain.check(&table).unwrap_err(),
            "rule [[-p tcp --dport 8080 -s 10.77.0.2/24 -j CNI-HOSTPORT-SETMARK] \
             [-p tcp --dport 8080 -s 127.0.0.1 -j CNI-HOSTPORT-SETMARK] \
             [-p tcp --dport 8080 -j DNAT --to-destination 10.77.0.2:80]] \
             in chain CNI-DN-323d23e06ba2fdaccfbf7 not found in table nat"
        );
        let mut script = String::new();
        chain.setup(&mut table, &mut script);
        assert!(
            !script.contains("-N CNI-DN"),
            "an existing chain is not made again"
        );
        assert_eq!(chain.check(&table), Ok(()));
    }

    #[test]
    fn shared_chains_and_options() {
        let mut table = NatTable::parse("");
        let mut script = String::new();
        set_mark_chain(0).setup(&mut table, &mut script);
        mark_masq_chain(31).setup(&mut table, &mut script);
        top_dnat_chain().setup(&mut table, &mut script);
        assert_eq!(
            script,
            "-N CNI-HOSTPORT-SETMARK\n\
             -A CNI-HOSTPORT-SETMARK -m comment --comment \"CNI portfwd masquerade mark\" -j MARK --set-xmark 0x1/0x1\n\
             -N CNI-HOSTPORT-MASQ\n\
             -A CNI-HOSTPORT-MASQ -m mark --mark 0x80000000/0x80000000 -j MASQUERADE\n\
             -I POSTROUTING -m comment --comment \"CNI portfwd requiring masquerade\" -j CNI-HOSTPORT-MASQ\n\
             -N CNI-HOSTPORT-DNAT\n\
             -A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\n\
             -A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\n"
        );
        // No SNAT, an external mark chain, IPv6: no localhost rule, brackets.
        let mut s = settings();
        s.snat = false;
        s.conditions.clear();
        s.mappings.truncate(1);
        let plain = dnat_chain(&s, "10.1.0.9".parse().unwrap(), 32);
        assert_eq!(plain.rules.len(), 1);
        s.snat = true;
        s.external_mark_chain = Some("KUBE-MARK-MASQ".into());
        let v6 = dnat_chain(&s, "fd00::9".parse().unwrap(), 64);
        let saved: Vec<&str> = v6.rules.iter().map(|r| r.saved.as_str()).collect();
        assert_eq!(
            saved,
            [
                "-s fd00::/64 -p tcp -m tcp --dport 8080 -j KUBE-MARK-MASQ",
                "-p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00::9]:80"
            ]
        );
        // A host IP of the other family skips the mapping.
        let v4_only = Mapping {
            host_ip: "10.0.0.1".into(),
            ..s.mappings[0].clone()
        };
        s.mappings = vec![v4_only];
        assert!(
            dnat_chain(&s, "fd00::9".parse().unwrap(), 64)
                .rules
                .is_empty()
        );
    }

    #[test]
    fn long_comments_are_cut_as_go_cuts_them() {
        let long = "x".repeat(300);
        let cut = trim_comment(&long);
        assert_eq!(cut.len(), 256);
        assert!(cut.ends_with("..."));
        assert_eq!(trim_comment("short"), "short");
    }

    proptest::proptest! {
        /// The chain name is CNI-DN- and the first 21 hex digits of SHA-512(network + id),
        /// computed here independently of the code under test.
        #[test]
        fn dnat_chain_names_are_go_hashes(network in "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,20}",
                                          id in "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,64}") {
            use sha2::Digest as _;
            let digest = sha2::Sha512::digest(format!("{network}{id}"));
            let hex = digest.iter().fold(String::new(), |mut hex, b| {
                let _ = write!(hex, "{b:02x}");
                hex
            });
            let name = dnat_chain_name(&network, &id);
            proptest::prop_assert_eq!(name.len(), 28);
            proptest::prop_assert_eq!(name, format!("CNI-DN-{}", &hex[..21]));
        }

        /// Every mapping gives its DNAT rule, and the mark rules before it when SNAT is on.
        #[test]
        fn rules_per_mapping(ports in proptest::collection::vec((1i64..65536, 1i64..65536, proptest::bool::ANY), 0..40),
                             snat in proptest::bool::ANY) {
            let mappings: Vec<Mapping> = ports.iter().map(|&(h, c, tcp)| Mapping {
                host_port: h, container_port: c,
                protocol: if tcp { "tcp" } else { "udp" }.into(), host_ip: String::new(),
            }).collect();
            let s = Settings { network: "n".into(), container_id: "c".into(), snat, mappings, ..Settings::default() };
            let chain = dnat_chain(&s, "10.0.0.2".parse().unwrap(), 24);
            let per = if snat { 3 } else { 1 };
            proptest::prop_assert_eq!(chain.rules.len(), per * ports.len());
            let tcp = ports.iter().filter(|p| p.2).count();
            let udp = ports.len() - tcp;
            proptest::prop_assert_eq!(chain.entry_rules.len(), tcp.div_ceil(15) + udp.div_ceil(15));
            for (rule, (h, c, _)) in chain.rules.iter().skip(per - 1).step_by(per).zip(&ports) {
                let expected = format!("--dport {h} -j DNAT --to-destination 10.0.0.2:{c}");
                proptest::prop_assert!(rule.saved.ends_with(&expected), "{}", rule.saved);
            }
        }
    }
}

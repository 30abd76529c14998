//! host-local IPAM: ADD, DEL and CHECK as Debian's containernetworking-plugins 1.1.1 do them,
//! sharing their lease directories; GC and STATUS of CNI 1.1 besides.

mod config;
mod range;
mod store;

pub(crate) use self::store::go_reason;

use std::io::Read as _;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use self::config::IpamConfig;
pub(crate) use self::range::Cidr;
use self::range::{RangeSet, Walk};
use self::store::Store;
pub(crate) use self::store::go_error;
use crate::gojson::{field, kind};
use crate::result::{Dns, IpConfig, Output};
use crate::skel::{Command, Failure, Invocation};

/// Runs one command; what to print on success.
pub(crate) fn run(args: &Invocation, deadline: Instant) -> Result<Vec<u8>, Failure> {
    let (conf, version) = config::load(&args.config, &args.cni_args).map_err(Failure::internal)?;
    match args.command {
        Command::Add => add(args, &conf, deadline)?.print(&version),
        Command::Del => {
            let store =
                Store::open(&conf.name, &conf.data_dir, deadline).map_err(Failure::internal)?;
            // Go releases once per range set, each time under the lock.
            for _ in &conf.ranges {
                let _locked = store.lock().map_err(Failure::internal)?;
                store.release_by_id(&args.container_id, &args.ifname);
            }
            Ok(Vec::new())
        }
        Command::Check => {
            let store =
                Store::open(&conf.name, &conf.data_dir, deadline).map_err(Failure::internal)?;
            if store
                .find_by_id(&args.container_id, &args.ifname)
                .map_err(Failure::internal)?
            {
                Ok(Vec::new())
            } else {
                Err(Failure::internal(format!(
                    "host-local: Failed to find address added by container {}",
                    args.container_id
                )))
            }
        }
        Command::Gc => {
            let valid = valid_attachments(args)?;
            let store =
                Store::open(&conf.name, &conf.data_dir, deadline).map_err(Failure::internal)?;
            store.retain(&valid).map_err(Failure::internal)?;
            Ok(Vec::new())
        }
        Command::Status => Ok(Vec::new()),
    }
}

/// GC's `cni.dev/valid-attachments`: `[{"containerID", "ifname"}]`.
fn valid_attachments(args: &Invocation) -> Result<Vec<(String, String)>, Failure> {
    const KEY: &str = "cni.dev/valid-attachments";
    let bad = |v: &Value| {
        Failure::internal(format!(
            "json: cannot unmarshal {} into Go struct field .{KEY} of type []types.GCAttachment",
            kind(v)
        ))
    };
    let items = match field(&args.config, KEY) {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(bad(other)),
    };
    let mut valid = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(map) = item else {
            if item.is_null() {
                continue;
            }
            return Err(bad(item));
        };
        let text = |key| match field(map, key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(bad(other)),
        };
        valid.push((text("containerID")?, text("ifname")?));
    }
    Ok(valid)
}

fn add(args: &Invocation, conf: &IpamConfig, deadline: Instant) -> Result<Output, Failure> {
    let mut out = Output {
        version: "1.0.0".into(),
        ..Output::default()
    };
    if !conf.resolv_conf.is_empty() {
        out.dns = resolv_conf(Path::new(&conf.resolv_conf)).map_err(Failure::internal)?;
    }
    let store = Store::open(&conf.name, &conf.data_dir, deadline).map_err(Failure::internal)?;
    let (id, ifname) = (args.container_id.as_str(), args.ifname.as_str());
    let mut requested = conf.requested.clone();
    let release = |count: usize| {
        for _ in 0..count {
            if let Ok(_locked) = store.lock() {
                store.release_by_id(id, ifname);
            }
        }
    };
    for (index, set) in conf.ranges.iter().enumerate() {
        let asked = requested
            .iter()
            .position(|ip| set.contains(*ip))
            .map(|at| requested.remove(at));
        match allocate(&store, set, index, id, ifname, asked, deadline) {
            Ok(ip) => out.ips.push(ip),
            Err(e) => {
                release(index);
                return Err(Failure::internal(format!(
                    "failed to allocate for range {index}: {e}"
                )));
            }
        }
    }
    if !requested.is_empty() {
        release(conf.ranges.len());
        let list: Vec<String> = requested.iter().map(ToString::to_string).collect();
        return Err(Failure::internal(format!(
            "failed to allocate all requested IPs: {}",
            list.join(" ")
        )));
    }
    out.routes.clone_from(&conf.routes);
    Ok(out)
}

/// `IPAllocator.Get`.
fn allocate(
    store: &Store,
    set: &RangeSet,
    index: usize,
    id: &str,
    ifname: &str,
    asked: Option<IpAddr>,
    deadline: Instant,
) -> Result<IpConfig, String> {
    let _locked = store.lock()?;
    let config = |ip: IpAddr, range: &range::Range| IpConfig {
        interface: None,
        address: Cidr {
            ip,
            prefix: range.subnet.prefix,
            v6_mask: range.subnet.v6_mask,
        }
        .to_go_string(),
        v4: ip.is_ipv4(),
        gateway: Some(range.gateway.to_string()),
    };
    if let Some(ip) = asked {
        let range = set.range_for(ip)?;
        if ip == range.gateway {
            return Err(format!("requested ip {ip} is subnet's gateway"));
        }
        if !store.reserve(id, ifname, ip, index)? {
            return Err(format!(
                "requested IP address {ip} is not available in range set {}",
                set.to_go_string()
            ));
        }
        return Ok(config(ip, range));
    }
    for ip in store.get_by_id(id, ifname) {
        if set.range_for(ip).is_ok() {
            return Err(format!(
                "{ip} has been allocated to {id}, duplicate allocation is not allowed"
            ));
        }
    }
    for (ip, range) in Walk::new(set, store.last_reserved(index)) {
        if Instant::now() >= deadline {
            return Err("timed out looking for a free address".to_owned());
        }
        if store.reserve(id, ifname, ip, index)? {
            return Ok(config(ip, &range));
        }
    }
    Err(format!(
        "no IP addresses available in range set: {}",
        set.to_go_string()
    ))
}

/// The plugin's `parseResolvConf`.
fn resolv_conf(path: &Path) -> Result<Dns, String> {
    const MAX_BYTES: u64 = 1 << 20;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| go_error("open", path, &e))?;
    let mut text = Vec::new();
    file.take(MAX_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| go_error("read", path, &e))?;
    let mut dns = Dns::default();
    for line in String::from_utf8_lossy(&text).lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 2 {
            continue;
        }
        let rest = fields[1..].iter().map(|s| (*s).to_owned());
        match fields[0] {
            "nameserver" => dns.nameservers.push(fields[1].to_owned()),
            "domain" => fields[1].clone_into(&mut dns.domain),
            "search" => dns.search.extend(rest),
            "options" => dns.options.extend(rest),
            _ => {}
        }
    }
    Ok(dns)
}

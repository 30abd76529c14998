//! What a pod's containers share, made from plain values in the pod's directory: its `/etc`
//! files, its IPC and UTS namespaces and `/dev/shm` ([`pin_pod`]), and, when the pod shares one,
//! its PID namespace and init ([`pin_pod_pid`]).
//!
//! ```text
//! <dir>/hosts         localhost, and the pod's addresses with its hostname
//! <dir>/hostname      the pod's hostname
//! <dir>/resolv.conf   the pod's DNS settings, when it has any (else the image's file stays)
//! <dir>/ipc, uts, shm, pid...   see pin_pod and pin_pod_pid
//! ```
//!
//! The files are written once per pod, the first time one of its containers is made: a file
//! that is there already is kept.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::pod::{PodNamespaces, pin_pod};
use crate::pod_pid::{PodInitConfinement, PodInitProgram, pin_pod_pid};

/// The longest hostname a pod's name gives (a DNS label).
const MAX_NAME_HOSTNAME: usize = 63;

/// A pod's DNS settings: what its `resolv.conf` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDns {
    /// Name servers.
    pub servers: Vec<String>,
    /// Search domains.
    pub searches: Vec<String>,
    /// resolv.conf options (`ndots:5`).
    pub options: Vec<String>,
}

impl PodDns {
    /// The pod's `resolv.conf`; `None` when it has no DNS settings (the image's file stays).
    ///
    /// The words are written as they are: the caller has checked that none holds white space.
    pub fn resolv_conf(&self) -> Option<String> {
        if self.servers.is_empty() && self.searches.is_empty() && self.options.is_empty() {
            return None;
        }
        let mut out = String::new();
        if !self.searches.is_empty() {
            let _ = writeln!(out, "search {}", self.searches.join(" "));
        }
        for server in &self.servers {
            let _ = writeln!(out, "nameserver {server}");
        }
        if !self.options.is_empty() {
            let _ = writeln!(out, "options {}", self.options.join(" "));
        }
        Some(out)
    }
}

/// A pod's hostname: the one asked for, else its name cut to a DNS label's 63 bytes, as
/// Kubernetes names a pod's host.
pub fn pod_hostname(requested: &str, pod_name: &str) -> String {
    if requested.is_empty() {
        let mut name = pod_name.to_owned();
        let mut end = name.len().min(MAX_NAME_HOSTNAME);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
        name
    } else {
        requested.to_owned()
    }
}

/// A pod, as its containers see it: plain values a runtime daemon keeps about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    /// The pod's id: named in errors, and the name of its pins.
    pub id: String,
    /// Its hostname (see [`pod_hostname`]).
    pub hostname: String,
    /// Its addresses, primary first: `/etc/hosts` maps each to the hostname.
    pub ips: Vec<IpAddr>,
    /// Its DNS settings.
    pub dns: PodDns,
    /// Its network namespace (a pin); `None` on the node's network.
    pub network: Option<PathBuf>,
    /// It runs on the node's network, and so has the node's hostname.
    pub host_network: bool,
    /// Its sysctls: the IPC ones are set in each container's spec (they share the pod's IPC
    /// namespace); the others are the network's, set by whoever made it.
    pub sysctls: std::collections::BTreeMap<String, String>,
}

/// A pod's init: the program, and the cgroup it is confined in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInit {
    /// The program that becomes the init.
    pub program: PodInitProgram,
    /// The cgroup (cgroupfs, absolute) the pod's containers are placed under; `None` when the
    /// caller places the init (systemd: [`Runtime::place_pod_init`](crate::Runtime::place_pod_init)).
    pub cgroup_parent: Option<PathBuf>,
    /// The init's own cgroup below it.
    pub cgroup_name: String,
}

/// A pod's files and pins, as [`PodFiles::make`] made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFiles {
    /// `<dir>/hosts`.
    pub hosts: PathBuf,
    /// `<dir>/hostname`.
    pub hostname: PathBuf,
    /// `<dir>/resolv.conf`; `None` when the pod has no DNS settings.
    pub resolv: Option<PathBuf>,
    /// The IPC and UTS namespaces and `/dev/shm` the pod's containers share.
    pub pins: PodNamespaces,
    /// The pod's PID namespace, when it shares one.
    pub pid: Option<PathBuf>,
}

impl PodFiles {
    /// Makes what `pod`'s containers share in `dir` (made if missing): writes its `/etc` files
    /// where they are not there yet, pins its IPC and UTS namespaces and mounts its `/dev/shm`,
    /// and, with `init`, starts the pod's init and pins its PID namespace. Each step is a no-op
    /// when done already, so this runs at each container's creation.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory when a file cannot be written; those of [`pin_pod`]
    /// and [`pin_pod_pid`].
    pub fn make(dir: &Path, pod: &Pod, init: Option<&PodInit>) -> Result<PodFiles> {
        let resolv = pod.dns.resolv_conf();
        let mut files = PodFiles {
            hosts: dir.join("hosts"),
            hostname: dir.join("hostname"),
            resolv: resolv.as_ref().map(|_| dir.join("resolv.conf")),
            pins: PodNamespaces::under(dir),
            pid: None,
        };
        let mut writes = vec![
            (files.hosts.clone(), hosts(&pod.hostname, &pod.ips)),
            (files.hostname.clone(), format!("{}\n", pod.hostname)),
        ];
        if let (Some(path), Some(text)) = (&files.resolv, resolv) {
            writes.push((path.clone(), text));
        }
        write_missing(dir, &writes)
            .map_err(|e| Error::io(&pod.id, "write the pod's /etc files in", dir, e))?;
        files.pins = pin_pod(&pod.id, dir, &pod.hostname)?;
        if let Some(init) = init {
            let confinement = PodInitConfinement {
                network: pod.network.clone(),
                ipc: files.pins.ipc.clone(),
                uts: files.pins.uts.clone(),
                cgroup_parent: init.cgroup_parent.clone(),
                cgroup_name: init.cgroup_name.clone(),
            };
            files.pid = Some(pin_pod_pid(&pod.id, dir, &init.program, &confinement)?);
        }
        Ok(files)
    }
}

/// `/etc/hosts`: localhost, then each address with the hostname (the loopback one of Debian's
/// when the pod has none).
fn hosts(hostname: &str, ips: &[IpAddr]) -> String {
    let mut out = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    for ip in ips {
        let _ = writeln!(out, "{ip}\t{hostname}");
    }
    if ips.is_empty() {
        let _ = writeln!(out, "127.0.1.1\t{hostname}");
    }
    out
}

fn write_missing(dir: &Path, writes: &[(PathBuf, String)]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (path, text) in writes {
        if std::fs::symlink_metadata(path).is_err() {
            safe_file::write_atomic(
                path,
                text.as_bytes(),
                0o644,
                safe_file::Durability::Unsynced,
            )
            .map_err(safe_file::Error::into_io)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_is_the_pods_dns_or_none() {
        assert_eq!(PodDns::default().resolv_conf(), None);
        let dns = PodDns {
            servers: vec!["10.0.0.10".into()],
            searches: vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        };
        assert_eq!(
            dns.resolv_conf().unwrap(),
            "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.0.0.10\noptions ndots:5\n"
        );
    }

    #[test]
    fn the_hostname_is_the_one_asked_for_or_the_pods_name_cut() {
        assert_eq!(pod_hostname("web-0", "pod"), "web-0");
        assert_eq!(pod_hostname("", "pod"), "pod");
        let long = "a".repeat(80);
        assert_eq!(pod_hostname("", &long), "a".repeat(63));
        // Never cut inside a character.
        let wide = format!("{}é", "a".repeat(62));
        assert_eq!(pod_hostname("", &wide), "a".repeat(62));
    }

    #[test]
    fn hosts_maps_each_address_or_the_loopback() {
        assert_eq!(
            hosts("web", &[]),
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tweb\n"
        );
        let ips = ["10.1.0.5".parse().unwrap(), "fd00::5".parse().unwrap()];
        let text = hosts("web", &ips);
        assert!(text.ends_with("10.1.0.5\tweb\nfd00::5\tweb\n"), "{text}");
    }

    #[test]
    fn files_there_already_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod/hostname");
        write_missing(&dir.path().join("pod"), &[(path.clone(), "first\n".into())]).unwrap();
        write_missing(
            &dir.path().join("pod"),
            &[(path.clone(), "second\n".into())],
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "first\n");
    }
}

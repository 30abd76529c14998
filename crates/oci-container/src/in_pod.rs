//! A container of a pod: its bind mounts checked, the pod's files mounted where the container
//! mounts nothing of its own, the pod's namespaces joined (see [`ContainerConfig::join_pod`]).

use std::collections::BTreeMap;
use std::path::{Component, Path};

use crate::config::{BindMount, ContainerConfig, NamespacePaths, Propagation};
use crate::error::{Error, MountPath, Result};
use crate::pod::is_ipc_sysctl;
use crate::pod_files::{Pod, PodFiles};

/// Whose PID namespace a pod's container runs in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PidNamespace {
    /// The pod's ([`PodFiles::pid`]): the pod's init is pid 1 and the pod's containers see
    /// each other's processes.
    Pod,
    /// One of its own, the container's process pid 1 in it.
    #[default]
    Container,
    /// The node's.
    Node,
}

impl ContainerConfig {
    /// Makes the container one of `pod`'s, whose shared parts `files` are:
    ///
    /// - checks each of [`ContainerConfig::mounts`] (an absolute source, made when missing as
    ///   kubelet's `DirectoryOrCreate` expects; an absolute destination below `/` without `..`),
    /// - mounts the pod's `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf` (when it has one)
    ///   and, unless `host_ipc`, its `/dev/shm`, each where the container mounts nothing,
    /// - joins the pod's network, IPC and UTS namespaces (the node's for a pod on the node's
    ///   network, and with `host_ipc` the node's IPC namespace) and the PID namespace `pid`
    ///   says, with the pod's hostname,
    /// - sets the pod's IPC sysctls in the IPC namespace the pod's containers share.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidMount`] naming the mount (its index in [`ContainerConfig::mounts`]) and
    /// which of its paths is at fault.
    pub fn join_pod(
        &mut self,
        pod: &Pod,
        files: &PodFiles,
        pid: PidNamespace,
        host_ipc: bool,
    ) -> Result<()> {
        for (index, mount) in self.mounts.iter().enumerate() {
            check_bind_mount(mount).map_err(|(which, reason)| Error::InvalidMount {
                container: self.id.clone(),
                index,
                which,
                reason,
            })?;
        }
        for (destination, source) in pod_mounts(files, host_ipc) {
            if !self.mounts.iter().any(|m| m.destination == destination) {
                self.mounts.push(BindMount {
                    source: source.to_owned(),
                    destination: destination.to_owned(),
                    readonly: false,
                    propagation: Propagation::Private,
                });
            }
        }
        self.hostname = Some(pod.hostname.clone());
        self.namespaces = NamespacePaths {
            network: pod.network.clone(),
            ipc: Some(files.pins.ipc.clone()),
            uts: Some(files.pins.uts.clone()),
            host_network: pod.host_network,
            host_pid: pid == PidNamespace::Node,
            pid: match pid {
                PidNamespace::Pod => files.pid.clone(),
                PidNamespace::Container | PidNamespace::Node => None,
            },
            host_ipc,
            // A pod on the node's network has the node's hostname, as in Kubernetes.
            host_uts: pod.host_network,
        };
        self.sysctls = if host_ipc {
            BTreeMap::new()
        } else {
            pod.sysctls
                .iter()
                .filter(|(k, _)| is_ipc_sysctl(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        Ok(())
    }
}

/// `(destination, source)` of each file the pod gives its containers, and its `/dev/shm`.
fn pod_mounts(files: &PodFiles, host_ipc: bool) -> Vec<(&'static str, &Path)> {
    let mut out = vec![
        ("/etc/hosts", files.hosts.as_path()),
        ("/etc/hostname", files.hostname.as_path()),
    ];
    if !host_ipc {
        out.push(("/dev/shm", files.pins.shm.as_path()));
    }
    if let Some(resolv) = &files.resolv {
        out.push(("/etc/resolv.conf", resolv.as_path()));
    }
    out
}

/// A bind mount's paths: which is wrong and why.
fn check_bind_mount(m: &BindMount) -> std::result::Result<(), (MountPath, String)> {
    if !m.source.is_absolute() {
        return Err((
            MountPath::Source,
            format!("{} is not an absolute path", m.source.display()),
        ));
    }
    let dest = Path::new(&m.destination);
    if !dest.is_absolute()
        || dest == Path::new("/")
        || dest.components().any(|c| c == Component::ParentDir)
    {
        return Err((
            MountPath::Destination,
            format!(
                "{:?} must be an absolute path below / without '..'",
                m.destination
            ),
        ));
    }
    if std::fs::symlink_metadata(&m.source).is_err() {
        // As CRI-O: a missing host directory is made (kubelet's hostPath DirectoryOrCreate).
        std::fs::create_dir_all(&m.source).map_err(|e| {
            (
                MountPath::Source,
                format!(
                    "{} does not exist and cannot be made: {e}",
                    m.source.display()
                ),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::pod::PodNamespaces;

    fn files(dir: &Path, resolv: bool) -> PodFiles {
        PodFiles {
            hosts: dir.join("hosts"),
            hostname: dir.join("hostname"),
            resolv: resolv.then(|| dir.join("resolv.conf")),
            pins: PodNamespaces::under(dir),
            pid: Some(dir.join("pid")),
        }
    }

    #[test]
    fn mounts_outside_what_is_allowed_are_refused_naming_the_path() {
        let ok = BindMount {
            source: std::env::temp_dir(),
            destination: "/data".into(),
            readonly: true,
            propagation: Propagation::HostToContainer,
        };
        assert!(check_bind_mount(&ok).is_ok());
        for (m, which) in [
            (
                BindMount {
                    source: "rel".into(),
                    ..ok.clone()
                },
                MountPath::Source,
            ),
            (
                BindMount {
                    destination: "data".into(),
                    ..ok.clone()
                },
                MountPath::Destination,
            ),
            (
                BindMount {
                    destination: "/a/../..".into(),
                    ..ok.clone()
                },
                MountPath::Destination,
            ),
            (
                BindMount {
                    destination: "/".into(),
                    ..ok.clone()
                },
                MountPath::Destination,
            ),
        ] {
            let mut config = ContainerConfig {
                id: "c1".into(),
                mounts: vec![ok.clone(), ok.clone(), ok.clone(), m],
                ..ContainerConfig::default()
            };
            let err = config
                .join_pod(
                    &Pod::default(),
                    &files(Path::new("/p"), false),
                    PidNamespace::Pod,
                    false,
                )
                .unwrap_err();
            assert!(
                matches!(err, Error::InvalidMount { index: 3, which: w, .. } if w == which),
                "{err}"
            );
        }
    }

    #[test]
    fn a_missing_source_directory_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("a/b");
        let m = BindMount {
            source: source.clone(),
            destination: "/data".into(),
            readonly: false,
            propagation: Propagation::Private,
        };
        check_bind_mount(&m).unwrap();
        assert!(source.is_dir());
    }

    #[test]
    fn a_container_joins_its_pods_namespaces_and_files() {
        let dir = PathBuf::from("/run/pods/p1");
        let pod = Pod {
            id: "p1".into(),
            hostname: "web".into(),
            network: Some("/run/netns/p1".into()),
            sysctls: BTreeMap::from([
                ("kernel.shm_rmid_forced".to_owned(), "1".to_owned()),
                ("net.ipv4.ip_forward".to_owned(), "1".to_owned()),
            ]),
            ..Pod::default()
        };
        let own_hosts = BindMount {
            source: std::env::temp_dir(),
            destination: "/etc/hosts".into(),
            readonly: true,
            propagation: Propagation::Private,
        };
        let mut config = ContainerConfig {
            id: "c1".into(),
            mounts: vec![own_hosts.clone()],
            ..ContainerConfig::default()
        };
        config
            .join_pod(&pod, &files(&dir, true), PidNamespace::Pod, false)
            .unwrap();
        let destinations: Vec<&str> = config
            .mounts
            .iter()
            .map(|m| m.destination.as_str())
            .collect();
        assert_eq!(
            destinations,
            [
                "/etc/hosts",
                "/etc/hostname",
                "/dev/shm",
                "/etc/resolv.conf"
            ]
        );
        assert_eq!(
            config.mounts[0], own_hosts,
            "the container's own mount wins"
        );
        assert_eq!(config.hostname.as_deref(), Some("web"));
        assert_eq!(config.namespaces.pid, Some(dir.join("pid")));
        assert_eq!(config.namespaces.ipc, Some(dir.join("ipc")));
        assert!(!config.namespaces.host_pid && !config.namespaces.host_uts);
        assert_eq!(
            config.sysctls.keys().collect::<Vec<_>>(),
            ["kernel.shm_rmid_forced"]
        );

        let mut node = ContainerConfig::default();
        node.join_pod(&pod, &files(&dir, false), PidNamespace::Node, true)
            .unwrap();
        assert!(node.namespaces.host_pid && node.namespaces.host_ipc);
        assert_eq!(node.namespaces.pid, None);
        assert!(
            node.sysctls.is_empty(),
            "no IPC sysctls in the node's IPC namespace"
        );
        assert!(
            !node
                .mounts
                .iter()
                .any(|m| m.destination == "/dev/shm" || m.destination == "/etc/resolv.conf")
        );
    }
}

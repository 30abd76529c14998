//! What a pod's containers share besides the network: an IPC and a UTS namespace pinned to files
//! (the UTS one carrying the pod's hostname), and a `/dev/shm` of the pod's own, as CRI-O's
//! `pinns` and its shm mount give them without an infra container.
//!
//! ```text
//! <dir>/ipc   an IPC namespace, bind-mounted over an empty file
//! <dir>/uts   a UTS namespace whose hostname is the pod's
//! <dir>/shm   a tmpfs (mode 1777, 64 MiB), bind-mounted into each container at /dev/shm
//! <dir>/pid   a PID namespace, when the pod shares one (see [`pin_pod_pid`](crate::pin_pod_pid))
//! ```
//!
//! The namespaces are made by a thread of their own that `unshare`s and ends (node-primitives'
//! pin manager): namespaces belong to threads, so the caller's are never touched. A pin is a
//! mount: [`unpin_pod`] detaches each (one that is not mounted is fine) before the directory goes.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use node_primitives::mounts::detach_all;
use node_primitives::ns::{self, Existing, NsKind, Pins};
use node_primitives::{Error as PinError, PinStep};

use crate::error::{Error, Result};

/// The size of a pod's `/dev/shm`, as CRI-O's default `shm_size`.
pub const POD_SHM_SIZE: &str = "65536k";

/// The shared parts of a pod, as [`pin_pod`] made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNamespaces {
    /// The pinned IPC namespace.
    pub ipc: PathBuf,
    /// The pinned UTS namespace.
    pub uts: PathBuf,
    /// The pod's `/dev/shm` tmpfs.
    pub shm: PathBuf,
}

impl PodNamespaces {
    /// Where [`pin_pod`] puts them under `dir`.
    pub fn under(dir: &Path) -> PodNamespaces {
        PodNamespaces {
            ipc: dir.join("ipc"),
            uts: dir.join("uts"),
            shm: dir.join("shm"),
        }
    }
}

/// Whether `key` is a sysctl of the IPC namespace (`kernel.shm*`, `kernel.msg*`, `kernel.sem`,
/// `fs.mqueue.*`): one a pod sets for its containers, which share its IPC namespace.
pub fn is_ipc_sysctl(key: &str) -> bool {
    let key = key.replace('/', ".");
    matches!(
        key.as_str(),
        "kernel.shmmax"
            | "kernel.shmall"
            | "kernel.shmmni"
            | "kernel.shm_rmid_forced"
            | "kernel.msgmax"
            | "kernel.msgmnb"
            | "kernel.msgmni"
            | "kernel.sem"
    ) || key.strip_prefix("fs.mqueue.").is_some_and(|rest| {
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    })
}

/// Checks an IPC sysctl's value as the kernel would read it: not empty, at most 4 KiB, no
/// control characters.
///
/// # Errors
///
/// The reason, for the caller to name the key with.
pub fn check_ipc_sysctl(key: &str, value: &str) -> std::result::Result<(), String> {
    if !is_ipc_sysctl(key) {
        return Err(format!("{key} is not a sysctl of the IPC namespace"));
    }
    if value.is_empty() || value.len() > 4096 || value.chars().any(char::is_control) {
        return Err(format!(
            "{key}={value:?}: the value must be 1 to 4096 bytes without control characters"
        ));
    }
    Ok(())
}

/// Writes `sysctls` (IPC ones, see [`is_ipc_sysctl`]), in order, in a new IPC namespace of a
/// thread's own that goes when the thread ends: the kernel's verdict on a pod's IPC sysctls
/// before anything is made for the pod, with nothing to undo. A fresh IPC namespace starts from
/// the kernel's defaults, as the pod's does, so what passes here passes in the pod's.
///
/// # Errors
///
/// [`Error::Sysctl`] naming the first key the kernel refuses (no such file: a key it does not
/// know; invalid argument: a value out of range), or that is not an IPC sysctl; also when the
/// namespace cannot be made (not root).
pub fn try_ipc_sysctls(sysctls: &[(String, String)]) -> Result<()> {
    let Some((first, first_value)) = sysctls.first() else {
        return Ok(());
    };
    for (key, value) in sysctls {
        check_ipc_sysctl(key, value).map_err(|why| Error::Sysctl {
            key: key.clone(),
            value: value.clone(),
            reason: "not an IPC sysctl a pod may set",
            source: std::io::Error::other(why),
        })?;
    }
    let sysctls = sysctls.to_vec();
    let thread_failed = |source| Error::Sysctl {
        key: first.clone(),
        value: first_value.clone(),
        reason: "cannot try it in an IPC namespace",
        source,
    };
    std::thread::Builder::new()
        .name("try-ipc-sysctls".to_owned())
        .spawn(move || -> Result<()> {
            unshare(CloneFlags::CLONE_NEWIPC).map_err(|e| Error::Sysctl {
                key: sysctls[0].0.clone(),
                value: sysctls[0].1.clone(),
                reason: "cannot make an IPC namespace to try it in",
                source: e.into(),
            })?;
            for (key, value) in &sysctls {
                write_sysctl(key, value).map_err(|source| Error::Sysctl {
                    key: key.clone(),
                    value: value.clone(),
                    reason: "the kernel refuses it",
                    source,
                })?;
            }
            // The thread ends here, and its IPC namespace with it.
            Ok(())
        })
        .map_err(thread_failed)?
        .join()
        .map_err(|_| thread_failed(std::io::Error::other("thread panicked")))?
}

/// Writes one sysctl of the calling thread's namespaces; `key` is checked to be an IPC one, so
/// its path stays under `/proc/sys`.
fn write_sysctl(key: &str, value: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let path = if key.contains('/') {
        key.to_owned()
    } else {
        key.replace('.', "/")
    };
    // No O_CREAT: a key the kernel does not know is ENOENT.
    let mut file = OpenOptions::new()
        .write(true)
        .open(Path::new("/proc/sys").join(path))?;
    file.write_all(value.as_bytes())
}

/// Pins a new IPC namespace and a new UTS namespace with `hostname` under `dir` (made if
/// missing), and mounts the pod's `/dev/shm` tmpfs there. `pod` names the pod in errors. Pins
/// that exist already are kept: calling it again for the same pod is a no-op.
///
/// # Errors
///
/// [`Error::Io`] naming the pin when a file cannot be made, the namespaces cannot be unshared
/// (not root), the hostname is refused or a mount fails; what was made is undone.
pub fn pin_pod(pod: &str, dir: &Path, hostname: &str) -> Result<PodNamespaces> {
    let pins = PodNamespaces::under(dir);
    let pinned = |path: &Path, kind| ns::is_namespace(path, kind).unwrap_or(false);
    if pinned(&pins.ipc, NsKind::Ipc) && pinned(&pins.uts, NsKind::Uts) && is_mounted(&pins.shm) {
        return Ok(pins);
    }
    // Half of a set (a crash between two mounts): start again. The PID namespace is not part of
    // it: its containers may be running.
    unpin_shared(pod, dir)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(pod, "create directory", dir, e))?;
    let made = make(pod, dir, &pins, hostname);
    if made.is_err() {
        let _ = unpin_shared(pod, dir);
    }
    made.map(|()| pins)
}

fn make(pod: &str, dir: &Path, pins: &PodNamespaces, hostname: &str) -> Result<()> {
    let kinds = [
        (NsKind::Ipc, OsStr::new("ipc")),
        (NsKind::Uts, OsStr::new("uts")),
    ];
    let set_hostname = || nix::unistd::sethostname(hostname).map_err(std::io::Error::from);
    // Both namespaces made by one thread that ends after: they live on in the pins.
    Pins::new(dir)
        .pin_new(&kinds, Existing::Reuse, set_hostname)
        .map_err(|e| match e {
            PinError::Pin { step, path, source } => {
                let op = match step {
                    PinStep::PrepareDir => "create directory",
                    PinStep::CreateFile => "create pin",
                    PinStep::Thread => "start a thread to pin",
                    PinStep::Unshare => "unshare IPC and UTS for",
                    PinStep::Setup => "set the hostname in",
                    _ => "pin",
                };
                Error::io(pod, op, path, source)
            }
            other => Error::io(pod, "pin", &pins.ipc, other.into_io()),
        })?;
    std::fs::create_dir_all(&pins.shm)
        .map_err(|e| Error::io(pod, "create directory", &pins.shm, e))?;
    let data = format!("mode=1777,size={POD_SHM_SIZE}");
    mount(
        Some("shm"),
        pins.shm.as_path(),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(data.as_str()),
    )
    .map_err(|e| Error::io(pod, "mount /dev/shm at", &pins.shm, e.into()))
}

/// Detaches the pod's pins and `/dev/shm` under `dir` and removes them, after killing the pod's
/// init ([`unpin_pod_pid`](crate::unpin_pod_pid)) if it has one; what is not there is fine. The
/// directory itself stays (it may hold other files of the pod's).
///
/// # Errors
///
/// [`Error::Io`] naming the path that cannot be unmounted or removed; the errors of
/// [`unpin_pod_pid`](crate::unpin_pod_pid).
pub fn unpin_pod(pod: &str, dir: &Path) -> Result<()> {
    crate::pod_pid::unpin_pod_pid(pod, dir)?;
    unpin_shared(pod, dir)
}

/// The IPC and UTS pins and `/dev/shm`.
fn unpin_shared(pod: &str, dir: &Path) -> Result<()> {
    let pins = PodNamespaces::under(dir);
    for pin in [&pins.ipc, &pins.uts] {
        ns::unpin(pin).map_err(|e| match e {
            PinError::Pin {
                step: PinStep::Remove,
                source,
                ..
            } => Error::io(pod, "remove", pin, source),
            other => Error::io(pod, "unmount", pin, other.into_io()),
        })?;
    }
    // Peel every mount stacked there.
    detach_all(&pins.shm).map_err(|e| Error::io(pod, "unmount", &pins.shm, e))?;
    match std::fs::remove_dir(&pins.shm) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(pod, "remove", &pins.shm, e))
        }
        _ => Ok(()),
    }
}

/// Whether something is mounted at `path`; `false` when the mount table cannot be read.
pub(crate) fn is_mounted(path: &Path) -> bool {
    node_primitives::mounts::is_mount_point(path).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipc_sysctls_are_the_ipc_namespaces_and_no_others() {
        for (key, ipc) in [
            ("kernel.shm_rmid_forced", true),
            ("kernel/shmmax", true),
            ("kernel.msgmnb", true),
            ("kernel.sem", true),
            ("fs.mqueue.msg_max", true),
            ("fs.mqueue.", false),
            ("fs.mqueue.../x", false),
            ("kernel.hostname", false),
            ("kernel.shm", false),
            ("net.ipv4.ip_forward", false),
            ("vm.overcommit_memory", false),
        ] {
            assert_eq!(is_ipc_sysctl(key), ipc, "{key}");
        }
        assert!(check_ipc_sysctl("kernel.shm_rmid_forced", "1").is_ok());
        for (key, value) in [
            ("kernel.shm_rmid_forced", ""),
            ("kernel.shm_rmid_forced", "1\n"),
            ("kernel.hostname", "x"),
        ] {
            assert!(check_ipc_sysctl(key, value).is_err(), "{key}={value:?}");
        }
    }

    /// The kernel's verdict, in a namespace of its own: the node's values stay.
    #[test]
    #[ignore = "needs root + netns: cargo xtask test"]
    fn ipc_sysctls_are_tried_on_the_kernel_and_the_node_is_untouched() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let node_before = std::fs::read_to_string("/proc/sys/kernel/shm_rmid_forced").unwrap();
        let other = if node_before.trim() == "1" { "0" } else { "1" };
        try_ipc_sysctls(&pairs(&[
            ("kernel.shm_rmid_forced", other),
            ("fs/mqueue/msg_max", "20"),
        ]))
        .unwrap();
        assert_eq!(
            std::fs::read_to_string("/proc/sys/kernel/shm_rmid_forced").unwrap(),
            node_before
        );
        for (key, value, why) in [
            ("fs.mqueue.no_such_knob", "1", "No such file"),
            ("kernel.shm_rmid_forced", "5", "Invalid argument"),
            ("kernel.msgmni", "many", "Invalid argument"),
            ("kernel.hostname", "x", "not an IPC sysctl"),
        ] {
            let err = try_ipc_sysctls(&pairs(&[("kernel.shmmni", "4096"), (key, value)]))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("sysctl {key}=")), "{err}");
            assert!(err.contains(why), "{key}: {err}");
        }
    }
}

//! Run containers from OCI runtime specs: generate the spec, then drive an OCI runtime (crun by
//! default, runc too) through the conmon monitor, as CRI-O does.
//!
//! This crate knows the OCI runtime spec and nothing of CRI; the CRI adapter in crio-lite maps
//! its requests onto [`ContainerConfig`] and its errors from [`Error`]. Like `cni-exec` for
//! plugins, it is where container processes are spawned. It does not pull images or make root
//! file systems (that is `image-store`), set up networks (`ocicni`) or keep a container store.
//!
//! - [`generate`]: a [`ContainerConfig`] (the image's configuration plus Kubernetes-style
//!   command/args, env, user, mounts, namespaces to join, capabilities, resources...) and a root
//!   file system make an [`oci_spec::runtime::Spec`] with CRI-O's defaults; pure but for reading
//!   the root's `/etc/passwd` and `/etc/group` ([`user::resolve`]), never through a link.
//!   [`ContainerConfig::seccomp`] picks the [`Seccomp`] filter: none, this crate's default
//!   profile for the container's capabilities, or a profile file (Docker's format); a privileged
//!   container gets none.
//! - [`Hooks`]: OCI hooks from hooks directories (oci-hooks(5)), as CRI-O injects them. The caller
//!   loads them once ([`Hooks::load`], which reports bad files and keeps the good ones) and
//!   applies them to each spec after [`generate`] ([`Hooks::apply`]), with the Kubernetes
//!   annotations and whether bind mounts were asked for.
//! - [`write_bundle`]: `config.json`, written atomically; [`make_bundle`] generates, applies the
//!   hooks and writes in one step.
//! - A pod's container from plain values: [`PodFiles::make`] writes a [`Pod`]'s `/etc` files
//!   ([`PodDns`], [`pod_hostname`]) and pins what its containers share;
//!   [`ContainerConfig::join_pod`] checks a container's bind mounts ([`Error::InvalidMount`]
//!   names the mount's index and [`MountPath`]), mounts the pod's files and joins its
//!   namespaces ([`PidNamespace`]).
//! - [`Runtime`]: `create` (conmon daemonizes, runs `<runtime> create`, writes the CRI log and,
//!   later, the exit file), `start`, `state`, `kill`, `wait`, `exit_code`, `delete`, `remove`,
//!   `list`, and the [`records`](Runtime::records) written before conmon starts, which name
//!   conmon by pid and start time ([`ProcessIdentity`]) so a restarted caller can reconcile.
//! - In a running container: [`exec_sync`](Runtime::exec_sync) (CRI's ExecSync: output capped,
//!   a timeout that kills the command inside the container, [`ExecOutput`]),
//!   [`pause`](Runtime::pause), [`resume`](Runtime::resume), [`update`](Runtime::update) (its
//!   [`Resources`]), [`reopen_log`](Runtime::reopen_log) (through conmon's control FIFO, after a
//!   log rotation) and [`stats`](Runtime::stats) ([`ContainerStats`] from the cgroup its process
//!   is in, v1 or v2).
//! - A pod's shared parts, without an infra container: [`pin_pod`] pins IPC and UTS namespaces
//!   and makes the pod's `/dev/shm`; [`pin_pod_pid`] starts a pod init (pid 1 of a new PID
//!   namespace that only reaps, [`pod_init::main`], run through the caller's
//!   [`PodInitProgram`], confined as a pause container is: [`PodInitConfinement`]) and pins its
//!   namespace; [`unpin_pod`] and [`unpin_pod_pid`] kill the init by identity, unpin and remove
//!   its cgroup.
//! - The stop protocol: [`stop`](Runtime::stop) sends the [`StopSignal`] (parsed as images
//!   write it, real-time signals included), again when the container's init had no handler for
//!   it yet, SIGKILL when the grace period ends, and waits for the exit ([`StopOutcome`]).
//! - After it exits: [`exit_details`](Runtime::exit_details) ([`Exit`]: the code, when, and
//!   whether the kernel OOM-killed it, from conmon's files).
//!
//! Every runtime call is time-bounded (its process group killed on timeout), its output capped,
//! and its failures are [`Error::Runtime`] with the runtime's own words and the container's id.
//!
//! # Example
//!
//! ```no_run
//! use std::path::Path;
//! use std::time::Duration;
//!
//! use oci_container::{ContainerConfig, Hooks, NamespacePaths, Runtime, Seccomp};
//!
//! # async fn demo() -> oci_container::Result<()> {
//! // once, at start: a bad hook file is reported, the others are used
//! let (hooks, errors) = Hooks::load(&[oci_container::hooks::DEFAULT_HOOKS_DIR.into()]);
//! for e in &errors {
//!     eprintln!("{e}");
//! }
//!
//! let config = ContainerConfig {
//!     id: "web-1".into(),
//!     command: vec!["/bin/sh".into(), "-c".into(), "echo hello; exit 3".into()],
//!     namespaces: NamespacePaths {
//!         network: Some("/run/netns/pod-1".into()),
//!         ..NamespacePaths::default()
//!     },
//!     seccomp: Seccomp::RuntimeDefault,
//!     ..ContainerConfig::default()
//! };
//! let rootfs = Path::new("/var/lib/crio-lite/rootfs/web-1/merged");
//! let mut spec = oci_container::generate(&config, rootfs)?;
//! hooks.apply(&mut spec, &config.annotations, !config.mounts.is_empty());
//! let bundle = Path::new("/run/crio-lite/bundles/web-1");
//! oci_container::write_bundle(&config.id, bundle, &spec)?;
//!
//! let runtime = Runtime::new("/usr/bin/crun", "/usr/bin/conmon", "/run/crio-lite/oci");
//! let log = Path::new("/var/log/pods/web-1/0.log");
//! let pid = runtime.create("web-1", bundle, log).await?;
//! runtime.start("web-1").await?;
//! let code = runtime.wait("web-1", Duration::from_secs(10)).await?;
//! assert_eq!(code, 3);
//! runtime.delete("web-1").await?;
//! # let _ = pid;
//! # Ok(())
//! # }
//! ```

mod attach;
mod bundle;
mod cgroup;
mod cgroup_manager;
mod command;
mod config;
mod control;
mod defaults;
mod error;
mod exec;
pub mod hooks;
mod in_pod;
mod monitor;
mod pod;
mod pod_files;
pub mod pod_init;
mod pod_pid;
mod record;
mod runtime;
pub mod seccomp;
mod spec;
mod stop;
mod streams;
mod terminal;
pub mod user;

pub use bundle::make_bundle;
pub use cgroup::ContainerStats;
pub use cgroup::systemd;
pub use cgroup_manager::{
    CgroupManager, CgroupVersion, ConmonCgroup, MAX_CGROUP_PARENT, slice_path, systemd_is_init,
};
pub use config::{
    BindMount, CapabilityChanges, ContainerConfig, ContainerStdio, DeviceMapping, NamespacePaths,
    Propagation, Resources,
};
pub use defaults::{
    ALL_CAPABILITIES, DEFAULT_CAPABILITIES, DEFAULT_MASKED_PATHS, DEFAULT_PATH,
    DEFAULT_READONLY_PATHS,
};
pub use error::{Error, MountPath, Result, validate_id};
pub use exec::{EXEC_TIMEOUT_EXIT_CODE, ExecOutput};
pub use hooks::Hooks;
pub use in_pod::PidNamespace;
pub use monitor::Exit;
pub use pod::{
    POD_SHM_SIZE, PodNamespaces, check_ipc_sysctl, is_ipc_sysctl, pin_pod, try_ipc_sysctls,
    unpin_pod,
};
pub use pod_files::{Pod, PodDns, PodFiles, PodInit, pod_hostname};
pub use pod_pid::{
    PodInitConfinement, PodInitProgram, pin_pod_pid, pod_init_pid, pod_pid_pin, unpin_pod_pid,
};
pub use record::{ContainerRecord, ProcessIdentity, SignalDisposition};
pub use runtime::{
    ContainerState, DEFAULT_CREATE_TIMEOUT, DEFAULT_TIMEOUT, Records, Runtime, Status,
};
pub use seccomp::Seccomp;
pub use spec::{OCI_VERSION, generate, write_bundle};
pub use stop::{KILL_WAIT, StopOutcome, StopSignal};
pub use streams::{Input, Output, Streams};
pub use terminal::TerminalSize;

//! What the domain is told of the node's configuration: the settings its managers run with,
//! built from the configuration by the daemon's wiring, so the domain reads no configuration
//! file and knows neither its keys nor the command line.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// A runtime handler: the OCI runtime and monitor its containers run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerSettings {
    /// The OCI runtime (crun, runc).
    pub runtime_path: PathBuf,
    /// The runtime's own state directory (`--root`).
    pub runtime_root: PathBuf,
    /// conmon.
    pub monitor_path: PathBuf,
    /// The runtime-interpreted annotations requests may pass (`allowed_annotations`).
    pub allowed_annotations: Vec<String>,
}

/// What the container manager runs with.
#[derive(Debug, Clone)]
pub struct ContainerSettings {
    /// The runtime handlers, by name.
    pub handlers: BTreeMap<String, HandlerSettings>,
    /// The handler of sandboxes that ask for none; one of [`ContainerSettings::handlers`].
    pub default_handler: String,
    /// OCI hook directories, later ones overriding same-named files; read at each creation,
    /// so a new hook applies at once.
    pub hooks_dirs: Vec<PathBuf>,
    /// The RuntimeDefault seccomp profile when set (else oci-container's default).
    pub seccomp_profile: Option<PathBuf>,
    /// A container that asks for no seccomp profile gets RuntimeDefault (else it is
    /// unconfined, the CRI's meaning).
    pub seccomp_use_default_when_empty: bool,
    /// Each container's most processes, when limited.
    pub pids_limit: Option<i64>,
    /// The run directory: `<run>/containers/<id>` are bundles, `<run>/pods/<sandbox>` a pod's
    /// files and pins, `<run>/oci/<handler>` each runtime's state.
    pub run_dir: PathBuf,
    /// The program that becomes the init of a pod that shares its PID namespace.
    pub pod_init: oci_container::PodInitProgram,
    /// Who makes the containers' cgroups.
    pub cgroup_manager: oci_container::CgroupManager,
    /// Where each container's conmon runs.
    pub conmon_cgroup: oci_container::ConmonCgroup,
}

/// What the node's images are kept and pulled with.
#[derive(Debug, Clone)]
pub struct ImageSettings {
    /// The image store: its directory, registries spoken to over HTTP, progress timeout, ...
    pub store: image_store::StoreConfig,
    /// The signature policy file; `None` to look in
    /// [`DEFAULT_POLICIES`](super::DEFAULT_POLICIES).
    pub signature_policy: Option<PathBuf>,
    /// The registries.conf file; `None` for none.
    pub registries_conf: Option<PathBuf>,
    /// The auth file whose credentials are used for pulls that bring none.
    pub auth_file: Option<PathBuf>,
}

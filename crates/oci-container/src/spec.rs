//! From a [`ContainerConfig`] and a root file system to an OCI runtime [`Spec`] and a bundle.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capabilities, Capability, LinuxCapabilities, LinuxCpu, LinuxDeviceCgroup, LinuxMemory,
    LinuxNamespace, LinuxNamespaceType, LinuxPids, LinuxResources, LinuxSeccomp, Mount, Process,
    Root, Spec, User,
};
use safe_file::Durability;

use crate::config::{BindMount, CapabilityChanges, ContainerConfig, Propagation, Resources};
use crate::defaults::{self, ALL_CAPABILITIES, DEFAULT_CAPABILITIES, DEFAULT_PATH};
use crate::error::{Error, Result, validate_id};
use crate::user::{self, ResolvedUser};

/// The OCI runtime spec version the generated specs declare.
pub const OCI_VERSION: &str = "1.0.2";

/// Makes the runtime spec of the container `config` describes, whose root file system is the
/// directory `rootfs` (an absolute path, written into the spec as it is).
///
/// The only files read are `rootfs`'s `/etc/passwd` and `/etc/group`, and only when the user is
/// given by name (see [`user::resolve`]), and a [`Seccomp::Localhost`](crate::Seccomp) profile.
/// OCI hooks are not added here: see [`Hooks::apply`](crate::Hooks::apply).
///
/// # Errors
///
/// [`Error::InvalidId`], [`Error::InvalidConfig`] naming the field, [`Error::NoCommand`], the
/// errors of [`user::resolve`] and of [`Seccomp::linux_seccomp`](crate::Seccomp::linux_seccomp).
pub fn generate(config: &ContainerConfig, rootfs: &Path) -> Result<Spec> {
    let id = config.id.as_str();
    validate_id(id)?;
    if !rootfs.is_absolute() {
        return Err(Error::config(
            id,
            format!("root file system {} is not absolute", rootfs.display()),
        ));
    }
    let image = config.image.as_ref().and_then(|i| i.config().as_ref());

    let args = process_args(config, image)?;
    let user_spec = config
        .user
        .as_deref()
        .or_else(|| image.and_then(|c| c.user().as_deref()))
        .filter(|u| !u.is_empty())
        .unwrap_or("0");
    let resolved = user::resolve(id, rootfs, user_spec)?;
    let env = environment(config, image, &resolved)?;
    let cwd = config
        .working_dir
        .as_deref()
        .or_else(|| image.and_then(|c| c.working_dir().as_deref()))
        .filter(|d| !d.is_empty())
        .unwrap_or("/");
    if !cwd.starts_with('/') {
        return Err(Error::config(
            id,
            format!("working directory {cwd:?} is not absolute"),
        ));
    }

    let caps = capabilities(
        id,
        &config.capabilities,
        config.privileged,
        defaults::own_bounding_set(),
    )?;
    // The filter follows the final capability set: CAP_SYS_ADMIN unlocks mount(2) and so on.
    let seccomp = config.seccomp.linux_seccomp(
        id,
        caps.bounding().as_ref().unwrap_or(&Capabilities::new()),
        config.privileged,
    )?;
    let mut process = Process::default();
    process
        .set_terminal(Some(config.stdio.terminal))
        .set_args(Some(args))
        .set_env(Some(env))
        .set_cwd(PathBuf::from(cwd))
        .set_user(user_of(
            &resolved,
            &config.supplemental_groups,
            config.strict_groups,
        ))
        .set_capabilities(Some(caps))
        .set_no_new_privileges(Some(config.no_new_privileges))
        .set_oom_score_adj(oom_score_adj(id, config.resources.oom_score_adj)?)
        .set_rlimits(None);

    let mut root = Root::default();
    root.set_path(rootfs.to_owned())
        .set_readonly(Some(config.readonly_rootfs));

    let mut spec = Spec::default();
    spec.set_version(OCI_VERSION.to_owned())
        .set_root(Some(root))
        .set_process(Some(process))
        .set_mounts(Some(mounts(id, config)?))
        .set_hostname(hostname(config))
        .set_annotations((!config.annotations.is_empty()).then(|| {
            config
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }))
        .set_linux(Some(linux(id, config, seccomp)?));
    Ok(spec)
}

/// Writes `spec` as `bundle/config.json`, atomically, for the container `id`. Not synced: a
/// bundle is for a runtime on this boot (its state directory, normally a tmpfs, does not
/// survive a power loss either).
///
/// # Errors
///
/// [`Error::File`] naming `config.json` when it cannot be written.
pub fn write_bundle(id: &str, bundle: &Path, spec: &Spec) -> Result<PathBuf> {
    let path = bundle.join("config.json");
    let json = serde_json::to_vec_pretty(spec).map_err(|e| Error::Corrupt {
        container: id.to_owned(),
        path: path.clone(),
        reason: format!("cannot serialize the spec: {e}"),
    })?;
    safe_file::write_atomic(&path, &json, 0o600, Durability::Unsynced)
        .map_err(|e| Error::file(id, e))?;
    Ok(path)
}

/// Kubernetes' rule: `command` replaces the Entrypoint (and drops the Cmd), `args` replaces the Cmd.
fn process_args(
    config: &ContainerConfig,
    image: Option<&oci_spec::image::Config>,
) -> Result<Vec<String>> {
    let entrypoint = image
        .and_then(|c| c.entrypoint().clone())
        .unwrap_or_default();
    let cmd = image.and_then(|c| c.cmd().clone()).unwrap_or_default();
    let args = match (config.command.is_empty(), config.args.is_empty()) {
        (false, _) => [config.command.clone(), config.args.clone()].concat(),
        (true, false) => [entrypoint, config.args.clone()].concat(),
        (true, true) => [entrypoint, cmd].concat(),
    };
    if args.first().is_none_or(String::is_empty) {
        return Err(Error::NoCommand {
            container: config.id.clone(),
        });
    }
    Ok(args)
}

/// The image's Env, then the caller's by name (replacing in place), then `PATH` and `HOME` when
/// neither set them.
fn environment(
    config: &ContainerConfig,
    image: Option<&oci_spec::image::Config>,
    user: &ResolvedUser,
) -> Result<Vec<String>> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| match env.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => value.clone_into(&mut slot.1),
        None => env.push((name.to_owned(), value.to_owned())),
    };
    for entry in image.and_then(|c| c.env().as_deref()).unwrap_or_default() {
        let (name, value) = entry.split_once('=').unwrap_or((entry, ""));
        if !name.is_empty() {
            set(name, value);
        }
    }
    for (name, value) in &config.env {
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(Error::config(
                &config.id,
                format!("environment variable name {name:?} is empty or has '=' or NUL"),
            ));
        }
        set(name, value);
    }
    if !env.iter().any(|(n, _)| n == "PATH") {
        env.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    if !env.iter().any(|(n, _)| n == "HOME") {
        env.push((
            "HOME".to_owned(),
            user.home.clone().unwrap_or_else(|| "/".to_owned()),
        ));
    }
    Ok(env.into_iter().map(|(n, v)| format!("{n}={v}")).collect())
}

/// The process's user. Its supplementary groups hold its primary group first: the runtime sets
/// exactly these (setgroups), and a process without its primary group among them escapes a
/// file's group-deny permissions (`0604`) once it changes its gid (CVE-2022-2995,
/// CVE-2023-25173). Then the groups `/etc/group` gives the user, unless `strict`, then `extra`.
fn user_of(resolved: &ResolvedUser, extra: &[u32], strict: bool) -> User {
    let image_groups: &[u32] = if strict {
        &[]
    } else {
        &resolved.additional_gids
    };
    let mut gids: Vec<u32> = Vec::new();
    for gid in std::iter::once(&resolved.gid)
        .chain(image_groups)
        .chain(extra)
    {
        if !gids.contains(gid) {
            gids.push(*gid);
        }
    }
    let mut user = User::default();
    user.set_uid(resolved.uid)
        .set_gid(resolved.gid)
        .set_additional_gids(Some(gids));
    user
}

/// Parses a capability name as the spec's types do: any case, with or without `CAP_`.
fn parse_capability(id: &str, name: &str) -> Result<Capability> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|_| Error::config(id, format!("unknown capability {name:?}")))
}

/// The container's capability sets; `bounding` is the mask this process may grant (`None`:
/// unknown, everything).
fn capabilities(
    id: &str,
    changes: &CapabilityChanges,
    privileged: bool,
    bounding: Option<u64>,
) -> Result<LinuxCapabilities> {
    let is_all = |n: &String| n.eq_ignore_ascii_case("ALL") || n.eq_ignore_ascii_case("CAP_ALL");
    // "All" is every capability this process may still grant: one outside its bounding set (a
    // node whose own runtime runs without CAP_SYS_RESOURCE) makes the runtime refuse the whole
    // container.
    let grantable = |c: Capability| {
        bounding.is_none_or(|set| defaults::cap_number(c).is_none_or(|n| set & (1 << n) != 0))
    };
    let all = || ALL_CAPABILITIES.iter().copied().filter(|c| grantable(*c));
    let mut caps: Capabilities = if privileged {
        all().collect()
    } else {
        let mut caps: Capabilities = DEFAULT_CAPABILITIES.iter().copied().collect();
        if changes.add.iter().any(is_all) {
            caps.extend(all());
        }
        for name in changes.add.iter().filter(|n| !is_all(n)) {
            let cap = parse_capability(id, name)?;
            if !grantable(cap) {
                return Err(Error::config(
                    id,
                    format!(
                        "capability {name:?} is outside this node's bounding set: the runtime \
                         cannot grant it"
                    ),
                ));
            }
            caps.insert(cap);
        }
        caps
    };
    // A privileged container keeps everything, whatever the drop list says (CRI-O).
    if !privileged {
        if changes.drop.iter().any(is_all) {
            caps.clear();
            // `add` wins over `drop: [ALL]`, as in CRI-O
            for name in changes.add.iter().filter(|n| !is_all(n)) {
                caps.insert(parse_capability(id, name)?);
            }
        }
        for name in changes.drop.iter().filter(|n| !is_all(n)) {
            caps.remove(&parse_capability(id, name)?);
        }
    }
    let mut out = LinuxCapabilities::default();
    out.set_bounding(Some(caps.clone()))
        .set_effective(Some(caps.clone()))
        .set_permitted(Some(caps))
        .set_inheritable(Some(HashSet::new()))
        .set_ambient(Some(HashSet::new()));
    Ok(out)
}

fn oom_score_adj(id: &str, value: Option<i32>) -> Result<Option<i32>> {
    match value {
        Some(v) if !(-1000..=1000).contains(&v) => Err(Error::config(
            id,
            format!("oom_score_adj {v} is outside -1000..=1000"),
        )),
        v => Ok(v),
    }
}

/// The hostname, unless the container joins a UTS namespace (runtimes refuse to set one then).
fn hostname(config: &ContainerConfig) -> Option<String> {
    if config.namespaces.uts.is_some() || config.namespaces.host_uts {
        return None;
    }
    Some(config.hostname.clone().unwrap_or_else(|| {
        let mut h = config.id.clone();
        h.truncate(64);
        h
    }))
}

/// The defaults, without those a caller's bind mount replaces, then the caller's.
fn mounts(id: &str, config: &ContainerConfig) -> Result<Vec<Mount>> {
    let mut out: Vec<Mount> = defaults::mounts(config.privileged)
        .into_iter()
        .filter(|m| {
            !config
                .mounts
                .iter()
                .any(|b| Path::new(&b.destination) == m.destination())
        })
        .collect();
    for bind in &config.mounts {
        out.push(bind_mount(id, bind)?);
    }
    Ok(out)
}

fn bind_mount(id: &str, bind: &BindMount) -> Result<Mount> {
    if !bind.source.is_absolute() {
        return Err(Error::config(
            id,
            format!("mount source {} is not absolute", bind.source.display()),
        ));
    }
    if !bind.destination.starts_with('/') || bind.destination == "/" {
        return Err(Error::config(
            id,
            format!(
                "mount destination {:?} is not an absolute path below /",
                bind.destination
            ),
        ));
    }
    let propagation = match bind.propagation {
        Propagation::Private => "rprivate",
        Propagation::HostToContainer => "rslave",
        Propagation::Bidirectional => "rshared",
    };
    let mut m = Mount::default();
    m.set_destination(PathBuf::from(&bind.destination))
        .set_typ(Some("bind".to_owned()))
        .set_source(Some(bind.source.clone()))
        .set_options(Some(vec![
            "rbind".to_owned(),
            if bind.readonly { "ro" } else { "rw" }.to_owned(),
            propagation.to_owned(),
        ]));
    Ok(m)
}

fn linux(
    id: &str,
    config: &ContainerConfig,
    seccomp: Option<LinuxSeccomp>,
) -> Result<oci_spec::runtime::Linux> {
    let mut linux = oci_spec::runtime::Linux::default();
    linux
        .set_namespaces(Some(namespaces(config)))
        .set_devices(Some({
            let mut all = defaults::devices();
            all.extend(
                host_devices(id, &config.devices)?
                    .into_iter()
                    .map(|(d, _)| d),
            );
            all
        }))
        .set_resources(Some(resources(
            id,
            &config.resources,
            config.privileged,
            &config.devices,
        )?))
        .set_cgroups_path(config.cgroups_path.clone())
        .set_sysctl((!config.sysctls.is_empty()).then(|| {
            config
                .sysctls
                .clone()
                .into_iter()
                .collect::<HashMap<_, _>>()
        }))
        .set_uid_mappings(None)
        .set_gid_mappings(None)
        .set_seccomp(seccomp);
    if config.privileged {
        linux.set_masked_paths(None).set_readonly_paths(None);
    } else {
        let with = |defaults: &[&str], extra: &[String]| {
            let mut all: Vec<String> = defaults.iter().map(|&p| p.to_owned()).collect();
            for p in extra {
                if !all.contains(p) {
                    all.push(p.clone());
                }
            }
            all
        };
        linux
            .set_masked_paths(Some(with(
                defaults::DEFAULT_MASKED_PATHS,
                &config.masked_paths,
            )))
            .set_readonly_paths(Some(with(
                defaults::DEFAULT_READONLY_PATHS,
                &config.readonly_paths,
            )));
    }
    // Mount events of rslave/rshared binds only reach the container through a root that
    // propagates them (CRI-O does the same).
    let propagation = config
        .mounts
        .iter()
        .map(|m| m.propagation)
        .max_by_key(|p| match p {
            Propagation::Private => 0,
            Propagation::HostToContainer => 1,
            Propagation::Bidirectional => 2,
        });
    linux.set_rootfs_propagation(match propagation {
        Some(Propagation::Bidirectional) => Some("rshared".to_owned()),
        Some(Propagation::HostToContainer) => Some("rslave".to_owned()),
        _ => None,
    });
    Ok(linux)
}

fn namespaces(config: &ContainerConfig) -> Vec<LinuxNamespace> {
    let paths = &config.namespaces;
    [
        (LinuxNamespaceType::Pid, &paths.pid, paths.host_pid),
        (
            LinuxNamespaceType::Network,
            &paths.network,
            paths.host_network,
        ),
        (LinuxNamespaceType::Ipc, &paths.ipc, paths.host_ipc),
        (LinuxNamespaceType::Uts, &paths.uts, paths.host_uts),
        (LinuxNamespaceType::Mount, &None, false),
    ]
    .into_iter()
    // Left out of the spec, a namespace is the runtime's own: the node's.
    .filter(|(_, _, host)| !host)
    .map(|(typ, path, _)| {
        let mut ns = LinuxNamespace::default();
        ns.set_typ(typ).set_path(path.clone());
        ns
    })
    .collect()
}

fn resources(
    id: &str,
    r: &Resources,
    privileged: bool,
    devices: &[crate::config::DeviceMapping],
) -> Result<LinuxResources> {
    let mut out = limits(id, r)?;
    // Deny every device, then allow the defaults; a privileged container may use them all.
    let mut deny_all = LinuxDeviceCgroup::default();
    deny_all
        .set_allow(privileged)
        .set_access(Some("rwm".to_owned()));
    let mut rules = vec![deny_all];
    if !privileged {
        rules.extend(defaults::devices().iter().map(|d| {
            let mut rule = LinuxDeviceCgroup::from(d);
            rule.set_allow(true).set_access(Some("rwm".to_owned()));
            rule
        }));
        for (device, access) in host_devices(id, devices)? {
            let mut rule = LinuxDeviceCgroup::from(&device);
            rule.set_allow(true).set_access(Some(access));
            rules.push(rule);
        }
    }
    out.set_devices(Some(rules));
    if !r.hugepage_limits.is_empty() {
        let mut limits = Vec::new();
        for (size, bytes) in &r.hugepage_limits {
            let valid = size.strip_suffix("B").is_some_and(|n| {
                let digits = n.trim_end_matches(['K', 'M', 'G', 'T', 'P']);
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            });
            if !valid {
                return Err(Error::config(
                    id,
                    format!("hugepage size {size:?} is not a size such as 2MB or 1GB"),
                ));
            }
            let mut limit = oci_spec::runtime::LinuxHugepageLimit::default();
            limit
                .set_page_size(size.clone())
                .set_limit(i64::try_from(*bytes).unwrap_or(i64::MAX));
            limits.push(limit);
        }
        out.set_hugepage_limits(Some(limits));
    }
    if !r.unified.is_empty() {
        check_unified(id, &r.unified)?;
        out.set_unified(Some(
            r.unified
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ));
    }
    Ok(out)
}

/// Most entries of a unified map (the kubelet sets a handful).
const MAX_UNIFIED: usize = 64;
/// The longest value of one (`io.max` lines for a few devices).
const MAX_UNIFIED_VALUE: usize = 4096;

/// A unified map's entries must each name one cgroup v2 interface file (`<controller>.<name>`,
/// written into the container's own cgroup, never a path) and hold one line.
fn check_unified(id: &str, unified: &std::collections::BTreeMap<String, String>) -> Result<()> {
    if unified.len() > MAX_UNIFIED {
        return Err(Error::config(
            id,
            format!(
                "unified has {} entries, more than {MAX_UNIFIED}",
                unified.len()
            ),
        ));
    }
    for (key, value) in unified {
        let file_name = key.len() <= 64
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
            && key
                .split_once('.')
                .is_some_and(|(controller, name)| !controller.is_empty() && !name.is_empty())
            && !key.contains("..");
        if !file_name {
            return Err(Error::config(
                id,
                format!("unified key {key:?} is not a cgroup v2 file name such as memory.high"),
            ));
        }
        if value.len() > MAX_UNIFIED_VALUE || value.contains(['\n', '\0']) {
            return Err(Error::config(
                id,
                format!(
                    "unified value of {key:?} is not one line of at most {MAX_UNIFIED_VALUE} bytes"
                ),
            ));
        }
    }
    Ok(())
}

/// The host devices a container gets, each with the cgroup access its permissions allow; a
/// path that is not a character or block device is refused naming it.
fn host_devices(
    id: &str,
    devices: &[crate::config::DeviceMapping],
) -> Result<Vec<(oci_spec::runtime::LinuxDevice, String)>> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let mut out = Vec::new();
    for d in devices {
        if !d.container_path.starts_with('/') || d.container_path.contains("/../") {
            return Err(Error::config(
                id,
                format!(
                    "device path {:?} in the container is not absolute",
                    d.container_path
                ),
            ));
        }
        let access = if d.permissions.is_empty() {
            "rwm".to_owned()
        } else {
            d.permissions.clone()
        };
        if !access.bytes().all(|b| matches!(b, b'r' | b'w' | b'm')) {
            return Err(Error::config(
                id,
                format!(
                    "device {}: permissions {:?} are not made of r, w and m",
                    d.host_path.display(),
                    d.permissions
                ),
            ));
        }
        let meta = std::fs::metadata(&d.host_path)
            .map_err(|e| Error::io(id, "inspect device", &d.host_path, e))?;
        let typ = if meta.file_type().is_char_device() {
            oci_spec::runtime::LinuxDeviceType::C
        } else if meta.file_type().is_block_device() {
            oci_spec::runtime::LinuxDeviceType::B
        } else {
            return Err(Error::config(
                id,
                format!(
                    "{} is not a device node (only character and block devices are)",
                    d.host_path.display()
                ),
            ));
        };
        let rdev = meta.rdev();
        let mut device = oci_spec::runtime::LinuxDevice::default();
        device
            .set_path(PathBuf::from(&d.container_path))
            .set_typ(typ)
            .set_major(i64::from(nix::sys::stat::major(rdev) as u32))
            .set_minor(i64::from(nix::sys::stat::minor(rdev) as u32))
            .set_file_mode(Some(meta.mode() & 0o777))
            .set_uid(Some(meta.uid()))
            .set_gid(Some(meta.gid()));
        out.push((device, access));
    }
    Ok(out)
}

/// The cgroup limits of `r` (CPU, memory, pids), without devices: what a spec sets at create and
/// what `<runtime> update` changes later.
pub(crate) fn limits(id: &str, r: &Resources) -> Result<LinuxResources> {
    let mut out = LinuxResources::default();
    if let Some(limit) = r.memory_limit {
        if limit <= 0 {
            return Err(Error::config(
                id,
                format!("memory limit {limit} is not positive"),
            ));
        }
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(limit));
        out.set_memory(Some(memory));
    }
    if r.cpu_shares.is_some()
        || r.cpu_quota.is_some()
        || r.cpu_period.is_some()
        || r.cpuset_cpus.is_some()
        || r.cpuset_mems.is_some()
    {
        let mut cpu = LinuxCpu::default();
        cpu.set_shares(r.cpu_shares)
            .set_quota(r.cpu_quota)
            .set_period(r.cpu_period)
            .set_cpus(r.cpuset_cpus.clone())
            .set_mems(r.cpuset_mems.clone());
        out.set_cpu(Some(cpu));
    }
    if let Some(limit) = r.pids_limit {
        let mut pids = LinuxPids::default();
        pids.set_limit(limit);
        out.set_pids(Some(pids));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

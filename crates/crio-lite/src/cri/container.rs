//! Container requests checked and turned into the domain's [`ContainerRequest`], and the CRI's
//! views of a [`Container`].

use std::collections::HashMap;
use std::path::PathBuf;

use cri_api::v1 as cri;

use super::convert::{check_metadata_size, to_hash_map};
use oci_container::{Propagation, Seccomp};

use crate::domain::{
    Container, ContainerRequest, ContainerState, DomainError, DomainResult, Limits, MountSpec,
    PidMode, RawLimits,
};

fn invalid(field: &str, reason: impl Into<String>) -> DomainError {
    DomainError::invalid(field, reason)
}

/// Checks a CreateContainer request; returns the sandbox ID and the domain's request.
///
/// # Errors
///
/// [`DomainError::InvalidField`] naming the field at fault.
pub(crate) fn request(
    request: cri::CreateContainerRequest,
) -> DomainResult<(String, ContainerRequest)> {
    if request.pod_sandbox_id.is_empty() {
        return Err(invalid("pod_sandbox_id", "empty: name the sandbox"));
    }
    let config = request
        .config
        .ok_or_else(|| invalid("config", "missing: CreateContainer needs a ContainerConfig"))?;
    let metadata = config
        .metadata
        .ok_or_else(|| invalid("config.metadata", "missing: the container needs a name"))?;
    if metadata.name.is_empty() {
        return Err(invalid(
            "config.metadata.name",
            "empty: the container needs a name",
        ));
    }
    let image = config.image.map(|i| i.image).unwrap_or_default();
    if image.is_empty() {
        return Err(invalid(
            "config.image.image",
            "empty: name the image to run",
        ));
    }
    if config.stdin_once && !config.stdin {
        return Err(invalid(
            "config.stdin_once",
            "set without config.stdin: there is no stdin to close",
        ));
    }
    let stdio = oci_container::ContainerStdio {
        terminal: config.tty,
        stdin: config.stdin,
        stdin_once: config.stdin_once,
    };
    if !config.cdi_devices.is_empty() {
        return Err(invalid(
            "config.CDI_devices",
            "CDI devices are not supported: name host devices in config.devices",
        ));
    }
    let devices = devices(config.devices)?;
    check_metadata_size(&config.labels, &config.annotations)?;
    let mut env = Vec::new();
    for (i, kv) in config.envs.into_iter().enumerate() {
        if kv.key.is_empty() || kv.key.contains('=') || kv.key.contains('\0') {
            return Err(invalid(
                &format!("config.envs[{i}].key"),
                format!("{:?} is not a variable name", kv.key),
            ));
        }
        env.push((kv.key, kv.value));
    }
    let mounts = mounts(config.mounts)?;
    let linux = config.linux.unwrap_or_default();
    let resources = linux.resources.unwrap_or_default();
    let security = security(linux.security_context.unwrap_or_default())?;
    if !(-1000..=1000).contains(&resources.oom_score_adj) {
        return Err(invalid(
            "config.linux.resources.oom_score_adj",
            format!("{} is outside -1000..=1000", resources.oom_score_adj),
        ));
    }
    let working_dir = Some(config.working_dir).filter(|d| !d.is_empty());
    if let Some(dir) = &working_dir
        && !dir.starts_with('/')
    {
        return Err(invalid(
            "config.working_dir",
            format!("{dir:?} is not an absolute path"),
        ));
    }
    Ok((
        request.pod_sandbox_id,
        ContainerRequest {
            name: metadata.name,
            attempt: metadata.attempt,
            image,
            command: config.command,
            args: config.args,
            working_dir,
            env,
            mounts,
            devices,
            labels: config.labels.into_iter().collect(),
            annotations: config.annotations.into_iter().collect(),
            log_path: Some(config.log_path).filter(|p| !p.is_empty()),
            limits: limits(&resources),
            stdio,
            ..security
        },
    ))
}

/// The security context's part of the request; the rest left default.
fn security(sc: cri::LinuxContainerSecurityContext) -> DomainResult<ContainerRequest> {
    let caps = sc.capabilities.clone().unwrap_or_default();
    let options = sc.namespace_options.clone().unwrap_or_default();
    let ns_field = "config.linux.security_context.namespace_options";
    let pid = match cri::NamespaceMode::try_from(options.pid) {
        Ok(cri::NamespaceMode::Node) => PidMode::Node,
        Ok(cri::NamespaceMode::Pod) => PidMode::Pod,
        Ok(cri::NamespaceMode::Container) => PidMode::Container,
        Ok(cri::NamespaceMode::Target) => {
            return Err(invalid(
                &format!("{ns_field}.pid"),
                "TARGET (sharing another container's PID namespace) is not supported yet",
            ));
        }
        Err(_) => {
            return Err(invalid(
                &format!("{ns_field}.pid"),
                format!("unknown namespace mode {}", options.pid),
            ));
        }
    };
    let host_ipc = options.ipc == cri::NamespaceMode::Node as i32;
    let user = user(&sc)?;
    let mut supplemental_groups = Vec::new();
    for (i, g) in sc.supplemental_groups.iter().enumerate() {
        supplemental_groups.push(u32::try_from(*g).map_err(|_| {
            invalid(
                &format!("config.linux.security_context.supplemental_groups[{i}]"),
                format!("{g} is not a group id"),
            )
        })?);
    }
    let strict_groups = match cri::SupplementalGroupsPolicy::try_from(sc.supplemental_groups_policy)
    {
        Ok(cri::SupplementalGroupsPolicy::Merge) => false,
        Ok(cri::SupplementalGroupsPolicy::Strict) => true,
        Err(_) => {
            return Err(invalid(
                "config.linux.security_context.supplemental_groups_policy",
                format!(
                    "unknown policy {} (expected Merge or Strict)",
                    sc.supplemental_groups_policy
                ),
            ));
        }
    };
    #[expect(
        deprecated,
        reason = "kubelets before 1.19 send only the deprecated path"
    )]
    let legacy = sc.seccomp_profile_path.clone();
    let seccomp = match sc.seccomp.clone() {
        None if legacy.is_empty() => None,
        None => Some(legacy_seccomp(&legacy)?),
        Some(profile) => match cri::security_profile::ProfileType::try_from(profile.profile_type) {
            Ok(cri::security_profile::ProfileType::RuntimeDefault) => Some(Seccomp::RuntimeDefault),
            Ok(cri::security_profile::ProfileType::Unconfined) => Some(Seccomp::Unconfined),
            Ok(cri::security_profile::ProfileType::Localhost) => {
                let path = PathBuf::from(&profile.localhost_ref);
                if !path.is_absolute() {
                    return Err(invalid(
                        "config.linux.security_context.seccomp.localhost_ref",
                        format!("{:?} is not an absolute path", profile.localhost_ref),
                    ));
                }
                Some(Seccomp::Localhost(path))
            }
            Err(_) => {
                return Err(invalid(
                    "config.linux.security_context.seccomp.profile_type",
                    format!("unknown profile type {}", profile.profile_type),
                ));
            }
        },
    };
    Ok(ContainerRequest {
        privileged: sc.privileged,
        readonly_rootfs: sc.readonly_rootfs,
        add_capabilities: caps.add_capabilities,
        drop_capabilities: caps.drop_capabilities,
        user,
        supplemental_groups,
        strict_groups,
        no_new_privs: sc.no_new_privs,
        masked_paths: sc.masked_paths,
        readonly_paths: sc.readonly_paths,
        pid,
        host_ipc,
        seccomp,
        ..ContainerRequest::default()
    })
}

/// Bind mounts as asked (checked further when the container is made); image volumes refused.
fn mounts(mounts: Vec<cri::Mount>) -> DomainResult<Vec<MountSpec>> {
    let mut out = Vec::new();
    for (i, m) in mounts.into_iter().enumerate() {
        if m.image.is_some_and(|i| !i.image.is_empty()) {
            return Err(invalid(
                &format!("config.mounts[{i}].image"),
                "image volumes are not supported yet",
            ));
        }
        let propagation = match cri::MountPropagation::try_from(m.propagation) {
            Ok(cri::MountPropagation::PropagationPrivate) => Propagation::Private,
            Ok(cri::MountPropagation::PropagationHostToContainer) => Propagation::HostToContainer,
            Ok(cri::MountPropagation::PropagationBidirectional) => Propagation::Bidirectional,
            Err(_) => {
                return Err(invalid(
                    &format!("config.mounts[{i}].propagation"),
                    format!("unknown propagation {}", m.propagation),
                ));
            }
        };
        out.push(MountSpec {
            container_path: m.container_path,
            host_path: PathBuf::from(m.host_path),
            readonly: m.readonly,
            propagation,
        });
    }
    Ok(out)
}

/// Host devices: absolute paths, permissions of r, w and m.
fn devices(devices: Vec<cri::Device>) -> DomainResult<Vec<oci_container::DeviceMapping>> {
    let mut out = Vec::new();
    for (i, d) in devices.into_iter().enumerate() {
        let host = PathBuf::from(&d.host_path);
        if !host.is_absolute() || !d.container_path.starts_with('/') {
            return Err(invalid(
                &format!("config.devices[{i}]"),
                format!(
                    "{:?} -> {:?}: both paths must be absolute",
                    d.host_path, d.container_path
                ),
            ));
        }
        if !d
            .permissions
            .bytes()
            .all(|b| matches!(b, b'r' | b'w' | b'm'))
        {
            return Err(invalid(
                &format!("config.devices[{i}].permissions"),
                format!("{:?} is not made of r, w and m", d.permissions),
            ));
        }
        out.push(oci_container::DeviceMapping {
            host_path: host,
            container_path: d.container_path,
            permissions: d.permissions,
        });
    }
    Ok(out)
}

/// The deprecated `seccomp_profile_path`: `runtime/default`, `unconfined`, `localhost/<path>`.
fn legacy_seccomp(path: &str) -> DomainResult<Seccomp> {
    match path {
        "runtime/default" | "docker/default" => Ok(Seccomp::RuntimeDefault),
        "unconfined" => Ok(Seccomp::Unconfined),
        other => match other.strip_prefix("localhost/") {
            Some(p) if p.starts_with('/') => Ok(Seccomp::Localhost(PathBuf::from(p))),
            _ => Err(invalid(
                "config.linux.security_context.seccomp_profile_path",
                format!(
                    "{other:?} is not runtime/default, unconfined or localhost/<absolute path>"
                ),
            )),
        },
    }
}

/// The user as oci-container takes it: `uid[:gid]` or `name[:gid]`.
fn user(sc: &cri::LinuxContainerSecurityContext) -> DomainResult<Option<String>> {
    let group = sc.run_as_group.as_ref().map(|g| g.value);
    if let Some(g) = group
        && u32::try_from(g).is_err()
    {
        return Err(invalid(
            "config.linux.security_context.run_as_group",
            format!("{g} is not a group id"),
        ));
    }
    let base = if let Some(uid) = &sc.run_as_user {
        let uid = u32::try_from(uid.value).map_err(|_| {
            invalid(
                "config.linux.security_context.run_as_user",
                format!("{} is not a user id", uid.value),
            )
        })?;
        uid.to_string()
    } else if !sc.run_as_username.is_empty() {
        if sc.run_as_username.contains(':') {
            return Err(invalid(
                "config.linux.security_context.run_as_username",
                format!("{:?} is not a user name", sc.run_as_username),
            ));
        }
        sc.run_as_username.clone()
    } else if group.is_some() {
        // As CRI-O: a group alone does not say which user.
        return Err(invalid(
            "config.linux.security_context.run_as_group",
            "set without run_as_user or run_as_username",
        ));
    } else {
        return Ok(None);
    };
    Ok(Some(match group {
        Some(g) => format!("{base}:{g}"),
        None => base,
    }))
}

/// CRI resources as the domain keeps them: 0 (and, for what cannot be negative, less) is
/// unset.
pub(crate) fn limits(r: &cri::LinuxContainerResources) -> Limits {
    // CreateContainer refuses a score outside -1000..=1000; UpdateContainerResources cannot
    // change it.
    RawLimits {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus.clone(),
        cpuset_mems: r.cpuset_mems.clone(),
        hugepage_limits: r
            .hugepage_limits
            .iter()
            .map(|h| (h.page_size.clone(), h.limit))
            .collect(),
        unified: r
            .unified
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
    .into()
}

/// The CRI's resources of limits the domain keeps: 0 for unset.
fn cri_resources(l: &Limits) -> cri::LinuxContainerResources {
    let raw = RawLimits::from(l.clone());
    cri::LinuxContainerResources {
        cpu_period: raw.cpu_period,
        cpu_quota: raw.cpu_quota,
        cpu_shares: raw.cpu_shares,
        memory_limit_in_bytes: raw.memory_limit_in_bytes,
        oom_score_adj: raw.oom_score_adj,
        cpuset_cpus: raw.cpuset_cpus,
        cpuset_mems: raw.cpuset_mems,
        hugepage_limits: raw
            .hugepage_limits
            .into_iter()
            .map(|(page_size, limit)| cri::HugepageLimit { page_size, limit })
            .collect(),
        unified: raw.unified.into_iter().collect(),
        ..cri::LinuxContainerResources::default()
    }
}

fn cri_propagation(p: Propagation) -> cri::MountPropagation {
    match p {
        Propagation::Private => cri::MountPropagation::PropagationPrivate,
        Propagation::HostToContainer => cri::MountPropagation::PropagationHostToContainer,
        Propagation::Bidirectional => cri::MountPropagation::PropagationBidirectional,
    }
}

fn cri_state(c: &Container) -> cri::ContainerState {
    match c.visible_state() {
        ContainerState::Created => cri::ContainerState::ContainerCreated,
        ContainerState::Running => cri::ContainerState::ContainerRunning,
        ContainerState::Exited | ContainerState::Removing => cri::ContainerState::ContainerExited,
        ContainerState::Creating => cri::ContainerState::ContainerUnknown,
    }
}

fn metadata(c: &Container) -> cri::ContainerMetadata {
    cri::ContainerMetadata {
        name: c.name.clone(),
        attempt: c.attempt,
    }
}

fn image_spec(c: &Container) -> cri::ImageSpec {
    cri::ImageSpec {
        image: c.image.clone(),
        user_specified_image: c.image.clone(),
        ..cri::ImageSpec::default()
    }
}

/// The entry ListContainers returns.
pub(crate) fn list_entry(c: &Container) -> cri::Container {
    cri::Container {
        id: c.id.clone(),
        pod_sandbox_id: c.sandbox_id.clone(),
        metadata: Some(metadata(c)),
        image: Some(image_spec(c)),
        image_ref: c.image_ref.clone(),
        state: cri_state(c) as i32,
        created_at: c.created_at,
        labels: to_hash_map(&c.labels),
        annotations: to_hash_map(&c.annotations),
        image_id: c.image_id.clone(),
    }
}

/// Whether the container passes a ListContainers filter.
pub(crate) fn matches(c: &Container, filter: &cri::ContainerFilter) -> bool {
    (filter.id.is_empty() || c.id.starts_with(&filter.id))
        && (filter.pod_sandbox_id.is_empty() || c.sandbox_id.starts_with(&filter.pod_sandbox_id))
        && filter
            .state
            .as_ref()
            .is_none_or(|s| s.state == cri_state(c) as i32)
        && filter
            .label_selector
            .iter()
            .all(|(k, v)| c.labels.get(k) == Some(v))
}

/// Whether the container passes a ListContainerStats filter.
pub(crate) fn matches_stats(c: &Container, filter: &cri::ContainerStatsFilter) -> bool {
    (filter.id.is_empty() || c.id.starts_with(&filter.id))
        && (filter.pod_sandbox_id.is_empty() || c.sandbox_id.starts_with(&filter.pod_sandbox_id))
        && filter
            .label_selector
            .iter()
            .all(|(k, v)| c.labels.get(k) == Some(v))
}

/// The status ContainerStatus returns.
pub(crate) fn status(c: &Container) -> cri::ContainerStatus {
    let (exit_code, finished_at, reason, message) = match &c.exit {
        Some(exit) => (
            exit.code,
            exit.at,
            exit.reason().to_owned(),
            exit.message.clone(),
        ),
        None => (0, 0, String::new(), String::new()),
    };
    cri::ContainerStatus {
        id: c.id.clone(),
        metadata: Some(metadata(c)),
        state: cri_state(c) as i32,
        created_at: c.created_at,
        started_at: c.started_at,
        finished_at,
        exit_code,
        image: Some(image_spec(c)),
        image_ref: c.image_ref.clone(),
        reason,
        message,
        labels: to_hash_map(&c.labels),
        annotations: to_hash_map(&c.annotations),
        mounts: c
            .mounts
            .iter()
            .map(|m| cri::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.to_string_lossy().into_owned(),
                readonly: m.readonly,
                propagation: cri_propagation(m.propagation) as i32,
                ..cri::Mount::default()
            })
            .collect(),
        log_path: c.log_path.to_string_lossy().into_owned(),
        resources: Some(cri::ContainerResources {
            linux: Some(cri_resources(&c.limits)),
            windows: None,
        }),
        image_id: c.image_id.clone(),
        user: Some(cri::ContainerUser {
            linux: Some(cri::LinuxContainerUser {
                uid: i64::from(c.user.0),
                gid: i64::from(c.user.1),
                supplemental_groups: c.user.2.iter().map(|&g| i64::from(g)).collect(),
            }),
        }),
    }
}

/// ContainerStatus's verbose `info`: what crio-lite knows beyond the status.
pub(crate) fn info(c: &Container) -> HashMap<String, String> {
    let info = serde_json::json!({
        "sandboxID": c.sandbox_id,
        "pid": c.pid,
        "runtimeHandler": c.runtime_handler,
        "command": c.command,
        "state": c.state.as_str(),
        "stopSignal": c.stop_signal,
        "exit": c.exit,
    });
    HashMap::from([("info".to_owned(), info.to_string())])
}

/// The CRI stats of a container.
pub(crate) fn stats(
    c: &Container,
    cgroup: Option<&oci_container::ContainerStats>,
    writable: image_store::Usage,
    storage_root: &str,
) -> cri::ContainerStats {
    let now = super::now_nanos();
    let v = |x: Option<u64>| x.map(|value| cri::UInt64Value { value });
    cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes {
            id: c.id.clone(),
            metadata: Some(metadata(c)),
            labels: to_hash_map(&c.labels),
            annotations: to_hash_map(&c.annotations),
        }),
        cpu: Some(cri::CpuUsage {
            timestamp: cgroup.map_or(now, |s| s.timestamp_ns),
            usage_core_nano_seconds: v(cgroup.and_then(|s| s.cpu_usage_ns)),
            usage_nano_cores: None,
        }),
        memory: Some(cri::MemoryUsage {
            timestamp: cgroup.map_or(now, |s| s.timestamp_ns),
            working_set_bytes: v(cgroup.and_then(|s| s.memory_working_set_bytes)),
            available_bytes: None,
            usage_bytes: v(cgroup.and_then(|s| s.memory_usage_bytes)),
            rss_bytes: v(cgroup.and_then(|s| s.memory_rss_bytes)),
            page_faults: None,
            major_page_faults: None,
        }),
        writable_layer: Some(cri::FilesystemUsage {
            timestamp: now,
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: storage_root.to_owned(),
            }),
            used_bytes: Some(cri::UInt64Value {
                value: writable.bytes,
            }),
            inodes_used: Some(cri::UInt64Value {
                value: writable.inodes,
            }),
        }),
        swap: None,
    }
}

/// A pod's stats from its containers' (`each`: a container, its cgroup's figures while it
/// runs, its writable layer): the pod's CPU, memory and process figures are the sums over the
/// containers that report them, `None` when none does.
pub(crate) fn pod_stats(
    sandbox: &crate::domain::Sandbox,
    each: &[(
        Container,
        Option<oci_container::ContainerStats>,
        image_store::Usage,
    )],
    storage_root: &str,
) -> cri::PodSandboxStats {
    let now = super::now_nanos();
    let sum = |figure: fn(&oci_container::ContainerStats) -> Option<u64>| {
        each.iter()
            .filter_map(|(_, cgroup, _)| cgroup.as_ref().and_then(figure))
            .reduce(u64::saturating_add)
            .map(|value| cri::UInt64Value { value })
    };
    cri::PodSandboxStats {
        attributes: Some(cri::PodSandboxAttributes {
            id: sandbox.id.clone(),
            metadata: Some(super::convert::metadata(sandbox)),
            labels: to_hash_map(&sandbox.labels),
            annotations: to_hash_map(&sandbox.annotations),
        }),
        linux: Some(cri::LinuxPodSandboxStats {
            cpu: Some(cri::CpuUsage {
                timestamp: now,
                usage_core_nano_seconds: sum(|s| s.cpu_usage_ns),
                usage_nano_cores: None,
            }),
            memory: Some(cri::MemoryUsage {
                timestamp: now,
                working_set_bytes: sum(|s| s.memory_working_set_bytes),
                available_bytes: None,
                usage_bytes: sum(|s| s.memory_usage_bytes),
                rss_bytes: sum(|s| s.memory_rss_bytes),
                page_faults: sum(|s| s.page_faults),
                major_page_faults: sum(|s| s.major_page_faults),
            }),
            network: None,
            process: Some(cri::ProcessUsage {
                timestamp: now,
                process_count: sum(|s| s.pids),
            }),
            containers: each
                .iter()
                .map(|(c, cgroup, usage)| stats(c, cgroup.as_ref(), *usage, storage_root))
                .collect(),
        }),
        windows: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(config: cri::ContainerConfig) -> cri::CreateContainerRequest {
        cri::CreateContainerRequest {
            pod_sandbox_id: "abc".into(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata {
                    name: "web".into(),
                    attempt: 1,
                }),
                image: Some(cri::ImageSpec {
                    image: "busybox".into(),
                    ..cri::ImageSpec::default()
                }),
                ..config
            }),
            sandbox_config: None,
        }
    }

    fn security(sc: cri::LinuxContainerSecurityContext) -> cri::ContainerConfig {
        cri::ContainerConfig {
            linux: Some(cri::LinuxContainerConfig {
                resources: None,
                security_context: Some(sc),
            }),
            ..cri::ContainerConfig::default()
        }
    }

    #[test]
    fn a_plain_request_converts() {
        let (sandbox, req) = request(create(cri::ContainerConfig {
            command: vec!["sh".into()],
            envs: vec![cri::KeyValue {
                key: "A".into(),
                value: "b=c".into(),
            }],
            ..cri::ContainerConfig::default()
        }))
        .unwrap();
        assert_eq!(sandbox, "abc");
        assert_eq!(
            (req.name.as_str(), req.attempt, req.image.as_str()),
            ("web", 1, "busybox")
        );
        assert_eq!(req.env, vec![("A".to_owned(), "b=c".to_owned())]);
        assert_eq!(req.user, None);
        assert_eq!(req.seccomp, None);
    }

    #[test]
    fn bad_requests_name_the_field() {
        let id = |v: i64| Some(cri::Int64Value { value: v });
        let cases: Vec<(cri::CreateContainerRequest, &str)> = vec![
            (
                cri::CreateContainerRequest {
                    config: None,
                    ..create(cri::ContainerConfig::default())
                },
                "config",
            ),
            (
                create(cri::ContainerConfig {
                    envs: vec![cri::KeyValue {
                        key: "A=B".into(),
                        value: String::new(),
                    }],
                    ..cri::ContainerConfig::default()
                }),
                "config.envs[0].key",
            ),
            (
                create(cri::ContainerConfig {
                    stdin_once: true,
                    ..cri::ContainerConfig::default()
                }),
                "config.stdin_once",
            ),
            (
                create(cri::ContainerConfig {
                    working_dir: "rel".into(),
                    ..cri::ContainerConfig::default()
                }),
                "config.working_dir",
            ),
            (
                create(security(cri::LinuxContainerSecurityContext {
                    run_as_user: id(-1),
                    ..Default::default()
                })),
                "config.linux.security_context.run_as_user",
            ),
            (
                create(security(cri::LinuxContainerSecurityContext {
                    run_as_group: id(5),
                    ..Default::default()
                })),
                "config.linux.security_context.run_as_group",
            ),
            (
                create(security(cri::LinuxContainerSecurityContext {
                    seccomp: Some(cri::SecurityProfile {
                        profile_type: 2,
                        localhost_ref: "rel.json".into(),
                    }),
                    ..Default::default()
                })),
                "config.linux.security_context.seccomp.localhost_ref",
            ),
            (
                create(cri::ContainerConfig {
                    mounts: vec![
                        cri::Mount {
                            container_path: "/a".into(),
                            host_path: "/srv/a".into(),
                            ..cri::Mount::default()
                        },
                        cri::Mount {
                            container_path: "/b".into(),
                            host_path: "/srv/b".into(),
                            propagation: 7,
                            ..cri::Mount::default()
                        },
                    ],
                    ..cri::ContainerConfig::default()
                }),
                "config.mounts[1].propagation",
            ),
        ];
        for (req, field) in cases {
            let err = request(req).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{field}:")), "{field}: {err}");
        }
        let mut no_image = create(cri::ContainerConfig::default());
        no_image.config.as_mut().unwrap().image = None;
        assert!(
            request(no_image)
                .unwrap_err()
                .to_string()
                .starts_with("config.image.image:")
        );
    }

    #[test]
    fn users_are_uid_name_and_group() {
        let id = |v: i64| Some(cri::Int64Value { value: v });
        for (sc, want) in [
            (
                cri::LinuxContainerSecurityContext {
                    run_as_user: id(1000),
                    run_as_group: id(100),
                    ..Default::default()
                },
                Some("1000:100"),
            ),
            (
                cri::LinuxContainerSecurityContext {
                    run_as_username: "nobody".into(),
                    ..Default::default()
                },
                Some("nobody"),
            ),
            (cri::LinuxContainerSecurityContext::default(), None),
        ] {
            assert_eq!(user(&sc).unwrap().as_deref(), want);
        }
    }

    #[test]
    fn pid_modes_are_the_pods_the_containers_or_the_nodes() {
        let pid = |mode: i32| {
            let sc = cri::LinuxContainerSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    pid: mode,
                    ..cri::NamespaceOption::default()
                }),
                ..Default::default()
            };
            request(create(security(sc))).map(|(_, r)| r.pid)
        };
        assert_eq!(pid(cri::NamespaceMode::Pod as i32).unwrap(), PidMode::Pod);
        assert_eq!(
            pid(cri::NamespaceMode::Container as i32).unwrap(),
            PidMode::Container
        );
        assert_eq!(pid(cri::NamespaceMode::Node as i32).unwrap(), PidMode::Node);
        // No security context at all is CRI's zero value: POD.
        let (_, plain) = request(create(cri::ContainerConfig::default())).unwrap();
        assert_eq!(plain.pid, PidMode::Pod);
        for mode in [cri::NamespaceMode::Target as i32, 9] {
            let err = pid(mode).expect_err("refused");
            assert!(err.to_string().contains("namespace_options.pid"), "{err}");
        }
    }

    #[test]
    fn mounts_and_limits_become_the_domains_enums_and_options() {
        let (_, req) = request(create(cri::ContainerConfig {
            mounts: [0, 1, 2]
                .map(|propagation| cri::Mount {
                    container_path: "/data".into(),
                    host_path: "/srv".into(),
                    propagation,
                    ..cri::Mount::default()
                })
                .into(),
            linux: Some(cri::LinuxContainerConfig {
                resources: Some(cri::LinuxContainerResources {
                    cpu_period: 100_000,
                    cpu_quota: -1,
                    memory_limit_in_bytes: 64 << 20,
                    oom_score_adj: -997,
                    cpuset_cpus: "0-1".into(),
                    ..cri::LinuxContainerResources::default()
                }),
                security_context: None,
            }),
            log_path: "web/0.log".into(),
            ..cri::ContainerConfig::default()
        }))
        .unwrap();
        let propagations: Vec<Propagation> = req.mounts.iter().map(|m| m.propagation).collect();
        assert_eq!(
            propagations,
            [
                Propagation::Private,
                Propagation::HostToContainer,
                Propagation::Bidirectional
            ]
        );
        assert_eq!(
            req.limits,
            Limits {
                cpu_period: Some(100_000),
                memory_limit_in_bytes: Some(64 << 20),
                oom_score_adj: Some(-997),
                cpuset_cpus: Some("0-1".into()),
                ..Limits::default()
            },
            "0 and a negative quota are unset"
        );
        assert_eq!(req.log_path.as_deref(), Some("web/0.log"));
        let back = cri_resources(&req.limits);
        assert_eq!(
            (
                back.cpu_period,
                back.cpu_quota,
                back.cpu_shares,
                back.oom_score_adj
            ),
            (100_000, 0, 0, -997)
        );
        assert_eq!(
            cri_propagation(Propagation::HostToContainer) as i32,
            1,
            "reported back as the CRI's number"
        );
        let (_, plain) = request(create(cri::ContainerConfig::default())).unwrap();
        assert_eq!(plain.log_path, None);
    }
}

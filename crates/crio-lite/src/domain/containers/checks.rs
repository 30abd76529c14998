//! The rules a container request meets in its sandbox, and the states an operation needs: each
//! refusal names the request's field.

use std::path::{Component, Path, PathBuf};

use super::super::container::{Container, ContainerState};
use super::super::error::{DomainError, DomainResult};
use super::super::sandbox::Sandbox;
use super::request::{ContainerRequest, PidMode};

/// A container may ask POD for pid only in a pod that shares one.
pub(super) fn check_pid_mode(sandbox: &Sandbox, pid: PidMode) -> DomainResult<()> {
    if pid == PidMode::Pod && !sandbox.shares_pid() {
        // kubelet sets one mode on a pod and its containers; a container cannot share what
        // the pod does not have, and quietly giving it a namespace of its own would hide
        // its siblings from it.
        return Err(DomainError::invalid(
            "config.linux.security_context.namespace_options.pid",
            format!(
                "POD, but sandbox {} was not run with POD for pid: it has no PID namespace to \
                 share (ask CONTAINER or NODE, or run the pod with POD)",
                sandbox.id
            ),
        ));
    }
    Ok(())
}

/// A privileged container only in a privileged pod, as CRI-O and containerd: the pod's spec
/// is where a cluster's admission decides whether privilege is allowed, and a privileged
/// container of an unprivileged pod would start with every capability and device anyway.
pub(super) fn check_privileged(sandbox: &Sandbox, request: &ContainerRequest) -> DomainResult<()> {
    if request.privileged && !sandbox.privileged {
        return Err(DomainError::invalid(
            "config.linux.security_context.privileged",
            format!(
                "a privileged container, but sandbox {} was not run privileged \
                 (config.linux.security_context.privileged of RunPodSandbox): only a privileged \
                 pod may hold privileged containers",
                sandbox.id
            ),
        ));
    }
    Ok(())
}

/// The cgroup parent of the sandbox's containers (and of its init): its `cgroup_parent`, or
/// `/crio-lite`. Checked at RunPodSandbox; checked again here for records of pods made before
/// that check.
pub(super) fn cgroup_parent(
    cgroups: oci_container::CgroupManager,
    sandbox: &Sandbox,
) -> DomainResult<String> {
    cgroups
        .check_parent(&sandbox.cgroup_parent)
        .map_err(|why| DomainError::invalid("sandbox cgroup_parent", why))?;
    Ok(if sandbox.cgroup_parent.is_empty() {
        cgroups.default_parent().to_owned()
    } else {
        sandbox.cgroup_parent.clone()
    })
}

/// The container's log file: the request's below the pod's log directory, or `default` when
/// either is not given.
pub(super) fn log_path(
    sandbox: &Sandbox,
    request: &ContainerRequest,
    default: PathBuf,
) -> DomainResult<PathBuf> {
    let Some(asked) = request.log_path.as_deref() else {
        return Ok(default);
    };
    if sandbox.log_directory.is_empty() {
        return Ok(default);
    }
    let relative = Path::new(asked);
    if !relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(DomainError::invalid(
            "config.log_path",
            format!("{asked:?} must be a relative path without '..' below the pod's log directory"),
        ));
    }
    Ok(Path::new(&sandbox.log_directory).join(relative))
}

/// oci-container's refusal of a bind mount, naming the request's field; its other errors as
/// they are.
pub(super) fn mount_error(error: oci_container::Error) -> DomainError {
    match error {
        oci_container::Error::InvalidMount {
            index,
            which,
            reason,
            ..
        } => {
            let path = match which {
                oci_container::MountPath::Source => "host_path",
                oci_container::MountPath::Destination => "container_path",
            };
            DomainError::invalid(format!("config.mounts[{index}].{path}"), reason)
        }
        other => DomainError::runtime(other),
    }
}

pub(super) fn require_running(container: &Container) -> DomainResult<()> {
    if container.visible_state() == ContainerState::Running {
        Ok(())
    } else {
        Err(DomainError::ContainerState {
            id: container.id.clone(),
            state: container.visible_state().as_str(),
            wanted: "running",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::NamespaceMode;

    #[test]
    fn a_container_shares_a_pid_namespace_only_with_a_pod_that_has_one() {
        let mut sandbox = Sandbox::example("s1");
        assert!(sandbox.shares_pid(), "CRI's zero value is POD");
        for mode in [PidMode::Pod, PidMode::Container, PidMode::Node] {
            check_pid_mode(&sandbox, mode).expect("a POD pod takes every mode");
        }
        for pod_mode in [NamespaceMode::Container, NamespaceMode::Node] {
            sandbox.namespace_options.pid = pod_mode;
            assert!(!sandbox.shares_pid());
            let err = check_pid_mode(&sandbox, PidMode::Pod).expect_err("nothing to share");
            let text = err.to_string();
            assert!(
                text.contains("namespace_options.pid") && text.contains("s1"),
                "{text}"
            );
            check_pid_mode(&sandbox, PidMode::Container).expect("its own");
            check_pid_mode(&sandbox, PidMode::Node).expect("the node's");
        }
    }

    /// Issue #21: a privileged container in an unprivileged pod started with every capability.
    #[test]
    fn a_privileged_container_needs_a_privileged_pod() {
        let mut sandbox = Sandbox::example("s1");
        let privileged = ContainerRequest {
            privileged: true,
            ..ContainerRequest::default()
        };
        let err = check_privileged(&sandbox, &privileged)
            .expect_err("an unprivileged pod")
            .to_string();
        assert!(
            err.starts_with("config.linux.security_context.privileged:") && err.contains("s1"),
            "{err}"
        );
        check_privileged(&sandbox, &ContainerRequest::default()).expect("unprivileged is fine");
        sandbox.privileged = true;
        check_privileged(&sandbox, &privileged).expect("a privileged pod");
        check_privileged(&sandbox, &ContainerRequest::default()).expect("either kind");
    }

    #[test]
    fn a_refused_mount_names_the_requests_field() {
        for (which, field) in [
            (
                oci_container::MountPath::Source,
                "config.mounts[3].host_path: ",
            ),
            (
                oci_container::MountPath::Destination,
                "config.mounts[3].container_path: ",
            ),
        ] {
            let err = mount_error(oci_container::Error::InvalidMount {
                container: "c1".into(),
                index: 3,
                which,
                reason: "why".into(),
            });
            assert_eq!(err.to_string(), format!("{field}why"));
        }
    }

    #[test]
    fn log_paths_stay_below_the_pods_log_directory() {
        let mut sandbox = Sandbox::example("s1");
        let default = PathBuf::from("/run/c/ctr.log");
        let asked = |path: &str| ContainerRequest {
            log_path: Some(path.into()),
            ..ContainerRequest::default()
        };
        assert_eq!(
            log_path(&sandbox, &asked("web/0.log"), default.clone()).unwrap(),
            default,
            "no log directory"
        );
        sandbox.log_directory = "/var/log/pods/p".into();
        assert_eq!(
            log_path(&sandbox, &asked("web/0.log"), default.clone()).unwrap(),
            Path::new("/var/log/pods/p/web/0.log")
        );
        assert_eq!(
            log_path(&sandbox, &ContainerRequest::default(), default.clone()).unwrap(),
            default
        );
        for bad in ["../0.log", "/etc/0.log", "web/../../0.log"] {
            let err = log_path(&sandbox, &asked(bad), default.clone()).unwrap_err();
            assert!(err.to_string().starts_with("config.log_path:"), "{err}");
        }
    }
}

//! Annotations that runtimes, or CRI-O on their behalf, act on, and which of them a request may
//! pass: those the runtime handler's `allowed_annotations` lists, as CRI-O filters them.
//!
//! A request's annotations end up in `config.json`, where crun reads `run.oci.*` (a seccomp
//! filter of the caller's choosing in `run.oci.seccomp_bpf_data`, a library to load in
//! `run.oci.seccomp.plugins`), runc reads `org.systemd.property.*` and `org.criu.config`, and OCI
//! hooks match on them. Whoever may create a pod must not get to say those: the node's
//! configuration decides, per handler (CVE-2024-3154 was CRI-O passing them).

use std::collections::BTreeMap;

/// The annotations CRI-O treats as runtime-interpreted (its `AllAllowedAnnotations`), each
/// matched as a prefix of the annotation's key, as CRI-O matches them: `run.oci.` is every
/// annotation of crun's, `bundle` also `bundle.x`.
pub const RUNTIME_ANNOTATIONS: &[&str] = &[
    // The Kubernetes CRI's RDT class, read by runtimes that support RDT.
    "io.kubernetes.cri.rdt-class",
    // runc's (`runc features`: potentiallyUnsafeConfigAnnotations).
    "bundle",
    "org.systemd.property.",
    "org.criu.config",
    // crun's (`crun features`: potentiallyUnsafeConfigAnnotations).
    "module.wasm.image/variant",
    "io.kubernetes.cri.container-type",
    "run.oci.",
    // CRI-O's own, in their current form.
    "cgroup2-mount-hierarchy-rw.crio.io",
    "cpu-c-states.crio.io",
    "cpu-freq-governor.crio.io",
    "cpu-load-balancing.crio.io",
    "cpu-quota.crio.io",
    "cpu-shared.crio.io",
    "devices.crio.io",
    "disable-fips.crio.io",
    "irq-load-balancing.crio.io",
    "io.containers.trace-syscall",
    "link-logs.crio.io",
    "platform-runtime-path.crio.io",
    "pod-linux-overhead.crio.io",
    "pod-linux-resources.crio.io",
    "seccomp-notifier-action.crio.io",
    "seccomp-profile.crio.io",
    "shm-size.crio.io",
    "spoofed.crio.io",
    "org.opencontainers.image.stopSignal",
    "try-skip-volume-selinux-label.crio.io",
    "umask.crio.io",
    "unified-cgroup.crio.io",
    "userns-mode.crio.io",
    // ... and in their deprecated `io.kubernetes.cri-o.*` form.
    "io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw",
    "io.kubernetes.cri-o.Devices",
    "io.kubernetes.cri-o.DisableFIPS",
    "io.kubernetes.cri-o.LinkLogs",
    "io.kubernetes.cri-o.PlatformRuntimePath",
    "io.kubernetes.cri-o.PodLinuxOverhead",
    "io.kubernetes.cri-o.PodLinuxResources",
    "io.kubernetes.cri-o.seccompNotifierAction",
    "seccomp-profile.kubernetes.cri-o.io",
    "io.kubernetes.cri-o.ShmSize",
    "io.kubernetes.cri-o.Spoofed",
    "io.kubernetes.cri-o.TrySkipVolumeSELinuxLabel",
    "io.kubernetes.cri-o.umask",
    "io.kubernetes.cri-o.UnifiedCgroup",
    "io.kubernetes.cri-o.userns-mode",
];

/// Checks one `allowed_annotations` entry: one of [`RUNTIME_ANNOTATIONS`] (what CRI-O accepts),
/// or a narrower key under one ending in `.` (`run.oci.seccomp_bpf_data` under `run.oci.`).
///
/// # Errors
///
/// The reason, for the caller to name the key with.
pub fn check_allowed(entry: &str) -> Result<(), String> {
    let known = RUNTIME_ANNOTATIONS
        .iter()
        .any(|known| entry == *known || (known.ends_with('.') && entry.starts_with(known)));
    if known {
        Ok(())
    } else {
        Err(format!(
            "{entry:?} is not an annotation runtimes interpret; those that can be allowed are: {}",
            RUNTIME_ANNOTATIONS.join(", ")
        ))
    }
}

/// Whether a key is runtime-interpreted and none of `allowed` lets it through.
fn is_filtered(key: &str, allowed: &[String]) -> bool {
    RUNTIME_ANNOTATIONS
        .iter()
        .any(|known| key.starts_with(known))
        && !allowed.iter().any(|entry| key.starts_with(entry.as_str()))
}

/// Removes from `annotations` every runtime-interpreted one that `allowed` (a handler's
/// `allowed_annotations`, checked by [`check_allowed`]) does not let through; returns the keys
/// removed. Others stay as they are.
pub fn filter(annotations: &mut BTreeMap<String, String>, allowed: &[String]) -> Vec<String> {
    let removed: Vec<String> = annotations
        .keys()
        .filter(|key| is_filtered(key, allowed))
        .cloned()
        .collect();
    for key in &removed {
        annotations.remove(key);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter()
            .map(|k| ((*k).to_owned(), "v".to_owned()))
            .collect()
    }

    #[test]
    fn runtime_annotations_go_unless_allowed_and_others_stay() {
        let mut all = annotations(&[
            "run.oci.seccomp_bpf_data",
            "run.oci.seccomp.plugins",
            "org.systemd.property.CPUQuota",
            "bundle",
            "io.kubernetes.cri-o.Devices",
            "io.kubernetes.cri-o.userns-mode",
            "seccomp-profile.kubernetes.cri-o.io/POD",
            "io.containers.trace-syscall",
            "app.kubernetes.io/name",
            "io.kubernetes.cri-o.SandboxID",
            "run.ocix",
        ]);
        let removed = filter(&mut all, &[]);
        assert_eq!(
            all.keys().collect::<Vec<_>>(),
            [
                "app.kubernetes.io/name",
                "io.kubernetes.cri-o.SandboxID",
                "run.ocix"
            ]
        );
        assert_eq!(removed.len(), 8, "{removed:?}");

        // A prefix entry lets its family through, a key entry that key only.
        let mut some = annotations(&[
            "run.oci.seccomp_bpf_data",
            "run.oci.seccomp.plugins",
            "org.criu.config",
        ]);
        filter(&mut some, &["run.oci.seccomp_bpf_data".to_owned()]);
        assert_eq!(
            some.keys().collect::<Vec<_>>(),
            ["run.oci.seccomp_bpf_data"]
        );
        let mut some = annotations(&["run.oci.seccomp_bpf_data", "run.oci.keep_original_groups"]);
        filter(&mut some, &["run.oci.".to_owned()]);
        assert_eq!(some.len(), 2);
    }

    #[test]
    fn allowed_entries_are_known_annotations_or_keys_under_a_known_prefix() {
        for ok in [
            "run.oci.",
            "run.oci.seccomp_bpf_data",
            "io.kubernetes.cri-o.Devices",
            "bundle",
        ] {
            assert_eq!(check_allowed(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "run.oc",
            "app.kubernetes.io/name",
            "bundles",
            "io.kubernetes.cri-o.",
        ] {
            let err = check_allowed(bad).unwrap_err();
            assert!(
                err.contains("not an annotation runtimes interpret"),
                "{bad}: {err}"
            );
        }
    }

    /// No entry is a prefix of another, so "filtered unless an allowed entry is a prefix" is
    /// CRI-O's "filtered when a disallowed entry is a prefix" for every list CRI-O accepts.
    #[test]
    fn no_runtime_annotation_is_a_prefix_of_another() {
        for a in RUNTIME_ANNOTATIONS {
            for b in RUNTIME_ANNOTATIONS {
                assert!(a == b || !b.starts_with(a), "{a} is a prefix of {b}");
            }
        }
    }
}

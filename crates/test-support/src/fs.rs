//! Files a test writes or looks at afterwards: directory listings, executable scripts, mounts.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// The names of the entries of `dir`, sorted; empty when it is missing or unreadable (a watched
/// directory may be gone, or be a file for a moment).
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Sets the permission bits of `path` to `mode`.
///
/// # Panics
///
/// When it cannot, failing the test.
pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// Writes `text` to `path` (a script with its `#!` line: a plugin, usually) and makes it
/// executable (0755).
///
/// # Panics
///
/// When it cannot, failing the test.
pub fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    set_mode(path, 0o755);
}

/// The mount points of this process's mount namespace, as `/proc/self/mountinfo` spells them
/// (with each one's whole line).
pub fn mounts() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("read /proc/self/mountinfo")
        .lines()
        .filter_map(|line| {
            Some(Mount {
                point: line.split(' ').nth(4)?.to_owned(),
                line: line.to_owned(),
            })
        })
        .collect()
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub point: String,
    /// The whole line (propagation flags such as `shared:N` are in it).
    pub line: String,
}

/// The mounts at `dir` or below it.
pub fn mounts_at_or_below(dir: &Path) -> Vec<Mount> {
    let dir = dir.to_string_lossy();
    let below = format!("{dir}/");
    mounts()
        .into_iter()
        .filter(|m| m.point == dir || m.point.starts_with(&below))
        .collect()
}

/// Whether something is mounted at `path` (compared as given: canonicalize it first if it may
/// hold a symlink).
pub fn is_mount_point(path: &Path) -> bool {
    let path = path.to_string_lossy();
    mounts().iter().any(|m| m.point == path)
}

/// What a result cache holds: the files of `results`, then the pending entries in `pending` as
/// `pending/<name>` (ocicni writes an ADD's entry there until its result is complete), each
/// sorted. A test asserts it is empty after a teardown.
pub fn cache_entries(results: &Path, pending: &Path) -> Vec<String> {
    let mut all = file_names(results);
    all.extend(
        file_names(pending)
            .into_iter()
            .map(|name| format!("pending/{name}")),
    );
    all
}

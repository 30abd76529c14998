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

/// The mounts of this process's mount namespace (`/proc/self/mountinfo`), in mount order.
///
/// # Panics
///
/// When the mount table cannot be read, failing the test.
pub fn mounts() -> Vec<Mount> {
    node_primitives::mounts::read_own()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|m| Mount {
            point: m.mount_point.to_string_lossy().into_owned(),
            optional: m.optional,
            fs_type: m.fs_type,
        })
        .collect()
}

/// One mount of this process's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted (its escapes decoded).
    pub point: String,
    /// Its optional fields: propagation (`shared:N`, `master:N`), `unbindable`.
    pub optional: Vec<String>,
    /// The file system type: `overlay`, `cgroup2`, `nsfs`...
    pub fs_type: String,
}

/// The mounts at `dir` or below it.
pub fn mounts_at_or_below(dir: &Path) -> Vec<Mount> {
    mounts()
        .into_iter()
        .filter(|m| Path::new(&m.point).starts_with(dir))
        .collect()
}

/// Whether something is mounted at `path` (made absolute, not resolved: canonicalize it first if
/// it may hold a symlink).
///
/// # Panics
///
/// When the mount table cannot be read, failing the test.
pub fn is_mount_point(path: &Path) -> bool {
    node_primitives::mounts::is_mount_point(path).unwrap_or_else(|e| panic!("{e}"))
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

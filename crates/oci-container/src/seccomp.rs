//! Seccomp: which system calls a container may make.
//!
//! A [`Seccomp`] choice in the [`ContainerConfig`](crate::ContainerConfig) becomes the spec's
//! `linux.seccomp` in [`generate`](crate::generate), through [`Seccomp::linux_seccomp`]:
//!
//! - [`Seccomp::Unconfined`]: no filter.
//! - [`Seccomp::RuntimeDefault`]: [`default_profile`], this crate's own profile: every system call
//!   not listed fails with `EPERM`; ordinary programs' calls are listed, and groups of calls are
//!   listed only when the container has the capability that makes them useful (`CAP_SYS_ADMIN`
//!   unlocks `mount`, `unshare`, `setns`, namespace-creating `clone`...).
//! - [`Seccomp::Localhost`]: a profile file on the host, in the JSON format of Docker and
//!   containers/common (`includes`/`excludes` by capability, architecture and kernel version,
//!   `archMap`, `name` or `names`) or already in the runtime spec's form. The file is untrusted:
//!   only a regular file is read, at most [`MAX_PROFILE_SIZE`] bytes, and an error names the file
//!   and the field at fault.
//!
//! A privileged container gets no filter whatever the choice, as in CRI-O.
//!
//! CRI's "no profile given" is a choice of the runtime daemon: [`Seccomp::for_empty_profile`].

mod default_profile;
mod json;
mod profile;

use std::path::{Path, PathBuf};

use oci_spec::runtime::{Arch, Capabilities, LinuxSeccomp};
use safe_file::Symlinks;

use crate::error::{Error, Result};

pub use default_profile::default_profile;

/// The largest profile file read, in bytes: Docker's own default profile is about 20 KiB.
pub const MAX_PROFILE_SIZE: u64 = 1024 * 1024;

/// CRI-O 1.2x's `seccomp_use_default_when_empty` default: a container whose CRI request names no
/// profile runs under [`Seccomp::RuntimeDefault`]. CRI itself (and CRI-O 1.30, which removed the
/// option) says such a container is unconfined; kubelet's `--seccomp-default` then asks for
/// `RuntimeDefault` explicitly.
pub const USE_DEFAULT_WHEN_EMPTY: bool = true;

/// The seccomp filter a container runs under.
///
/// `Default` is [`Seccomp::Unconfined`], what CRI means when no profile is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Seccomp {
    /// No filter.
    #[default]
    Unconfined,
    /// This crate's default profile ([`default_profile`]) for the container's capabilities.
    RuntimeDefault,
    /// The profile in this file on the host (Docker's format or the runtime spec's).
    Localhost(PathBuf),
}

impl Seccomp {
    /// The choice for a CRI request that names no profile: [`Seccomp::RuntimeDefault`] when
    /// `use_default_when_empty` (CRI-O's `seccomp_use_default_when_empty`, whose 1.2x default is
    /// [`USE_DEFAULT_WHEN_EMPTY`]), [`Seccomp::Unconfined`] otherwise, as CRI says.
    pub fn for_empty_profile(use_default_when_empty: bool) -> Seccomp {
        if use_default_when_empty {
            Seccomp::RuntimeDefault
        } else {
            Seccomp::Unconfined
        }
    }

    /// The spec's `linux.seccomp` for the container `container` whose (bounding) capabilities are
    /// `capabilities`: `None` when unconfined or `privileged`.
    ///
    /// Only [`Seccomp::Localhost`] reads a file.
    ///
    /// # Errors
    ///
    /// For [`Seccomp::Localhost`]: [`Error::InvalidConfig`] when the path is not absolute,
    /// [`Error::File`] when the file cannot be read (missing, not a regular file, larger than
    /// [`MAX_PROFILE_SIZE`]), [`Error::SeccompProfile`] naming the field when it is not a profile.
    pub fn linux_seccomp(
        &self,
        container: &str,
        capabilities: &Capabilities,
        privileged: bool,
    ) -> Result<Option<LinuxSeccomp>> {
        // CRI-O gives a privileged container no filter (unless configured with a profile of its
        // own for privileged containers, which this crate leaves to the caller's choice).
        if privileged {
            return Ok(None);
        }
        match self {
            Seccomp::Unconfined => Ok(None),
            Seccomp::RuntimeDefault => Ok(Some(default_profile(capabilities))),
            Seccomp::Localhost(path) => load_profile(container, path, capabilities).map(Some),
        }
    }
}

/// Reads and converts the profile file `path` for a container with `capabilities`.
fn load_profile(container: &str, path: &Path, capabilities: &Capabilities) -> Result<LinuxSeccomp> {
    if !path.is_absolute() {
        return Err(Error::config(
            container,
            format!("seccomp profile {} is not absolute", path.display()),
        ));
    }
    // Kubernetes mounts profiles through links (ConfigMaps), so links are followed; the target
    // still has to be a regular file.
    let bytes = safe_file::read_regular(path, MAX_PROFILE_SIZE, Symlinks::Follow)
        .map_err(|e| Error::file(container, e))?;
    let host = profile::Host::current();
    profile::convert(&bytes, capabilities, &host).map_err(|reason| Error::SeccompProfile {
        container: container.to_owned(),
        path: path.to_owned(),
        reason,
    })
}

/// The architecture this program was built for, in the names of libseccomp (`amd64`, `arm64`),
/// which Docker profiles' `includes.arches` use, and as a seccomp architecture.
fn native_arch() -> (&'static str, Option<Arch>) {
    if cfg!(target_arch = "x86_64") {
        ("amd64", Some(Arch::ScmpArchX86_64))
    } else if cfg!(target_arch = "aarch64") {
        ("arm64", Some(Arch::ScmpArchAarch64))
    } else if cfg!(target_arch = "x86") {
        ("x86", Some(Arch::ScmpArchX86))
    } else if cfg!(target_arch = "arm") {
        ("arm", Some(Arch::ScmpArchArm))
    } else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
        ("ppc64le", Some(Arch::ScmpArchPpc64le))
    } else if cfg!(target_arch = "s390x") {
        ("s390x", Some(Arch::ScmpArchS390x))
    } else if cfg!(target_arch = "riscv64") {
        ("riscv64", Some(Arch::ScmpArchRiscv64))
    } else if cfg!(target_arch = "loongarch64") {
        ("loong64", Some(Arch::ScmpArchLoongarch64))
    } else {
        ("unknown", None)
    }
}

#[cfg(test)]
mod tests;

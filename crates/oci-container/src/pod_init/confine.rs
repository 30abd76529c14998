//! The pod init's confinement, as CRI-O's and containerd's pause container has it: the pod's
//! namespaces, a mount namespace whose root is an empty read-only tmpfs, the pod's cgroup, no
//! capabilities, uid and gid 65534, no_new_privs, not dumpable, and a seccomp filter that allows
//! only what reaping and exiting need.
//!
//! Pid 1 of a PID namespace is reachable from every process in it (`/proc/1/root`, `/proc/1/net`,
//! `/proc/1/mountinfo`, `/proc/1/exe`): whatever it holds, a container that shares the namespace
//! can reach. So it holds nothing of the node's.

use std::fs::File;
use std::os::fd::{AsFd as _, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};
use serde::{Deserialize, Serialize};

/// What the init joins, as the caller resolved it (sent to the program on its stdin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Plan {
    /// The pod's network namespace; `None` for a pod on the node's network.
    pub(crate) network: Option<PathBuf>,
    /// The pod's IPC namespace pin.
    pub(crate) ipc: PathBuf,
    /// The pod's UTS namespace pin.
    pub(crate) uts: PathBuf,
    /// The init's cgroup leaf, one directory per hierarchy.
    pub(crate) cgroups: Vec<PathBuf>,
}

/// The user and group the init runs as: `nobody`, as the pause image's.
const NOBODY: u32 = 65534;

/// Every step, in order; the error names the step that failed. `staging` is a directory the
/// init's new root is mounted on (in its own mount namespace: the node's is not touched).
pub(super) fn confine(plan: &Plan, staging: &Path) -> Result<(), String> {
    let joins = [
        (plan.network.as_deref(), CloneFlags::CLONE_NEWNET, "network"),
        (Some(plan.ipc.as_path()), CloneFlags::CLONE_NEWIPC, "IPC"),
        (Some(plan.uts.as_path()), CloneFlags::CLONE_NEWUTS, "UTS"),
    ];
    for (path, kind, what) in joins {
        let Some(path) = path else { continue };
        let step = |e: &dyn std::fmt::Display| {
            format!("join the pod's {what} namespace {}: {e}", path.display())
        };
        let ns = File::open(path).map_err(|e| step(&e))?;
        setns(ns.as_fd(), kind).map_err(|e| step(&e))?;
    }
    // Before the pivot: the cgroup file systems are the node's.
    for dir in &plan.cgroups {
        std::fs::write(dir.join("cgroup.procs"), "0")
            .map_err(|e| format!("join the cgroup {}: {e}", dir.display()))?;
    }
    new_root(staging).map_err(|(step, e)| format!("{step}: {e}"))?;
    drop_privileges()?;
    install_seccomp().map_err(|e| format!("install the seccomp filter: {e}"))
}

/// A mount namespace of its own whose root is an empty, read-only, small tmpfs, the node's root
/// detached: `/proc/1/root` shows nothing, `/proc/1/mountinfo` one line.
fn new_root(staging: &Path) -> Result<(), (&'static str, Errno)> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| ("unshare a mount namespace", e))?;
    // Private first: nothing below propagates back to the node.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| ("make every mount private", e))?;
    mount(
        Some("pod-init"),
        staging,
        Some("tmpfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("size=4k,nr_inodes=16,mode=0555"),
    )
    .map_err(|e| ("mount the init's root tmpfs", e))?;
    nix::unistd::chdir(staging).map_err(|e| ("enter the init's root", e))?;
    // pivot_root(".", "."): the old root is stacked on the new one, then detached.
    nix::unistd::pivot_root(".", ".").map_err(|e| ("pivot into the init's root", e))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| ("detach the node's root", e))?;
    nix::unistd::chdir("/").map_err(|e| ("enter the init's root", e))
}

/// Drops every privilege for good: the bounding set (it needs CAP_SETPCAP, which the uid change
/// takes, so first), ambient capabilities, supplementary groups, then gid and uid 65534 (which
/// clears the effective and permitted sets), the inheritable set, and sets no_new_privs and
/// not-dumpable.
fn drop_privileges() -> Result<(), String> {
    for cap in 0..64 {
        // SAFETY: prctl(2) with integer arguments touches no memory.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            match Errno::last() {
                // Past the last capability this kernel knows.
                Errno::EINVAL if cap > 0 => break,
                e => return Err(format!("drop capability {cap} from the bounding set: {e}")),
            }
        }
    }
    let last = |what: &str| format!("{what}: {}", Errno::last());
    // SAFETY: prctl(2) with integer arguments touches no memory.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err(last("clear the ambient capabilities"));
    }
    // SAFETY: a count of 0 means the kernel reads nothing from the (null) list.
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        return Err(last("drop the supplementary groups"));
    }
    // SAFETY: setresgid(2) and setresuid(2) take integers and touch no memory.
    if unsafe { libc::setresgid(NOBODY, NOBODY, NOBODY) } != 0 {
        return Err(last("set gid 65534"));
    }
    // SAFETY: as above.
    if unsafe { libc::setresuid(NOBODY, NOBODY, NOBODY) } != 0 {
        return Err(last("set uid 65534"));
    }
    clear_capabilities().map_err(|e| format!("clear the capability sets: {e}"))?;
    // SAFETY: prctl(2) with integer arguments touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(last("set no_new_privs"));
    }
    // SAFETY: as above.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(last("make the init not dumpable"));
    }
    Ok(())
}

/// capset(2) with every set empty (the uid change left the inheritable one).
fn clear_capabilities() -> Result<(), Errno> {
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
    const VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: both pointers name live values of the layout capset(2) reads for version 3 (a
    // header and two data words), which it only reads.
    let rc = unsafe { libc::syscall(libc::SYS_capset, std::ptr::from_ref(&header), data.as_ptr()) };
    if rc == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// The syscalls the init makes once confined: its pipes (the confirmation, the go-ahead), the
/// signal wait and reaping loop, and its exit (`_exit`, which is exit_group; glibc's `waitpid`
/// is wait4).
const ALLOWED: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_close,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_restart_syscall,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_exit,
    libc::SYS_exit_group,
];

/// The audit architecture the filter accepts; a syscall made through another ABI is killed.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64

/// The classic BPF program: the architecture checked, [`ALLOWED`] allowed, anything else EPERM.
fn filter() -> Vec<libc::sock_filter> {
    const fn op(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
        libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        }
    }
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    // struct seccomp_data: `int nr` at 0, `__u32 arch` at 4.
    let (nr, arch) = (0, 4);
    let allow = op(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW, 0, 0);
    let deny = op(
        BPF_RET | BPF_K,
        libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA),
        0,
        0,
    );
    let mut prog = vec![
        op(BPF_LD | BPF_W | BPF_ABS, arch, 0, 0),
        op(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 1, 0),
        op(BPF_RET | BPF_K, libc::SECCOMP_RET_KILL_PROCESS, 0, 0),
        op(BPF_LD | BPF_W | BPF_ABS, nr, 0, 0),
    ];
    // x32 syscalls share x86_64's audit architecture, with bit 30 set: refused.
    #[cfg(target_arch = "x86_64")]
    prog.push(op(
        BPF_JMP | libc::BPF_JGE | BPF_K,
        0x4000_0000,
        (2 * ALLOWED.len()) as u8,
        0,
    ));
    for &syscall in ALLOWED {
        prog.push(op(BPF_JMP | BPF_JEQ | BPF_K, syscall as u32, 0, 1));
        prog.push(allow);
    }
    prog.push(deny);
    prog
}

/// Installs [`filter`] on this (single-threaded) process; needs no_new_privs.
fn install_seccomp() -> Result<(), Errno> {
    let filter = filter();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` and the filter it points to live through the call; the kernel copies the
    // program and writes nothing.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::c_ulong::from(libc::SECCOMP_MODE_FILTER),
            std::ptr::from_ref(&prog),
        )
    };
    if rc == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// Closes every descriptor but `keep`: the caller's standard streams and whatever it let through
/// would otherwise be reachable through `/proc/1/fd`.
pub(super) fn close_others(keep: &[RawFd]) {
    let mut keep: Vec<u32> = keep.iter().map(|&fd| fd as u32).collect();
    keep.sort_unstable();
    let mut from = 0u32;
    for fd in keep.into_iter().chain([u32::MAX]) {
        if fd > from {
            // SAFETY: close_range(2) with integer arguments touches no memory; nothing in this
            // process uses the descriptors it closes (the kept ones are the pipes it still
            // reads and writes; the standard streams are never written to again).
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32) };
        }
        from = fd.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_checks_the_architecture_then_allows_each_syscall_and_denies_the_rest() {
        let prog = filter();
        assert_eq!(prog[1].k, AUDIT_ARCH);
        assert_eq!(prog[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        let last = prog.last().expect("a program");
        assert_eq!(last.k, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
        let allowed: Vec<u32> = prog
            .windows(2)
            .filter(|w| w[1].k == libc::SECCOMP_RET_ALLOW)
            .map(|w| w[0].k)
            .collect();
        assert_eq!(allowed.len(), ALLOWED.len());
        for forbidden in [
            libc::SYS_openat,
            libc::SYS_ptrace,
            libc::SYS_setns,
            libc::SYS_mount,
        ] {
            assert!(!allowed.contains(&(forbidden as u32)), "{forbidden}");
        }
        // Every jump lands inside the program.
        let jumps = prog
            .iter()
            .enumerate()
            .filter(|(_, insn)| u32::from(insn.code) & 0x07 == libc::BPF_JMP);
        for (i, insn) in jumps {
            assert!(
                i + 1 + usize::from(insn.jt.max(insn.jf)) < prog.len(),
                "{i}"
            );
        }
    }
}

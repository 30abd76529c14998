//! This crate's default seccomp profile: deny by default, allow what ordinary programs call, and
//! unlock groups of calls by capability.
//!
//! Names a runtime's libseccomp does not know (a newer call, or one of another architecture) are
//! skipped by runc and crun, so every architecture's names can be listed once. runc also answers
//! `ENOSYS` rather than the default `EPERM` for calls newer than any the filter names, so a libc
//! that probes a new call falls back to the old one.

use oci_spec::runtime::{
    Arch, Capabilities, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg,
    LinuxSeccompArgBuilder, LinuxSeccompOperator, LinuxSyscall,
};

/// Calls any program may make: the kernel checks their own permissions, and none of them reaches
/// kernel state shared with the host that a container should not touch.
#[rustfmt::skip]
const ALLOWED: &[&str] = &[
    // files and directories
    "access", "chdir", "chmod", "chown", "close", "close_range", "copy_file_range", "creat",
    "dup", "dup2", "dup3", "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir",
    "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "flock",
    "fstat", "fstatfs", "fsync", "ftruncate", "getcwd", "getdents", "getdents64", "lchown",
    "link", "linkat", "lseek", "lstat", "mkdir", "mkdirat", "mknod", "mknodat", "newfstatat",
    "open", "openat", "openat2", "pipe", "pipe2", "pread64", "preadv", "preadv2", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "rename",
    "renameat", "renameat2", "rmdir", "sendfile", "splice", "stat", "statfs", "statx",
    "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "tee", "truncate", "umask",
    "unlink", "unlinkat", "utime", "utimensat", "utimes", "futimesat", "vmsplice", "write",
    "writev", "cachestat",
    // extended attributes
    "fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr", "lgetxattr",
    "listxattr", "llistxattr", "lremovexattr", "lsetxattr", "removexattr", "setxattr",
    "getxattrat", "listxattrat", "removexattrat", "setxattrat",
    // waiting on descriptors, events and timers
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "inotify_add_watch", "inotify_init", "inotify_init1",
    "inotify_rm_watch", "poll", "ppoll", "pselect6", "select", "signalfd", "signalfd4",
    "timerfd_create", "timerfd_gettime", "timerfd_settime",
    // asynchronous I/O (io_uring stays out: a frequent source of kernel flaws)
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
    // memory
    "brk", "get_mempolicy", "madvise", "membarrier", "memfd_create", "mincore", "mlock",
    "mlock2", "mlockall", "mmap", "mprotect", "mremap", "msync", "munlock", "munlockall",
    "munmap", "pkey_alloc", "pkey_free", "pkey_mprotect", "remap_file_pages",
    "map_shadow_stack",
    // processes, threads and signals
    "arch_prctl", "capget", "capset", "execve", "execveat", "exit", "exit_group", "fork",
    "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "get_robust_list",
    "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrlimit", "getrusage",
    "getsid", "gettid", "ioprio_get", "ioprio_set", "kill", "pause", "pidfd_getfd",
    "pidfd_open", "pidfd_send_signal", "prctl", "prlimit64", "restart_syscall", "rseq",
    "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn",
    "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getaffinity", "sched_getattr", "sched_getparam",
    "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_setattr",
    "sched_setparam", "sched_setscheduler", "sched_yield", "set_robust_list",
    "set_tid_address", "setpgid", "setpriority", "setrlimit", "setsid", "sigaltstack",
    "tgkill", "tkill", "vfork", "wait4", "waitid",
    // users and groups (the kernel checks CAP_SETUID/CAP_SETGID)
    "getegid", "geteuid", "getgid", "getgroups", "getresgid", "getresuid", "getuid",
    "setfsgid", "setfsuid", "setgid", "setgroups", "setregid", "setresgid", "setresuid",
    "setreuid", "setuid",
    // time (reading it; adjtimex only changes the clock with CAP_SYS_TIME)
    "adjtimex", "alarm", "clock_getres", "clock_gettime", "clock_nanosleep", "getitimer",
    "gettimeofday", "nanosleep", "setitimer", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_settime", "times",
    // sockets
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt",
    "listen", "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto",
    "setsockopt", "shutdown", "socket", "socketpair",
    // System V and POSIX IPC (namespaced)
    "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
    "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop", "semtimedop",
    "shmat", "shmctl", "shmdt", "shmget",
    // the system as the container sees it
    "getcpu", "getrandom", "ioctl", "sysinfo", "uname",
    // sandboxing a program further
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "seccomp",
    // 32-bit x86 and arm names of the calls above
    "_llseek", "_newselect", "arm_fadvise64_64", "arm_sync_file_range", "breakpoint",
    "cacheflush", "chown32", "clock_getres_time64", "clock_gettime64",
    "clock_nanosleep_time64", "fadvise64_64", "fchown32", "fcntl64", "fstat64", "fstatat64",
    "fstatfs64", "ftruncate64", "futex_time64", "getegid32", "geteuid32", "getgid32",
    "getgroups32", "getresgid32", "getresuid32", "getuid32", "io_pgetevents_time64", "ipc",
    "lchown32", "lstat64", "mmap2", "mq_timedreceive_time64", "mq_timedsend_time64", "nice",
    "ppoll_time64", "pselect6_time64", "recv", "recvmmsg_time64", "rt_sigtimedwait_time64",
    "sched_rr_get_interval_time64", "semtimedop_time64", "send", "sendfile64", "set_tls",
    "setfsgid32", "setfsuid32", "setgid32", "setgroups32", "setregid32", "setresgid32",
    "setresuid32", "setreuid32", "setuid32", "sigaction", "signal", "sigpending",
    "sigprocmask", "sigreturn", "sigsuspend", "socketcall", "stat64", "statfs64",
    "sync_file_range2", "timer_gettime64", "timer_settime64", "timerfd_gettime64",
    "timerfd_settime64", "truncate64", "ugetrlimit", "utimensat_time64", "waitpid",
];

/// Calls useful only with a capability: listed when the container has any of `caps`. Without it
/// the kernel would refuse most of them anyway; the filter also keeps the kernel code behind
/// them out of reach.
#[rustfmt::skip]
const GATED: &[(&[Capability], &[&str])] = &[
    (
        &[Capability::SysAdmin],
        &[
            // mounts, old and new API
            "fsconfig", "fsmount", "fsopen", "fspick", "mount", "mount_setattr", "move_mount",
            "open_tree", "pivot_root", "umount", "umount2",
            // namespaces (clone's namespace flags are handled apart)
            "setns", "unshare",
            // host-wide or filesystem-wide administration
            "fanotify_init", "lookup_dcookie", "name_to_handle_at", "quotactl", "quotactl_fd",
            "setdomainname", "sethostname", "swapoff", "swapon",
        ],
    ),
    (&[Capability::Bpf, Capability::SysAdmin], &["bpf"]),
    (&[Capability::Perfmon, Capability::SysAdmin], &["perf_event_open"]),
    (
        &[Capability::SysPtrace],
        &["kcmp", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace"],
    ),
    (
        &[Capability::SysModule],
        &["create_module", "delete_module", "finit_module", "init_module"],
    ),
    (&[Capability::SysBoot], &["kexec_file_load", "kexec_load", "reboot"]),
    (
        &[Capability::SysTime],
        &[
            "clock_adjtime", "clock_adjtime64", "clock_settime", "clock_settime64",
            "settimeofday", "stime",
        ],
    ),
    (&[Capability::SysChroot], &["chroot"]),
    (
        &[Capability::SysNice],
        &["mbind", "migrate_pages", "move_pages", "set_mempolicy", "set_mempolicy_home_node"],
    ),
    (&[Capability::Syslog], &["syslog"]),
    (&[Capability::SysPacct], &["acct"]),
    (&[Capability::SysRawio], &["ioperm", "iopl"]),
    (&[Capability::DacReadSearch], &["open_by_handle_at"]),
    (&[Capability::SysTtyConfig], &["vhangup"]),
];

/// `personality(2)` values that change nothing dangerous: PER_LINUX, PER_LINUX32, UNAME26,
/// PER_LINUX32|UNAME26, and 0xffffffff, which only asks for the current persona. Others would,
/// for instance, turn off address space randomization (ADDR_NO_RANDOMIZE).
const PERSONALITIES: &[u64] = &[0x0, 0x0008, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

/// clone(2)'s namespace flags: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
/// (CLONE_NEWTIME shares its bit with the exit signal in clone(2); only unshare takes it).
const CLONE_NAMESPACE_FLAGS: u64 =
    0x0002_0000 | 0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000;

/// The default profile for a container whose (bounding) capability set is `capabilities`.
///
/// Calls not listed fail with `EPERM`. Without `CAP_SYS_ADMIN`, `clone` is allowed only without
/// namespace flags and `clone3` fails with `ENOSYS`: seccomp cannot read clone3's flags (they
/// are in memory), and `ENOSYS` makes glibc fall back to `clone`. `personality` takes only the
/// harmless personas. The architectures are the build target's and those it runs binaries of:
/// x86_64 with x86 and x32, aarch64 with arm; others leave the runtime's native one.
pub fn default_profile(capabilities: &Capabilities) -> LinuxSeccomp {
    let has_any = |caps: &[Capability]| caps.iter().any(|c| capabilities.contains(c));
    let mut syscalls = vec![allow(ALLOWED, None)];
    for &value in PERSONALITIES {
        syscalls.push(allow(
            &["personality"],
            Some(arg(0, value, 0, LinuxSeccompOperator::ScmpCmpEq)),
        ));
    }
    if has_any(&[Capability::SysAdmin]) {
        syscalls.push(allow(&["clone", "clone3"], None));
    } else {
        syscalls.push(allow(
            &["clone"],
            Some(arg(
                0,
                CLONE_NAMESPACE_FLAGS,
                0,
                LinuxSeccompOperator::ScmpCmpMaskedEq,
            )),
        ));
        syscalls.push(errno(&["clone3"], libc::ENOSYS));
    }
    for (caps, names) in GATED {
        if has_any(caps) {
            syscalls.push(allow(names, None));
        }
    }
    let mut profile = LinuxSeccomp::default();
    profile
        .set_default_action(LinuxSeccompAction::ScmpActErrno)
        .set_default_errno_ret(Some(libc::EPERM as u32))
        .set_architectures(architectures())
        .set_syscalls(Some(syscalls));
    profile
}

fn architectures() -> Option<Vec<Arch>> {
    if cfg!(target_arch = "x86_64") {
        Some(vec![
            Arch::ScmpArchX86_64,
            Arch::ScmpArchX86,
            Arch::ScmpArchX32,
        ])
    } else if cfg!(target_arch = "aarch64") {
        Some(vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm])
    } else {
        None
    }
}

fn allow(names: &[&str], condition: Option<LinuxSeccompArg>) -> LinuxSyscall {
    let mut rule = LinuxSyscall::default();
    rule.set_names(names.iter().map(|&n| n.to_owned()).collect())
        .set_action(LinuxSeccompAction::ScmpActAllow)
        .set_args(condition.map(|a| vec![a]));
    rule
}

fn errno(names: &[&str], errno: i32) -> LinuxSyscall {
    let mut rule = LinuxSyscall::default();
    rule.set_names(names.iter().map(|&n| n.to_owned()).collect())
        .set_action(LinuxSeccompAction::ScmpActErrno)
        .set_errno_ret(Some(errno as u32));
    rule
}

/// An argument condition; for `ScmpCmpMaskedEq`, `value` is the mask and `value_two` what the
/// masked argument must equal (the runtime spec's and libseccomp's order).
fn arg(index: usize, value: u64, value_two: u64, op: LinuxSeccompOperator) -> LinuxSeccompArg {
    LinuxSeccompArgBuilder::default()
        .index(index)
        .value(value)
        .value_two(value_two)
        .op(op)
        .build()
        // every field is set, and the builder has defaults for all of them anyway
        .expect("a complete seccomp argument builds")
}

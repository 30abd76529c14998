//! CRI-O's defaults: capabilities, masked and read-only paths, mounts and devices.

use oci_spec::runtime::{Capability, LinuxDevice, LinuxDeviceType, Mount};

/// CRI-O's default capabilities (`default_capabilities` in crio.conf).
pub const DEFAULT_CAPABILITIES: &[Capability] = &[
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::Kill,
];

/// Every capability the spec names: a privileged container's set.
pub const ALL_CAPABILITIES: &[Capability] = &[
    Capability::AuditControl,
    Capability::AuditRead,
    Capability::AuditWrite,
    Capability::BlockSuspend,
    Capability::Bpf,
    Capability::CheckpointRestore,
    Capability::Chown,
    Capability::DacOverride,
    Capability::DacReadSearch,
    Capability::Fowner,
    Capability::Fsetid,
    Capability::IpcLock,
    Capability::IpcOwner,
    Capability::Kill,
    Capability::Lease,
    Capability::LinuxImmutable,
    Capability::MacAdmin,
    Capability::MacOverride,
    Capability::Mknod,
    Capability::NetAdmin,
    Capability::NetBindService,
    Capability::NetBroadcast,
    Capability::NetRaw,
    Capability::Perfmon,
    Capability::Setgid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::Setuid,
    Capability::SysAdmin,
    Capability::SysBoot,
    Capability::SysChroot,
    Capability::SysModule,
    Capability::SysNice,
    Capability::SysPacct,
    Capability::SysPtrace,
    Capability::SysRawio,
    Capability::SysResource,
    Capability::SysTime,
    Capability::SysTtyConfig,
    Capability::Syslog,
    Capability::WakeAlarm,
];

/// Paths CRI-O masks (podman's list plus `/proc/asound`): a container sees them empty.
pub const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
    "/sys/fs/selinux",
];

/// Paths CRI-O makes read-only.
pub const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The `PATH` a container gets when neither the image nor the caller sets one.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// `/proc`, `/dev` (a tmpfs), `/dev/pts`, `/dev/shm`, `/dev/mqueue`, `/sys` and its cgroups;
/// `/sys` and the cgroups read-only unless privileged.
pub(crate) fn mounts(privileged: bool) -> Vec<Mount> {
    let sys_ro: &[&str] = if privileged { &["rw"] } else { &["ro"] };
    let mut out = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        ),
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        ),
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        ),
    ];
    let mut sys = vec!["nosuid", "noexec", "nodev"];
    sys.extend_from_slice(sys_ro);
    out.push(mount("/sys", "sysfs", "sysfs", &sys));
    let mut cgroup = vec!["nosuid", "noexec", "nodev", "relatime"];
    cgroup.extend_from_slice(sys_ro);
    out.push(mount("/sys/fs/cgroup", "cgroup", "cgroup", &cgroup));
    out
}

fn mount(destination: &str, typ: &str, source: &str, options: &[&str]) -> Mount {
    let mut m = Mount::default();
    m.set_destination(destination.into())
        .set_typ(Some(typ.to_owned()))
        .set_source(Some(source.into()))
        .set_options(Some(options.iter().map(|&o| o.to_owned()).collect()));
    m
}

/// The character devices every container has: null, zero, full, random, urandom and tty, as
/// `(path, major, minor)`.
pub(crate) const DEFAULT_DEVICES: &[(&str, i64, i64)] = &[
    ("/dev/null", 1, 3),
    ("/dev/zero", 1, 5),
    ("/dev/full", 1, 7),
    ("/dev/random", 1, 8),
    ("/dev/urandom", 1, 9),
    ("/dev/tty", 5, 0),
];

pub(crate) fn devices() -> Vec<LinuxDevice> {
    DEFAULT_DEVICES
        .iter()
        .map(|&(path, major, minor)| {
            let mut d = LinuxDevice::default();
            d.set_path(path.into())
                .set_typ(LinuxDeviceType::C)
                .set_major(major)
                .set_minor(minor)
                .set_file_mode(Some(0o666))
                .set_uid(Some(0))
                .set_gid(Some(0));
            d
        })
        .collect()
}

/// The kernel's number of a capability (`capability.h`), for masks such as `CapBnd`.
pub(crate) fn cap_number(cap: Capability) -> Option<u32> {
    use Capability as C;
    Some(match cap {
        C::Chown => 0,
        C::DacOverride => 1,
        C::DacReadSearch => 2,
        C::Fowner => 3,
        C::Fsetid => 4,
        C::Kill => 5,
        C::Setgid => 6,
        C::Setuid => 7,
        C::Setpcap => 8,
        C::LinuxImmutable => 9,
        C::NetBindService => 10,
        C::NetBroadcast => 11,
        C::NetAdmin => 12,
        C::NetRaw => 13,
        C::IpcLock => 14,
        C::IpcOwner => 15,
        C::SysModule => 16,
        C::SysRawio => 17,
        C::SysChroot => 18,
        C::SysPtrace => 19,
        C::SysPacct => 20,
        C::SysAdmin => 21,
        C::SysBoot => 22,
        C::SysNice => 23,
        C::SysResource => 24,
        C::SysTime => 25,
        C::SysTtyConfig => 26,
        C::Mknod => 27,
        C::Lease => 28,
        C::AuditWrite => 29,
        C::AuditControl => 30,
        C::Setfcap => 31,
        C::MacOverride => 32,
        C::MacAdmin => 33,
        C::Syslog => 34,
        C::WakeAlarm => 35,
        C::BlockSuspend => 36,
        C::AuditRead => 37,
        C::Perfmon => 38,
        C::Bpf => 39,
        C::CheckpointRestore => 40,
        #[expect(
            unreachable_patterns,
            reason = "oci-spec may add capabilities; until it does, every one is named above"
        )]
        _ => return None,
    })
}

/// This process's capability bounding set (`CapBnd` in `/proc/self/status`); `None` when it
/// cannot be read.
pub(crate) fn own_bounding_set() -> Option<u64> {
    let status = safe_file::read_regular(
        std::path::Path::new("/proc/self/status"),
        64 << 10,
        safe_file::Symlinks::Follow,
    )
    .ok()?;
    let text = String::from_utf8_lossy(&status);
    let hex = text.lines().find_map(|l| l.strip_prefix("CapBnd:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

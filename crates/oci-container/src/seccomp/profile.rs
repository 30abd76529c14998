//! Profile files in the JSON format of Docker and containers/common, a superset of the runtime
//! spec's `LinuxSeccomp`, converted for one container on this host.
//!
//! The format's own rules: a rule's `includes` apply it only when the container has every
//! capability in `caps`, the host's architecture is in `arches` and its kernel is at least
//! `minKernel`; its `excludes` drop it when the container has any capability in `caps`, the
//! architecture is in `arches` or the kernel is at least `minKernel`. `archMap` lists, per
//! native architecture, the sub-architectures to allow with it. `errno`/`defaultErrno` (names or
//! numbers) win over `errnoRet`/`defaultErrnoRet`. A `null` is as good as a missing field.
//!
//! Every field is checked whether or not its rule applies to this container, so a file is valid
//! or not whatever the container. Unknown fields (`comment`...) are ignored, as Docker does.

use oci_spec::runtime::{
    Arch, Capabilities, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder,
    LinuxSeccompFilterFlag, LinuxSeccompOperator, LinuxSyscall,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::json::Obj;

/// What the conversion depends on besides the file and the container's capabilities.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    /// libseccomp's name of the native architecture (`amd64`, `arm64`), as `arches` use.
    pub(crate) arch: &'static str,
    /// The native architecture as `archMap` names it.
    pub(crate) seccomp_arch: Option<Arch>,
    /// The kernel's version and major revision (`6.1` of `6.1.0-18-amd64`).
    pub(crate) kernel: Option<(u64, u64)>,
}

impl Host {
    pub(crate) fn current() -> Host {
        let (arch, seccomp_arch) = super::native_arch();
        let kernel = nix::sys::utsname::uname()
            .ok()
            .and_then(|u| u.release().to_str().and_then(kernel_version));
        Host {
            arch,
            seccomp_arch,
            kernel,
        }
    }
}

/// libseccomp's architecture names, which `includes.arches` and `excludes.arches` use.
const ARCH_NAMES: &[&str] = &[
    "x86",
    "amd64",
    "x32",
    "arm",
    "arm64",
    "mips",
    "mipsel",
    "mips64",
    "mips64n32",
    "mipsel64",
    "mipsel64n32",
    "ppc",
    "ppc64",
    "ppc64le",
    "s390",
    "s390x",
    "parisc",
    "parisc64",
    "riscv64",
    "loong64",
    "m68k",
    "sh",
    "sheb",
];

/// errno names a profile may use in `errno` and `defaultErrno`.
const ERRNO_NAMES: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("ESRCH", libc::ESRCH),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("ENOEXEC", libc::ENOEXEC),
    ("EBADF", libc::EBADF),
    ("ECHILD", libc::ECHILD),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("ENOTTY", libc::ENOTTY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("EPIPE", libc::EPIPE),
    ("ERANGE", libc::ERANGE),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTSUP", libc::ENOTSUP),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("EPROTONOSUPPORT", libc::EPROTONOSUPPORT),
];

/// The highest argument index a system call has.
const MAX_ARG_INDEX: u64 = 5;

/// Converts the profile `bytes` for a container with `caps` on `host`; the error is
/// `field: reason`.
pub(crate) fn convert(
    bytes: &[u8],
    caps: &Capabilities,
    host: &Host,
) -> Result<LinuxSeccomp, String> {
    let root: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let root = Obj::new(&root, String::new())?;

    let default_action = match root.str("defaultAction")? {
        Some(name) => action(&root.field("defaultAction"), name)?,
        None => return Err("defaultAction: missing".to_owned()),
    };
    let default_errno = errno(&root, "defaultErrno", "defaultErrnoRet")?;

    let architectures = root.strings("architectures")?;
    let arch_map = root.array("archMap")?;
    if !architectures.is_empty() && !arch_map.is_empty() {
        return Err("archMap: architectures is set too; use one of them".to_owned());
    }
    let mut arches = Vec::new();
    for (i, name) in architectures.iter().enumerate() {
        arches.push(arch(&format!("architectures[{i}]"), name)?);
    }
    for (i, entry) in arch_map.iter().enumerate() {
        let entry = Obj::new(entry, format!("archMap[{i}]"))?;
        let main = match entry.str("architecture")? {
            Some(name) => arch(&entry.field("architecture"), name)?,
            None => return Err(format!("{}: missing", entry.field("architecture"))),
        };
        let mut subs = Vec::new();
        for (j, name) in entry.strings("subArchitectures")?.iter().enumerate() {
            subs.push(arch(
                &format!("{}[{j}]", entry.field("subArchitectures")),
                name,
            )?);
        }
        // The first entry for the native architecture wins, as in Docker.
        if arches.is_empty() && host.seccomp_arch == Some(main) {
            arches.push(main);
            arches.extend(subs);
        }
    }

    let mut flags = Vec::new();
    for (i, name) in root.strings("flags")?.iter().enumerate() {
        flags.push(
            parse_enum::<LinuxSeccompFilterFlag>(name)
                .ok_or_else(|| format!("flags[{i}]: unknown flag {name:?}"))?,
        );
    }
    // A listener receives the container's seccomp notifications: which agent gets them is the
    // runtime daemon's to choose, not a profile's.
    for key in ["listenerPath", "listenerMetadata"] {
        if root.get(key).is_some() {
            return Err(format!("{key}: seccomp agents are not supported"));
        }
    }

    let mut syscalls = Vec::new();
    for (i, rule) in root.array("syscalls")?.iter().enumerate() {
        let rule = Obj::new(rule, format!("syscalls[{i}]"))?;
        if let Some(syscall) = syscall(&rule, caps, host)? {
            syscalls.push(syscall);
        }
    }

    let mut out = LinuxSeccomp::default();
    out.set_default_action(default_action)
        .set_default_errno_ret(default_errno)
        .set_architectures((!arches.is_empty()).then_some(arches))
        .set_flags((!flags.is_empty()).then_some(flags))
        .set_syscalls((!syscalls.is_empty()).then_some(syscalls));
    Ok(out)
}

/// One entry of `syscalls`: checked, then `None` when its includes/excludes leave it out.
fn syscall(
    rule: &Obj<'_>,
    caps: &Capabilities,
    host: &Host,
) -> Result<Option<LinuxSyscall>, String> {
    let name = rule.str("name")?;
    let names = rule.strings("names")?;
    let names: Vec<String> = match (name, names.is_empty()) {
        (Some(_), false) => {
            return Err(format!("{}: name and names are both set", rule.at));
        }
        (Some(name), true) => {
            syscall_name(&rule.field("name"), name)?;
            vec![name.to_owned()]
        }
        (None, false) => {
            for (j, name) in names.iter().enumerate() {
                syscall_name(&format!("{}[{j}]", rule.field("names")), name)?;
            }
            names.iter().map(|&n| n.to_owned()).collect()
        }
        (None, true) => {
            return Err(format!("{}: no system call named", rule.field("names")));
        }
    };
    let act = match rule.str("action")? {
        Some(name) => action(&rule.field("action"), name)?,
        None => return Err(format!("{}: missing", rule.field("action"))),
    };
    let errno_ret = errno(rule, "errno", "errnoRet")?;

    let mut args = Vec::new();
    for (j, value) in rule.array("args")?.iter().enumerate() {
        let a = Obj::new(value, format!("{}[{j}]", rule.field("args")))?;
        let index = a
            .u64("index")?
            .ok_or_else(|| format!("{}: missing", a.field("index")))?;
        if index > MAX_ARG_INDEX {
            return Err(format!(
                "{}: {index} is not an argument index (0 to {MAX_ARG_INDEX})",
                a.field("index")
            ));
        }
        let value = a
            .u64("value")?
            .ok_or_else(|| format!("{}: missing", a.field("value")))?;
        let value_two = a.u64("valueTwo")?.unwrap_or(0);
        let op = match a.str("op")? {
            Some(name) => parse_enum::<LinuxSeccompOperator>(name)
                .ok_or_else(|| format!("{}: unknown operator {name:?}", a.field("op")))?,
            None => return Err(format!("{}: missing", a.field("op"))),
        };
        let arg = LinuxSeccompArgBuilder::default()
            .index(index as usize)
            .value(value)
            .value_two(value_two)
            .op(op)
            .build()
            .map_err(|e| format!("{}: {e}", a.at))?;
        args.push(arg);
    }

    let includes = Filter::parse(rule, "includes")?;
    let excludes = Filter::parse(rule, "excludes")?;
    if !includes.applies(caps, host, true)? || excludes.applies(caps, host, false)? {
        return Ok(None);
    }
    let mut out = LinuxSyscall::default();
    out.set_names(names)
        .set_action(act)
        .set_errno_ret(errno_ret)
        .set_args((!args.is_empty()).then_some(args));
    Ok(Some(out))
}

/// A rule's `includes` or `excludes`.
struct Filter {
    field: String,
    caps: Vec<Capability>,
    arches: Vec<String>,
    min_kernel: Option<(u64, u64)>,
}

impl Filter {
    fn parse(rule: &Obj<'_>, key: &str) -> Result<Filter, String> {
        let field = rule.field(key);
        let Some(obj) = rule.obj(key)? else {
            return Ok(Filter {
                field,
                caps: Vec::new(),
                arches: Vec::new(),
                min_kernel: None,
            });
        };
        let mut caps = Vec::new();
        for (k, name) in obj.strings("caps")?.iter().enumerate() {
            caps.push(parse_enum::<Capability>(name).ok_or_else(|| {
                format!("{}[{k}]: unknown capability {name:?}", obj.field("caps"))
            })?);
        }
        let mut arches = Vec::new();
        for (k, name) in obj.strings("arches")?.iter().enumerate() {
            if !ARCH_NAMES.contains(name) {
                return Err(format!(
                    "{}[{k}]: unknown architecture {name:?}",
                    obj.field("arches")
                ));
            }
            arches.push((*name).to_owned());
        }
        let min_kernel = match obj.str("minKernel")? {
            Some(v) => Some(kernel_version(v).ok_or_else(|| {
                format!(
                    "{}: {v:?} is not a kernel version such as \"5.8\"",
                    obj.field("minKernel")
                )
            })?),
            None => None,
        };
        Ok(Filter {
            field,
            caps,
            arches,
            min_kernel,
        })
    }

    /// For `includes` (`all`): whether every condition holds (true when there is none). For
    /// `excludes`: whether any holds.
    fn applies(&self, caps: &Capabilities, host: &Host, all: bool) -> Result<bool, String> {
        let mut conditions = Vec::new();
        if !self.caps.is_empty() {
            conditions.push(if all {
                self.caps.iter().all(|c| caps.contains(c))
            } else {
                self.caps.iter().any(|c| caps.contains(c))
            });
        }
        if !self.arches.is_empty() {
            conditions.push(self.arches.iter().any(|a| a == host.arch));
        }
        if let Some(min) = self.min_kernel {
            let kernel = host.kernel.ok_or_else(|| {
                format!(
                    "{}.minKernel: the host's kernel version is unknown",
                    self.field
                )
            })?;
            conditions.push(kernel >= min);
        }
        Ok(if all {
            conditions.iter().all(|&c| c)
        } else {
            conditions.iter().any(|&c| c)
        })
    }
}

fn action(field: &str, name: &str) -> Result<LinuxSeccompAction, String> {
    let action = parse_enum::<LinuxSeccompAction>(name)
        .ok_or_else(|| format!("{field}: unknown action {name:?}"))?;
    if action == LinuxSeccompAction::ScmpActNotify {
        return Err(format!(
            "{field}: {name} needs a seccomp agent, which is not supported"
        ));
    }
    Ok(action)
}

fn arch(field: &str, name: &str) -> Result<Arch, String> {
    parse_enum::<Arch>(name).ok_or_else(|| format!("{field}: unknown architecture {name:?}"))
}

/// `errno` (a name or a number) if set, else `errnoRet` (a number).
fn errno(obj: &Obj<'_>, name_key: &str, number_key: &str) -> Result<Option<u32>, String> {
    if let Some(name) = obj.str(name_key)? {
        if let Ok(n) = name.parse::<u32>() {
            return Ok(Some(n));
        }
        return ERRNO_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| Some(v as u32))
            .ok_or_else(|| format!("{}: unknown errno {name:?}", obj.field(name_key)));
    }
    match obj.u64(number_key)? {
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| format!("{}: {n} is too large", obj.field(number_key))),
        None => Ok(None),
    }
}

/// A system call name as libseccomp knows them: lower-case letters, digits and `_`.
fn syscall_name(field: &str, name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!("{field}: {name:?} is not a system call name"));
    }
    Ok(())
}

/// `X.Y` of a kernel release (`6.1.0-18-amd64`, `5.8`, `3.12-rc5`); `None` without both.
pub(crate) fn kernel_version(release: &str) -> Option<(u64, u64)> {
    let mut parts = release.splitn(3, ['.', '-', '+', '_']);
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// Parses a string the way the spec's types deserialize it.
fn parse_enum<T: DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(Value::String(name.to_owned())).ok()
}

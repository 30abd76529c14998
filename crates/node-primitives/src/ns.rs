//! Namespaces pinned to files, as `ip netns add`, CRI-O's `pinns` and its namespace manager
//! keep them: a namespace bind-mounted onto an empty file lives on with no process in it, and
//! the file's path is what a runtime hands to whoever joins it.
//!
//! [`Pins`] is the manager of one pin directory: it prepares the directory ([`Pins::shared`]
//! makes it a shared mount point first, as `ip netns` treats `/run/netns`), makes new
//! namespaces of one or more [`NsKind`]s on a thread of its own and pins each
//! ([`Pins::pin_new`]), or pins a namespace a process already has ([`Pins::pin_from`]).
//! [`unpin`] detaches and removes a pin; [`is_namespace`] tells a live pin (or a
//! `/proc/<pid>/ns/<kind>` link) of one kind from a bare file a reboot left.
//! [`connect_loopback`] opens a TCP connection to a port on a namespace's loopback (a port
//! forward's), from a thread of its own that enters it and ends.
//!
//! # Threads
//!
//! `unshare(2)` moves the calling *thread*. [`Pins::pin_new`] does it on a thread of its own
//! that ends once the namespaces are pinned, so no caller's thread (a tokio worker, say) ever
//! moves. The bind mounts are made from that thread too, in the process's own mount namespace
//! (never one made for the purpose), so child processes see them.

use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd as _, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::io::Errno;
use rustix::mount::{
    MountPropagationFlags, UnmountFlags, mount_bind, mount_bind_recursive, mount_change, unmount,
};
use rustix::thread::UnshareFlags;

use crate::error::{Error, PinStep, Result};

mod connect;
pub use connect::connect_loopback;

/// Serialises [`Pins::prepare`] within the process, so two callers cannot both bind a directory
/// onto itself (which would stack two mounts and leak one).
static PREPARE_LOCK: Mutex<()> = Mutex::new(());

/// `NSFS_MAGIC` (linux/magic.h): the file system every namespace file is on.
const NSFS_MAGIC: u64 = 0x6e73_6673;

/// A kind of namespace that can be pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NsKind {
    /// Network.
    Net,
    /// System V IPC and POSIX message queues.
    Ipc,
    /// Host and domain name.
    Uts,
    /// Process ids: pinned only from a process ([`Pins::pin_from`]), since the namespace a
    /// thread unshares is its children's, not its own.
    Pid,
}

impl NsKind {
    /// Its name under `/proc/<pid>/ns/`: `net`, `ipc`, `uts`, `pid`.
    pub fn proc_name(self) -> &'static str {
        match self {
            NsKind::Net => "net",
            NsKind::Ipc => "ipc",
            NsKind::Uts => "uts",
            NsKind::Pid => "pid",
        }
    }

    /// Its `CLONE_NEW*` flag.
    pub fn clone_flag(self) -> i32 {
        match self {
            NsKind::Net => libc::CLONE_NEWNET,
            NsKind::Ipc => libc::CLONE_NEWIPC,
            NsKind::Uts => libc::CLONE_NEWUTS,
            NsKind::Pid => libc::CLONE_NEWPID,
        }
    }

    fn unshare_flag(self) -> Option<UnshareFlags> {
        match self {
            NsKind::Net => Some(UnshareFlags::NEWNET),
            NsKind::Ipc => Some(UnshareFlags::NEWIPC),
            NsKind::Uts => Some(UnshareFlags::NEWUTS),
            NsKind::Pid => None,
        }
    }
}

/// What the pin directory's mount propagation is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Left as it is: the directory is only created.
    Unchanged,
    /// A shared mount point (the directory bound onto itself first when it is not a mount
    /// point). Unmounting a pin then propagates to every mount namespace that copied it
    /// (containers, `ip netns exec`, services with a private `/tmp`), so [`unpin`] really frees
    /// the namespace, and pins made later show up in those namespaces too.
    Shared,
}

/// Whether a pin's file may exist before it is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refused (`AlreadyExists`), so two owners can never share, or stack on, one pin.
    Refuse,
    /// Used as it is (a pin file its owner made before, or a bare one left by a crash).
    Reuse,
}

/// The manager of one pin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    dir: PathBuf,
    propagation: Propagation,
}

impl Pins {
    /// Pins under `dir`, whose mount propagation is left as it is.
    pub fn new(dir: impl Into<PathBuf>) -> Pins {
        Pins {
            dir: dir.into(),
            propagation: Propagation::Unchanged,
        }
    }

    /// Pins under `dir`, made a shared mount point first (see [`Propagation::Shared`]).
    pub fn shared(dir: impl Into<PathBuf>) -> Pins {
        Pins {
            dir: dir.into(),
            propagation: Propagation::Shared,
        }
    }

    /// The pin directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pin called `name` (a file name): `<dir>/<name>`.
    pub fn path(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.dir.join(name.as_ref())
    }

    /// Creates the directory (and its parents, mode 0755) if missing, and makes its mount
    /// propagation what the manager says. Idempotent within a process.
    ///
    /// # Errors
    ///
    /// [`Error::Pin`] with [`PinStep::PrepareDir`].
    pub fn prepare(&self) -> Result<()> {
        let dir = self.dir.as_path();
        let err = |source: io::Error| Error::Pin {
            step: PinStep::PrepareDir,
            path: dir.to_owned(),
            source,
        };
        let _guard = PREPARE_LOCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(err)?;
        if self.propagation == Propagation::Unchanged {
            return Ok(());
        }
        let shared = MountPropagationFlags::SHARED | MountPropagationFlags::REC;
        match mount_change(dir, shared) {
            Ok(()) => Ok(()),
            // EINVAL: not a mount point yet. Bind the directory onto itself (recursively, so
            // pins made before are carried over) and try again. On a node whose `/` is shared
            // (systemd makes it so) the new mount would join the peer group of the mount it
            // was bound from, and every pin would be mounted twice: once here and once,
            // hidden, below the self-bind. Made private first, it gets a peer group of its own.
            Err(Errno::INVAL) => {
                mount_bind_recursive(dir, dir).map_err(|e| err(e.into()))?;
                mount_change(dir, MountPropagationFlags::PRIVATE).map_err(|e| err(e.into()))?;
                mount_change(dir, shared).map_err(|e| err(e.into()))
            }
            Err(e) => Err(err(e.into())),
        }
    }

    /// Detaches the directory's self-bind that [`Pins::prepare`] made, and with it any pin
    /// still mounted under it; fine when it is not a mount point or is missing. Only for
    /// directories this program prepared: on one that is a mount point for another reason (a
    /// tmpfs, the system's `/run/netns`) it unmounts that.
    ///
    /// # Errors
    ///
    /// [`Error::Pin`] with [`PinStep::ReleaseDir`].
    pub fn release(&self) -> Result<()> {
        match unmount(&self.dir, UnmountFlags::DETACH) {
            Ok(()) | Err(Errno::INVAL | Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::Pin {
                step: PinStep::ReleaseDir,
                path: self.dir.clone(),
                source: e.into(),
            }),
        }
    }

    /// Makes new namespaces of the `pins`' kinds, all at once on a thread of their own, runs
    /// `setup` in them (a hostname for a UTS namespace, say: `|| Ok(())` for nothing), and
    /// binds each onto its file `<dir>/<name>` (made empty, mode 0, as `existing` allows).
    /// The directory is [prepared](Pins::prepare) first.
    ///
    /// On error, what this call made is undone: the pins it bound are unmounted and the files
    /// it created removed (a file that existed is left).
    ///
    /// # Errors
    ///
    /// [`Error::Pin`] naming the step and the pin: [`PinStep::PrepareDir`];
    /// [`PinStep::CreateFile`] (`AlreadyExists` for a file [`Existing::Refuse`] refuses);
    /// [`PinStep::Thread`]; [`PinStep::Unshare`] (no `CAP_SYS_ADMIN`; `InvalidInput` for a
    /// kind that cannot be unshared, [`NsKind::Pid`]), naming the first pin; [`PinStep::Setup`]
    /// with `setup`'s error, naming the last pin; [`PinStep::Bind`].
    pub fn pin_new<F>(&self, pins: &[(NsKind, &OsStr)], existing: Existing, setup: F) -> Result<()>
    where
        F: FnOnce() -> io::Result<()> + Send,
    {
        self.prepare()?;
        let mut flags = UnshareFlags::empty();
        for (kind, name) in pins {
            flags |= kind.unshare_flag().ok_or_else(|| Error::Pin {
                step: PinStep::Unshare,
                path: self.path(name),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a PID namespace is pinned from a process",
                ),
            })?;
        }
        let paths: Vec<(NsKind, PathBuf)> = pins
            .iter()
            .map(|(kind, name)| (*kind, self.path(name)))
            .collect();
        let mut made = Made::default();
        let result = make_and_bind(&paths, flags, existing, setup, &mut made);
        if result.is_err() {
            made.undo();
        }
        result
    }

    /// Binds the namespace `ns` (an open `/proc/<pid>/ns/<kind>`, so never another process's
    /// than the one it was opened for) onto `<dir>/<name>`, made empty (mode 0) as `existing`
    /// allows. The directory is [prepared](Pins::prepare) first.
    ///
    /// # Errors
    ///
    /// [`Error::Pin`] with [`PinStep::PrepareDir`], [`PinStep::CreateFile`] or
    /// [`PinStep::Bind`], naming the pin.
    pub fn pin_from(
        &self,
        ns: BorrowedFd<'_>,
        name: impl AsRef<OsStr>,
        existing: Existing,
    ) -> Result<PathBuf> {
        self.prepare()?;
        let path = self.path(name);
        create_file(&path, existing).map_err(|e| pin_err(PinStep::CreateFile, &path, e))?;
        let source = format!("/proc/self/fd/{}", ns.as_raw_fd());
        mount_bind(source.as_str(), &path).map_err(|e| pin_err(PinStep::Bind, &path, e.into()))?;
        Ok(path)
    }
}

/// Creates the pins' files, then makes and binds the namespaces on a thread of their own.
fn make_and_bind<F>(
    paths: &[(NsKind, PathBuf)],
    flags: UnshareFlags,
    existing: Existing,
    setup: F,
    made: &mut Made,
) -> Result<()>
where
    F: FnOnce() -> io::Result<()> + Send,
{
    let Some((_, first)) = paths.first() else {
        return Ok(());
    };
    for (_, path) in paths {
        if create_file(path, existing).map_err(|e| pin_err(PinStep::CreateFile, path, e))? {
            made.created.push(path.clone());
        }
    }
    let job = || {
        let mut bound = Vec::new();
        let result = bind_new(paths, flags, setup, &mut bound);
        (result, bound)
    };
    let (result, bound) = std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("ns-pin".to_owned())
            .spawn_scoped(scope, job)
            .map_err(|source| pin_err(PinStep::Thread, first, source))?;
        match handle.join() {
            Ok(done) => Ok(done),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })?;
    made.bound = bound;
    result
}

fn pin_err(step: PinStep, path: &Path, source: io::Error) -> Error {
    Error::Pin {
        step,
        path: path.to_owned(),
        source,
    }
}

/// On a thread of its own, which ends after: unshares `flags`, runs `setup`, binds each new
/// namespace onto its pin, pushing each pin bound onto `bound`.
fn bind_new<F>(
    paths: &[(NsKind, PathBuf)],
    flags: UnshareFlags,
    setup: F,
    bound: &mut Vec<PathBuf>,
) -> Result<()>
where
    F: FnOnce() -> io::Result<()>,
{
    let (first, last) = (&paths[0].1, &paths[paths.len() - 1].1);
    // SAFETY: the flags are only NEWNET, NEWIPC and NEWUTS (never FILES, which would leave
    // other threads' descriptors unusable here); they move this thread, which no one else uses
    // and which ends after the binds.
    unsafe { rustix::thread::unshare_unsafe(flags) }
        .map_err(|e| pin_err(PinStep::Unshare, first, e.into()))?;
    setup().map_err(|e| pin_err(PinStep::Setup, last, e))?;
    let tid = rustix::thread::gettid().as_raw_nonzero();
    for (kind, path) in paths {
        let own = format!("/proc/self/task/{tid}/ns/{}", kind.proc_name());
        mount_bind(own.as_str(), path).map_err(|e| pin_err(PinStep::Bind, path, e.into()))?;
        bound.push(path.clone());
    }
    Ok(())
}

/// What a failed [`Pins::pin_new`] undoes.
#[derive(Default)]
struct Made {
    created: Vec<PathBuf>,
    bound: Vec<PathBuf>,
}

impl Made {
    fn undo(self) {
        for path in &self.bound {
            let _ = unmount(path, UnmountFlags::DETACH | UnmountFlags::NOFOLLOW);
        }
        for path in &self.created {
            // Best effort: the error being returned is the one that matters.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// An empty, unreadable file at `path` for a bind mount; whether it was created (`false`: it
/// existed and `existing` reuses it).
///
/// # Errors
///
/// `AlreadyExists` when it exists and `existing` refuses it; the open's others.
pub fn create_file(path: &Path, existing: Existing) -> io::Result<bool> {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .mode(0o000)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW);
    match existing {
        Existing::Refuse => {
            options.create_new(true).open(path)?;
            Ok(true)
        }
        Existing::Reuse => match options.create_new(true).open(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(path)
                .map(|_| false),
            Err(e) => Err(e),
        },
    }
}

/// Detaches every mount stacked on the pin at `path` (a symbolic link there is not followed)
/// and removes its file; whether there was a file. A missing path, or a bare file left after a
/// reboot, is fine: unpinning twice succeeds. The namespace itself goes once no process, mount
/// or descriptor holds it.
///
/// # Errors
///
/// [`Error::Pin`] with [`PinStep::Unmount`] or [`PinStep::Remove`] for another reason than "not
/// there".
pub fn unpin(path: &Path) -> Result<bool> {
    // Without CAP_SYS_ADMIN the kernel says EPERM even when nothing is mounted; a bare file can
    // still be unlinked then.
    crate::mounts::detach_all_unless(path, |e| e == Errno::PERM && !on_nsfs(path))
        .map_err(|e| pin_err(PinStep::Unmount, path, e))?;
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(pin_err(PinStep::Remove, path, e)),
    }
}

/// Whether `path` is a namespace of `kind`: a live pin or a `/proc/<pid>/ns/<kind>` link. A
/// plain file (an unmounted pin), another kind of namespace, a FIFO, a socket or a device gives
/// `false`. Cheap (a `statfs`, an `open` that cannot block, an `fstatfs` and an `ioctl`); it
/// enters nothing.
///
/// # Errors
///
/// When the path cannot be examined (`NotFound` when it is missing).
pub fn is_namespace(path: &Path, kind: NsKind) -> io::Result<bool> {
    // statfs first: a plain file (an unmounted pin is mode 000) is told apart unopened.
    if !on_nsfs_checked(path)? {
        return Ok(false);
    }
    let Some(file) = open_namespace(path)? else {
        return Ok(false);
    };
    match namespace_kind(file.as_fd()) {
        Ok(found) => Ok(found == Some(kind)),
        // Kernels before 4.11 cannot tell; nsfs is the best answer they give.
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Opens `path` read-only and returns it when the descriptor is on nsfs (a namespace of some
/// kind), `None` when it is something else. The open never blocks (a FIFO without a writer
/// opens at once, `O_NONBLOCK`), and the check is on the descriptor, so the path cannot change
/// between the check and the use.
///
/// # Errors
///
/// The open's (`NotFound` when it is missing) or the `fstatfs`'s.
pub fn open_namespace(path: &Path) -> io::Result<Option<File>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        // A socket cannot be opened, and is no namespace either.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Ok(None),
        Err(e) => return Err(e),
    };
    let fs = rustix::fs::fstatfs(&file)?;
    Ok(is_nsfs(&fs).then_some(file))
}

/// The kind of the namespace behind `ns` (`NS_GET_NSTYPE`); `None` for a kind this crate does
/// not name.
///
/// # Errors
///
/// `ENOTTY` on kernels before 4.11 or for a descriptor that is no namespace.
pub fn namespace_kind(ns: BorrowedFd<'_>) -> io::Result<Option<NsKind>> {
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the descriptor, which `ns`
    // borrows open for the call.
    let kind = unsafe { libc::ioctl(ns.as_raw_fd(), libc::NS_GET_NSTYPE) };
    if kind < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok([NsKind::Net, NsKind::Ipc, NsKind::Uts, NsKind::Pid]
        .into_iter()
        .find(|k| k.clone_flag() == kind))
}

fn is_nsfs(fs: &rustix::fs::StatFs) -> bool {
    u64::try_from(fs.f_type).is_ok_and(|t| t == NSFS_MAGIC)
}

fn on_nsfs_checked(path: &Path) -> io::Result<bool> {
    Ok(is_nsfs(&rustix::fs::statfs(path)?))
}

fn on_nsfs(path: &Path) -> bool {
    on_nsfs_checked(path).unwrap_or(false)
}

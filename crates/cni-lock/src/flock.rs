//! The cross-process half: flock on a file that is removed when free.
//!
//! # Invariant
//!
//! *A lock file is unlinked only by someone holding an exclusive flock on it, and a caller holds
//! the lock only once it has the flock **and** the path still names the inode it locked.*
//!
//! Why this keeps mutual exclusion although files come and go:
//!
//! - Acquire: open (creating if needed) the path, flock the descriptor, then compare `fstat` of
//!   the descriptor with `stat` of the path (device and inode). If the path is gone or names
//!   another inode, an earlier holder unlinked our file between our `open` and our `flock`: the
//!   lock we got guards nothing, so close it and start again.
//! - While a caller holds the flock on the inode the path names, nobody can unlink that path:
//!   unlinking needs an exclusive flock, which conflicts with ours. Any other caller either waits
//!   for the same inode (and then verifies it) or opened an older, unlinked inode (and fails the
//!   check). So at most one exclusive holder, or a group of shared holders, owns the live file.
//! - Release, exclusive: still holding the flock, check the path names our inode, unlink it, then
//!   close. Waiters on the old inode wake up, fail the check and retry on a fresh file.
//! - Release, shared: try to convert our flock to exclusive without blocking. Success means no
//!   one else holds or is converting on this inode, so we are in the exclusive case above. On
//!   failure someone else still uses the file and will clean it up; we just close.
//! - Inode numbers are not reused under us: our open descriptor keeps the inode alive.
//!
//! - Keeping a file (release without unlinking) is always allowed: it only leaves the lock to a
//!   later exclusive holder to remove. Sweeping a directory takes each file exclusively, without
//!   waiting, and unlinks it under the same check as a release.
//!
//! The kernel drops a flock when its last descriptor closes, including when the holder is killed,
//! so a crashed holder never wedges anyone; its file stays until the next holder releases it. A
//! caller that times out after creating the file (without ever locking it) can also leave one
//! behind; the next release removes it.
//!
//! Waiting polls `try_lock` with a short backoff instead of blocking in `flock(2)`, because a
//! blocked `flock` cannot be given a deadline or cancelled without signals.

use std::{
    fs::{self, DirBuilder, File, OpenOptions, TryLockError},
    io,
    os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
    thread,
    time::{Duration, Instant},
};

use crate::{Error, LockMode};

/// First pause between two `try_lock` attempts; doubled up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// Longest pause between attempts: bounds how late a waiter notices a freed lock.
const MAX_BACKOFF: Duration = Duration::from_millis(10);

/// Why an attempt to take the file lock ended without it.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The deadline passed.
    Timeout,
    /// The caller gave up (its future was dropped).
    Cancelled,
    /// A file-system call failed.
    Io(Error),
}

/// A flock held on the inode the lock path names (see the module docs).
#[derive(Debug)]
pub(crate) struct Held {
    file: Option<File>,
    path: PathBuf,
    mode: LockMode,
    /// Release leaves the file in place.
    pub(crate) keep: bool,
}

/// Takes the file lock at `path` (creating `dir` if needed), polling until `deadline`
/// (`None`: forever) or until `cancel` is set.
pub(crate) fn acquire(
    dir: &Path,
    path: &Path,
    mode: LockMode,
    deadline: Option<Instant>,
    cancel: Option<&AtomicBool>,
) -> Result<Held, Failure> {
    let mut backoff = MIN_BACKOFF;
    loop {
        if let Some(held) = try_acquire(dir, path, mode).map_err(Failure::Io)? {
            return Ok(held);
        }
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(Failure::Cancelled);
        }
        let mut pause = backoff;
        if let Some(deadline) = deadline {
            let now = Instant::now();
            if now >= deadline {
                return Err(Failure::Timeout);
            }
            pause = pause.min(deadline - now);
        }
        thread::sleep(pause);
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One attempt at the file lock at `path`, without waiting: `Ok(None)` while someone else holds
/// it. A handful of syscalls on a local file, cheap enough for an async caller's fast path.
pub(crate) fn try_acquire(dir: &Path, path: &Path, mode: LockMode) -> Result<Option<Held>, Error> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))?;
    let mut replaced = 0;
    loop {
        let file = match open_lock_file(path) {
            Ok(file) => file,
            // Lock holders only ever make regular files here: a FIFO, device, socket or symlink
            // was planted, and is replaced (unlinked, never followed) rather than left to make
            // every lock on this key fail. Bounded, against a planter racing the replacement.
            Err(e) if is_not_a_lock_file(&e) && replaced < MAX_REPLACED => {
                tracing::warn!(path = %path.display(), error = %e, "not a lock file: replacing it");
                match fs::remove_file(path) {
                    Ok(()) => {}
                    Err(gone) if gone.kind() == io::ErrorKind::NotFound => {}
                    Err(other) => return Err(Error::io(path, other)),
                }
                replaced += 1;
                continue;
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        let attempt = match mode {
            LockMode::Exclusive => file.try_lock(),
            LockMode::Shared => file.try_lock_shared(),
        };
        match attempt {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(Error::io(path, e)),
        }
        match names_inode_of(path, &file) {
            Ok(true) => {
                tracing::trace!(path = %path.display(), ?mode, "lock file acquired");
                return Ok(Some(Held {
                    file: Some(file),
                    path: path.to_owned(),
                    mode,
                    keep: false,
                }));
            }
            // Unlinked by the previous holder after our open: retry on the live file.
            Ok(false) => {
                tracing::trace!(path = %path.display(), "lock file was replaced, retrying");
            }
            Err(e) => return Err(Error::io(path, e)),
        }
    }
}

/// How many planted entries [`try_acquire`] replaces at one path before it gives up.
const MAX_REPLACED: u32 = 3;

/// Whether opening failed because the path holds something other than a regular file: a
/// symlink (`ELOOP` under `O_NOFOLLOW`) or what [`open_lock_file`] refuses.
fn is_not_a_lock_file(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP) || error.kind() == io::ErrorKind::InvalidInput
}

/// Opens the lock file at `path`, creating it (mode 0600) when missing, if it is a regular file.
///
/// `O_NOFOLLOW`: a symbolic link planted at the path would otherwise send the lock to another file
/// and, since the link's own inode never matches the file's, make [`try_acquire`] retry forever.
/// `O_NONBLOCK`: a FIFO at the path is opened without waiting, then refused.
pub(crate) fn open_lock_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ))
    }
}

/// Whether `path` currently names the same inode as the open `file`.
fn names_inode_of(path: &Path, file: &File) -> io::Result<bool> {
    let ours = file.metadata()?;
    match fs::symlink_metadata(path) {
        Ok(there) => Ok(there.dev() == ours.dev() && there.ino() == ours.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

impl Held {
    /// Removes the lock file if we are its last user, then drops the flock.
    pub(crate) fn release(mut self) -> Result<(), Error> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<(), Error> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let exclusive = match self.mode {
            _ if self.keep => false,
            LockMode::Exclusive => true,
            // Converting to exclusive fails while anyone else holds the file; then they clean up.
            LockMode::Shared => file.try_lock().is_ok(),
        };
        let mut result = Ok(());
        if exclusive {
            // The check guards against someone outside this protocol having replaced the file;
            // under the invariant it always holds.
            result = match names_inode_of(&self.path, &file) {
                Ok(true) => match fs::remove_file(&self.path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
                Ok(false) => Ok(()),
                Err(e) => Err(e),
            }
            .map_err(|e| Error::io(&self.path, e));
        }
        // Closing the last descriptor drops the flock.
        drop(file);
        tracing::trace!(path = %self.path.display(), removed = exclusive, "lock file released");
        result
    }
}

/// Removes the lock files in `dir` that nobody holds and `keep` does not name; returns how many.
/// A file someone holds, or takes while we look, is left alone.
pub(crate) fn sweep(dir: &Path, keep: &dyn Fn(&str) -> bool) -> Result<usize, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if keep(name) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        // Opening without O_CREAT: a file unlinked since the listing is simply skipped.
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        if names_inode_of(&path, &file).map_err(|e| Error::io(&path, e))? {
            match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
    }
    Ok(removed)
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Err(e) = self.release_inner() {
            tracing::warn!(error = %e, "could not remove lock file; the lock is released anyway");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("locks");
        let path = dir.join("k.lock");
        (tmp, dir, path)
    }

    fn now_plus(ms: u64) -> Option<Instant> {
        Instant::now().checked_add(Duration::from_millis(ms))
    }

    #[test]
    fn exclusive_release_removes_the_file() {
        let (_tmp, dir, path) = paths();
        let held = acquire(&dir, &path, LockMode::Exclusive, now_plus(100), None).expect("free");
        assert!(path.exists());
        held.release().expect("release");
        assert!(!path.exists());
    }

    #[test]
    fn a_kept_file_stays_and_the_next_holder_removes_it() {
        let (_tmp, dir, path) = paths();
        let mut held =
            acquire(&dir, &path, LockMode::Exclusive, now_plus(100), None).expect("free");
        held.keep = true;
        held.release().expect("release");
        assert!(path.exists(), "kept");
        let again = acquire(&dir, &path, LockMode::Exclusive, now_plus(100), None).expect("free");
        again.release().expect("release");
        assert!(!path.exists());
    }

    #[test]
    fn sweep_removes_only_free_unkept_files() {
        let (_tmp, dir, path) = paths();
        let busy = dir.join("busy.lock");
        let kept = dir.join("kept.lock");
        for p in [&path, &busy, &kept] {
            let mut held =
                acquire(&dir, p, LockMode::Exclusive, now_plus(100), None).expect("free");
            held.keep = true;
        }
        let _busy = acquire(&dir, &busy, LockMode::Shared, now_plus(100), None).expect("free");
        let removed = sweep(&dir, &|name| name == "kept.lock").expect("sweep");
        assert_eq!(removed, 1);
        assert!(!path.exists());
        assert!(busy.exists() && kept.exists());
        assert_eq!(sweep(&dir.join("missing"), &|_| false).expect("no dir"), 0);
    }

    #[test]
    fn last_shared_holder_removes_the_file() {
        let (_tmp, dir, path) = paths();
        let a = acquire(&dir, &path, LockMode::Shared, now_plus(100), None).expect("free");
        let b = acquire(&dir, &path, LockMode::Shared, now_plus(100), None).expect("shared");
        assert!(matches!(
            acquire(&dir, &path, LockMode::Exclusive, now_plus(30), None),
            Err(Failure::Timeout)
        ));
        a.release().expect("release a");
        assert!(path.exists(), "b still holds the file");
        b.release().expect("release b");
        assert!(!path.exists());
    }

    #[test]
    fn a_waiter_on_an_unlinked_inode_retries_on_the_live_file() {
        let (_tmp, dir, path) = paths();
        let first = acquire(&dir, &path, LockMode::Exclusive, now_plus(100), None).expect("free");
        let waiter = thread::spawn({
            let (dir, path) = (dir.clone(), path.clone());
            move || acquire(&dir, &path, LockMode::Exclusive, now_plus(5000), None)
        });
        // The waiter has opened the first inode and is polling it.
        thread::sleep(Duration::from_millis(50));
        // Keeping the old inode open stops the file system from reusing its number.
        let old = File::open(&path).expect("open");
        let old_ino = old.metadata().expect("fstat").ino();
        drop(first);
        let second = waiter.join().expect("waiter panicked").expect("acquired");
        let file = second.file.as_ref().expect("held");
        assert!(names_inode_of(&path, file).expect("stat"));
        assert_ne!(file.metadata().expect("fstat").ino(), old_ino);
    }

    #[test]
    fn a_symlink_or_fifo_at_a_lock_path_is_replaced_never_followed() {
        let (tmp, dir, path) = paths();
        fs::create_dir_all(&dir).expect("mkdir");
        let target = tmp.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        let held = try_acquire(&dir, &path, LockMode::Exclusive)
            .expect("acquired")
            .expect("free");
        assert!(!target.exists(), "the link's target is never made");
        assert!(fs::symlink_metadata(&path).expect("stat").is_file());
        drop(held);

        let _ = fs::remove_file(&path);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("run mkfifo");
        assert!(made.success());
        let held = try_acquire(&dir, &path, LockMode::Shared)
            .expect("acquired")
            .expect("free");
        assert!(fs::symlink_metadata(&path).expect("stat").is_file());
        drop(held);
    }

    #[test]
    fn cancel_stops_polling() {
        let (_tmp, dir, path) = paths();
        let _held = acquire(&dir, &path, LockMode::Exclusive, None, None).expect("free");
        let cancel = AtomicBool::new(true);
        assert!(matches!(
            acquire(&dir, &path, LockMode::Exclusive, None, Some(&cancel)),
            Err(Failure::Cancelled)
        ));
    }

    #[test]
    fn an_unusable_directory_is_an_io_error_naming_it() {
        let (tmp, _dir, _path) = paths();
        let not_a_dir = tmp.path().join("file");
        fs::write(&not_a_dir, b"").expect("write");
        let path = not_a_dir.join("k.lock");
        match acquire(&not_a_dir, &path, LockMode::Exclusive, now_plus(10), None) {
            Err(Failure::Io(e)) => {
                assert!(e.to_string().contains(&*not_a_dir.to_string_lossy()), "{e}");
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }
}

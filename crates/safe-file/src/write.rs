//! Replacing a file atomically: a temporary file in the same directory, written, synced and
//! renamed over the file, then the directory synced.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Whether a write waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// The file is synced before the rename and its directory after it: once the write returns,
    /// a power loss leaves the new content. For state that must survive a reboot.
    Synced,
    /// No sync: the rename is still atomic, so a reader, or the program restarted after a crash,
    /// sees the old file or the new one. After a power loss the file may be old, empty or torn.
    /// For markers that only have to survive their process dying (the page cache does), or files
    /// on a tmpfs.
    Unsynced,
}

/// Replaces `path` with `bytes` atomically: readers see the old file or the new one, never a
/// mix. The new file gets exactly `mode` (the umask does not apply). See [`AtomicFile`].
///
/// # Errors
///
/// As [`AtomicFile::create`] and [`AtomicFile::commit`]; the temporary file is gone on error.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32, durability: Durability) -> Result<()> {
    AtomicFile::create(path, mode)?.commit(bytes, durability)
}

/// Syncs the directory `dir`, which makes the renames, creations and removals in it durable.
///
/// # Errors
///
/// [`Error::Io`] naming the directory when it cannot be opened or synced.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync", dir, e))
}

/// A new version of a file, being written to a temporary file next to it.
///
/// [`AtomicFile::create`] makes the temporary file: `.<name>.tmp-<pid>-<n>` in the target's
/// directory (a rename only replaces atomically within one file system), with a name no other
/// writer uses, in this process or another ([`TempName`] reads such names back). Write to it
/// through [`Write`], or hand the bytes to [`AtomicFile::commit`], which renames it over the
/// target. Dropping it uncommitted removes the temporary file, so a failed or abandoned write
/// leaves nothing behind; only a process killed in the middle does, and the temporary file then
/// names the dead writer.
///
/// Creating the file can be split from committing it: creating can be the slowest step on a busy
/// file system and does not need the content.
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    /// Creates the temporary file for a new version of `target`, with exactly `mode`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming `target` when it has no file name or the temporary file cannot be
    /// created (the directory is missing, for instance: it is not created here).
    pub fn create(target: impl Into<PathBuf>, mode: u32) -> Result<AtomicFile> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let target = target.into();
        let Some(name) = target.file_name() else {
            return Err(Error::io(
                "create a temporary file",
                &target,
                io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"),
            ));
        };
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(
            ".tmp-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let temp = target.with_file_name(temp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)
            .map_err(|e| Error::io("create a temporary file", &target, e))?;
        let mut atomic = AtomicFile {
            target,
            temp,
            file: Some(file),
        };
        // The umask may have taken bits away; the caller said which it wants.
        if let Some(file) = &atomic.file
            && let Err(e) = file.set_permissions(Permissions::from_mode(mode))
        {
            atomic.discard();
            return Err(Error::io("create a temporary file", &atomic.target, e));
        }
        Ok(atomic)
    }

    /// The file this one will replace.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file being written.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Writes `bytes` after anything already written, syncs the file if asked, renames it over
    /// the target, then syncs the directory if asked.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the target and the step that failed (`write`, `sync`, `rename into
    /// place`, `sync its directory`). Up to the rename, the temporary file is removed and the
    /// target is untouched; when only the directory sync fails, the new file is in place but may
    /// not survive a power loss.
    pub fn commit(mut self, bytes: &[u8], durability: Durability) -> Result<()> {
        let Some(mut file) = self.file.take() else {
            return Err(Error::io("write", &self.target, committed()));
        };
        let written =
            file.write_all(bytes)
                .map_err(|e| ("write", e))
                .and_then(|()| match durability {
                    Durability::Synced => file.sync_all().map_err(|e| ("sync", e)),
                    Durability::Unsynced => Ok(()),
                });
        drop(file);
        if let Err((op, e)) = written {
            self.remove_temp();
            return Err(Error::io(op, &self.target, e));
        }
        if let Err(e) = fs::rename(&self.temp, &self.target) {
            self.remove_temp();
            return Err(Error::io("rename into place", &self.target, e));
        }
        match durability {
            Durability::Synced => sync_dir(self.dir())
                .map_err(|e| Error::io("sync its directory", &self.target, e.into_io())),
            Durability::Unsynced => Ok(()),
        }
    }

    /// The directory holding the target and the temporary file.
    fn dir(&self) -> &Path {
        match self.target.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        }
    }

    /// Closes and removes the temporary file, if it is still open.
    fn discard(&mut self) {
        if self.file.take().is_some() {
            self.remove_temp();
        }
    }

    fn remove_temp(&self) {
        // Best effort: a temporary file that cannot be removed is named for its writer, and a
        // cleanup that knows the writer is gone can remove it later.
        let _ = fs::remove_file(&self.temp);
    }

    fn open_file(&mut self) -> io::Result<&mut File> {
        self.file.as_mut().ok_or_else(committed)
    }
}

/// Only reachable through a bug: `commit` consumes the file.
fn committed() -> io::Error {
    io::Error::other("the atomic file was already committed")
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.open_file()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.open_file()?.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        self.discard();
    }
}

/// What the name of a temporary file made by [`AtomicFile`] tells: whose new version it was and
/// which process wrote it. For cleanups that remove the temporary files of dead writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TempName<'a> {
    /// The file name of the file it was to replace.
    pub target: &'a str,
    /// The process that created it.
    pub pid: u32,
}

impl<'a> TempName<'a> {
    /// Reads a file name (not a path); `None` when it is not one [`AtomicFile`] makes.
    pub fn parse(name: &'a str) -> Option<TempName<'a>> {
        let rest = name.strip_prefix('.')?;
        let (target, tail) = rest.rsplit_once(".tmp-")?;
        let (pid, counter) = tail.split_once('-')?;
        counter.parse::<u64>().ok()?;
        if target.is_empty() {
            return None;
        }
        Some(TempName {
            target,
            pid: pid.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_file_names_give_their_target_and_writer() {
        assert_eq!(
            TempName::parse(".net-c1-eth0.tmp-4242-7"),
            Some(TempName {
                target: "net-c1-eth0",
                pid: 4242
            })
        );
        assert_eq!(
            TempName::parse(".a.tmp-b.tmp-1-2").map(|t| t.target),
            Some("a.tmp-b")
        );
        for not_temp in [
            "net-c1-eth0",
            ".net-c1-eth0.tmp-x-7",
            ".net-c1-eth0.tmp-12",
            ".net.tmp-1-x",
            "..tmp-1-2",
        ] {
            assert_eq!(TempName::parse(not_temp), None, "{not_temp}");
        }
    }

    #[test]
    fn made_names_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let atomic = AtomicFile::create(dir.path().join("state.json"), 0o600).unwrap();
        let name = atomic.temp_path().file_name().unwrap().to_str().unwrap();
        assert_eq!(
            TempName::parse(name),
            Some(TempName {
                target: "state.json",
                pid: std::process::id()
            })
        );
        assert_eq!(atomic.temp_path().parent(), Some(dir.path()));
    }

    #[test]
    fn a_failed_write_removes_the_temporary_file_and_keeps_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f");
        std::fs::write(&target, b"old").unwrap();
        let temp = dir.path().join(".f.tmp-1-1");
        std::fs::write(&temp, b"").unwrap();
        // A descriptor opened read-only: every write fails (EBADF).
        let atomic = AtomicFile {
            target: target.clone(),
            temp: temp.clone(),
            file: Some(File::open(&temp).unwrap()),
        };
        let err = atomic.commit(b"new", Durability::Synced).unwrap_err();
        assert!(matches!(err, Error::Io { op: "write", .. }), "{err}");
        assert_eq!(err.path(), target);
        assert!(!temp.exists());
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
    }

    #[test]
    fn a_relative_target_syncs_the_current_directory() {
        let atomic = AtomicFile {
            target: PathBuf::from("f"),
            temp: PathBuf::from(".f.tmp-1-1"),
            file: None,
        };
        assert_eq!(atomic.dir(), Path::new("."));
    }
}

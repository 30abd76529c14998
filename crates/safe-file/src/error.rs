//! The crate's error type.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong reading or writing a file; every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call on the file (or its directory) failed.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// What was being done: `open`, `read`, `create a temporary file`, `write`, `sync`,
        /// `rename into place`, `sync its directory`, ...
        op: &'static str,
        /// The file read, or the file a write was replacing.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// The path names something other than a regular file: a directory, FIFO, socket, device,
    /// or a symbolic link where links are refused.
    #[error("{}: not a regular file ({kind})", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: FileKind,
    },
    /// The file is longer than the caller's cap.
    #[error("{}: larger than {}", path.display(), size_text(*limit))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap, in bytes.
        limit: u64,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. }
            | Error::NotRegular { path, .. }
            | Error::TooLarge { path, .. } => path,
        }
    }

    /// The [`io::ErrorKind`] that best describes the error: the operating system's for
    /// [`Error::Io`], `IsADirectory` or `InvalidInput` for [`Error::NotRegular`], `FileTooLarge`
    /// for [`Error::TooLarge`].
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Error::Io { source, .. } => source.kind(),
            Error::NotRegular {
                kind: FileKind::Directory,
                ..
            } => io::ErrorKind::IsADirectory,
            Error::NotRegular { .. } => io::ErrorKind::InvalidInput,
            Error::TooLarge { .. } => io::ErrorKind::FileTooLarge,
        }
    }

    /// True when nothing exists at the path.
    pub fn is_not_found(&self) -> bool {
        self.kind() == io::ErrorKind::NotFound
    }

    /// The error as an [`io::Error`] whose message leaves out the path, for a caller whose own
    /// error already names the file: the operating system's error itself for [`Error::Io`]
    /// (its raw OS code kept), `not a regular file (<kind>)` or `larger than <limit>` otherwise,
    /// with the kind of [`Error::kind`].
    pub fn into_io(self) -> io::Error {
        let kind = self.kind();
        match self {
            Error::Io { source, .. } => source,
            Error::NotRegular { kind: what, .. } => {
                io::Error::new(kind, format!("not a regular file ({what})"))
            }
            Error::TooLarge { limit, .. } => {
                io::Error::new(kind, format!("larger than {}", size_text(limit)))
            }
        }
    }
}

/// What a path names when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device, such as `/dev/zero`.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A symbolic link, when the caller refuses them.
    Symlink,
    /// Anything else the kernel reports.
    Other,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "directory",
            FileKind::Fifo => "fifo",
            FileKind::Socket => "socket",
            FileKind::CharDevice => "character device",
            FileKind::BlockDevice => "block device",
            FileKind::Symlink => "symbolic link",
            FileKind::Other => "unknown file type",
        })
    }
}

/// `1 MiB`, `4 KiB` or `1000 bytes`.
fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(1 << 20), "1 MiB");
        assert_eq!(size_text(4 << 20), "4 MiB");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(size_text(0), "0 bytes");
    }

    #[test]
    fn messages_name_the_file_and_into_io_leaves_it_out() {
        let path = PathBuf::from("/etc/cni/net.d/x");
        let cases = [
            (
                Error::NotRegular {
                    path: path.clone(),
                    kind: FileKind::Fifo,
                },
                "/etc/cni/net.d/x: not a regular file (fifo)",
                "not a regular file (fifo)",
                io::ErrorKind::InvalidInput,
            ),
            (
                Error::NotRegular {
                    path: path.clone(),
                    kind: FileKind::Directory,
                },
                "/etc/cni/net.d/x: not a regular file (directory)",
                "not a regular file (directory)",
                io::ErrorKind::IsADirectory,
            ),
            (
                Error::TooLarge {
                    path: path.clone(),
                    limit: 1 << 20,
                },
                "/etc/cni/net.d/x: larger than 1 MiB",
                "larger than 1 MiB",
                io::ErrorKind::FileTooLarge,
            ),
            (
                Error::io("open", &path, io::Error::from_raw_os_error(libc::ENOENT)),
                "/etc/cni/net.d/x: cannot open: No such file or directory (os error 2)",
                "No such file or directory (os error 2)",
                io::ErrorKind::NotFound,
            ),
        ];
        for (err, full, bare, kind) in cases {
            assert_eq!(err.to_string(), full);
            assert_eq!(err.path(), path);
            assert_eq!(err.kind(), kind);
            assert_eq!(err.is_not_found(), kind == io::ErrorKind::NotFound);
            let io = err.into_io();
            assert_eq!(io.to_string(), bare);
            assert_eq!(io.kind(), kind);
        }
    }
}

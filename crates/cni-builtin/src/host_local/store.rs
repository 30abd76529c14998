//! The Go plugin's disk store, byte for byte: `<dataDir>/<network>/<ip>` holding
//! `<container id>\r\n<ifname>`, `last_reserved_ip.<range set index>` holding the address last
//! handed out from that set, and `lock`, which both plugins `flock` while they change anything.

use std::fs::{self, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fd::OwnedFd;
use rustix::fs::{FlockOperation, Mode, OFlags, flock};

/// `LineBreak` of the Go store: between the container id and the interface name.
const LINE_BREAK: &str = "\r\n";
const LAST_IP_PREFIX: &str = "last_reserved_ip.";
/// Lease files are a few dozen bytes; a bigger file is nobody's lease.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// How deep the walk over the network directory goes (Go's walks the whole tree).
const MAX_DEPTH: usize = 16;

/// An error as Go's `os` package words it: `op path: reason`.
pub(crate) fn go_error(op: &str, path: &Path, e: &io::Error) -> String {
    format!("{op} {}: {}", path.display(), go_reason(e))
}

/// The reason of an error as Go's `syscall.Errno` words it: glibc's text, lower case.
pub(crate) fn go_reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text
        .rfind(" (os error ")
        .map_or(text.as_str(), |at| &text[..at])
        .to_owned();
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// One network's lease directory, its lock file open.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    lock: OwnedFd,
    deadline: Instant,
}

/// Holds the store's flock until dropped.
#[derive(Debug)]
pub(crate) struct Locked<'a> {
    store: &'a Store,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Closing the descriptor would release it too; the store lives on, so say it now.
        let _ = flock(&self.store.lock, FlockOperation::Unlock);
    }
}

impl Store {
    /// `disk.New`: creates `<data_dir>/<network>` (0755) and opens (creating, 0750) its `lock`.
    /// Locking gives up at `deadline`.
    pub(crate) fn open(network: &str, data_dir: &str, deadline: Instant) -> Result<Store, String> {
        let data_dir = if data_dir.is_empty() {
            super::config::DEFAULT_DATA_DIR
        } else {
            data_dir
        };
        let dir = Path::new(data_dir).join(network);
        // Go's MkdirAll: an existing non-directory is ENOTDIR, whatever it is.
        if fs::metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            let e = io::Error::from_raw_os_error(rustix::io::Errno::NOTDIR.raw_os_error());
            return Err(go_error("mkdir", &dir, &e));
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&dir)
            .map_err(|e| go_error("mkdir", &dir, &e))?;
        let meta = fs::metadata(&dir).map_err(|e| go_error("stat", &dir, &e))?;
        let path = if meta.is_dir() {
            dir.join("lock")
        } else {
            dir.clone()
        };
        // As go-filemutex opens it: read-only, created 0750.
        let lock = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::from_raw_mode(0o750),
        )
        .map_err(|e| go_reason(&io::Error::from(e)))?;
        Ok(Store {
            dir,
            lock,
            deadline,
        })
    }

    /// Takes the exclusive flock on `lock`, polling until the deadline.
    pub(crate) fn lock(&self) -> Result<Locked<'_>, String> {
        let mut pause = Duration::from_millis(1);
        loop {
            match flock(&self.lock, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Locked { store: self }),
                Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => {}
                Err(e) => {
                    return Err(go_error(
                        "flock",
                        &self.dir.join("lock"),
                        &io::Error::from(e),
                    ));
                }
            }
            let now = Instant::now();
            if now >= self.deadline {
                return Err(format!(
                    "timed out waiting for the lock {}",
                    self.dir.join("lock").display()
                ));
            }
            std::thread::sleep(pause.min(self.deadline - now));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// `Store.Reserve`: creates the lease file unless it exists (then `false`), and records the
    /// address as the set's last reserved one.
    pub(crate) fn reserve(
        &self,
        id: &str,
        ifname: &str,
        ip: IpAddr,
        set: usize,
    ) -> Result<bool, String> {
        let path = self.dir.join(ip.to_string());
        let mut file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(go_error("open", &path, &e)),
        };
        let content = format!("{}{LINE_BREAK}{ifname}", id.trim());
        if let Err(e) = file.write_all(content.as_bytes()) {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(go_error("write", &path, &e));
        }
        drop(file);
        let last = self.dir.join(format!("{LAST_IP_PREFIX}{set}"));
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&last)
            .and_then(|mut f| f.write_all(ip.to_string().as_bytes()))
            .map_err(|e| go_error("open", &last, &e))?;
        Ok(true)
    }

    /// `Store.LastReservedIP`: what `last_reserved_ip.<set>` names, when it is an address.
    pub(crate) fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        let data = read_small(&self.dir.join(format!("{LAST_IP_PREFIX}{set}")))?;
        std::str::from_utf8(&data).ok()?.parse().ok()
    }

    /// Every file under the directory, in Go's `filepath.Walk` order, with its trimmed content.
    fn walk(&self, mut visit: impl FnMut(&Path, &str)) {
        fn go(dir: &Path, depth: usize, visit: &mut dyn FnMut(&Path, &str)) {
            let Ok(entries) = fs::read_dir(dir) else {
                return;
            };
            let mut names: Vec<_> = entries
                .filter_map(|e| e.ok().map(|e| e.file_name()))
                .collect();
            names.sort();
            for name in names {
                let path = dir.join(name);
                let Ok(meta) = fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    if depth < MAX_DEPTH {
                        go(&path, depth + 1, visit);
                    }
                    continue;
                }
                if let Some(data) = read_small(&path) {
                    visit(&path, String::from_utf8_lossy(&data).trim());
                }
            }
        }
        go(&self.dir, 0, &mut visit);
    }

    /// `Store.GetByID`: the addresses leased to this attachment (or, in the old format, to
    /// this container).
    pub(crate) fn get_by_id(&self, id: &str, ifname: &str) -> Vec<IpAddr> {
        let (new, old) = matches(id, ifname);
        let mut ips = Vec::new();
        self.walk(|path, content| {
            if content != new && content != old {
                return;
            }
            if let Some(ip) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
            {
                ips.push(ip);
            }
        });
        ips
    }

    /// `Store.FindByID`, under the lock as in Go.
    pub(crate) fn find_by_id(&self, id: &str, ifname: &str) -> Result<bool, String> {
        let _locked = self.lock()?;
        let (new, old) = matches(id, ifname);
        for wanted in [new, old] {
            let mut found = false;
            self.walk(|_, content| found |= content == wanted);
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `Store.ReleaseByID`: removes this attachment's files; when there are none, the old
    /// format's files of this container.
    pub(crate) fn release_by_id(&self, id: &str, ifname: &str) {
        let (new, old) = matches(id, ifname);
        for wanted in [new, old] {
            let mut found = false;
            self.walk(|path, content| {
                if content == wanted && fs::remove_file(path).is_ok() {
                    found = true;
                }
            });
            if found {
                return;
            }
        }
    }

    /// GC: removes every lease (a file named after an address) whose attachment is not in
    /// `valid`; an old-format lease survives when its container has any valid attachment.
    pub(crate) fn retain(&self, valid: &[(String, String)]) -> Result<(), String> {
        let _locked = self.lock()?;
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_lease = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.parse::<IpAddr>().is_ok());
            if !is_lease || !entry.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let Some(data) = read_small(&path) else {
                continue;
            };
            let content = String::from_utf8_lossy(&data);
            let content = content.trim();
            let keep = match content.split_once(LINE_BREAK) {
                Some((id, ifname)) => valid.iter().any(|(v, i)| v == id && i == ifname),
                None => valid.iter().any(|(v, _)| v == content),
            };
            if !keep {
                fs::remove_file(&path).map_err(|e| go_error("remove", &path, &e))?;
            }
        }
        Ok(())
    }
}

fn matches(id: &str, ifname: &str) -> (String, String) {
    let id = id.trim();
    (format!("{id}{LINE_BREAK}{ifname}"), id.to_owned())
}

/// The content of a regular file of at most [`MAX_FILE_BYTES`]; opening never blocks (a FIFO
/// in the directory is skipped, not waited on).
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let mut data = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut data).ok()?;
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_like_go() {
        let e = io::Error::from_raw_os_error(13);
        assert_eq!(
            go_error("open", Path::new("/x"), &e),
            "open /x: permission denied"
        );
    }

    #[test]
    fn leases_are_written_as_go_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let store = Store::open("net", dir.path().to_str().unwrap(), deadline).unwrap();
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(store.reserve("c1", "eth0", ip, 0).unwrap());
        assert!(!store.reserve("c2", "eth0", ip, 0).unwrap());
        let net = dir.path().join("net");
        assert_eq!(fs::read(net.join("10.0.0.2")).unwrap(), b"c1\r\neth0");
        assert_eq!(
            fs::read(net.join("last_reserved_ip.0")).unwrap(),
            b"10.0.0.2"
        );
        assert_eq!(store.last_reserved(0), Some(ip));
        assert_eq!(store.get_by_id("c1", "eth0"), vec![ip]);
        store.release_by_id("c1", "eth0");
        assert!(!net.join("10.0.0.2").exists());
    }
}

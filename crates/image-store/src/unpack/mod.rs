//! Unpacking one layer, an untrusted (compressed) tar, into a directory of its own in overlayfs
//! form.
//!
//! The directory is private to the unpacker (a temporary directory the caller renames into place),
//! so checking each parent with `lstat` before writing is race-free: nothing else writes there.
//! The rules:
//!
//! - paths are relative to the layer: an absolute path or a `..` component is refused;
//! - no entry is written through a symbolic link: every parent directory is looked at with
//!   `lstat` and a symbolic link there is refused;
//! - a symbolic link may point anywhere inside the image (absolute targets are resolved against
//!   the container's root, never the host's, by whoever follows them) but a relative target
//!   may not climb above the layer's root;
//! - a hard link must name a file already unpacked in this layer; a hard link to a symbolic
//!   link is a second copy of that link at a new depth, so its target passes the rule above
//!   there too;
//! - character and block devices and FIFOs are made as the layer has them (mode and owner
//!   kept) when running as root; without the right to (not root, or root of a user namespace)
//!   devices are skipped, as containers/storage and containerd skip them. What keeps a
//!   container from using a device node is the device cgroup and the runtime's own `/dev`, not
//!   the layer;
//! - whiteouts become overlayfs whiteouts: `.wh.name` is a character device 0/0 named `name`,
//!   `.wh..wh..opq` is `trusted.overlay.opaque=y` on its directory;
//! - modes (setuid, setgid and sticky bits included) and, as root, owners are kept, and so
//!   are PAX `user.*` and `security.capability` xattrs; `trusted.*` ones are dropped;
//! - the decompressed stream (headers and padding included) is capped in bytes, the archive in
//!   entries: a decompression bomb stops at the cap. The files written are capped in bytes too,
//!   by their apparent size: a sparse entry's holes come from no byte of the stream;
//! - one member's headers (its own, a GNU long name or link name, PAX records) are capped at
//!   [`MAX_HEADER_BYTES`], counted as the tar reader pulls them from the stream, so a huge one
//!   is refused before it is read into memory (as Go's archive/tar does since CVE-2022-2879);
//!   global PAX headers too. Errors quote at most [`QUOTED_BYTES`] of a name.
//!
//! A parent a lower layer made a symbolic link (usr-merge's `bin -> usr/bin`, then `bin/foo` in
//! a later layer) is not in this layer's directory, so it is made here as a directory (0755,
//! root) and the entry lands in it: in the container's view that `bin/` hides the lower
//! link. containers/storage's overlay driver and containerd's overlay snapshotter, which also
//! unpack each layer into a directory of its own, do the same (containerd copies the
//! attributes of the directory the link resolves to); builders write such files through the
//! link (`usr/bin/foo`), so only hand-made layers meet this. The vfs driver shows the same.

pub(crate) mod sys;

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use tar::EntryType;

use crate::config::Limits;
use crate::digest::{Digest, Hasher};
use crate::error::LayerProblem;

/// The most bytes the tar reader may pull from the stream to read one member's headers: its
/// own, a GNU long name (`L`) and long link name (`K`), PAX records (`x`), the extension blocks
/// of a GNU sparse map; and the most a global PAX header (`g`) may hold. Go's archive/tar caps
/// each at 1 MiB; real names are at most a few KiB.
pub(crate) const MAX_HEADER_BYTES: u64 = 1 << 20;

/// The most bytes of an entry name (or link target) an error quotes.
pub(crate) const QUOTED_BYTES: usize = 256;

/// What went wrong, and with which entry; the caller adds the image and layer.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) entry: Option<String>,
    pub(crate) problem: LayerProblem,
}

impl Failure {
    fn new(entry: Option<&str>, problem: LayerProblem) -> Failure {
        Failure {
            entry: entry.map(str::to_owned),
            problem,
        }
    }
}

/// `bytes` as text for an error or a log line: at most [`QUOTED_BYTES`] of them, and when cut,
/// how long the whole was, so a 128 MiB name stays out of errors, logs and RPC replies.
pub(crate) fn quoted(bytes: &[u8]) -> String {
    if bytes.len() <= QUOTED_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    format!(
        "{}... (cut, {} bytes in all)",
        String::from_utf8_lossy(&bytes[..QUOTED_BYTES]),
        bytes.len()
    )
}

/// Unpacks the layer read from `blob` (gzip, zstd or plain tar, told apart by their magic
/// numbers) into the existing, empty directory `dest`. Returns the diff id: the digest of the
/// uncompressed tar.
/// `cancelled` is looked at before each entry: once it is set the unpack stops.
pub(crate) fn unpack(
    blob: impl Read,
    dest: &Path,
    limits: &Limits,
    cancelled: &AtomicBool,
) -> Result<Digest, Failure> {
    let mut buffered = BufReader::with_capacity(128 * 1024, blob);
    let magic = buffered
        .fill_buf()
        .map_err(|e| Failure::new(None, LayerProblem::Io(e.to_string())))?;
    let decompressed: Box<dyn Read> = if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(
            zstd::stream::read::Decoder::with_buffer(buffered)
                .map_err(|e| Failure::new(None, LayerProblem::Corrupt(e.to_string())))?,
        )
    } else {
        Box::new(buffered)
    };
    let gauge = Rc::new(Gauge::default());
    let meter = Meter {
        inner: decompressed,
        hasher: Hasher::new(),
        read: 0,
        cap: limits.max_layer_bytes,
        gauge: Rc::clone(&gauge),
    };
    let mut archive = tar::Archive::new(meter);
    let mut unpacker = Unpacker {
        root: dest.to_owned(),
        as_root: nix::unistd::geteuid().is_root(),
        dirs: Vec::new(),
        written: 0,
        cap: limits.max_layer_bytes,
    };
    let stream_error = |entry: Option<&str>, e: io::Error| {
        if gauge.headers_over.get() {
            Failure::new(entry, LayerProblem::HeaderTooLarge(MAX_HEADER_BYTES))
        } else if gauge.over.get() {
            Failure::new(entry, LayerProblem::TooLarge(limits.max_layer_bytes))
        } else {
            Failure::new(entry, LayerProblem::Corrupt(e.to_string()))
        }
    };
    let mut entries = archive.entries().map_err(|e| stream_error(None, e))?;
    let mut count = 0u64;
    let mut last: Option<String> = None;
    loop {
        if cancelled.load(Ordering::Relaxed) {
            return Err(Failure::new(None, LayerProblem::Cancelled));
        }
        // Everything the reader pulls from here to the next entry is headers: the entry before
        // was read to its end (below), so only its padding is left to skip.
        gauge.headers_left.set(Some(MAX_HEADER_BYTES));
        let next = entries.next();
        gauge.headers_left.set(None);
        let Some(entry) = next else { break };
        let mut entry = entry.map_err(|e| {
            // A member whose headers are too big is not named: its name is what is too big.
            if gauge.headers_over.get() {
                stream_error(None, e)
            } else {
                stream_error(last.as_deref(), e)
            }
        })?;
        count += 1;
        let name = quoted(&entry.path_bytes());
        if count > limits.max_layer_entries {
            return Err(Failure::new(
                Some(&name),
                LayerProblem::TooManyEntries(limits.max_layer_entries),
            ));
        }
        unpacker
            .entry(&mut entry)
            .and_then(|()| {
                // Whatever the entry holds that was not written (a directory's or a link's
                // data), read here, so the next headers are all the reader pulls for them.
                io::copy(&mut entry, &mut io::sink())?;
                Ok(())
            })
            .map_err(|e| match e {
                EntryError::Problem(problem) => Failure::new(Some(&name), problem),
                EntryError::Io(_) if gauge.over.get() => {
                    Failure::new(Some(&name), LayerProblem::TooLarge(limits.max_layer_bytes))
                }
                EntryError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    Failure::new(Some(&name), LayerProblem::Corrupt(e.to_string()))
                }
                EntryError::Io(e) => Failure::new(Some(&name), LayerProblem::Io(e.to_string())),
            })?;
        last = Some(name);
    }
    let mut meter = archive.into_inner();
    // The diff id covers the whole stream: whatever follows the end-of-archive blocks too.
    io::copy(&mut meter, &mut io::sink()).map_err(|e| stream_error(None, e))?;
    unpacker
        .finish()
        .map_err(|e| Failure::new(None, LayerProblem::Io(e.to_string())))?;
    Ok(meter.hasher.finish())
}

/// What the [`Meter`] and the loop over entries share.
#[derive(Default)]
struct Gauge {
    /// The stream went past the layer's cap.
    over: Cell<bool>,
    /// While the tar reader reads a member's headers: how many more bytes it may pull.
    headers_left: Cell<Option<u64>>,
    /// A member's headers went past [`MAX_HEADER_BYTES`].
    headers_over: Cell<bool>,
}

/// Counts and hashes the decompressed stream, and stops it at the cap, or at the header cap
/// while headers are read.
struct Meter<R> {
    inner: R,
    hasher: Hasher,
    read: u64,
    cap: u64,
    gauge: Rc<Gauge>,
}

impl<R: Read> Read for Meter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // While headers are read, never ask for more than they may still take (plus one byte,
        // to see they go past): the reader grows its buffer only by what it receives.
        let buf = match self.gauge.headers_left.get() {
            Some(left) => {
                let most = usize::try_from(left.saturating_add(1)).unwrap_or(usize::MAX);
                let len = buf.len().min(most);
                &mut buf[..len]
            }
            None => buf,
        };
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.cap {
            self.gauge.over.set(true);
            return Err(io::Error::other("the layer is larger than the cap"));
        }
        if let Some(left) = self.gauge.headers_left.get() {
            let Some(left) = left.checked_sub(n as u64) else {
                self.gauge.headers_over.set(true);
                return Err(io::Error::other(
                    "a member's headers are larger than the cap",
                ));
            };
            self.gauge.headers_left.set(Some(left));
        }
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

enum EntryError {
    Problem(LayerProblem),
    Io(io::Error),
}

impl From<io::Error> for EntryError {
    fn from(e: io::Error) -> Self {
        EntryError::Io(e)
    }
}

impl From<LayerProblem> for EntryError {
    fn from(p: LayerProblem) -> Self {
        EntryError::Problem(p)
    }
}

struct Unpacker {
    root: PathBuf,
    as_root: bool,
    /// Directories whose times are set at the end, when nothing is created in them any more.
    dirs: Vec<(PathBuf, u64)>,
    /// The apparent size of the files written so far (a sparse file's holes included).
    written: u64,
    /// The most `written` may reach: the layer's byte cap.
    cap: u64,
}

const OPAQUE: &[u8] = b".wh..wh..opq";
const WHITEOUT_META: &[u8] = b".wh..wh.";
const WHITEOUT: &[u8] = b".wh.";

impl Unpacker {
    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), EntryError> {
        let kind = entry.header().entry_type();
        if let Some(done) = extension(kind, entry.size()) {
            return done;
        }
        let meta = Meta::of(entry.header())?;
        let (mode, owner, mtime) = (meta.mode, meta.owner, meta.mtime);
        let path = entry.path_bytes().into_owned();
        let link = entry.link_name_bytes().map(std::borrow::Cow::into_owned);
        // No path or link target this long can be made; refused before it is split up.
        let limit = libc::PATH_MAX as usize;
        if path.len() >= limit || link.as_ref().is_some_and(|l| l.len() >= limit) {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG).into());
        }
        let xattrs = kept_xattrs(entry).map_err(corrupt)?;
        let components = clean(&path)?;

        let Some((name, parents)) = components.split_last() else {
            // `./`: the layer's root directory itself.
            if kind == EntryType::Directory {
                self.owner_and_mode(&self.root.clone(), owner, Some(mode))?;
                self.dirs.push((self.root.clone(), mtime));
            }
            return Ok(());
        };
        let name = name.as_bytes();
        if name == OPAQUE {
            let dir = self.parent_dirs(parents)?;
            sys::set_opaque(&dir)?;
            return Ok(());
        }
        if name.starts_with(WHITEOUT_META) {
            // Other AUFS metadata (.wh..wh.plnk, .wh..wh.aufs) means nothing to overlayfs.
            return Ok(());
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            if hidden.is_empty() || hidden == b"." || hidden == b".." || hidden.contains(&b'/') {
                return Err(LayerProblem::BadWhiteout.into());
            }
            let dir = self.parent_dirs(parents)?;
            let target = dir.join(OsStr::from_bytes(hidden));
            remove_existing(&target)?;
            sys::whiteout(&target)?;
            self.owner_and_mode(&target, owner, None)?;
            return Ok(());
        }

        let dir = self.parent_dirs(parents)?;
        let target = dir.join(OsStr::from_bytes(name));
        match kind {
            EntryType::Directory => {
                let existing = fs::symlink_metadata(&target);
                if !existing.as_ref().is_ok_and(fs::Metadata::is_dir) {
                    remove_existing(&target)?;
                    DirBuilder::new().mode(0o700).create(&target)?;
                }
                self.owner_and_mode(&target, owner, Some(mode))?;
                self.dirs.push((target, mtime));
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                self.file(entry, &target, &meta, &xattrs)?;
            }
            EntryType::Symlink => {
                let link = link.unwrap_or_default();
                check_symlink(parents.len(), &link)?;
                remove_existing(&target)?;
                std::os::unix::fs::symlink(OsStr::from_bytes(&link), &target)?;
                self.owner_and_mode(&target, owner, None)?;
                sys::set_mtime(&target, mtime)?;
            }
            EntryType::Link => {
                let link = link.unwrap_or_default();
                let source = self.hardlink_source(&link)?;
                if fs::symlink_metadata(&source)?.file_type().is_symlink() {
                    // The new name is a second copy of that link, at its own depth.
                    check_symlink(
                        parents.len(),
                        fs::read_link(&source)?.as_os_str().as_bytes(),
                    )?;
                }
                if source != target {
                    remove_existing(&target)?;
                    fs::hard_link(&source, &target)?;
                }
            }
            EntryType::Fifo => {
                remove_existing(&target)?;
                sys::fifo(&target)?;
                self.owner_and_mode(&target, owner, Some(mode))?;
                sys::set_mtime(&target, mtime)?;
            }
            EntryType::Char | EntryType::Block => {
                remove_existing(&target)?;
                if self.device(&target, kind == EntryType::Block, meta.device)? {
                    self.owner_and_mode(&target, owner, Some(mode))?;
                    sys::set_mtime(&target, mtime)?;
                }
            }
            // Anything else (a volume label, a multi-volume continuation) carries no file.
            other => tracing::debug!(?other, "skipping a tar entry of this type"),
        }
        Ok(())
    }

    /// Writes a regular (or sparse) file's data to the new file `target`, then its attributes.
    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        target: &Path,
        meta: &Meta,
        xattrs: &[(String, Vec<u8>)],
    ) -> Result<(), EntryError> {
        // The apparent size, before anything is written: a sparse entry's holes are zeros no
        // byte of the stream paid for.
        self.written = self.written.saturating_add(entry.size());
        if self.written > self.cap {
            return Err(LayerProblem::TooLarge(self.cap).into());
        }
        remove_existing(target)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(target)?;
        io::copy(entry, &mut file)?;
        drop(file);
        self.owner_and_mode(target, meta.owner, Some(meta.mode))?;
        // After chown, which drops file capabilities.
        for (name, value) in xattrs {
            sys::set_xattr(target, name, value)?;
        }
        sys::set_mtime(target, meta.mtime)?;
        Ok(())
    }

    /// Makes a device node; `false` when this process may not (not root, or root of a user
    /// namespace), after which the entry is skipped as containers/storage and containerd skip
    /// it.
    fn device(&self, path: &Path, block: bool, (major, minor): (u32, u32)) -> io::Result<bool> {
        if !self.as_root {
            tracing::debug!(path = %path.display(), "not root: skipping a device node");
            return Ok(false);
        }
        match sys::device(path, block, major, minor) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                tracing::debug!(path = %path.display(), "may not make device nodes: skipping one");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The directory `parents` names under the root, made (0755, owned by the unpacker) where
    /// missing; a symbolic link or a non-directory on the way is refused.
    fn parent_dirs(&self, parents: &[&OsStr]) -> Result<PathBuf, EntryError> {
        let mut dir = self.root.clone();
        for (i, part) in parents.iter().enumerate() {
            dir.push(part);
            match fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(LayerProblem::SymlinkParent(joined(&parents[..=i])).into());
                }
                Ok(_) => return Err(LayerProblem::ParentNotDir(joined(&parents[..=i])).into()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    DirBuilder::new().mode(0o755).create(&dir)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(dir)
    }

    /// The file in this layer a hard link names: reached without following a symbolic link, and
    /// not a directory.
    fn hardlink_source(&self, link: &[u8]) -> Result<PathBuf, EntryError> {
        let outside = || LayerProblem::HardlinkOutside(quoted(link));
        let parts = clean(link).map_err(|_| outside())?;
        let Some((name, parents)) = parts.split_last() else {
            return Err(outside().into());
        };
        let mut path = self.root.clone();
        for part in parents {
            path.push(part);
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                return Err(outside().into());
            }
        }
        path.push(name);
        match fs::symlink_metadata(&path) {
            Ok(m) if !m.is_dir() => Ok(path),
            _ => Err(outside().into()),
        }
    }

    fn owner_and_mode(
        &self,
        path: &Path,
        (uid, gid): (u32, u32),
        mode: Option<u32>,
    ) -> io::Result<()> {
        // chown clears setuid and setgid bits, so the mode comes after it.
        if self.as_root {
            std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
        }
        if let Some(mode) = mode {
            fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
        }
        Ok(())
    }

    /// Sets the directories' times, deepest last-created first, now that nothing changes them.
    fn finish(&mut self) -> io::Result<()> {
        for (dir, mtime) in self.dirs.drain(..).rev() {
            sys::set_mtime(&dir, mtime)?;
        }
        Ok(())
    }
}

/// For a global PAX header, or an extension the reader did not take as one (in a header of no
/// known format): no file, only data to drain (the caller does), when it is small. Asking it for
/// PAX records would read it whole. `None` for any other entry.
fn extension(kind: EntryType, size: u64) -> Option<Result<(), EntryError>> {
    if !matches!(
        kind,
        EntryType::XGlobalHeader
            | EntryType::XHeader
            | EntryType::GNULongName
            | EntryType::GNULongLink
    ) {
        return None;
    }
    Some(if size > MAX_HEADER_BYTES {
        Err(LayerProblem::HeaderTooLarge(MAX_HEADER_BYTES).into())
    } else {
        Ok(())
    })
}

/// What a header says of an entry besides its name and type.
struct Meta {
    /// Permission bits, setuid, setgid and sticky included.
    mode: u32,
    owner: (u32, u32),
    mtime: u64,
    /// Major and minor, for a character or block device.
    device: (u32, u32),
}

impl Meta {
    fn of(header: &tar::Header) -> Result<Meta, EntryError> {
        let device = if matches!(header.entry_type(), EntryType::Char | EntryType::Block) {
            let number =
                |n: io::Result<Option<u32>>| n.map_err(corrupt).map(Option::unwrap_or_default);
            (
                number(header.device_major())?,
                number(header.device_minor())?,
            )
        } else {
            (0, 0)
        };
        Ok(Meta {
            mode: header.mode().map_err(corrupt)? & 0o7777,
            owner: (
                id(header.uid().map_err(corrupt)?)?,
                id(header.gid().map_err(corrupt)?)?,
            ),
            mtime: header.mtime().map_err(corrupt)?,
            device,
        })
    }
}

/// The extended attributes a PAX header carries (`SCHILY.xattr.<name>`) that a layer may set:
/// `user.*` and file capabilities (`security.capability`, as ping needs). `trusted.*` would let
/// a layer forge overlayfs' own marks, and other `security.*` names are for the host's security
/// modules to set; they are dropped.
fn kept_xattrs<R: Read>(entry: &mut tar::Entry<'_, R>) -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut kept = Vec::new();
    let Some(extensions) = entry.pax_extensions()? else {
        return Ok(kept);
    };
    for extension in extensions {
        let extension = extension?;
        let Ok(key) = extension.key() else { continue };
        let Some(name) = key.strip_prefix("SCHILY.xattr.") else {
            continue;
        };
        if name.starts_with("user.") || name == "security.capability" {
            kept.push((name.to_owned(), extension.value_bytes().to_vec()));
        } else {
            tracing::debug!(
                name = quoted(name.as_bytes()),
                "dropping an extended attribute a layer may not set"
            );
        }
    }
    Ok(kept)
}

/// A header field or PAX record that does not parse.
fn corrupt(e: io::Error) -> EntryError {
    EntryError::Problem(LayerProblem::Corrupt(e.to_string()))
}

/// An owner id from a tar header; ids past 32 bits do not exist on Linux.
fn id(raw: u64) -> Result<u32, EntryError> {
    u32::try_from(raw)
        .map_err(|_| LayerProblem::Corrupt(format!("owner id {raw} out of range")).into())
}

/// The path's components relative to the layer root: `.` and empty ones dropped; an absolute
/// path or a `..` component refused.
fn clean(path: &[u8]) -> Result<Vec<&OsStr>, LayerProblem> {
    if path.first() == Some(&b'/') {
        return Err(LayerProblem::Absolute);
    }
    let mut parts = Vec::new();
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err(LayerProblem::DotDot),
            _ => parts.push(OsStr::from_bytes(part)),
        }
    }
    Ok(parts)
}

/// Refuses a relative symbolic-link target that climbs above the layer root from a link `depth`
/// directories down.
fn check_symlink(depth: usize, target: &[u8]) -> Result<(), LayerProblem> {
    if target.first() == Some(&b'/') {
        return Ok(());
    }
    let mut depth = depth as i64;
    for part in target.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(LayerProblem::SymlinkEscapes(quoted(target)));
                }
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

/// `parts` joined with `/`, [`quoted`].
fn joined(parts: &[&OsStr]) -> String {
    let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
    quoted(&bytes.join(&b'/'))
}

/// Removes whatever is at `path` (a whole tree for a directory); nothing there is fine.
pub(crate) fn remove_existing(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;

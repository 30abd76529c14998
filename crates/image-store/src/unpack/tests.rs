use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};

use tar::EntryType;
use test_support::image::{Compression, Tar, compress, digest};

use std::cell::Cell;
use std::rc::Rc;

use super::*;

fn limits() -> Limits {
    Limits::default()
}

fn unpack_tar(
    tar: &[u8],
    compression: Compression,
    limits: &Limits,
) -> (tempfile::TempDir, Result<Digest, Failure>) {
    let dir = tempfile::tempdir().unwrap();
    let blob = compress(tar, compression);
    let result = unpack(&blob[..], dir.path(), limits, &AtomicBool::new(false));
    (dir, result)
}

fn problem(tar: Tar) -> (Option<String>, LayerProblem) {
    let (_dir, result) = unpack_tar(&tar.build(), Compression::None, &limits());
    let f = result.expect_err("the layer is refused");
    (f.entry, f.problem)
}

#[test]
fn files_dirs_links_and_modes_land_in_the_layer_dir() {
    let tar = Tar::new()
        .dir("usr", 0o755)
        .dir("usr/bin", 0o755)
        .file("usr/bin/tool", 0o4755, b"#!/bin/sh\n")
        .file("etc/deep/implicit", 0o640, b"x")
        .symlink("bin", "usr/bin")
        .symlink("usr/bin/abs", "/etc/passwd")
        .hardlink("usr/bin/tool2", "usr/bin/tool")
        .fifo("run.fifo", 0o600)
        .dir("tmp", 0o1777)
        .build();
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let (dir, result) = unpack_tar(&tar, compression, &limits());
        let diff_id = result.unwrap_or_else(|f| panic!("{compression:?}: {f:?}"));
        assert_eq!(diff_id.to_string(), digest(&tar), "{compression:?}");
        let root = dir.path();
        let tool = fs::metadata(root.join("usr/bin/tool")).unwrap();
        assert_eq!(tool.mode() & 0o7777, 0o4755, "setuid kept");
        assert_eq!(fs::read(root.join("usr/bin/tool")).unwrap(), b"#!/bin/sh\n");
        assert_eq!(
            fs::metadata(root.join("usr/bin/tool")).unwrap().mtime() as u64,
            test_support::image::MTIME
        );
        assert_eq!(
            fs::read_link(root.join("bin")).unwrap(),
            Path::new("usr/bin")
        );
        assert_eq!(
            fs::read_link(root.join("usr/bin/abs")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            fs::metadata(root.join("usr/bin/tool2")).unwrap().ino(),
            tool.ino(),
            "hard link shares the inode"
        );
        assert!(
            fs::symlink_metadata(root.join("run.fifo"))
                .unwrap()
                .file_type()
                .is_fifo()
        );
        assert_eq!(
            fs::metadata(root.join("tmp")).unwrap().mode() & 0o7777,
            0o1777
        );
        assert_eq!(
            fs::metadata(root.join("etc/deep")).unwrap().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::metadata(root.join("usr")).unwrap().mtime() as u64,
            test_support::image::MTIME
        );
    }
}

#[test]
fn later_entries_replace_earlier_ones() {
    let tar = Tar::new()
        .file("a", 0o644, b"one")
        .file("a", 0o600, b"two")
        .dir("d", 0o755)
        .file("d/x", 0o644, b"x")
        .file("d", 0o644, b"now a file")
        .build();
    let (dir, result) = unpack_tar(&tar, Compression::None, &limits());
    result.unwrap();
    assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"two");
    assert_eq!(fs::read(dir.path().join("d")).unwrap(), b"now a file");
}

#[test]
fn hostile_entries_are_refused_by_name() {
    let cases: Vec<(Tar, &str, LayerProblem)> = vec![
        (
            Tar::new().raw(EntryType::Regular, b"../escape", b"", b"x"),
            "../escape",
            LayerProblem::DotDot,
        ),
        (
            Tar::new().raw(EntryType::Regular, b"a/../../escape", b"", b"x"),
            "a/../../escape",
            LayerProblem::DotDot,
        ),
        (
            Tar::new().raw(EntryType::Regular, b"/etc/evil", b"", b"x"),
            "/etc/evil",
            LayerProblem::Absolute,
        ),
        (
            Tar::new()
                .symlink("root", "/")
                .raw(EntryType::Regular, b"root/etc/evil", b"", b"x"),
            "root/etc/evil",
            LayerProblem::SymlinkParent("root".into()),
        ),
        (
            Tar::new()
                .symlink("up", "../../..")
                .raw(EntryType::Regular, b"x", b"", b"x"),
            "up",
            LayerProblem::SymlinkEscapes("../../..".into()),
        ),
        (
            Tar::new().raw(EntryType::Link, b"passwd", b"/etc/passwd", b""),
            "passwd",
            LayerProblem::HardlinkOutside("/etc/passwd".into()),
        ),
        (
            Tar::new().raw(EntryType::Link, b"passwd", b"../../etc/passwd", b""),
            "passwd",
            LayerProblem::HardlinkOutside("../../etc/passwd".into()),
        ),
        (
            Tar::new().raw(EntryType::Link, b"nothing", b"not-here", b""),
            "nothing",
            LayerProblem::HardlinkOutside("not-here".into()),
        ),
        (
            Tar::new()
                .symlink("l", "/")
                .raw(EntryType::Link, b"passwd", b"l/etc/passwd", b""),
            "passwd",
            LayerProblem::HardlinkOutside("l/etc/passwd".into()),
        ),
        (
            Tar::new()
                .file("f", 0o644, b"x")
                .raw(EntryType::Regular, b"f/under", b"", b"x"),
            "f/under",
            LayerProblem::ParentNotDir("f".into()),
        ),
        (
            Tar::new().file(".wh.", 0o644, b""),
            ".wh.",
            LayerProblem::BadWhiteout,
        ),
        (
            Tar::new().file("a/.wh...", 0o644, b""),
            "a/.wh...",
            LayerProblem::BadWhiteout,
        ),
    ];
    for (tar, entry, want) in cases {
        let (got_entry, got) = problem(tar);
        assert_eq!(got_entry.as_deref(), Some(entry), "{want:?}");
        assert_eq!(got, want, "{entry}");
    }
}

#[test]
fn a_symlink_parent_is_refused_even_after_the_directory_was_replaced() {
    // d is a directory, then replaced by a link to /: d/x must not land in /.
    let (entry, got) = problem(Tar::new().dir("d", 0o755).symlink("d", "/tmp").raw(
        EntryType::Regular,
        b"d/x",
        b"",
        b"x",
    ));
    assert_eq!(entry.as_deref(), Some("d/x"));
    assert_eq!(got, LayerProblem::SymlinkParent("d".into()));
}

#[test]
fn caps_stop_bombs() {
    let small = Limits {
        max_layer_bytes: 64 * 1024,
        max_layer_entries: 1_000,
    };
    let zeros = vec![0u8; 256 * 1024];
    let tar = Tar::new().file("zeros", 0o644, &zeros).build();
    let (_dir, result) = unpack_tar(&tar, Compression::Gzip, &small);
    let f = result.unwrap_err();
    assert_eq!(f.problem, LayerProblem::TooLarge(64 * 1024));
    assert_eq!(f.entry.as_deref(), Some("zeros"));

    let mut many = Tar::new();
    for i in 0..20 {
        many = many.file(&format!("f{i}"), 0o644, b"");
    }
    let few = Limits {
        max_layer_bytes: 1 << 20,
        max_layer_entries: 10,
    };
    let (_dir, result) = unpack_tar(&many.build(), Compression::None, &few);
    let f = result.unwrap_err();
    assert_eq!(f.problem, LayerProblem::TooManyEntries(10));
    assert_eq!(f.entry.as_deref(), Some("f10"));
}

#[test]
fn garbage_is_corrupt_not_a_panic() {
    for blob in [
        &b"not a tar at all, just text that is long enough to be read as a header"[..],
        &[0x1f, 0x8b, 0, 1, 2, 3][..],
        &[0x28, 0xb5, 0x2f, 0xfd, 9, 9, 9][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let f = unpack(blob, dir.path(), &limits(), &AtomicBool::new(false)).unwrap_err();
        assert!(matches!(f.problem, LayerProblem::Corrupt(_)), "{f:?}");
    }
}

#[test]
fn a_truncated_tar_is_refused_naming_the_entry() {
    let tar = Tar::new().file("big", 0o644, &[7u8; 4096]).build();
    let dir = tempfile::tempdir().unwrap();
    let f = unpack(&tar[..1024], dir.path(), &limits(), &AtomicBool::new(false)).unwrap_err();
    assert_eq!(f.entry.as_deref(), Some("big"));
    assert!(matches!(f.problem, LayerProblem::Corrupt(_)), "{f:?}");
}

/// Needs CAP_MKNOD and CAP_SYS_ADMIN (trusted.* xattrs).
#[test]
#[ignore = "needs root: cargo xtask test"]
fn whiteouts_and_opaque_dirs_take_overlayfs_form() {
    let tar = Tar::new()
        .dir("etc", 0o755)
        .whiteout("etc/gone")
        .whiteout("top")
        .dir("var/cache", 0o755)
        .opaque("var/cache")
        .file("var/cache/kept", 0o644, b"k")
        .file(".wh..wh.plnk", 0o644, b"")
        .build();
    let (dir, result) = unpack_tar(&tar, Compression::None, &limits());
    result.unwrap();
    let root = dir.path();
    for w in ["etc/gone", "top"] {
        let m = fs::symlink_metadata(root.join(w)).unwrap();
        assert!(m.file_type().is_char_device(), "{w}");
        assert_eq!(m.rdev(), 0, "{w} is 0/0");
    }
    assert!(!root.join("etc/.wh.gone").exists());
    assert!(!root.join(".wh..wh.plnk").exists());
    assert_eq!(
        sys::get_xattr(&root.join("var/cache"), sys::OPAQUE_XATTR).unwrap(),
        Some(b"y".to_vec())
    );
    assert_eq!(
        sys::get_xattr(&root.join("etc"), sys::OPAQUE_XATTR).unwrap(),
        None
    );
    assert!(!root.join("var/cache/.wh..wh..opq").exists());
    assert_eq!(fs::read(root.join("var/cache/kept")).unwrap(), b"k");
}

#[test]
#[ignore = "needs root: cargo xtask test"]
fn owners_are_kept_as_root() {
    let tar = Tar::new().file_owned("f", 0o2755, 1234, 5678, b"x").build();
    let (dir, result) = unpack_tar(&tar, Compression::None, &limits());
    result.unwrap();
    let m = fs::metadata(dir.path().join("f")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1234, 5678));
    assert_eq!(m.mode() & 0o7777, 0o2755, "setgid survives the chown");
}

#[test]
fn a_cancelled_unpack_stops_before_the_next_entry() {
    let tar = Tar::new().file("a", 0o644, b"a").build();
    let dir = tempfile::tempdir().unwrap();
    let f = unpack(&tar[..], dir.path(), &limits(), &AtomicBool::new(true)).unwrap_err();
    assert_eq!(f.problem, LayerProblem::Cancelled);
    assert!(!dir.path().join("a").exists());
}

/// A PAX header with extended attributes, then a regular file.
fn file_with_xattrs(path: &str, xattrs: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let pax: Vec<(String, &[u8])> = xattrs
        .iter()
        .map(|(k, v)| (format!("SCHILY.xattr.{k}"), *v))
        .collect();
    builder
        .append_pax_extensions(pax.iter().map(|(k, v)| (k.as_str(), *v)))
        .unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(EntryType::Regular);
    h.set_mode(0o755);
    h.set_size(1);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    builder.append_data(&mut h, path, &b"x"[..]).unwrap();
    builder.into_inner().unwrap()
}

/// Needs CAP_SETFCAP to set a file capability.
#[test]
#[ignore = "needs root: cargo xtask test"]
fn file_capabilities_are_kept_and_overlay_marks_are_not() {
    // cap_net_raw+ep, as Debian's ping carries it (VFS_CAP_REVISION_2).
    let cap: &[u8] = &[
        0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    let tar = file_with_xattrs(
        "ping",
        &[
            ("security.capability", cap),
            ("trusted.overlay.opaque", b"y"),
            ("security.selinux", b"system_u:object_r:bin_t:s0"),
        ],
    );
    let (dir, result) = unpack_tar(&tar, Compression::None, &limits());
    result.unwrap();
    let ping = dir.path().join("ping");
    assert_eq!(
        sys::get_xattr(&ping, "security.capability").unwrap(),
        Some(cap.to_vec())
    );
    assert_eq!(sys::get_xattr(&ping, sys::OPAQUE_XATTR).unwrap(), None);
    assert_eq!(fs::read(&ping).unwrap(), b"x");
}

#[test]
fn a_header_that_does_not_parse_is_corrupt() {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(EntryType::Regular);
    h.set_size(0);
    h.set_path("f").unwrap();
    h.set_cksum();
    let mut tar = h.as_bytes().to_vec();
    tar.extend_from_slice(&[0u8; 1024]);
    let dir = tempfile::tempdir().unwrap();
    let f = unpack(&tar[..], dir.path(), &limits(), &AtomicBool::new(false)).unwrap_err();
    assert_eq!(f.entry.as_deref(), Some("f"));
    assert!(matches!(f.problem, LayerProblem::Corrupt(_)), "{f:?}");
}

/// A GNU header of `kind` and `size`, root's, mode 0644: the rest is for the caller to set.
fn gnu_header(kind: EntryType, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(test_support::image::MTIME);
    h
}

/// A tar stream made as it is read: one extension member (`kind`: a GNU long name or link
/// name, PAX records) whose payload is `size` bytes of `a`, then a file `f`. Counts what the
/// reader pulls, so a test sees how much of the payload was read.
struct Extension {
    head: Vec<u8>,
    fill: u64,
    tail: Vec<u8>,
    pulled: Rc<Cell<u64>>,
}

impl Extension {
    fn new(kind: EntryType, size: u64) -> (Extension, Rc<Cell<u64>>) {
        let mut h = gnu_header(kind, size);
        h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
        h.set_cksum();
        let padding = (512 - size % 512) % 512;
        let mut tail = vec![0u8; usize::try_from(padding).unwrap()];
        tail.extend_from_slice(&Tar::new().file("f", 0o644, b"").build());
        let pulled = Rc::new(Cell::new(0));
        let stream = Extension {
            head: h.as_bytes().to_vec(),
            fill: size,
            tail,
            pulled: Rc::clone(&pulled),
        };
        (stream, pulled)
    }
}

impl Read for Extension {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = if !self.head.is_empty() {
            let n = buf.len().min(self.head.len());
            buf[..n].copy_from_slice(&self.head[..n]);
            self.head.drain(..n);
            n
        } else if self.fill > 0 {
            let n = buf
                .len()
                .min(usize::try_from(self.fill).unwrap_or(usize::MAX));
            buf[..n].fill(b'a');
            self.fill -= n as u64;
            n
        } else {
            let n = buf.len().min(self.tail.len());
            buf[..n].copy_from_slice(&self.tail[..n]);
            self.tail.drain(..n);
            n
        };
        self.pulled.set(self.pulled.get() + n as u64);
        Ok(n)
    }
}

#[test]
fn huge_long_names_and_pax_headers_are_refused_before_they_are_read() {
    const HUGE: u64 = 128 << 20;
    for kind in [
        EntryType::GNULongName,
        EntryType::GNULongLink,
        EntryType::XHeader,
        EntryType::XGlobalHeader,
    ] {
        for gzip in [false, true] {
            let (stream, pulled) = Extension::new(kind, HUGE);
            let dir = tempfile::tempdir().unwrap();
            let cancelled = AtomicBool::new(false);
            let result = if gzip {
                // Compressed as the unpacker reads it: what it never pulls is never made.
                let blob = flate2::read::GzEncoder::new(stream, flate2::Compression::best());
                unpack(blob, dir.path(), &limits(), &cancelled)
            } else {
                unpack(stream, dir.path(), &limits(), &cancelled)
            };
            let f = result.expect_err("a 128 MiB header is refused");
            assert_eq!(
                f.problem,
                LayerProblem::HeaderTooLarge(MAX_HEADER_BYTES),
                "{kind:?} gzip={gzip}"
            );
            // Plain: the header cap and the unpacker's read-ahead, not the 128 MiB. Compressed,
            // the encoder reads ahead of the unpacker by what its read-ahead holds compressed:
            // still a small part of the whole.
            let most = if gzip {
                HUGE / 16
            } else {
                MAX_HEADER_BYTES + (512 << 10)
            };
            assert!(
                pulled.get() < most,
                "{kind:?} gzip={gzip}: {} bytes pulled from the stream",
                pulled.get()
            );
            let text = crate::Error::Layer {
                image: "i".into(),
                layer: "l".into(),
                entry: f.entry,
                problem: f.problem,
            }
            .to_string();
            assert!(text.contains("1048576 bytes"), "{text}");
            assert!(text.len() < 512, "{kind:?}: {} bytes of error", text.len());
        }
    }
}

/// A regular, empty file whose name, `name`, is written as a GNU long name, unchecked.
fn long_named(name: &[u8]) -> Vec<u8> {
    let mut tar = Vec::new();
    let mut append = |h: &mut tar::Header, data: &[u8]| {
        h.set_cksum();
        tar.extend_from_slice(h.as_bytes());
        tar.extend_from_slice(data);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    };
    let mut long = gnu_header(EntryType::GNULongName, name.len() as u64);
    long.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
    append(&mut long, name);
    let mut file = gnu_header(EntryType::Regular, 0);
    file.set_path("short").unwrap();
    append(&mut file, b"");
    tar.extend_from_slice(&[0u8; 1024]);
    tar
}

#[test]
fn errors_quote_only_the_start_of_a_long_name() {
    // Under PATH_MAX, far over what an error should carry.
    let name = format!("../{}", "a/".repeat(2_000));
    let (_dir, result) = unpack_tar(&long_named(name.as_bytes()), Compression::None, &limits());
    let f = result.expect_err("the name climbs out");
    assert_eq!(f.problem, LayerProblem::DotDot);
    let entry = f.entry.unwrap();
    assert!(entry.starts_with("../a/a/"), "{entry}");
    assert!(
        entry.len() < QUOTED_BYTES + 64,
        "{} bytes of name quoted",
        entry.len()
    );
    assert!(entry.contains(&format!("{} bytes", name.len())), "{entry}");
}

#[test]
fn names_past_100_bytes_still_unpack() {
    let deep = format!("{}file", "dir/".repeat(100));
    let tar = Tar::new().file(&deep, 0o644, b"deep").build();
    let (dir, result) = unpack_tar(&tar, Compression::Gzip, &limits());
    result.unwrap();
    assert_eq!(fs::read(dir.path().join(&deep)).unwrap(), b"deep");
}

/// A GNU sparse entry `name` of `real` bytes whose only data is its last 512 bytes (`7`s): the
/// archive holds one block of data whatever `real` is.
fn sparse(name: &str, real: u64) -> Vec<u8> {
    let mut h = gnu_header(EntryType::GNUSparse, 512);
    h.set_path(name).unwrap();
    let gnu = h.as_gnu_mut().unwrap();
    gnu.set_real_size(real);
    gnu.sparse[0].set_offset(real - 512);
    gnu.sparse[0].set_length(512);
    h.set_cksum();
    let mut tar = h.as_bytes().to_vec();
    tar.extend_from_slice(&[7u8; 512]);
    tar.extend_from_slice(&[0u8; 1024]);
    tar
}

#[test]
fn a_sparse_entry_counts_its_holes_against_the_cap() {
    let small = Limits {
        max_layer_bytes: 8 << 20,
        max_layer_entries: 1_000,
    };
    let tar = sparse("sparse", 64 << 20);
    let blob = compress(&tar, Compression::Gzip);
    assert!(blob.len() < 2048, "a {} byte layer", blob.len());
    let (dir, result) = unpack_tar(&tar, Compression::Gzip, &small);
    let f = result.expect_err("64 MiB of file is past an 8 MiB cap");
    assert_eq!(f.problem, LayerProblem::TooLarge(8 << 20));
    assert_eq!(f.entry.as_deref(), Some("sparse"));
    let written = fs::symlink_metadata(dir.path().join("sparse")).map_or(0, |m| m.len());
    assert!(written <= 8 << 20, "{written} bytes written");

    // Under the cap, the file is there, holes and all.
    let (dir, result) = unpack_tar(&sparse("sparse", 1 << 20), Compression::Gzip, &small);
    result.unwrap();
    let data = fs::read(dir.path().join("sparse")).unwrap();
    assert_eq!(data.len(), 1 << 20);
    assert!(data[..(1 << 20) - 512].iter().all(|&b| b == 0));
    assert!(data[(1 << 20) - 512..].iter().all(|&b| b == 7));
}

#[test]
fn a_hard_link_to_a_symlink_obeys_the_symlink_rule_where_it_lands() {
    let (entry, got) = problem(
        Tar::new()
            .dir("a", 0o755)
            .dir("a/b", 0o755)
            .symlink("a/b/top", "../../etc")
            .hardlink("top", "a/b/top"),
    );
    assert_eq!(entry.as_deref(), Some("top"));
    assert_eq!(got, LayerProblem::SymlinkEscapes("../../etc".into()));

    let tar = Tar::new()
        .dir("a/b", 0o755)
        .dir("a/c", 0o755)
        .symlink("a/b/l", "../x")
        .hardlink("a/c/l", "a/b/l")
        .symlink("abs", "/etc/passwd")
        .hardlink("a/b/abs", "abs")
        .build();
    let (dir, result) = unpack_tar(&tar, Compression::None, &limits());
    result.unwrap();
    let root = dir.path();
    assert_eq!(
        fs::read_link(root.join("a/c/l")).unwrap(),
        Path::new("../x")
    );
    assert_eq!(
        fs::symlink_metadata(root.join("a/c/l")).unwrap().ino(),
        fs::symlink_metadata(root.join("a/b/l")).unwrap().ino()
    );
    assert_eq!(
        fs::read_link(root.join("a/b/abs")).unwrap(),
        Path::new("/etc/passwd")
    );
}

/// Needs CAP_MKNOD.
#[test]
#[ignore = "needs root: cargo xtask test"]
fn device_nodes_and_fifos_are_made_as_the_layer_has_them() {
    let mut tar = Tar::new()
        .dir("dev", 0o755)
        .char_device("dev/console", 5, 1)
        .char_device("dev/null", 1, 3)
        .block_device("dev/sda", 8, 0)
        .fifo("dev/initctl", 0o600);
    // Owned by root:disk, as debootstrap's block devices are.
    let mut h = gnu_header(EntryType::Block, 0);
    h.set_mode(0o660);
    h.set_gid(6);
    h.set_device_major(259).unwrap();
    h.set_device_minor(1).unwrap();
    tar = tar.entry(h, "dev/nvme0n1p1", b"");
    let (dir, result) = unpack_tar(&tar.build(), Compression::Gzip, &limits());
    result.unwrap();
    let root = dir.path();
    let node = |p: &str| fs::symlink_metadata(root.join(p)).unwrap();
    let numbers = |m: &fs::Metadata| (libc::major(m.rdev()), libc::minor(m.rdev()));
    for (path, block, want, mode) in [
        ("dev/console", false, (5, 1), 0o666),
        ("dev/null", false, (1, 3), 0o666),
        ("dev/sda", true, (8, 0), 0o660),
        ("dev/nvme0n1p1", true, (259, 1), 0o660),
    ] {
        let m = node(path);
        if block {
            assert!(m.file_type().is_block_device(), "{path} is a block device");
        } else {
            assert!(m.file_type().is_char_device(), "{path} is a char device");
        }
        assert_eq!(numbers(&m), want, "{path}");
        assert_eq!(m.mode() & 0o7777, mode, "{path}");
        assert_eq!(m.mtime() as u64, test_support::image::MTIME, "{path}");
    }
    assert_eq!(node("dev/nvme0n1p1").gid(), 6, "owner kept");
    let fifo = node("dev/initctl");
    assert!(fifo.file_type().is_fifo());
    assert_eq!(fifo.mode() & 0o7777, 0o600);
}

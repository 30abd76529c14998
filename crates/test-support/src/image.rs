//! Test images made offline: tar layers (busybox from Debian's busybox-static, whiteouts, opaque
//! directories, and hostile entries no honest tool writes), compressed or not, with their image
//! configuration, manifest and index, digests computed.
//!
//! Push them to a local registry with [`crate::registry::Registry`].

use std::io::Write as _;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    digest_text(&Sha256::digest(bytes))
}

/// `sha256:` and the hex digits of a finished hash.
fn digest_text(hash: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("sha256:");
    for b in hash {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The OCI media types the builders use.
pub mod media {
    /// An OCI image manifest.
    pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// An OCI image index.
    pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
    /// An OCI image configuration.
    pub const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
    /// An uncompressed layer.
    pub const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
    /// A gzip layer.
    pub const LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
    /// A zstd layer.
    pub const LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
}

/// A tar archive being built, entry by entry, in memory. Owners are root, times fixed.
pub struct Tar {
    builder: tar::Builder<Vec<u8>>,
}

impl Default for Tar {
    fn default() -> Self {
        Tar::new()
    }
}

/// The modification time every entry gets: 2024-01-01T00:00:00Z.
pub const MTIME: u64 = 1_704_067_200;

impl Tar {
    /// An empty archive.
    pub fn new() -> Tar {
        Tar {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(MTIME);
        h
    }

    fn append(mut self, mut header: tar::Header, path: &str, data: &[u8]) -> Tar {
        self.builder
            .append_data(&mut header, path, data)
            .unwrap_or_else(|e| panic!("tar entry {path}: {e}"));
        self
    }

    /// An entry with the header `header` as given (its path and checksum set here).
    pub fn entry(self, header: tar::Header, path: &str, data: &[u8]) -> Tar {
        self.append(header, path, data)
    }

    /// A directory.
    pub fn dir(self, path: &str, mode: u32) -> Tar {
        self.append(Self::header(tar::EntryType::Directory, mode, 0), path, &[])
    }

    /// A regular file owned by root.
    pub fn file(self, path: &str, mode: u32, contents: &[u8]) -> Tar {
        self.file_owned(path, mode, 0, 0, contents)
    }

    /// A regular file owned by `uid`:`gid`.
    pub fn file_owned(self, path: &str, mode: u32, uid: u64, gid: u64, contents: &[u8]) -> Tar {
        let mut h = Self::header(tar::EntryType::Regular, mode, contents.len() as u64);
        h.set_uid(uid);
        h.set_gid(gid);
        self.append(h, path, contents)
    }

    /// A symbolic link at `path` to `target`.
    pub fn symlink(mut self, path: &str, target: &str) -> Tar {
        let mut h = Self::header(tar::EntryType::Symlink, 0o777, 0);
        self.builder
            .append_link(&mut h, path, target)
            .unwrap_or_else(|e| panic!("tar symlink {path}: {e}"));
        self
    }

    /// A hard link at `path` to the earlier entry `target`.
    pub fn hardlink(mut self, path: &str, target: &str) -> Tar {
        let mut h = Self::header(tar::EntryType::Link, 0o644, 0);
        self.builder
            .append_link(&mut h, path, target)
            .unwrap_or_else(|e| panic!("tar hard link {path}: {e}"));
        self
    }

    /// An OCI whiteout: removes `path` of the layers below (`dir/.wh.name`).
    pub fn whiteout(self, path: &str) -> Tar {
        let (dir, name) = path.rsplit_once('/').map_or(("", path), |(d, n)| (d, n));
        let entry = if dir.is_empty() {
            format!(".wh.{name}")
        } else {
            format!("{dir}/.wh.{name}")
        };
        self.file(&entry, 0o644, b"")
    }

    /// An OCI opaque marker: `dir` hides everything the layers below have in it.
    pub fn opaque(self, dir: &str) -> Tar {
        self.file(&format!("{dir}/.wh..wh..opq"), 0o644, b"")
    }

    /// A character device node, mode 0666.
    pub fn char_device(self, path: &str, major: u32, minor: u32) -> Tar {
        self.device(tar::EntryType::Char, path, 0o666, (major, minor))
    }

    /// A block device node, mode 0660.
    pub fn block_device(self, path: &str, major: u32, minor: u32) -> Tar {
        self.device(tar::EntryType::Block, path, 0o660, (major, minor))
    }

    fn device(
        self,
        kind: tar::EntryType,
        path: &str,
        mode: u32,
        (major, minor): (u32, u32),
    ) -> Tar {
        let mut h = Self::header(kind, mode, 0);
        h.set_device_major(major)
            .expect("a gnu header has device numbers");
        h.set_device_minor(minor)
            .expect("a gnu header has device numbers");
        self.append(h, path, &[])
    }

    /// A named pipe.
    pub fn fifo(self, path: &str, mode: u32) -> Tar {
        self.append(Self::header(tar::EntryType::Fifo, mode, 0), path, &[])
    }

    /// An entry whose name (and link name) bytes are written as given, unchecked: `../escape`,
    /// `/etc/x`, a hard link to `/etc/passwd`. Names must fit the 100-byte header field.
    pub fn raw(mut self, kind: tar::EntryType, name: &[u8], link: &[u8], data: &[u8]) -> Tar {
        let mut h = Self::header(kind, 0o644, data.len() as u64);
        {
            let old = h.as_old_mut();
            old.name.fill(0);
            old.name[..name.len()].copy_from_slice(name);
            old.linkname.fill(0);
            old.linkname[..link.len()].copy_from_slice(link);
        }
        h.set_cksum();
        self.builder
            .append(&h, data)
            .unwrap_or_else(|e| panic!("raw tar entry: {e}"));
        self
    }

    /// A minimal busybox root: `bin/busybox` (Debian's busybox-static), `bin/sh` and `bin/ls`
    /// symbolic links to it, `etc/passwd`, `etc/group`, a sticky `tmp/`.
    ///
    /// # Panics
    ///
    /// When `/bin/busybox` is missing (`apt-get install busybox-static`).
    pub fn busybox() -> Tar {
        let busybox = std::fs::read("/bin/busybox").unwrap_or_else(|e| {
            panic!("cannot read /bin/busybox (install Debian's busybox-static): {e}")
        });
        Tar::new()
            .dir("bin", 0o755)
            .file("bin/busybox", 0o755, &busybox)
            .symlink("bin/sh", "busybox")
            .symlink("bin/ls", "/bin/busybox")
            .dir("etc", 0o755)
            .file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n")
            .file("etc/group", 0o644, b"root:x:0:\n")
            .dir("tmp", 0o1777)
    }

    /// A root as a busybox image from a registry has it: Debian's busybox-static with a hard
    /// link for every applet it lists (`busybox --list-full`: `bin/sh`, `usr/bin/top`,
    /// `sbin/ip`, ...), `root`, `www-data` and `nobody` users, a sticky `tmp/`; and small shell
    /// stand-ins for the two applets Debian's build leaves out that conformance suites run
    /// (`pgrep`: pids whose name matches; `ipcs -m`: the System V shared memory segments).
    ///
    /// # Panics
    ///
    /// As [`Tar::busybox`], or when busybox cannot list its applets.
    pub fn busybox_full() -> Tar {
        let busybox = std::fs::read("/bin/busybox").unwrap_or_else(|e| {
            panic!("cannot read /bin/busybox (install Debian's busybox-static): {e}")
        });
        let out = std::process::Command::new("/bin/busybox")
            .arg("--list-full")
            .output()
            .unwrap_or_else(|e| panic!("cannot run /bin/busybox --list-full: {e}"));
        let listed = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut tar = Tar::new();
        for dir in ["bin", "etc", "sbin", "usr", "usr/bin", "usr/sbin"] {
            tar = tar.dir(dir, 0o755);
        }
        tar = tar
            .dir("root", 0o700)
            .dir("tmp", 0o1777)
            .file("bin/busybox", 0o755, &busybox)
            .file(
                "etc/passwd",
                0o644,
                b"root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/false\n\
                  nobody:x:65534:65534:nobody:/home:/bin/false\n",
            )
            .file(
                "etc/group",
                0o644,
                b"root:x:0:\nwww-data:x:33:\nnogroup:x:65534:\n",
            );
        let mut applets = Vec::new();
        for applet in listed.lines().map(str::trim) {
            // Only names in the directories made above (not `linuxrc` at the top).
            if applet == "bin/busybox" || !applet.contains('/') || applet.contains("..") {
                continue;
            }
            tar = tar.hardlink(applet, "bin/busybox");
            applets.push(applet.rsplit('/').next().unwrap_or(applet).to_owned());
        }
        let stand_ins: [(&str, &[u8]); 2] = [
            (
                "pgrep",
                b"#!/bin/sh\n# pgrep look-alike: the pids whose name matches $1\nfound=1\n\
                  for d in /proc/[0-9]*; do\n  n=$(cat \"$d/comm\" 2>/dev/null) || continue\n  \
                  if echo \"$n\" | grep -qE \"$1\"; then echo \"${d#/proc/}\"; found=0; fi\n\
                  done\nexit $found\n",
            ),
            (
                "ipcs",
                b"#!/bin/sh\n# ipcs -m look-alike: the shared memory segments\n\
                  cat /proc/sysvipc/shm\n",
            ),
        ];
        for (name, script) in stand_ins {
            if !applets.iter().any(|a| a == name) {
                tar = tar.file(&format!("usr/bin/{name}"), 0o755, script);
            }
        }
        tar
    }

    /// The archive's bytes.
    pub fn build(self) -> Vec<u8> {
        self.builder
            .into_inner()
            .unwrap_or_else(|e| panic!("finish tar: {e}"))
    }
}

/// How a layer blob is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

/// Compresses `bytes`.
pub fn compress(bytes: &[u8], compression: Compression) -> Vec<u8> {
    match compression {
        Compression::None => bytes.to_vec(),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(bytes).expect("gzip to memory");
            enc.finish().expect("gzip to memory")
        }
        Compression::Zstd => zstd::encode_all(bytes, 3).expect("zstd to memory"),
    }
}

/// A layer blob with its digests.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The blob as the registry stores it.
    pub blob: Vec<u8>,
    /// Its media type.
    pub media_type: &'static str,
    /// The blob's digest.
    pub digest: String,
    /// The uncompressed tar's digest.
    pub diff_id: String,
}

impl Layer {
    /// A layer of `tar`, compressed with `compression`.
    pub fn new(tar: &[u8], compression: Compression) -> Layer {
        let blob = compress(tar, compression);
        Layer::from_parts(blob, digest(tar), compression)
    }

    /// A layer whose blob and diff id are given as they are (a bomb compressed while streaming).
    pub fn from_parts(blob: Vec<u8>, diff_id: String, compression: Compression) -> Layer {
        let media_type = match compression {
            Compression::None => media::LAYER,
            Compression::Gzip => media::LAYER_GZIP,
            Compression::Zstd => media::LAYER_ZSTD,
        };
        Layer {
            digest: digest(&blob),
            blob,
            media_type,
            diff_id,
        }
    }

    /// A gzip layer holding one file `path` of `size` zeros: a few kilobytes that decompress to
    /// `size` bytes. Built while streaming, never held whole in memory.
    pub fn zero_bomb(path: &str, size: u64) -> Layer {
        struct Tee<W> {
            hasher: Sha256,
            out: W,
        }
        impl<W: std::io::Write> std::io::Write for Tee<W> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let n = self.out.write(buf)?;
                self.hasher.update(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                self.out.flush()
            }
        }
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let mut tee = Tee {
            hasher: Sha256::new(),
            out: gz,
        };
        {
            let mut builder = tar::Builder::new(&mut tee);
            let mut h = Tar::header(tar::EntryType::Regular, 0o644, size);
            builder
                .append_data(&mut h, path, std::io::Read::take(std::io::repeat(0), size))
                .expect("stream the bomb");
            builder.finish().expect("finish the bomb");
        }
        let diff_id = digest_text(&tee.hasher.finalize());
        let blob = tee.out.finish().expect("gzip to memory");
        Layer::from_parts(blob, diff_id, Compression::Gzip)
    }
}

/// This machine's platform in Go's words (`linux`, `amd64`), as registries and indexes spell it.
pub fn this_platform() -> (&'static str, &'static str, Option<&'static str>) {
    let (arch, variant) = match std::env::consts::ARCH {
        "x86_64" => ("amd64", None),
        "aarch64" => ("arm64", Some("v8")),
        "arm" => ("arm", Some("v7")),
        "x86" => ("386", None),
        "powerpc64" => ("ppc64le", None),
        "riscv64" => ("riscv64", None),
        "s390x" => ("s390x", None),
        other => (other, None),
    };
    ("linux", arch, variant)
}

/// A platform that is not this machine's, for the other half of a two-platform index.
pub fn other_platform() -> (&'static str, &'static str, Option<&'static str>) {
    if this_platform().1 == "s390x" {
        ("linux", "ppc64le", None)
    } else {
        ("linux", "s390x", None)
    }
}

/// An image: configuration, manifest and layers, digests computed.
#[derive(Debug, Clone)]
pub struct Image {
    /// The layers, bottom first.
    pub layers: Vec<Layer>,
    /// The configuration's bytes.
    pub config: Vec<u8>,
    /// The configuration's digest: the image id.
    pub config_digest: String,
    /// The manifest's bytes.
    pub manifest: Vec<u8>,
    /// The manifest's digest.
    pub manifest_digest: String,
    /// The platform written in the configuration.
    pub platform: (String, String, Option<String>),
}

/// Builds an [`Image`] for a platform (this machine's unless told).
#[derive(Debug, Clone)]
pub struct ImageBuilder {
    layers: Vec<Layer>,
    platform: (String, String, Option<String>),
    manifest_edit: Option<fn(&mut Value)>,
    labels: Vec<(String, String)>,
    user: Option<String>,
    cmd: Option<Vec<String>>,
    env: Option<Vec<String>>,
}

impl Default for ImageBuilder {
    fn default() -> Self {
        ImageBuilder::new()
    }
}

impl ImageBuilder {
    /// No layers yet, this machine's platform.
    pub fn new() -> ImageBuilder {
        let (os, arch, variant) = this_platform();
        ImageBuilder {
            layers: Vec::new(),
            platform: (os.into(), arch.into(), variant.map(Into::into)),
            manifest_edit: None,
            labels: Vec::new(),
            user: None,
            cmd: None,
            env: None,
        }
    }

    /// A label in the configuration: images that differ only in labels share their layers but
    /// not their id.
    pub fn label(mut self, key: &str, value: &str) -> ImageBuilder {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// The configuration's `User` (`1000`, `nobody`, `1000:1000`).
    pub fn user(mut self, user: &str) -> ImageBuilder {
        self.user = Some(user.into());
        self
    }

    /// The configuration's `Cmd` (`/bin/sh` unless told): what a container of the image runs
    /// when its request names no command, such as a pod's infra container.
    pub fn cmd(mut self, cmd: &[&str]) -> ImageBuilder {
        self.cmd = Some(cmd.iter().map(|&arg| arg.to_owned()).collect());
        self
    }

    /// The configuration's `Env` (`PATH=/bin` unless told).
    pub fn env(mut self, env: &[&str]) -> ImageBuilder {
        self.env = Some(env.iter().map(|&var| var.to_owned()).collect());
        self
    }

    /// Another platform.
    pub fn platform(mut self, (os, arch, variant): (&str, &str, Option<&str>)) -> ImageBuilder {
        self.platform = (os.into(), arch.into(), variant.map(Into::into));
        self
    }

    /// Adds a layer on top.
    pub fn layer(mut self, layer: Layer) -> ImageBuilder {
        self.layers.push(layer);
        self
    }

    /// Changes the manifest JSON before it is serialised: a lie about a size, say.
    pub fn edit_manifest(mut self, edit: fn(&mut Value)) -> ImageBuilder {
        self.manifest_edit = Some(edit);
        self
    }

    /// The image.
    pub fn build(self) -> Image {
        let (os, arch, variant) = &self.platform;
        let mut config = json!({
            "architecture": arch,
            "os": os,
            "config": {
                "Env": self.env.clone().unwrap_or_else(|| vec!["PATH=/bin".to_owned()]),
                "Cmd": self.cmd.clone().unwrap_or_else(|| vec!["/bin/sh".to_owned()]),
                "Labels": self.labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>(),
            },
            "rootfs": {
                "type": "layers",
                "diff_ids": self.layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>(),
            },
            "history": [],
        });
        if let Some(v) = variant {
            config["variant"] = json!(v);
        }
        if let Some(user) = &self.user {
            config["config"]["User"] = json!(user);
        }
        let config = serde_json::to_vec(&config).expect("serialise config");
        let config_digest = digest(&config);
        let mut manifest = json!({
            "schemaVersion": 2,
            "mediaType": media::MANIFEST,
            "config": {"mediaType": media::CONFIG, "digest": config_digest, "size": config.len()},
            "layers": self.layers.iter().map(|l| json!({
                "mediaType": l.media_type, "digest": l.digest, "size": l.blob.len(),
            })).collect::<Vec<_>>(),
        });
        if let Some(edit) = self.manifest_edit {
            edit(&mut manifest);
        }
        let manifest = serde_json::to_vec(&manifest).expect("serialise manifest");
        Image {
            manifest_digest: digest(&manifest),
            manifest,
            config_digest,
            config,
            layers: self.layers,
            platform: self.platform,
        }
    }
}

/// An image index over `images`, each listed with the platform of its configuration.
#[derive(Debug, Clone)]
pub struct Index {
    /// The index's bytes.
    pub bytes: Vec<u8>,
    /// Its digest.
    pub digest: String,
}

impl Index {
    /// The index of `images`.
    pub fn of(images: &[&Image]) -> Index {
        let manifests: Vec<Value> = images
            .iter()
            .map(|img| {
                let (os, arch, variant) = &img.platform;
                let mut platform = json!({"os": os, "architecture": arch});
                if let Some(v) = variant {
                    platform["variant"] = json!(v);
                }
                json!({
                    "mediaType": media::MANIFEST,
                    "digest": img.manifest_digest,
                    "size": img.manifest.len(),
                    "platform": platform,
                })
            })
            .collect();
        let index = json!({
            "schemaVersion": 2,
            "mediaType": media::INDEX,
            "manifests": manifests,
        });
        let bytes = serde_json::to_vec(&index).expect("serialise index");
        Index {
            digest: digest(&bytes),
            bytes,
        }
    }
}

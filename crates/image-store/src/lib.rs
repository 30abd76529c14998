//! Pull OCI images from distribution registries, verify every blob, keep them content-addressed
//! and unpack their layers, once each, in overlayfs form.
//!
//! An image is untrusted input from an untrusted network. This crate's job is to turn it into
//! directories a container runtime can mount as overlayfs lower layers, and to refuse, naming
//! the image, layer and tar entry, anything that would write outside them.
//!
//! - [`Reference`]: image references parsed and normalised as Kubernetes and containers/image
//!   do (`busybox` is `docker.io/library/busybox:latest`).
//! - [`Store`]: the store on disk. [`Store::pull`] resolves a tag to a manifest (this node's
//!   [`Platform`] from an index), streams the configuration and layers (in parallel, bounded)
//!   into content-addressed blobs, each verified against its digest and size while it
//!   arrives, unpacks each layer into `<root>/layers/<chain id>/` as its bytes arrive (put in
//!   place once its blob is verified and its diff id matched) and only then lists the image.
//!   A pull of a reference already being pulled joins it. [`Store::list`], [`Store::get`] (by
//!   reference, digest or id prefix), [`Store::remove`] (a tag removes that name, the image
//!   going with its last; an id or digest the image; blobs and layers go when no image uses
//!   them) and [`Store::disk_usage`] (bytes and inodes). No lock is held across a request to
//!   a registry: a slow pull holds up no removal, listing or other pull, and a progress
//!   timeout ([`StoreConfig::progress_timeout`], [`StoreConfig::min_pull_rate`]) cancels a
//!   pull its registry only trickles to.
//! - Layers are unpacked as overlayfs wants them: a whiteout `.wh.name` becomes a character
//!   device 0/0 `name`, an opaque marker `.wh..wh..opq` the xattr `trusted.overlay.opaque=y`
//!   (as containerd's overlay snapshotter and containers/storage lay them out). Entries with
//!   `..` or absolute paths, links out of the layer, writes through a symbolic link, headers
//!   past 1 MiB and layers past the [`Limits`] (decompression bombs, sparse files included) are
//!   refused. Device nodes are made as the layer has them when running as root (the device
//!   cgroup, not the layer, decides what a container may open).
//! - Containers' root file systems: [`Store::create_rootfs`] mounts an overlay of an image's
//!   layers with a writable upper directory per container ([`StorageDriver::Overlay`]) or,
//!   where overlayfs cannot be mounted, copies the layers with whiteouts and opaque
//!   directories applied ([`StorageDriver::Vfs`]); the driver is probed (or configured) at
//!   open and reported by [`Store::storage_driver`]. [`Store::remove_rootfs`],
//!   [`Store::rootfs`], [`Store::list_rootfs`]. An image a container uses cannot be removed
//!   ([`Error::ImageInUse`]) and its layers are never collected.
//! - Crash safety: blobs are written to temporary files, synced and renamed into place; layers
//!   are unpacked into temporary directories and renamed; `images.json` is replaced atomically
//!   after both. A pull killed at any point leaves no image; [`Store::open`] sweeps what it left.
//!   A root file system's record is written before it is made or removed; [`Store::open`]
//!   takes down half-made ones and mounts again ready ones whose mount is gone.
//! - Credentials: [`Auth`] per pull, and [`AuthFile`] to look them up in a containers-auth.json
//!   file (CRI-O's `global_auth_file`, Podman's `auth.json`). [`Store::config`] reads an image's
//!   configuration.
//! - Trust and registry resolution ([`Store::pull_with`] and [`PullOptions`]): a
//!   containers-policy.json ([`Policy`]: `reject`, `insecureAcceptAnything`, `sigstoreSigned`
//!   with ECDSA P-256 public keys, the most specific `docker` scope winning) checked once the
//!   manifest digest is known and before any layer is fetched; a containers-registries.conf
//!   ([`Registries`]: short names by alias or unqualified-search registries, mirrors tried
//!   before the location, `blocked`, `insecure`, drop-in files). What cannot be verified here
//!   (`signedBy` GPG signatures, Fulcio, Rekor) refuses the pull, naming the policy section.
//! - Progress: a [`Progress`] observer given with [`PullOptions::with_progress`] hears each
//!   layer start, its bytes as they arrive, its end (or that it was reused) and the end of the
//!   pull; the pull itself logs its progress at most every 5 s and a summary at the end.
//! - One [`Error`], whose variants name the image, the blob or layer and the tar entry, the
//!   policy section and requirement, or the registries.conf table.
//!
//! - The node's files: [`NodeFiles`] holds the paths of a policy (or the defaults to look
//!   in), a registries.conf and a credentials file, and gives the [`PullOptions`] and [`Auth`]
//!   of a pull, reading each file again only when it changed.
//!
//! It does not know CRI, start containers, or find `policy.json`, `registries.conf` or
//! credentials files on its own: callers pass their paths (or default paths), [`Auth`] and the
//! insecure registries. Whiteouts, opaque directories and overlay mounts need root (`CAP_MKNOD`,
//! `CAP_SYS_ADMIN`).
//!
//! # Example
//!
//! ```no_run
//! use image_store::{Auth, Store, StoreConfig};
//!
//! # async fn example() -> image_store::Result<()> {
//! let mut config = StoreConfig::new("/var/lib/crio-lite/images");
//! config.insecure_registries = vec!["127.0.0.1:5000".to_owned()];
//! let store = Store::open(config)?;
//!
//! let image = store.pull("127.0.0.1:5000/busybox", &Auth::Anonymous).await?;
//! assert_eq!(image.names, ["127.0.0.1:5000/busybox:latest"]);
//! for layer in &image.layers {
//!     // The overlayfs lower directories, bottom first.
//!     println!("{}", store.layer_dir(&layer.chain_id).display());
//! }
//! assert_eq!(store.get(&image.id[..12])?.id, image.id);
//! let usage = store.disk_usage()?;
//! println!("{} bytes, {} inodes", usage.bytes, usage.inodes);
//! // A container's root file system; the image cannot go while it is there.
//! let rootfs = store.create_rootfs("ctr1", "127.0.0.1:5000/busybox")?;
//! println!("{} by {}", rootfs.path.display(), store.storage_driver());
//! store.remove_rootfs("ctr1")?;
//! store.remove("127.0.0.1:5000/busybox:latest").await?;
//! # Ok(())
//! # }
//! ```
//!
//! With a node's policy and registries configuration:
//!
//! ```no_run
//! use image_store::{Auth, Policy, PullOptions, Registries, Store, StoreConfig};
//!
//! # async fn example() -> image_store::Result<()> {
//! let store = Store::open(StoreConfig::new("/var/lib/crio-lite/images"))?;
//! let options = PullOptions::new()
//!     .with_policy(Policy::from_file("/etc/containers/policy.json")?)
//!     .with_registries(Registries::load(
//!         "/etc/containers/registries.conf",
//!         Some("/etc/containers/registries.conf.d"),
//!     )?);
//! // Mirrors first; the image is named as asked; refused unless the policy accepts it.
//! let image = store.pull_with("quay.io/team/app:v1", &Auth::Anonymous, &options).await?;
//! assert_eq!(image.names, ["quay.io/team/app:v1"]);
//! # Ok(())
//! # }
//! ```

mod auth;
mod auth_file;
mod blobs;
mod config;
mod copy;
mod digest;
mod documents;
mod driver;
mod error;
mod feed;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod index;
mod inspect;
mod layers;
mod manifest;
mod mount;
mod node_files;
mod pins;
mod platform;
mod policy;
mod progress;
mod pull;
mod reference;
mod registries;
mod rootfs;
mod sigstore;
mod store;
mod trust;
mod unpack;
mod usage;
mod watchdog;

pub use auth::Auth;
pub use auth_file::AuthFile;
pub use config::{Limits, StoreConfig};
pub use digest::Digest;
pub use driver::StorageDriver;
pub use error::{Attempt, Error, LayerProblem, RegistryRefusal, Result};
pub use index::{Image, Layer};
pub use node_files::NodeFiles;
pub use platform::Platform;
pub use policy::{Policy, Requirement, Rule, SignedIdentity, SigstoreSigned};
pub use progress::Progress;
pub use pull::log_failed_pull;
pub use reference::{DEFAULT_REGISTRY, DEFAULT_TAG, Reference};
pub use registries::{PullFromMirror, PullSource, Registries, ShortNameMode};
pub use rootfs::Rootfs;
pub use sigstore::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, signature_tag};
pub use store::{Removed, Store, Swept};
pub use trust::PullOptions;
pub use usage::Usage;

/// An image's configuration, as [`Store::config`] returns it (the oci-spec crate's type).
pub use oci_spec::image::ImageConfiguration;

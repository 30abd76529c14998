//! Parse, validate and load CNI network configuration files.
//!
//! This crate turns the files of a CNI configuration directory (`/etc/cni/net.d`) into validated
//! [`NetworkList`]s: `.conflist` files are network configuration lists, `.conf` and `.json` files
//! are single plugin configurations promoted to a list of one. It reads files and directories it
//! is given and nothing else: it runs no plugins (that is `cni-exec`) and does not watch for
//! changes (that is `cni-watch`).
//!
//! You probably want the `ocicni` crate, which builds on this one.
//!
//! # Main items
//!
//! - [`load_dir`]: every file of a directory, each with a [`Verdict`] (loaded, shadowed by an
//!   earlier file with the same network name, or rejected with an [`Error`] naming the file and
//!   the field). One bad file never stops the load.
//! - [`load_file`], [`parse_conflist`], [`parse_conf`]: one file, or bytes.
//! - [`NetworkList`]: the parsed [`NetworkConfigList`], its effective [`Version`], the exact file
//!   bytes and the bytes libcni would cache for it.
//! - [`effective_version`], [`is_valid_network_name`], [`is_plain_file_name`]: the rules.
//! - [`read_regular_file`]: how every file is read: regular files only (a FIFO, socket or device
//!   is refused without blocking), at most [`MAX_CONFIG_BYTES`] for a configuration file. The rule
//!   itself lives in the `safe-file` crate; this is its form with links followed.
//!
//! # Rules
//!
//! - `name` is required and follows the spec: `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`; it is at most 255
//!   bytes, as files named after it (plugin directory, cache entries) must be.
//! - There is at least one plugin, and every `type` (and `ipam.type`) is a plain file name.
//! - A missing `cniVersion` means 0.1.0; `cniVersions` (spec 1.1) picks the highest supported
//!   version; every entry must parse.
//! - `disableCheck`, `disableGC` and `loadOnlyInlinedPlugins` accept `"true"`/`"false"` strings.
//! - Keys the spec does not define are kept, in order, for the plugin to read.
//!
//! # Example
//!
//! ```no_run
//! use std::path::Path;
//!
//! # fn main() -> cni_config::Result<()> {
//! let load = cni_config::load_dir(Path::new("/etc/cni/net.d"))?;
//! for (file, error) in load.rejected() {
//!     eprintln!("skipping {}: {error}", file.display());
//! }
//! if let Some(net) = load.default_network() {
//!     println!("{} ({}): {:?}", net.name(), net.version, net.plugin_types());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Bytes can be parsed directly:
//!
//! ```
//! let net = cni_config::parse_conflist(br#"{
//!     "cniVersions": ["1.0.0", "1.1.0"],
//!     "name": "crio",
//!     "plugins": [{"type": "bridge", "bridge": "cni0"}, {"type": "portmap"}]
//! }"#).unwrap();
//! assert_eq!(net.version, cni_types::Version::V1_1_0);
//! assert_eq!(net.plugin_types(), ["bridge", "portmap"]);
//!
//! let err = cni_config::parse_conflist(br#"{"name": "x", "plugins": [{"type": "../evil"}]}"#)
//!     .unwrap_err();
//! assert_eq!(err.to_string(), r#"plugins[0].type: must be a plain file name, got "../evil""#);
//! ```

mod dir;
mod error;
mod parse;
mod read;
mod validate;

pub use cni_types::Version;
pub use cni_types::config::{
    Capabilities, ConfigError, Dns, Ipam, NetworkConfigList, PluginConfig,
};
pub use dir::{DirLoad, EXTENSIONS, FileReport, Verdict, load_dir, load_file};
pub use error::{Error, Result};
pub use parse::{Format, NetworkList, parse_conf, parse_conflist};
pub use read::{MAX_CONFIG_BYTES, open_regular_file, read_regular_file};
pub use validate::{
    effective_version, is_plain_file_name, is_valid_network_name, validate_network_name,
};

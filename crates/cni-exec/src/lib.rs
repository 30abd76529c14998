//! Find and run CNI plugins; the only crate of the workspace that spawns processes.
//!
//! You probably want the `ocicni` crate, which builds on this one.
//!
//! # The process layer
//!
//! At the bottom of the crate, plugins are just programs: bytes in on stdin, variables in the
//! environment, bytes out on stdout, an exit status. Nothing here knows what a CNI result looks like.
//!
//! - [`Exec`] is the seam: find a plugin by name, run it. Code above this layer holds an
//!   `Arc<dyn Exec>`, so it can be tested against a fake.
//! - [`ProcessExec`] is the real thing on `tokio::process`: an empty environment plus the `CNI_*`
//!   variables and `PATH`, a process group per plugin that is killed on timeout or cancellation,
//!   bounded stdout/stderr, retries while the binary is "text file busy", and an optional wrapper
//!   command (see [`ProcessExec::with_launcher`]).
//! - [`find_plugin_in`] searches plugin directories ([`DEFAULT_PLUGIN_DIRS`] unless configured) for an
//!   executable file.
//! - [`Error::Failed`] keeps a failed plugin's stdout, so the layer above can parse the spec's error
//!   object out of it, and the tail of its stderr for humans.
//!
//! # The fake plugin
//!
//! The crate ships a binary, `cni-fake-plugin`: a configurable test double for runtime authors. It
//! records every invocation (command, environment, parsed stdin, pid) as one JSON line in a file and
//! behaves as told by a `"fake"` object in its network configuration, so each plugin of a conflist can
//! behave differently. The `CNI_FAKE` environment variable (a JSON object) overrides keys of that object.
//!
//! | key | effect |
//! |-----|--------|
//! | `"record": "/path/log.jsonl"` | append `{"command","env","stdin","pid"}` per invocation |
//! | `"result": <json>` | print this on ADD |
//! | `"resultVersion": "0.2.0"` … `"1.1.0"` | print a canned result of that version's shape, with an address derived from `CNI_CONTAINERID` (the default, using the config's `cniVersion`) |
//! | `"passPrevResult": true` | print the `prevResult` from stdin on ADD, as a chained plugin does |
//! | `"fail": {"code": 7, "msg": "...", "details": "..."}` | print that spec error and exit 1 |
//! | `"failOn": ["ADD", "DEL"]` | apply `fail`, `crash`, `garbage`, `hugeBytes`, `hangSecs` and `spawnChild` only to these commands (default: all) |
//! | `"hangSecs": 30` | sleep that long first |
//! | `"crash": "abort"` / `"segv"` / `"exit3-no-json"` | die by SIGABRT, by SIGSEGV, or exit 3 with text on stderr only |
//! | `"garbage": true` | print something that is not JSON, exit 0 |
//! | `"hugeBytes": 5000000` | print that many bytes, exit 0 |
//! | `"spawnChild": true` | start `sleep 1000` (its pid recorded as `childPid`) and hang |
//! | `"stderr": "text"` | write this to stderr |
//! | `"supportedVersions": [...]` | what VERSION reports |
//!
//! Undecodable stdin gets the spec's error code 6 and an unknown `CNI_COMMAND` code 4; the fake never
//! panics. Integration tests find it with `env!("CARGO_BIN_EXE_cni-fake-plugin")` and copy or link it
//! into a temporary plugin directory under the names a configuration uses.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use cni_exec::{DEFAULT_PLUGIN_DIRS, Exec, ProcessExec};
//!
//! # async fn run() -> cni_exec::Result<()> {
//! let exec: Arc<dyn Exec> = Arc::new(ProcessExec::new());
//! let dirs: Vec<_> = DEFAULT_PLUGIN_DIRS.iter().map(Into::into).collect();
//! let bridge = exec.find_plugin("bridge", &dirs).await?;
//! let env = [("CNI_COMMAND".to_owned(), "VERSION".to_owned())];
//! let stdout = exec.exec_plugin(&bridge, &env, br#"{"cniVersion":"1.0.0"}"#).await?;
//! println!("{}", String::from_utf8_lossy(&stdout));
//! # Ok(())
//! # }
//! ```

mod cache;
mod discovery;
mod error;
mod exec;
mod invoke;
mod ops;
mod runtime;
mod version_cache;

pub use cache::{CACHE_KIND_V1, CachedAttachment, DEFAULT_CACHE_DIR, ResultCache};
pub use discovery::{
    DEFAULT_PLUGIN_DIRS, default_plugin_dirs, find_plugin_in, validate_plugin_name,
};
pub use error::{Error, OutputStream, PluginStatus, Result, STDERR_TAIL_BYTES};
pub use exec::{
    DEFAULT_OUTPUT_LIMIT, DEFAULT_PATH, DEFAULT_TIMEOUT, Exec, PluginOutput, ProcessExec,
};
pub use ops::{Cni, GC_ATTACHMENT_KEYS};
pub use runtime::{
    GcAttachment, MAX_IF_NAME_LEN, RuntimeConf, validate_container_id, validate_if_name,
    validate_network_name,
};

//! State files: one JSON file per sandbox (or container), replaced atomically.
//!
//! A save is [`safe_file::write_atomic`]: a temporary file `.<id>.json.tmp-<pid>-<n>`, fsynced,
//! renamed over `<id>.json`, then the directory fsynced, so after a crash a file holds either the
//! old state or the new one, never half of each. The `Creating` marker skips the syncs (see
//! [`Store::save_unsynced`]). Leftover temporary files are deleted when the store opens.

use std::fs;
use std::path::{Path, PathBuf};

use std::marker::PhantomData;

use safe_file::{Durability, Symlinks, TempName};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::{Container, Sandbox};
use crate::error::{Error, Result};

/// The most bytes read from one state file.
const MAX_STATE_BYTES: u64 = 4 << 20;

/// What a store keeps: one file per item, named by its ID.
pub(crate) trait Stored: Serialize + DeserializeOwned {
    /// The store's directory under the state directory.
    const DIR: &'static str;
    /// What errors call it: `sandbox`, `container`.
    const KIND: &'static str;
    /// The item's ID.
    fn id(&self) -> &str;
}

impl Stored for Sandbox {
    const DIR: &'static str = "sandboxes";
    const KIND: &'static str = "sandbox";
    fn id(&self) -> &str {
        &self.id
    }
}

impl Stored for Container {
    const DIR: &'static str = "containers";
    const KIND: &'static str = "container";
    fn id(&self) -> &str {
        &self.id
    }
}

/// What a state directory holds at start-up.
#[derive(Debug)]
pub(crate) enum Loaded<T> {
    /// An item whose state could be read.
    Item(Box<T>),
    /// A file named after an ID that cannot be decoded; the ID is all that is known.
    Unreadable {
        /// The ID, from the file name.
        id: String,
        /// Why the file cannot be used.
        error: Error,
    },
}

/// The directory of state files of sandboxes (or containers).
#[derive(Debug)]
pub(crate) struct Store<T = Sandbox> {
    dir: PathBuf,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Store<T> {
    fn clone(&self) -> Self {
        Store {
            dir: self.dir.clone(),
            kind: PhantomData,
        }
    }
}

impl<T: Stored> Store<T> {
    /// Opens (creating) `<state_dir>/sandboxes` (or `containers`) and deletes temporary files
    /// left by a crash.
    pub(crate) fn open(state_dir: &Path) -> Result<Store<T>> {
        let dir = state_dir.join(T::DIR);
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io("cannot create state directory", &dir, e))?;
        let store = Store {
            dir,
            kind: PhantomData,
        };
        for entry in store.entries()? {
            let name = entry.file_name();
            if is_temp_file(&name.to_string_lossy()) {
                let path = entry.path();
                if let Err(e) = fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot delete temporary state file");
                }
            }
        }
        Ok(store)
    }

    fn entries(&self) -> Result<Vec<fs::DirEntry>> {
        let read = fs::read_dir(&self.dir)
            .map_err(|e| Error::io("cannot read state directory", &self.dir, e))?;
        Ok(read.filter_map(std::result::Result::ok).collect())
    }

    /// The file holding the item `id`.
    pub(crate) fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes the item's state atomically and durably (file and directory synced).
    pub(crate) fn save(&self, sandbox: &T) -> Result<()> {
        self.write(sandbox, Durability::Synced)
    }

    /// Writes the sandbox's state atomically without syncing it: for the `Creating` marker, which
    /// must survive the daemon being killed (the page cache does) but not a power loss, after which
    /// the namespace pins are gone anyway and a torn or missing file is rolled back or left to GC.
    pub(crate) fn save_unsynced(&self, sandbox: &T) -> Result<()> {
        self.write(sandbox, Durability::Unsynced)
    }

    fn write(&self, sandbox: &T, durability: Durability) -> Result<()> {
        let path = self.path_of(sandbox.id());
        let bytes = serde_json::to_vec_pretty(sandbox).map_err(|e| Error::State {
            path: path.clone(),
            reason: format!("cannot encode: {e}"),
        })?;
        // 0600: a sandbox's labels, annotations and network results are not for every user.
        safe_file::write_atomic(&path, &bytes, 0o600, durability)
            .map_err(|e| Error::io(context(T::KIND, "write"), &path, e.into_io()))
    }

    /// Deletes the item's state; a missing file is fine.
    pub(crate) fn delete(&self, id: &str) -> Result<()> {
        let path = self.path_of(id);
        match fs::remove_file(&path) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(context(T::KIND, "delete"), &path, e)),
        }
    }

    /// Deletes the item's state without syncing the directory (see
    /// [`Store::save_unsynced`]); a missing file is fine.
    pub(crate) fn delete_unsynced(&self, id: &str) -> Result<()> {
        let path = self.path_of(id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(context(T::KIND, "delete"), &path, e))
            }
            _ => Ok(()),
        }
    }

    fn sync_dir(&self) -> Result<()> {
        safe_file::sync_dir(&self.dir)
            .map_err(|e| Error::io("cannot sync state directory", &self.dir, e.into_io()))
    }

    /// Reads every state file. Files not named `<64 hex>.json` are left alone.
    pub(crate) fn load_all(&self) -> Result<Vec<Loaded<T>>> {
        let mut loaded = Vec::new();
        for entry in self.entries()? {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !is_sandbox_id(id) {
                continue;
            }
            let path = entry.path();
            // A state file is a few KiB (metadata is capped at 256 KiB); a FIFO or a huge file
            // planted here must not hang or exhaust the daemon.
            let decoded = safe_file::read_regular(&path, MAX_STATE_BYTES, Symlinks::Follow)
                .map_err(|e| Error::io(context(T::KIND, "read"), &path, e.into_io()))
                .and_then(|bytes| {
                    serde_json::from_slice::<T>(&bytes).map_err(|e| Error::State {
                        path: path.clone(),
                        reason: e.to_string(),
                    })
                })
                .and_then(|sandbox| {
                    if sandbox.id() == id {
                        Ok(sandbox)
                    } else {
                        Err(Error::State {
                            path: path.clone(),
                            reason: format!("holds {} {}, not {id}", T::KIND, sandbox.id()),
                        })
                    }
                });
            loaded.push(match decoded {
                Ok(sandbox) => Loaded::Item(Box::new(sandbox)),
                Err(error) => Loaded::Unreadable {
                    id: id.to_owned(),
                    error,
                },
            });
        }
        Ok(loaded)
    }
}

/// The context of an I/O error: `cannot write sandbox state`, `cannot read container state`...
fn context(kind: &str, action: &str) -> &'static str {
    match (kind, action) {
        ("container", "write") => "cannot write container state",
        ("container", "read") => "cannot read container state",
        ("container", _) => "cannot delete container state",
        (_, "write") => "cannot write sandbox state",
        (_, "read") => "cannot read sandbox state",
        _ => "cannot delete sandbox state",
    }
}

/// True for the temporary file of a save: [`safe_file::AtomicFile`]'s name for a state file, or
/// the fixed `.<id>.json.tmp` of daemons before it. The store opens under the instance lock, so
/// no other daemon is writing: every one of them is left over.
fn is_temp_file(name: &str) -> bool {
    TempName::parse(name)
        .and_then(|t| t.target.strip_suffix(".json"))
        .is_some_and(is_sandbox_id)
        || (name.starts_with('.') && name.ends_with(".json.tmp"))
}

/// True for the IDs crio-lite makes: 64 lower-case hex characters.
pub(crate) fn is_sandbox_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A new random sandbox ID, from /dev/urandom.
pub(crate) fn new_sandbox_id() -> std::io::Result<String> {
    use std::fmt::Write as _;
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let mut id = String::with_capacity(64);
    for b in bytes {
        let _ = write!(id, "{b:02x}");
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(id: &str) -> Sandbox {
        Sandbox {
            netns_path: Some(PathBuf::from("/run/x")),
            ..Sandbox::example(id)
        }
    }

    #[test]
    fn ids_are_64_hex_and_differ() {
        let a = new_sandbox_id().unwrap();
        let b = new_sandbox_id().unwrap();
        assert!(is_sandbox_id(&a), "{a}");
        assert_ne!(a, b);
        assert!(!is_sandbox_id("../etc/passwd"));
    }

    #[test]
    fn save_load_delete_and_tmp_cleanup() {
        let dir = tempfile::tempdir().unwrap();
        let store: Store = Store::open(dir.path()).unwrap();
        let id = new_sandbox_id().unwrap();
        store.save(&sandbox(&id)).unwrap();
        let tmp = dir.path().join("sandboxes").join(format!(".{id}.json.tmp"));
        fs::write(&tmp, b"{half").unwrap();
        // A daemon killed mid-save leaves its own temporary file; it goes too.
        let killed = dir
            .path()
            .join("sandboxes")
            .join(format!(".{id}.json.tmp-99999999-0"));
        fs::write(&killed, b"{half").unwrap();
        fs::write(dir.path().join("sandboxes/notes.txt"), b"ignored").unwrap();
        let other = new_sandbox_id().unwrap();
        fs::write(store.path_of(&other), b"not json").unwrap();

        let store: Store = Store::open(dir.path()).unwrap();
        assert!(!tmp.exists() && !killed.exists());
        let loaded = store.load_all().unwrap();
        assert_eq!(loaded.len(), 2);
        for item in loaded {
            match item {
                Loaded::Item(s) => assert_eq!(*s, sandbox(&id)),
                Loaded::Unreadable { id: bad, error } => {
                    assert_eq!(bad, other);
                    assert!(error.to_string().contains(&other), "{error}");
                }
            }
        }
        store.delete(&id).unwrap();
        store.delete(&id).unwrap();
        assert!(!store.path_of(&id).exists());
    }

    #[test]
    fn a_failed_save_names_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let store: Store = Store::open(dir.path()).unwrap();
        let id = new_sandbox_id().unwrap();
        // A directory in the state file's place: the rename over it fails.
        fs::create_dir_all(store.path_of(&id).join("x")).unwrap();
        let err = store.save(&sandbox(&id)).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "cannot write sandbox state {}",
                store.path_of(&id).display()
            )),
            "{err}"
        );
        assert_eq!(
            fs::read_dir(dir.path().join("sandboxes")).unwrap().count(),
            1,
            "only the directory, no temporary file"
        );
    }

    #[test]
    fn an_unsynced_save_is_read_back_and_replaced_by_a_synced_one() {
        let dir = tempfile::tempdir().unwrap();
        let store: Store = Store::open(dir.path()).unwrap();
        let id = new_sandbox_id().unwrap();
        let mut state = sandbox(&id);
        store.save_unsynced(&state).unwrap();
        let loaded = store.load_all().unwrap();
        assert!(matches!(&loaded[..], [Loaded::Item(s)] if **s == state));
        state.hostname = "after".into();
        store.save(&state).unwrap();
        let loaded = store.load_all().unwrap();
        assert!(matches!(&loaded[..], [Loaded::Item(s)] if s.hostname == "after"));
        assert_eq!(
            fs::read_dir(dir.path().join("sandboxes")).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}

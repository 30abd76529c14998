//! Go programs the tests run beside ours (a Go CRI client, Go's libcni), built offline.
//!
//! They are built in GOPATH mode against the Go packages Debian installs under
//! `/usr/share/gocode` (`cargo xtask test` installs them as root), with no module proxy: a test
//! never downloads anything.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Builds the Go program in the directory `source` into `<tmp>/<directory name>`, once per
/// process, and returns the binary's path. `tmp` is the test's `env!("CARGO_TARGET_TMPDIR")`,
/// which also holds Go's build cache; `needs` tells the reader of a failure what to install.
///
/// # Panics
///
/// When `go` cannot be run or the build fails (with Go's output and `needs`), failing the test.
pub fn build(source: &Path, tmp: &Path, needs: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<PathBuf, PathBuf>>> = Mutex::new(None);
    // Held across the build: a second test asking for the same program waits for the first.
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(out) = built.get(source) {
        return out.clone();
    }
    let name = source
        .file_name()
        .unwrap_or_else(|| panic!("{} names no directory", source.display()));
    let out = tmp.join(name);
    // Another test process may build the same program into `tmp`: each writes a file of its
    // own and renames it into place, so none runs a half-written binary.
    let mut partial = out.clone().into_os_string();
    partial.push(format!(".{}.partial", std::process::id()));
    let partial = PathBuf::from(partial);
    let result = Command::new("go")
        // GOPATH mode refuses an absolute import path; `.` is a local one.
        .current_dir(source)
        .args(["build", "-o"])
        .arg(&partial)
        .arg(".")
        .env("GO111MODULE", "off")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOPATH", "/nonexistent:/usr/share/gocode")
        .env("GOCACHE", tmp.join("gocache"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run `go` ({needs}): {e}"));
    assert!(
        result.status.success(),
        "building {} failed ({needs}):\n{}",
        source.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::rename(&partial, &out)
        .unwrap_or_else(|e| panic!("rename {} into place: {e}", partial.display()));
    built.insert(source.to_owned(), out.clone());
    out
}

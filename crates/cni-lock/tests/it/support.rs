//! Helpers: the re-exec trick that turns this test binary into a worker process, counters in
//! files, and a look at which lock files the process still has open.

use std::{
    fs, io,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::Duration,
};

use cni_lock::{LockKey, Locks};

/// Tells a re-executed copy of this binary which job to do instead of being a test.
const ROLE_VAR: &str = "CNI_LOCK_IT_ROLE";
const DIR_VAR: &str = "CNI_LOCK_IT_DIR";
const ITERATIONS_VAR: &str = "CNI_LOCK_IT_ITERATIONS";
const SLEEP_MS_VAR: &str = "CNI_LOCK_IT_SLEEP_MS";

/// The key every worker contends for; its ID needs escaping, to cover that path too.
pub(crate) fn contended_key() -> LockKey {
    LockKey::container("shared/ctr..é")
}

/// A worker's job.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    /// Increment the counter file `iterations` times under the lock, with the async API.
    IncrementAsync,
    /// The same with the blocking API.
    IncrementBlocking,
    /// Take the lock, create `<dir>/ready`, then sleep until killed.
    Hold,
    /// Take a [`cni_lock::FileLock`] on `<dir>/daemon.lock`, create `<dir>/ready`, then sleep
    /// until killed.
    HoldFile,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::IncrementAsync => "increment-async",
            Self::IncrementBlocking => "increment-blocking",
            Self::Hold => "hold",
            Self::HoldFile => "hold-file",
        }
    }
}

/// A test workspace: the lock directory and the files workers share.
pub(crate) struct Workspace {
    _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) locks_dir: PathBuf,
}

impl Workspace {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_owned();
        Self {
            locks_dir: root.join("locks"),
            root,
            _tmp: tmp,
        }
    }

    pub(crate) fn locks(&self) -> Locks {
        Locks::new(&self.locks_dir)
    }

    pub(crate) fn counter(&self) -> u64 {
        read_counter(&self.root.join("counter")).expect("read counter")
    }

    /// Names of the files left in the lock directory, sorted (none if it was never created).
    pub(crate) fn lock_files(&self) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(&self.locks_dir) {
            Ok(entries) => entries
                .map(|e| {
                    e.expect("dir entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("read {}: {e}", self.locks_dir.display()),
        };
        names.sort();
        names
    }

    /// Starts this test binary again, running only `test_name`, as a worker in `role`.
    pub(crate) fn spawn_worker(
        &self,
        test_name: &str,
        role: Role,
        iterations: u32,
        sleep_ms: u64,
    ) -> Child {
        test_support::process::rerun_test(test_name)
            .env(ROLE_VAR, role.name())
            .env(DIR_VAR, &self.root)
            .env(ITERATIONS_VAR, iterations.to_string())
            .env(SLEEP_MS_VAR, sleep_ms.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker")
    }
}

/// Waits for a worker and fails the test with its stderr if it failed.
pub(crate) fn join_worker(child: Child) {
    let out = child.wait_with_output().expect("wait for worker");
    assert!(
        out.status.success(),
        "worker failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// In a worker process: does the job and exits. In the test process: returns.
///
/// Call it first thing in every test that spawns workers with its own name.
pub(crate) fn act_as_worker_if_asked() {
    let Ok(role) = std::env::var(ROLE_VAR) else {
        return;
    };
    let code = match run_worker(&role) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("worker {role} in pid {}: {e}", std::process::id());
            1
        }
    };
    std::process::exit(code);
}

fn run_worker(role: &str) -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var(DIR_VAR)?);
    let iterations: u32 = std::env::var(ITERATIONS_VAR)?.parse()?;
    let sleep = Duration::from_millis(std::env::var(SLEEP_MS_VAR)?.parse()?);
    let locks = Locks::new(root.join("locks"));
    let key = contended_key();
    let counter = root.join("counter");
    let timeout = Duration::from_secs(60);
    match role {
        "increment-blocking" => {
            for _ in 0..iterations {
                let guard = locks.lock_blocking(&key, timeout)?;
                increment(&counter, sleep)?;
                guard.unlock()?;
            }
        }
        "increment-async" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()?;
            rt.block_on(async {
                for _ in 0..iterations {
                    let guard = locks.lock(&key, timeout).await?;
                    increment(&counter, sleep)?;
                    guard.unlock()?;
                }
                Ok::<_, Box<dyn std::error::Error>>(())
            })?;
        }
        "hold" => {
            let _guard = locks.lock_blocking(&key, timeout)?;
            fs::write(root.join("ready"), std::process::id().to_string())?;
            std::thread::sleep(Duration::from_secs(120));
        }
        "hold-file" => {
            let _lock = cni_lock::FileLock::try_exclusive(root.join("daemon.lock"))?;
            fs::write(root.join("ready"), std::process::id().to_string())?;
            std::thread::sleep(Duration::from_secs(120));
        }
        other => return Err(format!("unknown role {other:?}").into()),
    }
    Ok(())
}

/// Read, pause, write: loses updates unless callers exclude each other.
pub(crate) fn increment(counter: &Path, pause: Duration) -> io::Result<()> {
    let n = read_counter(counter)?;
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
    fs::write(counter, (n + 1).to_string())
}

fn read_counter(counter: &Path) -> io::Result<u64> {
    match fs::read_to_string(counter) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{s:?}: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// How many descriptors this process has open on files in `dir` (unlinked ones included).
pub(crate) fn open_fds_under(dir: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

//! Holds one container's lock for a while: run it twice to watch the second one wait.
//!
//! ```text
//! cargo run -p cni-lock --example hold -- /tmp/cni-run my-container 5 &
//! cargo run -p cni-lock --example hold -- /tmp/cni-run my-container 5
//! ```
//!
//! Kill the first one with `kill -9` and the second gets the lock at once.

use std::{env, process::ExitCode, thread, time::Duration};

use cni_lock::{LockKey, Locks};

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let [run_dir, container, seconds] = args.as_slice() else {
        eprintln!("usage: hold RUN_DIR CONTAINER_ID SECONDS");
        return ExitCode::from(2);
    };
    let Ok(seconds) = seconds.parse::<u64>() else {
        eprintln!("hold: {seconds:?} is not a number of seconds");
        return ExitCode::from(2);
    };
    let locks = Locks::under(run_dir);
    let key = LockKey::container(container);
    let pid = std::process::id();
    println!("{pid}: waiting for {}", locks.path_for(&key).display());
    match locks.lock_blocking(&key, Duration::from_secs(60)) {
        Ok(guard) => {
            println!("{pid}: holding the lock of {key} for {seconds}s");
            thread::sleep(Duration::from_secs(seconds));
            if let Err(e) = guard.unlock() {
                eprintln!("{pid}: {e}");
            }
            println!("{pid}: released");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{pid}: {e}");
            ExitCode::FAILURE
        }
    }
}

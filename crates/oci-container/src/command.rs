//! Running the runtime: time-bounded, output captured and capped, the process group killed on
//! timeout.

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use node_primitives::child::{self, Bounds, Cap, Captured, read_into};
use tokio::io::AsyncRead;
use tokio::process::Command;

use crate::error::{Error, Result};

/// The most kept of a runtime's stdout (`state`, `list` JSON).
pub(crate) const STDOUT_CAP: usize = 1 << 20;
/// The most kept of a runtime's stderr; the rest is read and dropped so it never blocks.
pub(crate) const STDERR_CAP: usize = 16 << 10;
/// The most of stderr an error message carries.
const MESSAGE_CAP: usize = 1024;

/// What a runtime command printed.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

/// Starts `program args` for `container` with nothing of the caller's environment but `PATH`,
/// stdin from `/dev/null`, stdout and stderr piped, in a process group of its own (so a timeout
/// can kill whatever it started) and killed if the handle is dropped.
pub(crate) fn spawn(
    container: &str,
    program: &Path,
    args: &[&std::ffi::OsStr],
) -> Result<tokio::process::Child> {
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().env(
        "PATH",
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into()),
    );
    child::prepare(&mut cmd, false);
    cmd.spawn().map_err(|source| Error::Spawn {
        container: container.to_owned(),
        program: program.to_owned(),
        source,
    })
}

/// Runs `program args` for `container`, each stream capped (what passes the cap is dropped),
/// its process group killed after `timeout`.
pub(crate) async fn run(
    container: &str,
    program: &Path,
    args: &[&std::ffi::OsStr],
    command: &'static str,
    timeout: Duration,
) -> Result<Output> {
    let spawned = spawn(container, program, args)?;
    let bounds = Bounds {
        stdout: Cap::keep_first(STDOUT_CAP),
        stderr: Cap::keep_first(STDERR_CAP),
        timeout,
    };
    match child::run(spawned, b"", &bounds).await {
        Ok(done) => Ok(Output {
            status: done.status,
            stdout: done.stdout.bytes,
            stderr: done.stderr.bytes,
        }),
        Err(node_primitives::Error::Timeout { .. }) => Err(Error::Timeout {
            container: container.to_owned(),
            runtime: program.to_owned(),
            command,
            timeout,
        }),
        // Only waiting can fail: both streams keep what came before a read error.
        Err(e) => Err(Error::Spawn {
            container: container.to_owned(),
            program: program.to_owned(),
            source: e.into_io(),
        }),
    }
}

/// Like [`run`], and a failure (non-zero exit) is an [`Error::Runtime`] with its stderr.
pub(crate) async fn run_ok(
    container: &str,
    program: &Path,
    args: &[&std::ffi::OsStr],
    command: &'static str,
    timeout: Duration,
) -> Result<Output> {
    let out = run(container, program, args, command, timeout).await?;
    if out.status.success() {
        return Ok(out);
    }
    Err(Error::Runtime {
        container: container.to_owned(),
        runtime: program.to_owned(),
        command,
        status: out.status.to_string(),
        stderr: message(&out.stderr),
    })
}

/// Reads everything, keeping at most `cap` bytes, so a chatty child never blocks on a full pipe.
pub(crate) async fn read_capped(reader: Option<impl AsyncRead + Unpin>, cap: usize) -> Vec<u8> {
    let mut out = Captured::default();
    read_into(reader, cap, &mut out).await;
    out.bytes
}

/// Output as one trimmed, capped line for an error message.
pub(crate) fn message(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() > MESSAGE_CAP {
        return format!("{} ...", node_primitives::text::cut(&line, MESSAGE_CAP));
    }
    if line.is_empty() {
        "(no output)".to_owned()
    } else {
        line
    }
}

/// SIGKILL to the process group `pid` leads (a child started by [`spawn`]).
pub(crate) fn kill_group(pid: u32) {
    // ESRCH: nobody left in it.
    let _ = child::kill_group(pid);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&'static str]) -> Vec<&'static std::ffi::OsStr> {
        args.iter().map(|&a| std::ffi::OsStr::new(a)).collect()
    }

    #[tokio::test]
    async fn captures_caps_and_reports_failures() {
        let sh = Path::new("/bin/sh");
        let out = run(
            "c1",
            sh,
            &os(&["-c", "echo out; echo err >&2"]),
            "state",
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"out\n"[..], &b"err\n"[..])
        );

        // far more stderr than the cap: kept to the cap, and the child was never blocked
        let out = run(
            "c1",
            sh,
            &os(&["-c", "head -c 1000000 /dev/zero >&2"]),
            "state",
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(out.stderr.len(), STDERR_CAP);

        // what was cut is said, and a stream that fits is not cut
        let mut child = spawn(
            "c1",
            sh,
            &os(&["-c", "head -c 100000 /dev/zero; echo hi >&2"]),
        )
        .unwrap();
        let (mut out, mut err) = (Captured::default(), Captured::default());
        tokio::join!(
            read_into(child.stdout.take(), 1000, &mut out),
            read_into(child.stderr.take(), 1000, &mut err)
        );
        child.wait().await.unwrap();
        assert_eq!((out.bytes.len(), out.truncated), (1000, true));
        assert_eq!((&err.bytes[..], err.truncated), (&b"hi\n"[..], false));

        let err = run_ok(
            "c1",
            sh,
            &os(&["-c", "echo '  bad\n thing' >&2; exit 2"]),
            "start",
            Duration::from_secs(10),
        )
        .await
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "container c1: /bin/sh start failed (exit status: 2): bad thing"
        );
    }

    #[tokio::test]
    async fn times_out_and_kills_the_group() {
        let started = std::time::Instant::now();
        // the grandchild holds the pipes open; killing only the child would hang the reads
        let err = run(
            "c1",
            Path::new("/bin/sh"),
            &os(&["-c", "sleep 30 & sleep 30"]),
            "kill",
            Duration::from_millis(300),
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "container c1: /bin/sh kill timed out after 300ms"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_missing_program_names_it() {
        let err = run(
            "c1",
            Path::new("/nonexistent/crun"),
            &[],
            "start",
            Duration::from_secs(1),
        )
        .await
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.starts_with("container c1: cannot run /nonexistent/crun: "),
            "{err}"
        );
    }

    #[test]
    fn messages_are_one_capped_line() {
        assert_eq!(message(b""), "(no output)");
        assert_eq!(message(b"a\n\tb  c\n"), "a b c");
        assert_eq!(message(&[b'x'; 5000]).len(), MESSAGE_CAP + 4);
    }
}

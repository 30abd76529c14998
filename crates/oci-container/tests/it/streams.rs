//! Interactive exec and attach against each runtime, through in-memory pipes standing in for a
//! streaming server's channels: typing, reading, resizing, EOF, exit codes, and what dropping
//! an exec kills.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oci_container::{ContainerStdio, Streams, TerminalSize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream};
use tokio::sync::mpsc;

use crate::support::{Fixture, config, cri_lines, line_in, runtimes, started};

const LONG: Duration = Duration::from_secs(30);

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|&s| s.to_owned()).collect()
}

/// Output read as it comes, kept for the test to look at.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<u8>>>);

impl Seen {
    fn reading(from: DuplexStream) -> Seen {
        let seen = Seen::default();
        let keep = seen.clone();
        tokio::spawn(async move {
            let mut from = from;
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                keep.0.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        seen
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Waits until the output holds `needle`, failing the test after 30 seconds.
    async fn wait_for(&self, needle: &str, what: &str) {
        let deadline = Instant::now() + LONG;
        while !self.text().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "{what}: {needle:?} never came; got {:?}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A client's side of [`Streams`]: what it types, what it reads, the sizes it sends.
struct Client {
    stdin: Option<DuplexStream>,
    stdout: Seen,
    stderr: Seen,
    resize: Option<mpsc::Sender<TerminalSize>>,
}

fn client(stdin: bool, stderr: bool, tty: bool) -> (Streams, Client) {
    let (typed, stdin_end) = tokio::io::duplex(1 << 16);
    let (stdout_end, out) = tokio::io::duplex(1 << 16);
    let (stderr_end, err) = tokio::io::duplex(1 << 16);
    let (tx, rx) = mpsc::channel(4);
    let streams = Streams {
        stdin: stdin.then(|| Box::pin(stdin_end) as _),
        stdout: Some(Box::pin(stdout_end)),
        stderr: stderr.then(|| Box::pin(stderr_end) as _),
        resize: tty.then_some(rx),
    };
    let client = Client {
        stdin: stdin.then_some(typed),
        stdout: Seen::reading(out),
        stderr: Seen::reading(err),
        resize: tty.then_some(tx),
    };
    (streams, client)
}

impl Client {
    async fn type_in(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("a client with stdin");
        stdin.write_all(text.as_bytes()).await.unwrap();
    }

    async fn size(&self, height: u16, width: u16) {
        let tx = self.resize.as_ref().expect("a client with a terminal");
        tx.send(TerminalSize { width, height }).await.unwrap();
    }
}

async fn container(fx: &Fixture, id: &str, command: &[&str]) {
    let cfg = config(id, command);
    started(fx, &cfg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn exec_without_a_terminal_types_reads_and_ends_at_stdin_eof() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-pipes-{name}"));
        container(&fx, &id, &["/bin/busybox", "sleep", "300"]).await;

        let (streams, mut c) = client(true, true, false);
        let rt = fx.runtime.clone();
        let cmd = args(&[
            "/bin/busybox",
            "sh",
            "-c",
            "read line; echo \"got $line\"; echo oops >&2; /bin/busybox cat; exit 3",
        ]);
        let exec = tokio::spawn({
            let id = id.clone();
            async move { rt.exec(&id, &cmd, false, streams).await }
        });
        c.type_in("hello\n").await;
        c.stdout.wait_for("got hello\n", name).await;
        c.stderr.wait_for("oops\n", name).await;
        c.type_in("through cat\n").await;
        c.stdout.wait_for("through cat\n", name).await;
        // EOF ends cat, and the shell exits 3
        drop(c.stdin.take());
        let code = tokio::time::timeout(LONG, exec)
            .await
            .expect("the exec ended at stdin's EOF")
            .unwrap()
            .unwrap();
        assert_eq!(code, 3, "{name}");
        assert_eq!(c.stdout.text(), "got hello\nthrough cat\n", "{name}");

        // a command the container does not have: the runtime's code and complaint
        let (streams, c) = client(false, true, false);
        let code = fx
            .runtime
            .exec(&id, &args(&["/no/such/command"]), false, streams)
            .await
            .unwrap();
        assert_ne!(code, 0, "{name}");
        c.stderr.wait_for("/no/such/command", name).await;
        fx.runtime.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn exec_on_a_terminal_is_resized_and_returns_the_exit_code() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-tty-{name}"));
        container(&fx, &id, &["/bin/busybox", "sleep", "300"]).await;

        let (streams, mut c) = client(true, false, true);
        let rt = fx.runtime.clone();
        let cmd = args(&["/bin/busybox", "sh"]);
        let exec = tokio::spawn({
            let id = id.clone();
            async move { rt.exec(&id, &cmd, true, streams).await }
        });
        c.size(40, 100).await;
        // the size is set before the shell is asked (a resize travels apart from stdin)
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.type_in("/bin/busybox stty size; /bin/busybox tty\n")
            .await;
        c.stdout.wait_for("40 100", name).await;
        c.stdout.wait_for("/dev/pts/", name).await;
        c.size(50, 120).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.type_in("/bin/busybox stty size\n").await;
        c.stdout.wait_for("50 120", name).await;
        c.type_in("exit 3\n").await;
        let code = tokio::time::timeout(LONG, exec)
            .await
            .expect("the shell exited")
            .unwrap()
            .unwrap();
        assert_eq!(code, 3, "{name}: {}", c.stdout.text());
        fx.runtime.remove(&id).await.unwrap();
    }
}

/// What kubectl does: the first size and the first keystrokes are sent at once, before the
/// runtime has made the terminal. The command reads the input only after the size is set (runc
/// copies input into its terminal before it sizes it), and the input is echoed once, by the
/// container's terminal (not also by ours before runc made it raw). Repeated: the race it
/// guards against is one of milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn an_exec_terminal_is_sized_before_the_first_input_is_read() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("exec-early-{name}"));
        container(&fx, &id, &["/bin/busybox", "sleep", "300"]).await;
        for round in 0..16 {
            let (streams, mut c) = client(true, false, true);
            c.size(17, 91).await;
            c.type_in("go\n").await;
            let cmd = args(&["/bin/busybox", "sh", "-c", "read go; stty size; exit 4"]);
            let code = tokio::time::timeout(LONG, fx.runtime.exec(&id, &cmd, true, streams))
                .await
                .expect("the command exited")
                .unwrap();
            assert_eq!(code, 4, "{name} round {round}: {:?}", c.stdout.text());
            // the last output (the client's copy may still be reading it)
            c.stdout
                .wait_for("17 91", &format!("{name} round {round}"))
                .await;
            let out = c.stdout.text();
            assert_eq!(
                out.matches("go").count(),
                1,
                "{name} round {round}: {out:?}"
            );
        }
        fx.runtime.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn dropping_an_exec_kills_the_command_and_its_children() {
    for (name, path) in runtimes() {
        for tty in [false, true] {
            let fx = Fixture::new(&path);
            let id = test_support::unique_name(&format!("exec-drop-{name}"));
            container(&fx, &id, &["/bin/busybox", "sleep", "300"]).await;

            let (streams, c) = client(false, !tty, tty);
            let cmd = args(&[
                "/bin/busybox",
                "sh",
                "-c",
                "/bin/busybox sleep 7777 & echo started; /bin/busybox sleep 8888",
            ]);
            let mut exec = Box::pin(fx.runtime.exec(&id, &cmd, tty, streams));
            tokio::select! {
                done = &mut exec => panic!("{name}: the exec ended on its own: {done:?}"),
                () = c.stdout.wait_for("started", name) => {}
            }
            drop(exec);

            // the kill runs in a task of its own: the container soon has neither sleep
            let deadline = Instant::now() + LONG;
            loop {
                let ps = fx
                    .runtime
                    .exec_sync(
                        &id,
                        &args(&["/bin/busybox", "ps", "-o", "args"]),
                        LONG,
                        1 << 16,
                    )
                    .await
                    .unwrap();
                let listing = String::from_utf8_lossy(&ps.stdout).into_owned();
                assert!(listing.contains("sleep 300"), "{name}: {listing}");
                if !listing.contains("7777") && !listing.contains("8888") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{name} (tty {tty}): the dropped exec still runs: {listing}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            fx.runtime.remove(&id).await.unwrap();
        }
    }
}

/// Creates and starts a container whose process has `stdio`.
async fn started_with(fx: &Fixture, id: &str, command: &[&str], stdio: ContainerStdio) {
    let mut cfg = config(id, command);
    cfg.stdio = stdio;
    let bundle = fx.bundle(&cfg, &fx.rootfs);
    fx.runtime
        .create_with_stdio(id, &bundle, &fx.log_path(id), stdio)
        .await
        .unwrap();
    fx.runtime.start(id).await.unwrap();
    assert_eq!(fx.runtime.record(id).unwrap().stdio, stdio);
}

/// conmon accepts attachers in its own time: output before that is not theirs.
const ACCEPTED: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn two_attachers_see_the_output_stdin_reaches_the_process_and_the_log_goes_on() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("attach-{name}"));
        let stdio = ContainerStdio {
            terminal: false,
            stdin: true,
            stdin_once: false,
        };
        let script = "while read line; do echo \"got $line\"; echo \"err $line\" >&2; done";
        started_with(&fx, &id, &["/bin/busybox", "sh", "-c", script], stdio).await;

        let attach = |streams: Streams| {
            let rt = fx.runtime.clone();
            let id = id.clone();
            tokio::spawn(async move { rt.attach(&id, streams).await })
        };
        let (streams, mut a) = client(true, true, false);
        let first = attach(streams);
        let (streams, b) = client(false, true, false);
        let second = attach(streams);
        tokio::time::sleep(ACCEPTED).await;

        a.type_in("one\n").await;
        for (who, c) in [("typing", &a), ("watching", &b)] {
            c.stdout
                .wait_for("got one\n", &format!("{name}: {who}"))
                .await;
            c.stderr
                .wait_for("err one\n", &format!("{name}: {who}"))
                .await;
        }
        // conmon writes the log all the same
        let log = fx.log_path(&id);
        line_in(&log, |l| l == "got one").await;
        line_in(&log, |l| l == "err one").await;

        // The typing attacher's stdin ends: it has detached (crictl's ctrl-p ctrl-q, docker's),
        // its attach returns while the process runs on, and the process's stdin stays open
        // (not stdin_once) for the next one.
        drop(a.stdin.take());
        tokio::time::timeout(LONG, first)
            .await
            .expect("an attacher whose stdin ended is detached")
            .unwrap()
            .unwrap();
        let (streams, mut c) = client(true, false, false);
        let third = attach(streams);
        tokio::time::sleep(ACCEPTED).await;
        c.type_in("two\n").await;
        c.stdout.wait_for("got two\n", name).await;
        b.stdout.wait_for("got two\n", name).await;
        assert!(!c.stdout.text().contains("got one"), "{name}: no history");

        // the process exits: every attacher's output ends, and attach returns
        fx.runtime
            .kill(&id, nix::sys::signal::Signal::SIGKILL)
            .await
            .unwrap();
        for task in [second, third] {
            tokio::time::timeout(LONG, task)
                .await
                .expect("attach ended with the process")
                .unwrap()
                .unwrap();
        }
        fx.runtime.wait(&id, LONG).await.unwrap();
        fx.runtime.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn stdin_once_closes_the_processs_stdin_when_its_attacher_leaves() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("attach-once-{name}"));
        let stdio = ContainerStdio {
            terminal: false,
            stdin: true,
            stdin_once: true,
        };
        started_with(&fx, &id, &["/bin/busybox", "cat"], stdio).await;

        let (streams, mut c) = client(true, true, false);
        let rt = fx.runtime.clone();
        let attached = tokio::spawn({
            let id = id.clone();
            async move { rt.attach(&id, streams).await }
        });
        tokio::time::sleep(ACCEPTED).await;
        c.type_in("hello\n").await;
        c.stdout.wait_for("hello\n", name).await;
        // the attacher's EOF is cat's: it exits, and the attach with it
        drop(c.stdin.take());
        tokio::time::timeout(LONG, attached)
            .await
            .expect("attach ended once cat exited")
            .unwrap()
            .unwrap();
        assert_eq!(fx.runtime.wait(&id, LONG).await.unwrap(), 0, "{name}");
        let lines = cri_lines(&fx.log_path(&id));
        assert_eq!(lines, [("stdout".to_owned(), "hello".to_owned())], "{name}");
        fx.runtime.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn an_attached_terminal_is_typed_into_and_resized() {
    for (name, path) in runtimes() {
        let fx = Fixture::new(&path);
        let id = test_support::unique_name(&format!("attach-tty-{name}"));
        let stdio = ContainerStdio {
            terminal: true,
            stdin: true,
            stdin_once: false,
        };
        started_with(&fx, &id, &["/bin/busybox", "sh"], stdio).await;

        let (streams, mut c) = client(true, false, true);
        let rt = fx.runtime.clone();
        let attached = tokio::spawn({
            let id = id.clone();
            async move { rt.attach(&id, streams).await }
        });
        tokio::time::sleep(ACCEPTED).await;
        c.size(30, 90).await;
        tokio::time::sleep(ACCEPTED).await;
        c.type_in("/bin/busybox stty size\n").await;
        c.stdout.wait_for("30 90", name).await;
        // the log goes on (a prompt is a partial line: no whole-line parsing here)
        let log = fx.log_path(&id);
        let deadline = Instant::now() + LONG;
        while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains("30 90")) {
            assert!(Instant::now() < deadline, "{name}: the log lacks the size");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // resized from outside an attach too
        fx.runtime
            .resize_terminal(
                &id,
                TerminalSize {
                    width: 132,
                    height: 43,
                },
            )
            .unwrap();
        tokio::time::sleep(ACCEPTED).await;
        c.type_in("/bin/busybox stty size; exit 4\n").await;
        c.stdout.wait_for("43 132", name).await;
        tokio::time::timeout(LONG, attached)
            .await
            .expect("attach ended with the shell")
            .unwrap()
            .unwrap();
        assert_eq!(fx.runtime.wait(&id, LONG).await.unwrap(), 4, "{name}");

        // a container without a terminal cannot be resized
        let plain = test_support::unique_name(&format!("attach-plain-{name}"));
        container(&fx, &plain, &["/bin/busybox", "sleep", "300"]).await;
        let err = fx
            .runtime
            .resize_terminal(
                &plain,
                TerminalSize {
                    width: 1,
                    height: 1,
                },
            )
            .unwrap_err();
        assert!(err.to_string().contains("no terminal"), "{err}");
        fx.runtime.remove(&plain).await.unwrap();
        fx.runtime.remove(&id).await.unwrap();
    }
}

//! `cargo xtask crictl`: crio-lite's streaming (Exec, Attach, PortForward) through an unmodified
//! crictl, as a user types it.
//!
//! crictl 1.26 speaks SPDY only, so this is the SPDY path end to end: crictl asks crio-lite over
//! CRI for a URL and upgrades to SPDY/3.1 on crio-lite's streaming server. The node is critest's
//! (see [`crate::critest::on_node`]): a node network namespace of its own with the local
//! registry and crio-lite in it. crictl, and the terminal it runs in (a tmux pane, resized as a
//! user resizes a window), run in that namespace, where the streaming server listens.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::cmd::is_root;
use crate::critest::{BUSYBOX, on_node};
use crate::demo::{Demo, REGISTRY, shown, step};

pub(crate) const USAGE: &str =
    "usage: cargo xtask crictl --crictl PATH [--transport spdy|websocket]

Checks crio-lite's streaming with an unmodified crictl, as root, in a node network namespace of
its own (critest's set-up: a local registry with a busybox image, crio-lite serving): `exec -it`
in a real terminal (tmux: typing, reading the screen, resizing the window, `stty size` inside),
`exec -i` with piped stdin and a non-zero exit code, `attach` to a tty container and to a stdin
container (detached with ctrl-p ctrl-q), `port-forward` to a busybox httpd in the pod (fetched
with curl). Each check prints pass or FAIL; the command fails if any does. Installs the Debian
packages the demo needs, tmux and curl.

--transport T   crictl's --transport for exec, attach and port-forward (crictl 1.30 and later:
                `websocket` checks the WebSocket path; by default crictl's own, SPDY)
--crictl PATH   the crictl binary (not packaged by Debian 12; 1.26 speaks SPDY only). To build
                it offline from cri-tools v1.26.1's vendored source with Debian's Go 1.19:
                  git archive v1.26.1 of kubernetes-sigs/cri-tools, in that tree:
                  GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 \\
                    go build -o crictl ./cmd/crictl";

/// How long one crictl command may take before it counts as hung.
const PATIENCE: Duration = Duration::from_secs(30);
/// The pod's port the httpd listens on, and the node's port crictl forwards from.
const HTTPD_PORT: u16 = 8080;
const LOCAL_PORT: u16 = 18080;
const PAGE: &str = "hello through crictl port-forward";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut crictl = None;
    let mut transport = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--crictl" => {
                crictl =
                    Some(PathBuf::from(it.next().with_context(|| {
                        format!("--crictl needs a value\n\n{USAGE}")
                    })?));
            }
            "--transport" => {
                let value = it
                    .next()
                    .with_context(|| format!("--transport needs a value\n\n{USAGE}"))?;
                if value != "spdy" && value != "websocket" {
                    bail!("--transport {value:?}: spdy or websocket\n\n{USAGE}");
                }
                transport = Some(value.clone());
            }
            other => bail!("crictl: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    let Some(crictl) = crictl else {
        bail!("crictl: --crictl PATH is required\n\n{USAGE}");
    };
    let crictl = std::fs::canonicalize(&crictl)
        .with_context(|| format!("crictl binary {}", crictl.display()))?;
    if !is_root() {
        bail!("crictl's checks create network namespaces and run containers: run it as root");
    }
    let tmux = [
        (
            "tmux",
            "a real terminal for crictl exec -it and attach -it, resized",
        ),
        ("curl", "fetches through crictl port-forward"),
    ];
    on_node(&tmux, "crictl", |node, _| {
        checks(node, &crictl, transport.as_deref())
    })
}

/// crictl against the node's daemon, and the node's tmux server.
struct Crictl<'a> {
    node: &'a Demo,
    bin: &'a Path,
    /// `--transport` for the streaming commands.
    transport: Option<&'a str>,
}

fn checks(node: &mut Demo, bin: &Path, transport: Option<&str>) -> Result<()> {
    let crictl = Crictl {
        node,
        bin,
        transport,
    };
    let version = crictl.output(&["--version"], None)?;
    step(&format!(
        "crictl ({}) against crio-lite, in the node namespace",
        String::from_utf8_lossy(&version.stdout).trim()
    ));
    std::fs::write(
        node.path("crictl.yaml"),
        format!(
            "runtime-endpoint: unix://{0}\nimage-endpoint: unix://{0}\ntimeout: 60\n",
            node.socket().display()
        ),
    )?;
    let containers = crictl.set_up()?;
    let tmux = Tmux::start(node)?;
    let checks: [(&str, Result<()>); 5] = [
        (
            "exec -it in a terminal",
            crictl.exec_tty(&tmux, &containers.web),
        ),
        (
            "exec -i, piped stdin, exit code",
            crictl.exec_stdin(&containers.web),
        ),
        (
            "attach -it to a tty container",
            crictl.attach_tty(&tmux, &containers.tty),
        ),
        (
            "attach -i to a stdin_once container",
            crictl.attach_stdin(&containers.stdin),
        ),
        (
            "port-forward to httpd",
            crictl.port_forward(&containers.pod),
        ),
    ];
    drop(tmux);
    step("Results");
    let mut failed = Vec::new();
    for (name, outcome) in checks {
        match outcome {
            Ok(()) => println!("    pass  {name}"),
            Err(e) => {
                println!("    FAIL  {name}: {e:#}");
                failed.push(name);
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} of 5 crictl checks failed: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// The pod and the three containers the checks use.
struct Containers {
    pod: String,
    /// `httpd` serving the page; exec runs in it.
    web: String,
    /// `sh` with a terminal and stdin.
    tty: String,
    /// A loop echoing its stdin, with `stdin_once`.
    stdin: String,
}

impl Crictl<'_> {
    /// `nsenter --net=<node> -- crictl --config <node's crictl.yaml> ARGS`.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.node.node()))
            .arg("--")
            .arg(self.bin)
            .arg("--config")
            .arg(self.node.path("crictl.yaml"));
        match (args.split_first(), self.transport) {
            (Some((&sub, rest)), Some(transport))
                if ["exec", "attach", "port-forward"].contains(&sub) =>
            {
                cmd.args([sub, "--transport", transport]).args(rest);
            }
            _ => {
                cmd.args(args);
            }
        }
        cmd
    }

    /// Runs crictl to its end (killed after [`PATIENCE`]), `input` on its stdin.
    fn output(&self, args: &[&str], input: Option<&str>) -> Result<Output> {
        bounded(&mut self.command(args), input, PATIENCE)
    }

    /// Runs crictl and returns its trimmed stdout; an error with its stderr when it fails.
    fn ok(&self, args: &[&str]) -> Result<String> {
        let out = self.output(args, None)?;
        if !out.status.success() {
            bail!(
                "crictl {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn set_up(&self) -> Result<Containers> {
        let image = format!("{REGISTRY}/{BUSYBOX}");
        step(&format!(
            "crictl pull, runp and create/start: one pod, three containers of {image}"
        ));
        self.ok(&["pull", &image])?;
        let logs = self.node.path("pod-logs");
        std::fs::create_dir_all(&logs)?;
        let pod_config = self.node.path("pod.json");
        let pod_json = serde_json::json!({
            "metadata": {"name": "crictl-pod", "namespace": "default", "uid": "crictl-pod-uid"},
            "hostname": "crictl-pod",
            "log_directory": logs,
            "linux": {},
        });
        std::fs::write(&pod_config, pod_json.to_string())?;
        let pod = self.ok(&["runp", &pod_config.display().to_string()])?;
        println!("    $ crictl runp pod.json: {pod}");
        let serve = format!(
            "mkdir -p /www && echo {PAGE} > /www/index.html && exec httpd -f -p {HTTPD_PORT} -h /www"
        );
        let echo = "while read line; do echo got:$line; done; echo stdin closed";
        let web = self.container(&pod, &pod_config, "web", &["sh", "-c", &serve], &[])?;
        let tty = self.container(&pod, &pod_config, "tty", &["sh"], &["tty", "stdin"])?;
        let stdin = self.container(
            &pod,
            &pod_config,
            "stdin",
            &["sh", "-c", echo],
            &["stdin", "stdin_once"],
        )?;
        Ok(Containers {
            pod,
            web,
            tty,
            stdin,
        })
    }

    /// `crictl create` and `crictl start` of one container; `flags` are the config's booleans
    /// set to true (`tty`, `stdin`, `stdin_once`).
    fn container(
        &self,
        pod: &str,
        pod_config: &Path,
        name: &str,
        command: &[&str],
        flags: &[&str],
    ) -> Result<String> {
        let mut config = serde_json::json!({
            "metadata": {"name": name},
            "image": {"image": format!("{REGISTRY}/{BUSYBOX}")},
            "command": command,
            "log_path": format!("{name}.log"),
            "linux": {},
        });
        for flag in flags {
            config[*flag] = true.into();
        }
        let path = self.node.path(&format!("{name}.json"));
        std::fs::write(&path, config.to_string())?;
        let id = self.ok(&[
            "create",
            pod,
            &path.display().to_string(),
            &pod_config.display().to_string(),
        ])?;
        self.ok(&["start", &id])?;
        println!(
            "    $ crictl create/start {name} ({}): {id}",
            flags.join(", ")
        );
        Ok(id)
    }

    /// `crictl exec -it web sh` in a tmux pane: type, read the screen, resize the window and
    /// see the new size inside, then `exit 3` and see crictl fail with that code.
    fn exec_tty(&self, tmux: &Tmux, web: &str) -> Result<()> {
        step("crictl exec -it web sh, in a tmux pane (a real terminal)");
        let cmd = shown(&self.command(&["exec", "-it", web, "sh"]));
        tmux.open("exec", &cmd)?;
        tmux.wait_for("exec", "# ")?;
        tmux.type_line("exec", "echo typed-$((6*7))")?;
        tmux.wait_for("exec", "typed-42")?;
        println!("    typed `echo typed-$((6*7))`, the screen shows typed-42");
        Self::check_resize(tmux, "exec")?;
        tmux.type_line("exec", "exit 3")?;
        let status = tmux.exit_status("exec")?;
        let screen = tmux.screen("exec")?;
        println!("    `exit 3`: crictl exited with {status}");
        if status == 0 || !screen.contains("exit code 3") {
            bail!("crictl exited {status} after `exit 3`; the screen:\n{screen}");
        }
        tmux.close("exec");
        Ok(())
    }

    /// `stty size` inside the pane's shell matches the pane, before and after resizing the
    /// window.
    fn check_resize(tmux: &Tmux, window: &str) -> Result<()> {
        for (columns, rows) in [(None, None), (Some(101), Some(31))] {
            if let (Some(x), Some(y)) = (columns, rows) {
                tmux.resize(window, x, y)?;
            }
            let (height, width) = tmux.pane_size(window)?;
            tmux.type_line(window, "stty size")?;
            let expected = format!("{height} {width}");
            tmux.wait_for(window, &expected)?;
            println!("    pane {width}x{height}: `stty size` inside says {expected}");
        }
        Ok(())
    }

    /// `printf 'first\nsecond\n' | crictl exec -i web sh -c 'read a; read b; echo $b-$a; exit 7'`.
    fn exec_stdin(&self, web: &str) -> Result<()> {
        step("crictl exec -i web, stdin piped, the command exits 7");
        let script = "read a; read b; echo \"$b-$a\"; echo to-stderr >&2; exit 7";
        let out = self.output(
            &["exec", "-i", web, "sh", "-c", script],
            Some("first\nsecond\n"),
        )?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!(
            "    stdout {:?}, exit {}, stderr {:?}",
            stdout.trim(),
            out.status,
            stderr.trim()
        );
        if stdout.trim() != "second-first" {
            bail!("stdout is {stdout:?}, not \"second-first\"");
        }
        if !stderr.contains("to-stderr") {
            bail!("the command's stderr did not reach crictl's: {stderr:?}");
        }
        // crictl 1.26 exits 1 for any failed stream and names the code in its message.
        if out.status.success() || !stderr.contains("exit code 7") {
            bail!(
                "crictl exited {} without naming exit code 7: {stderr:?}",
                out.status
            );
        }
        Ok(())
    }

    /// `crictl attach -it tty` in a tmux pane: the shell answers, follows a resize, and
    /// ctrl-p ctrl-q detaches leaving the container running.
    fn attach_tty(&self, tmux: &Tmux, tty: &str) -> Result<()> {
        step("crictl attach -it tty (a `tty: true, stdin: true` sh), in a tmux pane");
        let cmd = shown(&self.command(&["attach", "-it", tty]));
        tmux.open("attach", &cmd)?;
        // The prompt was written before anyone attached: type blind.
        std::thread::sleep(Duration::from_millis(500));
        tmux.type_line("attach", "echo attached-$((6*7))")?;
        tmux.wait_for("attach", "attached-42")?;
        println!("    typed `echo attached-$((6*7))`, the screen shows attached-42");
        Self::check_resize(tmux, "attach")?;
        tmux.keys("attach", &["C-p", "C-q"])?;
        let status = tmux.exit_status("attach")?;
        println!("    ctrl-p ctrl-q: crictl exited with {status}");
        let state = self.state(tty)?;
        println!("    the container after detaching: {state}");
        if state != "CONTAINER_RUNNING" {
            bail!("the tty container is {state} after detaching");
        }
        tmux.close("attach");
        Ok(())
    }

    /// The container's state as `crictl inspect` tells it (`CONTAINER_RUNNING`, ...).
    fn state(&self, container: &str) -> Result<String> {
        self.ok(&[
            "inspect",
            "-o",
            "go-template",
            "--template",
            "{{.status.state}}",
            container,
        ])
    }

    /// `printf 'one\ntwo\n' | crictl attach -i stdin`: the container echoes each line; at EOF
    /// `stdin_once` closes its stdin, it ends and so does the attach.
    fn attach_stdin(&self, stdin: &str) -> Result<()> {
        step("crictl attach -i stdin (a `stdin: true, stdin_once: true` echo loop), stdin piped");
        let out = self.output(&["attach", "-i", stdin], Some("one\ntwo\n"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("    stdout {:?}, exit {}", stdout.trim(), out.status);
        if !out.status.success() || stdout.trim() != "got:one\ngot:two\nstdin closed" {
            bail!(
                "crictl attach -i answered {stdout:?} ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let state = self.state(stdin)?;
        println!("    the container after its stdin closed: {state}");
        if state != "CONTAINER_EXITED" {
            bail!("the stdin_once container is {state} after its stdin closed");
        }
        Ok(())
    }

    /// `crictl port-forward POD 18080:8080`, then two fetches of the httpd's page through it.
    fn port_forward(&self, pod: &str) -> Result<()> {
        step(&format!(
            "crictl port-forward pod {LOCAL_PORT}:{HTTPD_PORT}, then curl http://127.0.0.1:{LOCAL_PORT}/ twice"
        ));
        let ports = format!("{LOCAL_PORT}:{HTTPD_PORT}");
        let mut child = self
            .command(&["port-forward", pod, &ports])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start crictl port-forward")?;
        let outcome = self.fetch_twice();
        let _ = child.kill();
        let out = child.wait_with_output()?;
        println!(
            "    crictl port-forward said: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        );
        outcome.with_context(|| {
            format!(
                "crictl port-forward's stderr: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
    }

    fn fetch_twice(&self) -> Result<()> {
        let url = format!("http://127.0.0.1:{LOCAL_PORT}/");
        let mut wget = Command::new("nsenter");
        wget.arg(format!("--net=/run/netns/{}", self.node.node()))
            // busybox-static's wget crashes on this host (its static resolver): curl
            .args([
                "--",
                "curl",
                "--silent",
                "--show-error",
                "--max-time",
                "5",
                &url,
            ]);
        let deadline = Instant::now() + PATIENCE;
        for n in 1..=2 {
            let page = loop {
                let out = bounded(&mut wget, None, PATIENCE)?;
                let page = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if out.status.success() && page == PAGE {
                    break page;
                }
                // The first: crictl may not listen yet, or the httpd not yet serve.
                if n > 1 || Instant::now() > deadline {
                    bail!(
                        "fetch {n} of {url} answered {page:?} ({}): {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                std::thread::sleep(Duration::from_millis(300));
            };
            println!("    fetch {n}: {page:?}");
        }
        Ok(())
    }
}

/// A tmux server of the check's own (its socket in the node's directory), started in the node
/// namespace so what its panes run is there too.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn start(node: &Demo) -> Result<Tmux> {
        let tmux = Tmux {
            socket: node.path("tmux.sock"),
        };
        // A detached session keeps the server up; panes stay after their command exits, so its
        // exit status can be read.
        let mut start = Command::new("nsenter");
        start
            .arg(format!("--net=/run/netns/{}", node.node()))
            .args(["--", "tmux", "-S"])
            .arg(&tmux.socket)
            .args(["new-session", "-d", "-s", "checks", "-x", "80", "-y", "24"])
            .args([";", "set-option", "-g", "remain-on-exit", "on"])
            .args([";", "set-option", "-g", "history-limit", "50000"])
            .env("TERM", "xterm");
        let out = bounded(&mut start, None, PATIENCE)?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                shown(&start),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(tmux)
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).args(args);
        let out = bounded(&mut cmd, None, PATIENCE)?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                shown(&cmd),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A window named `name`, 80x24, running `command`.
    fn open(&self, name: &str, command: &str) -> Result<()> {
        self.run(&["new-window", "-d", "-n", name, command])?;
        self.resize(name, 80, 24)?;
        Ok(())
    }

    fn resize(&self, name: &str, columns: u16, rows: u16) -> Result<()> {
        self.run(&[
            "resize-window",
            "-t",
            name,
            "-x",
            &columns.to_string(),
            "-y",
            &rows.to_string(),
        ])?;
        Ok(())
    }

    /// The pane's rows and columns, as tmux gives them to the program in it.
    fn pane_size(&self, name: &str) -> Result<(u16, u16)> {
        let size = self.run(&[
            "display-message",
            "-p",
            "-t",
            name,
            "#{pane_height} #{pane_width}",
        ])?;
        let mut it = size.split_whitespace().map(str::parse::<u16>);
        match (it.next(), it.next()) {
            (Some(Ok(h)), Some(Ok(w))) => Ok((h, w)),
            _ => bail!("tmux gave the pane's size as {size:?}"),
        }
    }

    fn keys(&self, name: &str, keys: &[&str]) -> Result<()> {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        self.run(&args)?;
        Ok(())
    }

    /// Types `line` literally, then Enter.
    fn type_line(&self, name: &str, line: &str) -> Result<()> {
        self.run(&["send-keys", "-t", name, "-l", line])?;
        self.keys(name, &["Enter"])
    }

    fn screen(&self, name: &str) -> Result<String> {
        self.run(&["capture-pane", "-p", "-J", "-t", name, "-S", "-"])
    }

    /// Waits until the screen shows `needle` on a line of its own or after a prompt.
    fn wait_for(&self, name: &str, needle: &str) -> Result<()> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen(name)?;
            if screen.lines().any(|l| {
                l.trim_end().ends_with(needle.trim_end())
                    && !l.contains("echo ")
                    && !l.contains("stty ")
            }) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the screen did not show {needle:?} within {PATIENCE:?}:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the pane's program to exit; its exit status. tmux 3.3 sometimes leaves a pane's
    /// program a zombie, unreaped, for longer than the patience here (seen: crictl had printed
    /// its last line and exited): a zombie's status is read from its /proc stat.
    fn exit_status(&self, name: &str) -> Result<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = self.run(&[
                "display-message",
                "-p",
                "-t",
                name,
                "#{pane_dead} #{pane_dead_status} #{pane_pid}",
            ])?;
            // `1 STATUS PID` once dead, `0 PID` while running (the status is empty then)
            let fields: Vec<&str> = state.split_whitespace().collect();
            if let ["0", pid] = fields.as_slice()
                && let Some(code) = zombie_exit_code(pid)
            {
                println!(
                    "    (the pane's program, pid {pid}, exited {code}; tmux had not reaped it yet)"
                );
                return Ok(code);
            }
            if let ["1", status, ..] = fields.as_slice() {
                return status
                    .parse()
                    .with_context(|| format!("tmux gave the exit status as {status:?}"));
            }
            if Instant::now() > deadline {
                // Go prints every goroutine's stack at SIGQUIT: where crictl waits.
                let pid = self.run(&["display-message", "-p", "-t", name, "#{pane_pid}"])?;
                // What runs there, and where each waits, before anything is signalled.
                let ps = Command::new("ps")
                    .args(["-o", "pid,ppid,stat,wchan:24,args", "--pid", pid.trim()])
                    .args(["--ppid", pid.trim()])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                println!("    the pane's processes:\n{ps}");
                let _ = Command::new("kill").args(["-QUIT", pid.trim()]).status();
                let _ = Command::new("pkill")
                    .args(["-QUIT", "-P", pid.trim()])
                    .status();
                std::thread::sleep(Duration::from_secs(1));
                bail!(
                    "crictl still runs in the pane after {PATIENCE:?} (its goroutines at \
                     SIGQUIT follow):\n{}",
                    self.screen(name)?
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn close(&self, name: &str) {
        let _ = self.run(&["kill-window", "-t", name]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Runs `cmd` with `input` on its stdin (then closed), killed after `patience`.
fn bounded(cmd: &mut Command, input: Option<&str>, patience: Duration) -> Result<Output> {
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", shown(cmd)))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let input = input.to_owned();
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + patience;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{} did not finish within {patience:?}", shown(cmd));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// The exit code of process `pid` if it is a zombie that exited normally: field 52 of its
/// /proc stat, the status as waitpid(2) reports it.
fn zombie_exit_code(pid: &str) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // after the command name in parentheses, which may hold spaces
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state)
    if fields.first() != Some(&"Z") {
        return None;
    }
    let status: i32 = fields.get(52 - 3)?.parse().ok()?;
    // exited, not killed: no signal in the low 7 bits
    (status.trailing_zeros() >= 7).then_some((status >> 8) & 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombies_exit_code_is_read_from_proc() {
        let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let pid = child.id().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        let code = loop {
            if let Some(code) = zombie_exit_code(&pid) {
                break code;
            }
            assert!(Instant::now() < deadline, "the child never became a zombie");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(code, 3);
        assert_eq!(child.wait().unwrap().code(), Some(3));
        assert_eq!(zombie_exit_code(&pid), None, "reaped: no longer a zombie");
        assert_eq!(zombie_exit_code(&std::process::id().to_string()), None);
    }
}

//! `cargo xtask demo`: crio-lite end to end, in a network namespace of its own.
//!
//! Builds crio-lite and the `cri-client` example, starts the daemon inside a fresh "node" network
//! namespace on the built-in default network (bridge `cni0`, 10.85.0.0/16, which exists only in
//! that namespace) with temporary directories, creates three pod sandboxes over CRI, pings between
//! them, shows the status API and the metrics, removes everything, and checks that nothing leaked.
//! The machine's own network namespace is never touched; a guard deletes the node namespace, the
//! pins and the directories even when a step fails.
//!
//! It needs no CNI plugin binaries: where /usr/lib/cni lacks them, crio-lite runs `bridge`,
//! `host-local`, `portmap` and `loopback` built in. `--without-plugin-binaries` points the plugin directories at an empty
//! directory, to see that path on a machine that has the binaries.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::cmd::{cargo, is_root, run_step, target_dir};
use crate::packages;

const PODS: [&str; 3] = ["demo-pod-1", "demo-pod-2", "demo-pod-3"];
/// Where the demo's registry listens, inside the node namespace (a fresh loopback: the port is
/// free).
pub(crate) const REGISTRY: &str = "127.0.0.1:5000";
/// The built-in default network's name (its leases live under `<cache>/networks/<name>`).
const NETWORK: &str = "ocicni-default";

pub(crate) const USAGE: &str = "usage: cargo xtask demo [--without-plugin-binaries]

crio-lite end to end, as root: builds the daemon and a CRI client, starts a local registry and the
daemon in a node network namespace of its own, pulls a busybox image it built, creates three pod
sandboxes over CRI, pings between them, runs a busybox httpd container in one pod and fetches its
page from a container in another, shows the status API and the metrics, removes everything and
checks that nothing leaked. Installs the Debian packages it needs (iptables, iproute2,
iputils-ping, docker-registry, busybox-static, crun, runc, conmon) with apt-get. The CNI plugins
are not among them: without containernetworking-plugins, crio-lite runs bridge, host-local,
portmap and loopback built in.

  --without-plugin-binaries   point crio.network.plugin_dirs at an empty directory (a drop-in),
                              as on a node without containernetworking-plugins";

pub(crate) fn run(args: &[String]) -> Result<()> {
    let mut without_binaries = false;
    for arg in args {
        match arg.as_str() {
            "--without-plugin-binaries" => without_binaries = true,
            other => bail!("demo: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    // The binaries decide unless told otherwise: crio-lite's prefer-binary falls back to its
    // built-in plugins for each one missing.
    let builtin = without_binaries || !Path::new(packages::PLUGIN_DIR).join("bridge").exists();
    if !is_root() {
        bail!("the demo creates network namespaces and bridges: run it as root");
    }
    let wanted = packages::node_packages();
    step("Checking the Debian packages the demo needs (installed with apt-get when missing)");
    packages::ensure(&wanted)?;
    println!(
        "    all present: {}",
        wanted
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    );
    run_step(
        "Building crio-lite and the CRI client (crates/crio-lite/examples/cri-client.rs)",
        cargo().args([
            "build",
            "-p",
            "crio-lite",
            "--bin",
            "crio-lite",
            "--example",
            "cri-client",
        ]),
    )?;
    run_step(
        "Building the offline test-image builder (image-bench push: a busybox-static image)",
        cargo().args([
            "build",
            "-p",
            "benches",
            "--features",
            "images",
            "--bin",
            "image-bench",
        ]),
    )?;
    let target = target_dir().join("debug");
    let bins = Bins {
        daemon: target.join("crio-lite"),
        client: target.join("examples/cri-client"),
        image_bench: target.join("image-bench"),
    };

    let started = Instant::now();
    let mut demo = Demo::new()?;
    demo.builtin = builtin;
    let outcome = if without_binaries {
        demo.without_plugin_binaries()
    } else {
        Ok(())
    }
    .and_then(|()| demo.run(&bins));
    if let Err(e) = &outcome {
        println!("\n==> FAILED: {e:#}");
        if let Ok(log) = std::fs::read_to_string(demo.path("crio-lite.log")) {
            println!("    the daemon's log:\n{}", indent(&log));
        }
    }
    step("Cleaning up: the node namespace, pins and temporary directories");
    drop(demo);
    println!("    done");
    outcome?;
    println!(
        "\n==> Demo finished in {:.1} s after the build",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

struct Bins {
    daemon: PathBuf,
    client: PathBuf,
    image_bench: PathBuf,
}

/// One pod sandbox as the demo knows it.
struct Pod {
    name: &'static str,
    id: String,
    ip: IpAddr,
}

/// The node namespace, the directories and the daemon; dropping it removes all of them.
pub(crate) struct Demo {
    node: String,
    dir: PathBuf,
    daemon: Option<Child>,
    /// The local registry (the demo's docker-registry, or critest's test-registry).
    pub(crate) registry: Option<Child>,
    /// Whether crio-lite's built-in bridge is expected (no bridge binary to run).
    builtin: bool,
}

impl Demo {
    pub(crate) fn new() -> Result<Demo> {
        let pid = std::process::id();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_micros());
        let node = format!("crio-lite-demo-{pid}-{stamp}");
        let dir = std::env::temp_dir().join(&node);
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        // From here on the guard owns the directory and, once made, the namespace.
        let demo = Demo {
            node,
            dir,
            daemon: None,
            registry: None,
            builtin: false,
        };
        for sub in ["state", "run", "net.d", "cache", "registry"] {
            std::fs::create_dir_all(demo.path(sub))
                .with_context(|| format!("cannot create {}", demo.path(sub).display()))?;
        }
        demo.write_config()?;
        Ok(demo)
    }

    /// A drop-in that points `crio.network.plugin_dirs` at an empty directory.
    fn without_plugin_binaries(&self) -> Result<()> {
        let empty = self.path("no-plugins");
        std::fs::create_dir_all(&empty)?;
        step(&format!(
            "No CNI plugin binaries: crio.network.plugin_dirs = [{}] (empty), in a drop-in",
            empty.display()
        ));
        std::fs::write(
            self.path("crio-lite.conf.d/20-no-plugin-binaries.conf"),
            format!(
                "# An empty plugin directory: the built-in plugins run.\n\
                 [crio.network]\nplugin_dirs = [\"{}\"]\n",
                empty.display()
            ),
        )?;
        Ok(())
    }

    pub(crate) fn path(&self, sub: &str) -> PathBuf {
        self.dir.join(sub)
    }

    pub(crate) fn socket(&self) -> PathBuf {
        self.path("run/crio-lite.sock")
    }

    fn netns_dir(&self) -> PathBuf {
        self.path("run/netns")
    }

    /// The node namespace's name (under /run/netns).
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// Makes the node network namespace, its loopback up.
    pub(crate) fn create_node(&self) -> Result<()> {
        step(&format!(
            "Creating the node network namespace {} (lo up); the bridge and iptables rules live there",
            self.node
        ));
        capture(Command::new("ip").args(["netns", "add", &self.node]))?;
        capture(Command::new("ip").args(["-n", &self.node, "link", "set", "lo", "up"]))?;
        println!("    temporary directories under {}", self.dir.display());
        Ok(())
    }

    fn run(&mut self, bins: &Bins) -> Result<()> {
        self.create_node()?;
        let reference = self.start_registry(bins)?;
        self.start_daemon(&bins.daemon)?;
        let image = self.pull_image(bins, &reference)?;
        let pods = self.create_pods(bins)?;
        self.ping_between(&pods)?;
        self.run_containers(bins, &image, &pods)?;
        self.show_status_api(bins)?;
        self.remove_image(bins, &image)?;
        self.remove_everything(bins, &pods)?;
        self.check_for_leaks(&pods)
    }

    /// Debian's docker-registry inside the node namespace (its loopback, so only the node
    /// reaches it), and a busybox-static image built offline and pushed to it.
    fn start_registry(&mut self, bins: &Bins) -> Result<String> {
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: {REGISTRY}\n",
            self.path("registry/storage").display()
        );
        std::fs::write(self.path("registry/config.yml"), config)?;
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.node))
            .args(["--", "/usr/bin/docker-registry", "serve"])
            .arg(self.path("registry/config.yml"))
            .stdin(Stdio::null());
        step(&format!(
            "Starting a local registry in the node namespace on {REGISTRY} (plain HTTP)\n    {}",
            shown(&cmd)
        ));
        let log = std::fs::File::create(self.path("registry/registry.log"))?;
        cmd.stdout(log.try_clone()?).stderr(log);
        self.registry = Some(cmd.spawn().context("cannot start docker-registry")?);
        let mut push = Command::new("nsenter");
        push.arg(format!("--net=/run/netns/{}", self.node))
            .arg("--")
            .arg(&bins.image_bench)
            .args([
                "push",
                "--registry",
                REGISTRY,
                "--layers",
                "1",
                "--layer-mib",
                "1",
            ]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let pushed = loop {
            match capture(&mut push) {
                Ok(out) => break out,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        let pushed: serde_json::Value =
            serde_json::from_str(pushed.trim()).context("image-bench push printed no JSON")?;
        let reference = pushed["reference"]
            .as_str()
            .context("image-bench push named no reference")?
            .to_owned();
        println!(
            "    pushed {reference} ({} layers, {} bytes), built offline from /bin/busybox",
            pushed["layers"], pushed["compressed_bytes"]
        );
        Ok(reference)
    }

    /// PullImage, ListImages and ImageFsInfo, as `crictl pull`, `images` and `imagefsinfo`.
    fn pull_image(&self, bins: &Bins, image: &str) -> Result<String> {
        step("Pulling the image over CRI (PullImage), then ListImages and ImageFsInfo");
        println!("    $ cri-client pull {image}");
        let pulled = self.client(bins, &["pull", image])?;
        let id = pulled["id"]
            .as_str()
            .context("PullImage answered without an image id")?
            .to_owned();
        println!("    image id {}", short(&id));
        let listed = self.client(bins, &["images"])?;
        let images = listed["images"].as_array().cloned().unwrap_or_default();
        for listed in &images {
            println!(
                "    $ cri-client images: {} {} {} bytes",
                short(listed["id"].as_str().unwrap_or_default()),
                listed["repo_tags"],
                listed["size"]
            );
        }
        if !images.iter().any(|i| i["id"] == id.as_str()) {
            bail!("ListImages does not list the pulled image {id}: {listed}");
        }
        let fs = self.client(bins, &["imagefsinfo"])?;
        println!(
            "    $ cri-client imagefsinfo: {} bytes, {} inodes under {}",
            fs["image_filesystems"][0]["used_bytes"]["value"],
            fs["image_filesystems"][0]["inodes_used"]["value"],
            fs["image_filesystems"][0]["fs_id"]["mountpoint"]
                .as_str()
                .unwrap_or_default()
        );
        Ok(id)
    }

    fn remove_image(&self, bins: &Bins, id: &str) -> Result<()> {
        step("Removing the image (RemoveImage)");
        self.client(bins, &["rmi", id])?;
        let left = self.client(bins, &["images"])?;
        if left["images"].as_array().is_some_and(|i| !i.is_empty()) {
            bail!("images left after RemoveImage: {left}");
        }
        println!("    $ cri-client rmi {}: no image left", short(id));
        Ok(())
    }

    /// Checks the configuration, then starts crio-lite (`daemon`) in the node namespace and
    /// waits until it serves.
    pub(crate) fn start_daemon(&mut self, daemon: &Path) -> Result<()> {
        let mut check = Command::new(daemon);
        check.args(self.flags()).arg("check-config");
        step(&format!(
            "Checking the configuration: crio-lite.conf and the drop-ins of crio-lite.conf.d\n    {}",
            shown(&check)
        ));
        println!("    {}", capture(&mut check)?.trim_end());
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.node))
            .arg("--")
            .arg(daemon)
            .args(self.flags())
            .arg("run")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        step(&format!(
            "Starting crio-lite in the node namespace on the built-in default network (empty net.d)\n    {}",
            shown(&cmd)
        ));
        let log = std::fs::File::create(self.path("crio-lite.log"))?;
        cmd.stdout(log.try_clone()?).stderr(log);
        let mut child = cmd
            .spawn()
            .context("cannot start crio-lite under nsenter")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(self.socket()).is_err() {
            if let Some(status) = child.try_wait()? {
                bail!("crio-lite exited at start-up ({status})");
            }
            if Instant::now() > deadline {
                self.daemon = Some(child);
                bail!(
                    "crio-lite did not serve on {} within 20 s",
                    self.socket().display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        println!(
            "    pid {}, serving CRI and the status API on {}",
            child.id(),
            self.socket().display()
        );
        self.daemon = Some(child);
        Ok(())
    }

    /// The configuration as an operator lays it out: crio-lite.conf with the socket and every
    /// directory under the demo's own (pins in run/netns, not the machine's /var/run/netns), and
    /// a drop-in over one of its keys. Nothing from /etc/crio-lite is read.
    fn write_config(&self) -> Result<()> {
        let runtime = runtime();
        let path = |sub: &str| {
            let path = self.path(sub).display().to_string();
            // TOML basic strings: a temporary directory's name needs no escapes, refuse if not.
            if path.contains(['"', '\\']) || path.chars().any(char::is_control) {
                bail!("{path} needs escaping in TOML; set TMPDIR to a plainer directory");
            }
            Ok(path)
        };
        let main = format!(
            "[crio]\nroot = \"{}\"\nrunroot = \"{}\"\n\n[crio.api]\nlisten = \"{}\"\n\n\
             [crio.runtime]\nlog_level = \"debug\"\nnamespaces_dir = \"{}\"\n\
             default_runtime = \"{runtime}\"\n\n\
             [crio.runtime.runtimes.{runtime}]\nruntime_root = \"{}\"\n\n\
             [crio.network]\nnetwork_dir = \"{}\"\n\n\
             [crio.metrics]\nenable_metrics = true\nmetrics_host = \"127.0.0.1\"\nmetrics_port = 9090\n\n\
             [crio.image]\ninsecure_registries = [\"{REGISTRY}\"]\nsignature_policy = \"{}\"\n\n\
             [crio_lite.network]\ncache_dir = \"{}\"\ncni_run_dir = \"{}\"\n\n\
             [crio_lite.image]\nregistries_conf = \"{}\"\n",
            path("state")?,
            path("run")?,
            path("run/crio-lite.sock")?,
            path("run")?,
            path(&format!("run/{runtime}"))?,
            path("net.d")?,
            path("policy.json")?,
            path("cache")?,
            path("run/cni")?,
            path("registries.conf")?,
        );
        // The node's own policy: accept what the demo's registry serves, reject everything
        // else (the machine's /etc/containers files are not read).
        std::fs::write(
            self.path("policy.json"),
            format!(
                "{{\"default\": [{{\"type\": \"reject\"}}],\n \"transports\": {{\"docker\": \
                 {{\"{REGISTRY}\": [{{\"type\": \"insecureAcceptAnything\"}}]}}}}}}\n"
            ),
        )?;
        std::fs::write(self.path("crio-lite.conf"), main)?;
        std::fs::create_dir_all(self.path("crio-lite.conf.d"))?;
        std::fs::write(
            self.path("crio-lite.conf.d/10-log-level.conf"),
            "# Overrides crio-lite.conf's log_level; its other keys stay.\n\
             [crio.runtime]\nlog_level = \"info\"\n",
        )?;
        Ok(())
    }

    /// The daemon's flags: the configuration file and its drop-in directory.
    fn flags(&self) -> Vec<String> {
        [
            ("--config", "crio-lite.conf"),
            ("--config-dir", "crio-lite.conf.d"),
        ]
        .iter()
        .flat_map(|(flag, sub)| [(*flag).to_owned(), self.path(sub).display().to_string()])
        .collect()
    }

    fn client(&self, bins: &Bins, args: &[&str]) -> Result<serde_json::Value> {
        let mut cmd = Command::new(&bins.client);
        cmd.arg("--socket").arg(self.socket()).args(args);
        let out = capture(&mut cmd)?;
        serde_json::from_str(&out)
            .with_context(|| format!("cri-client {} printed no JSON: {out}", args.join(" ")))
    }

    fn create_pods(&self, bins: &Bins) -> Result<Vec<Pod>> {
        step("Creating three pod sandboxes over CRI (RunPodSandbox, then PodSandboxStatus)");
        let mut pods = Vec::new();
        for (i, name) in PODS.into_iter().enumerate() {
            // Pod 1 maps a host port, so portmap has work to do (and rules to leave behind).
            let logs = self.path(&format!("logs/{name}")).display().to_string();
            let mut args = vec!["runp", name, "--log-dir", &logs];
            if i == 0 {
                args.extend(["--port", "8080:80"]);
            }
            println!("    $ cri-client {}", args.join(" "));
            let id = self.client(bins, &args)?["id"]
                .as_str()
                .context("RunPodSandbox answered without an ID")?
                .to_owned();
            let status = self.client(bins, &["inspectp", &id])?;
            let state = status["status"]["state"].as_str().unwrap_or_default();
            if state != "SANDBOX_READY" {
                bail!("{name} ({id}) is {state}, not ready");
            }
            let ip: IpAddr = status["status"]["network"]["ip"]
                .as_str()
                .unwrap_or_default()
                .parse()
                .with_context(|| format!("{name} ({id}) reports no IP: {status}"))?;
            println!(
                "    {name}  id {}  ip {ip}  netns {}",
                short(&id),
                self.netns_dir().join(&id).display()
            );
            pods.push(Pod { name, id, ip });
        }
        let listed = self.client(bins, &["pods"])?;
        let ready = listed["items"].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|p| p["state"] == "SANDBOX_READY")
                .count()
        });
        println!("    $ cri-client pods: {ready} ready");
        if ready != PODS.len() {
            bail!(
                "ListPodSandbox shows {ready} ready sandboxes, not {}",
                PODS.len()
            );
        }
        let bridge =
            capture(Command::new("ip").args(["-n", &self.node, "-br", "addr", "show", "cni0"]))?;
        println!("    the node's bridge: {}", bridge.trim());
        let rules = self.pod_rules(&pods)?;
        if self.builtin {
            println!(
                "    {} iptables rules in the node name the pods (built-in bridge masquerade; no \
                 portmap yet)",
                rules.len()
            );
        } else {
            println!(
                "    {} iptables rules in the node name the pods (bridge masquerade, portmap)",
                rules.len()
            );
        }
        Ok(pods)
    }

    /// The node's iptables rules that belong to pods: they name a sandbox ID, or carry the
    /// `id: "..."` comment bridge and portmap put on per-pod rules.
    fn pod_rules(&self, pods: &[Pod]) -> Result<Vec<String>> {
        Ok(
            capture(Command::new("ip").args(["netns", "exec", &self.node, "iptables-save"]))?
                .lines()
                .filter(|l| l.contains("id: \\\"") || pods.iter().any(|p| l.contains(&p.id)))
                .map(str::to_owned)
                .collect(),
        )
    }

    fn ping_between(&self, pods: &[Pod]) -> Result<()> {
        step("Pod-to-pod traffic: ping from pod 1 to pods 2 and 3, inside their namespaces");
        let from = &pods[0];
        for to in &pods[1..] {
            let pin = format!("--net={}", self.netns_dir().join(&from.id).display());
            let out = capture(Command::new("nsenter").args([
                pin.as_str(),
                "--",
                "ping",
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "2",
                &to.ip.to_string(),
            ]))
            .with_context(|| format!("{} cannot reach {} at {}", from.name, to.name, to.ip))?;
            let summary = out
                .lines()
                .find(|l| l.contains("packets transmitted"))
                .unwrap_or("");
            println!("    {} -> {} ({}): {summary}", from.name, to.name, to.ip);
        }
        Ok(())
    }

    fn show_status_api(&self, bins: &Bins) -> Result<()> {
        step("The status API on the same socket: crio-lite status info");
        // No --socket: status asks the configuration's crio.api.listen.
        let info = capture(
            Command::new(&bins.daemon)
                .args(self.flags())
                .args(["status", "info"]),
        )?;
        println!("{}", indent(&info));
        let bridge = if self.builtin {
            "builtin:bridge"
        } else {
            "/bridge"
        };
        if !info
            .lines()
            .any(|l| l.starts_with("cni_plugins.bridge") && l.trim_end().ends_with(bridge))
        {
            bail!("status info does not say that bridge ran as {bridge}:\n{info}");
        }
        step(
            "Some of /metrics, scraped over TCP as Prometheus would (crio.metrics: 127.0.0.1:9090 \
             in the node namespace)",
        );
        let client = bins.client.display().to_string();
        let metrics = capture(Command::new("ip").args([
            "netns",
            "exec",
            &self.node,
            &client,
            "scrape",
            "127.0.0.1:9090",
        ]))?;
        let shown: Vec<&str> = metrics
            .lines()
            .filter(|l| {
                l.starts_with("crio_operations_total{operation_type=\"RunPodSandbox\"}")
                    || l.starts_with("crio_lite_sandbox_operations_total")
                    || l.starts_with("crio_lite_sandboxes_ready")
                    || (l.starts_with("crio_lite_cni_plugin_duration_seconds_count")
                        && l.contains("command=\"ADD\""))
            })
            .collect();
        if !shown.iter().any(|l| l.contains("plugin=\"bridge\"")) {
            bail!("/metrics has no bridge ADD sample:\n{metrics}");
        }
        if !shown.iter().any(|l| l.starts_with("crio_operations_total")) {
            bail!("/metrics counts no RunPodSandbox call:\n{metrics}");
        }
        println!("{}", indent(&shown.join("\n")));
        Ok(())
    }

    /// A busybox httpd container in pod 1, and in pod 2 a container that fetches its page; the
    /// fetcher's CRI log holds the page. ExecSync, stats, stop and removal as crictl does them.
    fn run_containers(&self, bins: &Bins, image: &str, pods: &[Pod]) -> Result<()> {
        step(
            "Containers: busybox httpd in pod 1, fetched by a container in pod 2 (runc via conmon)",
        );
        let (web, client) = (&pods[0], &pods[1]);
        let serve = "mkdir -p /www && echo hello from a crio-lite container > /www/index.html \
                     && exec httpd -f -p 80 -h /www";
        println!(
            "    $ cri-client run {} httpd {} -- sh -c '...httpd -f -p 80...'",
            web.name,
            short(image)
        );
        let httpd = self.client(
            bins,
            &["run", &web.id, "httpd", image, "--", "sh", "-c", serve],
        )?["id"]
            .as_str()
            .context("CreateContainer answered without an ID")?
            .to_owned();
        let fetch = format!("until wget -q -O- http://{}/; do sleep 0.2; done", web.ip);
        println!(
            "    $ cri-client run {} fetch {} -- sh -c '{fetch}'",
            client.name,
            short(image)
        );
        let fetcher = self.client(
            bins,
            &["run", &client.id, "fetch", image, "--", "sh", "-c", &fetch],
        )?["id"]
            .as_str()
            .context("CreateContainer answered without an ID")?
            .to_owned();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = self.client(bins, &["ps"])?;
            let state = listed["containers"]
                .as_array()
                .and_then(|all| all.iter().find(|c| c["id"] == fetcher.as_str()))
                .map(|c| c["state"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            if state == "CONTAINER_EXITED" {
                break;
            }
            if Instant::now() > deadline {
                bail!("the fetcher is still {state} after 30 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let logs = self.client(bins, &["logs", &fetcher])?;
        let lines: Vec<&str> = logs["lines"]
            .as_array()
            .map(|l| l.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        println!("    $ cri-client logs fetch: {lines:?}");
        if !lines.contains(&"hello from a crio-lite container") {
            bail!("the fetcher's log does not hold the page: {lines:?}");
        }
        // The image links only sh to busybox; its shell runs the other applets by name.
        let exec = self.client(bins, &["exec", &httpd, "--", "sh", "-c", "hostname"])?;
        let hostname = exec["stdout"].as_str().unwrap_or_default().trim();
        println!(
            "    $ cri-client exec httpd -- sh -c hostname: {hostname} (exit {})",
            exec["exit_code"]
        );
        if exec["exit_code"] != 0 || hostname != web.name {
            bail!("ExecSync in httpd answered {exec}, not the pod's hostname");
        }
        let stats = self.client(bins, &["stats", &httpd])?;
        println!(
            "    $ cri-client stats httpd: {} bytes of memory in its working set, {} ns of CPU",
            stats["memory"]["working_set_bytes"]["value"],
            stats["cpu"]["usage_core_nano_seconds"]["value"]
        );
        for (name, id) in [("httpd", &httpd), ("fetch", &fetcher)] {
            self.client(bins, &["stop", id, "--timeout", "5"])?;
            self.client(bins, &["rm", id])?;
            println!("    {name} ({}) stopped and removed", short(id));
        }
        Ok(())
    }

    fn remove_everything(&mut self, bins: &Bins, pods: &[Pod]) -> Result<()> {
        step("Removing everything: StopPodSandbox and RemovePodSandbox for each pod, then SIGTERM");
        for pod in pods {
            self.client(bins, &["stopp", &pod.id])?;
            self.client(bins, &["rmp", &pod.id])?;
            println!("    {} ({}) stopped and removed", pod.name, short(&pod.id));
        }
        let Some(mut child) = self.daemon.take() else {
            bail!("the daemon is not running");
        };
        capture(Command::new("kill").args(["-TERM", &child.id().to_string()]))?;
        let deadline = Instant::now() + Duration::from_secs(40);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                self.daemon = Some(child);
                bail!("crio-lite did not exit within 40 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if !status.success() {
            bail!("crio-lite exited with {status} after SIGTERM");
        }
        println!("    crio-lite exited cleanly ({status})");
        Ok(())
    }

    fn check_for_leaks(&self, pods: &[Pod]) -> Result<()> {
        step("Checking that nothing leaked");
        let veths = capture(
            Command::new("ip").args(["-n", &self.node, "-o", "link", "show", "type", "veth"]),
        )?;
        let leases: Vec<String> = files(&self.path("cache/networks").join(NETWORK))
            .into_iter()
            .filter(|f| f.parse::<IpAddr>().is_ok())
            .collect();
        let prefix = format!("{}/", self.netns_dir().display());
        let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")?
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&prefix))
            .map(str::to_owned)
            .collect();
        let rules = self.pod_rules(pods)?;
        let checks = [
            (
                "veths in the node namespace",
                veths.lines().map(str::to_owned).collect::<Vec<_>>(),
            ),
            ("host-local lease files", leases),
            ("CNI cache entries", files(&self.path("cache/results"))),
            (
                "pending CNI cache entries",
                files(&self.path("run/cni/pending")),
            ),
            (
                "pod lock files (the GC lock's stays)",
                files(&self.path("run/cni/locks"))
                    .into_iter()
                    .filter(|name| name != "gc.lock")
                    .collect(),
            ),
            ("pinned namespaces", files(&self.netns_dir())),
            ("mounts under the run dir", mounts),
            ("sandbox state files", files(&self.path("state/sandboxes"))),
            (
                "container state files",
                files(&self.path("state/containers")),
            ),
            (
                "container root file systems",
                files(&self.path("state/storage/containers"))
                    .into_iter()
                    .filter(|n| !n.starts_with('.'))
                    .collect(),
            ),
            ("container bundles", files(&self.path("run/containers"))),
            ("runc containers", self.runc_containers()),
            (
                "unpacked image layers",
                files(&self.path("state/storage/layers")),
            ),
            (
                "image blobs",
                files(&self.path("state/storage/blobs/sha256")),
            ),
            ("iptables rules naming the sandboxes", rules),
        ];
        // The GC lock's file proves the lock check looked where the daemon keeps its locks.
        let gc_lock = self.path("run/cni/locks/gc.lock");
        if !gc_lock.exists() {
            bail!(
                "{} is missing: the daemon keeps its locks elsewhere",
                gc_lock.display()
            );
        }
        let mut leaked = 0;
        for (what, left) in &checks {
            if left.is_empty() {
                println!("    ok    no {what}");
            } else {
                leaked += 1;
                println!("    LEAK  {what}: {left:?}");
            }
        }
        if leaked > 0 {
            bail!("{leaked} kind(s) of leftovers after removing every sandbox");
        }
        println!(
            "\n==> VERDICT: PASS: an image was pulled, three pods ran and talked, a container served \
             another, and nothing was left behind"
        );
        Ok(())
    }
}

/// crun, unless it refuses this host: crun 1.8 rejects hybrid cgroup hierarchies whose v2 half
/// has controllers, as some container hosts have; runc runs there.
fn runtime() -> &'static str {
    let hybrid = std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers")
        .is_ok_and(|c| !c.trim().is_empty());
    if hybrid { "runc" } else { "crun" }
}

impl Demo {
    fn runc_containers(&self) -> Vec<String> {
        let root = self.path(&format!("run/{}", runtime()));
        if !root.exists() {
            return Vec::new();
        }
        Command::new(runtime())
            .arg("--root")
            .arg(&root)
            .args(["list", "-q"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        for mut child in [self.daemon.take(), self.registry.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Containers a failed demo left: deleted with the runtime, their conmon killed with
        // everything else in the node namespace, their root file systems unmounted.
        let root = self.path(&format!("run/{}", runtime()));
        for id in self.runc_containers() {
            let _ = Command::new(runtime())
                .arg("--root")
                .arg(&root)
                .args(["delete", "--force", &id])
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("ip")
            .args(["netns", "pids", &self.node])
            .output()
            .map(|o| {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            });
        // Pod inits run in their pods' namespaces, not the node's: found by the paths they
        // were started with.
        let dir = self.dir.to_string_lossy().into_owned();
        for entry in files(Path::new("/proc")) {
            let Ok(pid) = entry.parse::<u32>() else {
                continue;
            };
            if pid != std::process::id()
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&dir))
            {
                let _ = Command::new("kill").args(["-9", &entry]).status();
            }
        }
        // Root file systems, and the pods' namespace pins and shm a failed run left.
        let under = format!("{dir}/");
        if let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") {
            let mut points: Vec<&str> = mountinfo
                .lines()
                .filter_map(|l| l.split(' ').nth(4))
                .filter(|m| m.starts_with(&under))
                .collect();
            points.sort_by_key(|p| std::cmp::Reverse(p.len()));
            for point in points {
                unmount(Path::new(point));
            }
        }
        // With umount(8) rather than the ocicni crate: xtask depends on no workspace crate.
        for pin in files(&self.netns_dir()) {
            let path = self.netns_dir().join(pin);
            unmount(&path);
            if let Err(e) = std::fs::remove_file(&path) {
                eprintln!("    cannot remove pin {}: {e}", path.display());
            }
        }
        unmount(&self.netns_dir());
        // Fine when it was never made.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.node])
            .stderr(Stdio::null())
            .status();
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("    cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// Detaches whatever is mounted at `path`; nothing mounted there is fine.
fn unmount(path: &Path) {
    let _ = Command::new("umount")
        .arg("--lazy")
        .arg(path)
        .stderr(Stdio::null())
        .status();
}

pub(crate) fn step(title: &str) {
    println!("\n==> {title}");
}

/// Runs a command to its end; its stdout, or an error with its stderr.
pub(crate) fn capture(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", shown(cmd)))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}{}",
            shown(cmd),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim_end(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn shown(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// File names in a directory (dot files too), sorted; empty when it is missing.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

pub(crate) fn indent(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

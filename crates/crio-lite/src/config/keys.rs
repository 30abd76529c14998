//! Every key with its flag, its environment variable and what `crio-lite config` says of it: one
//! table that the printout, the environment layer and the tests read.

/// One configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// Tables and name, dotted: `crio.api.listen`.
    pub path: &'static str,
    /// The flag that sets it: `--listen`.
    pub flag: &'static str,
    /// The environment variable that sets it: `CONTAINER_LISTEN`.
    pub env: &'static str,
    /// True when CRI-O has this key, flag and variable; false for crio-lite's own.
    pub crio: bool,
    /// The comment `crio-lite config` prints above the key (lines split on `\n`).
    pub doc: &'static str,
}

impl Key {
    /// The table the key is in: `crio.api` for `crio.api.listen`.
    pub fn table(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(table, _)| table)
    }

    /// The key's own name: `listen` for `crio.api.listen`.
    pub fn name(&self) -> &'static str {
        self.path
            .rsplit_once('.')
            .map_or(self.path, |(_, name)| name)
    }
}

/// Every key, in the order `crio-lite config` prints them.
pub const KEYS: &[Key] = &[
    Key {
        path: "crio.root",
        flag: "--root",
        env: "CONTAINER_ROOT",
        crio: true,
        doc: "Persistent state: sandbox state files in <root>/sandboxes, the instance lock.",
    },
    Key {
        path: "crio.runroot",
        flag: "--runroot",
        env: "CONTAINER_RUNROOT",
        crio: true,
        doc: "State that only matters while the node is up.",
    },
    Key {
        path: "crio.storage_driver",
        flag: "--storage-driver",
        env: "CONTAINER_STORAGE_DRIVER",
        crio: true,
        doc: "How containers' root file systems are made: \"overlay\", \"vfs\" (copies), or \"\" for\n\
              overlay where it can be mounted and vfs elsewhere. Images are in <root>/storage.",
    },
    Key {
        path: "crio.api.listen",
        flag: "--listen",
        env: "CONTAINER_LISTEN",
        crio: true,
        doc: "The unix socket serving CRI (gRPC) and the HTTP status API (mode 0660).",
    },
    Key {
        path: "crio.api.stream_address",
        flag: "--stream-address",
        env: "CONTAINER_STREAM_ADDRESS",
        crio: true,
        doc: "The address of the streaming server that Exec, Attach and PortForward hand out URLs on\n\
              (SPDY/3.1 and WebSocket, as kubectl and crictl speak them).",
    },
    Key {
        path: "crio.api.stream_port",
        flag: "--stream-port",
        env: "CONTAINER_STREAM_PORT",
        crio: true,
        doc: "Its port; \"0\" for a free one.",
    },
    Key {
        path: "crio.api.stream_enable_tls",
        flag: "--stream-enable-tls",
        env: "CONTAINER_STREAM_ENABLE_TLS",
        crio: true,
        doc: "Serve streams over HTTPS with stream_tls_cert and stream_tls_key.",
    },
    Key {
        path: "crio.api.stream_tls_cert",
        flag: "--stream-tls-cert",
        env: "CONTAINER_STREAM_TLS_CERT",
        crio: true,
        doc: "The streaming server's certificate chain (PEM).",
    },
    Key {
        path: "crio.api.stream_tls_key",
        flag: "--stream-tls-key",
        env: "CONTAINER_STREAM_TLS_KEY",
        crio: true,
        doc: "The streaming server's private key (PEM).",
    },
    Key {
        path: "crio.api.stream_tls_ca",
        flag: "--stream-tls-ca",
        env: "CONTAINER_STREAM_TLS_CA",
        crio: true,
        doc: "CA certificates (PEM) a client's certificate must be signed by; \"\" for no client\n\
              certificates.",
    },
    Key {
        path: "crio.api.stream_idle_timeout",
        flag: "--stream-idle-timeout",
        env: "CONTAINER_STREAM_IDLE_TIMEOUT",
        crio: true,
        doc: "A stream with no traffic this long is closed (4h, kubelet's default).",
    },
    Key {
        path: "crio.runtime.log_level",
        flag: "--log-level",
        env: "CONTAINER_LOG_LEVEL",
        crio: true,
        doc: "A tracing filter: a level (trace, debug, info, warn, error) or directives such as\n\
              \"crio_lite=debug,ocicni=trace\". RUST_LOG wins over it. SIGHUP applies a new one.",
    },
    Key {
        path: "crio.runtime.namespaces_dir",
        flag: "--namespaces-dir",
        env: "CONTAINER_NAMESPACES_DIR",
        crio: true,
        doc: "Network namespaces are pinned in <namespaces_dir>/netns, where `ip netns` and lsns\n\
              see them.",
    },
    Key {
        path: "crio.runtime.default_runtime",
        flag: "--default-runtime",
        env: "CONTAINER_DEFAULT_RUNTIME",
        crio: true,
        doc: "The runtime handler of sandboxes whose request names none: \"crun\", \"runc\" or a\n\
              [crio.runtime.runtimes.NAME] table. The default handler also answers to \"\".",
    },
    Key {
        path: "crio.runtime.conmon",
        flag: "--conmon",
        env: "CONTAINER_CONMON",
        crio: true,
        doc: "The container monitor: one conmon per container owns its stdio, writes its log and\n\
              records its exit code, also while crio-lite is down.",
    },
    Key {
        path: "crio.runtime.hooks_dir",
        flag: "--hooks-dir",
        env: "CONTAINER_HOOKS_DIR",
        crio: true,
        doc: "Directories of OCI hook files (oci-hooks(5)); a later directory's file replaces an\n\
              earlier one of the same name. Read when a container is created.",
    },
    Key {
        path: "crio.runtime.seccomp_profile",
        flag: "--seccomp-profile",
        env: "CONTAINER_SECCOMP_PROFILE",
        crio: true,
        doc: "The seccomp profile of RuntimeDefault containers (a JSON file); \"\" for the built-in\n\
              one.",
    },
    Key {
        path: "crio.runtime.seccomp_use_default_when_empty",
        flag: "--seccomp-use-default-when-empty",
        env: "CONTAINER_SECCOMP_USE_DEFAULT_WHEN_EMPTY",
        crio: true,
        doc: "Whether a container whose request names no seccomp profile gets the RuntimeDefault\n\
              one rather than none (unconfined, the CRI's meaning of an empty profile). kubelet\n\
              always names one.",
    },
    Key {
        path: "crio.runtime.pids_limit",
        flag: "--pids-limit",
        env: "CONTAINER_PIDS_LIMIT",
        crio: true,
        doc: "The most processes a container may have (pids.max), so a fork bomb stays in its\n\
              cgroup; 0 or -1 for none. CRI-O's default before 1.25.",
    },
    Key {
        path: "crio.runtime.cgroup_manager",
        flag: "--cgroup-manager",
        env: "CONTAINER_CGROUP_MANAGER",
        crio: true,
        doc: "Who makes the containers' cgroups: \"systemd\" (scopes through systemd's D-Bus API,\n\
              pods under slices such as kubepods-burstable.slice; the default where systemd is\n\
              init) or \"cgroupfs\" (cgroup paths such as /kubepods/burstable; the default\n\
              elsewhere). It must match kubelet's cgroupDriver.",
    },
    Key {
        path: "crio.runtime.conmon_cgroup",
        flag: "--conmon-cgroup",
        env: "CONTAINER_CONMON_CGROUP",
        crio: true,
        doc: "Where each container's conmon runs: \"pod\" (beside the pod's containers, charged\n\
              to the pod) or, with the systemd manager, a slice such as system.slice.",
    },
    Key {
        path: "crio.image.global_auth_file",
        flag: "--global-auth-file",
        env: "CONTAINER_GLOBAL_AUTH_FILE",
        crio: true,
        doc: "A containers-auth.json file (as Podman's auth.json) with credentials for pulls whose\n\
              request brings none; \"\" for none.",
    },
    Key {
        path: "crio.image.insecure_registries",
        flag: "--insecure-registry",
        env: "CONTAINER_INSECURE_REGISTRY",
        crio: true,
        doc: "Registries (host or host:port) pulled from over plain HTTP; all others need HTTPS.",
    },
    Key {
        path: "crio.image.pull_progress_timeout",
        flag: "--pull-progress-timeout",
        env: "CONTAINER_PULL_PROGRESS_TIMEOUT",
        crio: true,
        doc: "A pull that waits on its registry this long and receives less than\n\
              crio_lite.image.pull_min_rate in that time is cancelled, naming the registry and\n\
              the layer. \"0s\": never (CRI-O's default, which lets a registry that trickles\n\
              hold a pull for ever); crio-lite's is 5m, with a 1 KiB/s minimum.",
    },
    Key {
        path: "crio.image.signature_policy",
        flag: "--signature-policy",
        env: "CONTAINER_SIGNATURE_POLICY",
        crio: true,
        doc: "A containers-policy.json file deciding which images may be pulled (reject,\n\
              insecureAcceptAnything, sigstoreSigned with a public key); read again when it\n\
              changes. \"\" for /etc/crio-lite/policy.json, else /etc/containers/policy.json. With\n\
              no policy file every pull is refused, as CRI-O refuses them.",
    },
    Key {
        path: "crio.network.network_dir",
        flag: "--cni-config-dir",
        env: "CONTAINER_CNI_CONFIG_DIR",
        crio: true,
        doc: "The directory of CNI network configuration files (watched; SIGHUP rereads it).",
    },
    Key {
        path: "crio.network.plugin_dirs",
        flag: "--cni-plugin-dir",
        env: "CONTAINER_CNI_PLUGIN_DIR",
        crio: true,
        doc: "Directories searched for CNI plugin binaries, in order.",
    },
    Key {
        path: "crio.network.cni_default_network",
        flag: "--cni-default-network",
        env: "CONTAINER_CNI_DEFAULT_NETWORK",
        crio: true,
        doc: "The network pods are attached to; \"\" picks the first configuration in network_dir\n\
              (by file name).",
    },
    Key {
        path: "crio.metrics.enable_metrics",
        flag: "--enable-metrics",
        env: "CONTAINER_ENABLE_METRICS",
        crio: true,
        doc: "Serve Prometheus metrics on an endpoint of their own: metrics_host:metrics_port over TCP,\n\
              and metrics_socket when set. GET /metrics on the CRI socket answers either way.",
    },
    Key {
        path: "crio.metrics.metrics_host",
        flag: "--metrics-host",
        env: "CONTAINER_METRICS_HOST",
        crio: true,
        doc: "The address the metrics endpoint listens on.",
    },
    Key {
        path: "crio.metrics.metrics_port",
        flag: "--metrics-port",
        env: "CONTAINER_METRICS_PORT",
        crio: true,
        doc: "The TCP port the metrics endpoint listens on.",
    },
    Key {
        path: "crio.metrics.metrics_socket",
        flag: "--metrics-socket",
        env: "CONTAINER_METRICS_SOCKET",
        crio: true,
        doc: "A unix socket for the metrics endpoint instead of the port; \"\" for none.",
    },
    Key {
        path: "crio_lite.runtime.log_format",
        flag: "--log-format",
        env: "CONTAINER_LOG_FORMAT",
        crio: false,
        doc: "How log lines are written to stderr: \"text\", or \"json\" (one object a line, with the\n\
              fields of the request: sandbox, pod, namespace). CRI-O's --log-format flag.",
    },
    Key {
        path: "crio_lite.runtime.log_journald",
        flag: "--log-journald",
        env: "CONTAINER_LOG_JOURNALD",
        crio: false,
        doc: "Log to journald natively, each field a journal field (SANDBOX=..., POD=...). Also done\n\
              when stderr is the journal (JOURNAL_STREAM, as under systemd) and log_format is text.\n\
              CRI-O's --log-journald flag.",
    },
    Key {
        path: "crio_lite.api.normalize_authority",
        flag: "--normalize-authority",
        env: "CRIO_LITE_NORMALIZE_AUTHORITY",
        crio: false,
        doc: "Replace an invalid HTTP/2 :authority (the socket path crictl < 1.31 sends) by\n\
              localhost. Off, such clients fail every call; off only to measure its cost.",
    },
    Key {
        path: "crio_lite.network.cache_dir",
        flag: "--cache-dir",
        env: "CRIO_LITE_CACHE_DIR",
        crio: false,
        doc: "Where CNI results are cached (libcni's cache dir, shared with its other users).",
    },
    Key {
        path: "crio_lite.network.cni_run_dir",
        flag: "--cni-run-dir",
        env: "CRIO_LITE_CNI_RUN_DIR",
        crio: false,
        doc: "Pod locks and set-ups in progress; every ocicni user on the node must share it.",
    },
    Key {
        path: "crio_lite.network.plugin_timeout",
        flag: "--plugin-timeout",
        env: "CRIO_LITE_PLUGIN_TIMEOUT",
        crio: false,
        doc: "How long one plugin may run before it is killed (\"500ms\", \"60s\", \"2m\").",
    },
    Key {
        path: "crio_lite.network.cni_args_policy",
        flag: "--cni-args-policy",
        env: "CRIO_LITE_CNI_ARGS_POLICY",
        crio: false,
        doc: "CNI_ARGS given to plugins: \"kubernetes\" (K8S_POD_* as CRI-O passes them) or\n\
              \"plain\".",
    },
    Key {
        path: "crio_lite.network.builtin_default_network",
        flag: "--builtin-default-network",
        env: "CRIO_LITE_BUILTIN_DEFAULT_NETWORK",
        crio: false,
        doc: "Whether a built-in default network is used when network_dir has none.",
    },
    Key {
        path: "crio_lite.network.builtin_plugins",
        flag: "--builtin-plugins",
        env: "CRIO_LITE_BUILTIN_PLUGINS",
        crio: false,
        doc: "When bridge, host-local and loopback run built in instead of as binaries:\n\
              \"prefer-binary\" (the binary when a plugin directory has it, else built in: a node\n\
              without CNI plugins still gets pod networks), \"prefer-builtin\" or \"never\".",
    },
    Key {
        path: "crio_lite.image.registries_conf",
        flag: "--registries-conf",
        env: "CRIO_LITE_REGISTRIES_CONF",
        crio: false,
        doc: "A containers-registries.conf file (short-name aliases, unqualified-search registries,\n\
              mirrors, blocked and insecure registries), drop-ins in <file>.d/; read again when\n\
              it changes. A file that does not exist means none.",
    },
    Key {
        path: "crio_lite.image.pull_min_rate",
        flag: "--pull-min-rate",
        env: "CRIO_LITE_PULL_MIN_RATE",
        crio: false,
        doc: "The fewest bytes per second, over a crio.image.pull_progress_timeout window, that\n\
              count as a pull's progress (1024 by default); 0: any byte does (CRI-O's meaning),\n\
              and a registry that trickles is never cut.",
    },
];

/// The key at `path`.
pub(crate) fn key(path: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.path == path)
}

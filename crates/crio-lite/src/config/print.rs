//! `crio-lite config`: the configuration as TOML, a comment over every key.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::Config;
use super::keys::KEYS;

const HEADER: &str = "\
# crio-lite configuration, laid out as CRI-O's crio.conf(5).
#
# Read from /etc/crio-lite/crio-lite.conf (--config), then from every *.conf file of
# /etc/crio-lite/crio-lite.conf.d (--config-dir) in lexical order, a key of a later file
# replacing the same key of an earlier one. Environment variables override the files and
# flags override both; each key's are named above it. Every key is optional.
#
# [crio.*] tables hold the options CRI-O has, under CRI-O's names; [crio_lite.*] tables hold
# crio-lite's own.
";

impl Config {
    /// The configuration as TOML with a comment over every key, as `crio-lite config` prints it.
    /// It parses back to the same configuration (paths that are not UTF-8, which
    /// [`Config::validate`] refuses, are printed lossily).
    pub fn to_commented_toml(&self) -> String {
        let table = toml::Table::try_from(self)
            .or_else(|_| toml::Table::try_from(self.lossy()))
            .unwrap_or_default();
        let mut out = String::from(HEADER);
        let mut table_now = "";
        for key in KEYS {
            if key.table() != table_now {
                table_now = key.table();
                let _ = write!(out, "\n[{table_now}]\n");
            }
            out.push('\n');
            for line in key.doc.lines() {
                let _ = writeln!(out, "# {}", line.trim());
            }
            let _ = writeln!(out, "# ({}, ${})", key.flag, key.env);
            let value = super::load::lookup(&table, key.path).map_or_else(String::new, render);
            let _ = writeln!(out, "{} = {value}", key.name());
        }
        out.push_str(RUNTIMES_HELP);
        for (name, handler) in &self.crio.runtime.runtimes {
            let _ = write!(out, "\n[crio.runtime.runtimes.{}]\n", render_key(name));
            let handler = toml::Table::try_from(handler).unwrap_or_default();
            for (key, value) in &handler {
                let _ = writeln!(out, "{key} = {}", render(value));
            }
        }
        out
    }

    /// The configuration with every path made UTF-8.
    pub(super) fn lossy(&self) -> Config {
        let fix = |p: &mut PathBuf| *p = PathBuf::from(p.to_string_lossy().into_owned());
        let mut config = self.clone();
        let crio = &mut config.crio;
        let lite = &mut config.crio_lite;
        for path in [
            &mut crio.root,
            &mut crio.runroot,
            &mut crio.api.listen,
            &mut crio.runtime.namespaces_dir,
            &mut crio.runtime.conmon,
            &mut crio.runtime.seccomp_profile,
            &mut crio.network.network_dir,
            &mut crio.metrics.metrics_socket,
            &mut lite.network.cache_dir,
            &mut lite.network.cni_run_dir,
        ] {
            fix(path);
        }
        crio.network.plugin_dirs.iter_mut().for_each(fix);
        crio.runtime.hooks_dir.iter_mut().for_each(fix);
        for handler in crio.runtime.runtimes.values_mut() {
            fix(&mut handler.runtime_path);
            fix(&mut handler.runtime_root);
            fix(&mut handler.monitor_path);
        }
        config
    }
}

const RUNTIMES_HELP: &str = "
# Runtime handlers: crun (/usr/bin/crun, root /run/crun) and runc (/usr/sbin/runc, root
# /run/runc) are built in. A [crio.runtime.runtimes.NAME] table adds one, or replaces the
# built-in of that name: runtime_path (\"\" for NAME in PATH), runtime_type (\"oci\"),
# runtime_root (\"\" for /run/NAME), monitor_path (\"\" for crio.runtime.conmon),
# allowed_annotations (the runtime-interpreted annotations, such as crun's \"run.oci.\", that
# requests may pass to this runtime; [] for none: the others are dropped from requests).
";

/// A table name as a TOML key: bare when it can be, quoted otherwise.
fn render_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        name.to_owned()
    } else {
        toml::Value::String(name.to_owned()).to_string()
    }
}

/// A value on one line: arrays inline, strings quoted and escaped as TOML wants.
fn render(value: &toml::Value) -> String {
    match value {
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

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
            &mut crio.network.network_dir,
            &mut crio.metrics.metrics_socket,
            &mut lite.network.cache_dir,
            &mut lite.network.cni_run_dir,
        ] {
            fix(path);
        }
        crio.network.plugin_dirs.iter_mut().for_each(fix);
        config
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

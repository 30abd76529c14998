//! [`ObservedExec`]: an [`Exec`] that reports every plugin run to a callback, for metrics and
//! benchmarks, without touching how plugins run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Deserialize;

use crate::error::Result;
use crate::exec::{Exec, PluginOutput};

/// One finished plugin run, as an [`ObservedExec`] callback sees it.
#[derive(Debug, Clone, Copy)]
pub struct PluginRun<'a> {
    /// The plugin binary.
    pub plugin: &'a Path,
    /// The variables it was given (`CNI_COMMAND`, `CNI_CONTAINERID`, ...).
    pub env: &'a [(String, String)],
    /// What it got on stdin.
    pub stdin: &'a [u8],
    /// How long the run took, spawn to exit.
    pub elapsed: Duration,
    /// Whether it succeeded.
    pub ok: bool,
}

impl PluginRun<'_> {
    /// The plugin's file name (its type).
    pub fn plugin_name(&self) -> String {
        self.plugin
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// `CNI_COMMAND`, or `""`.
    pub fn command(&self) -> &str {
        self.var("CNI_COMMAND")
    }

    /// `CNI_CONTAINERID`, or `""` (VERSION, STATUS and GC have none).
    pub fn container_id(&self) -> &str {
        self.var("CNI_CONTAINERID")
    }

    /// The network's name from the plugin's configuration, or `""` (VERSION has none).
    pub fn network(&self) -> String {
        #[derive(Deserialize)]
        struct Named {
            #[serde(default)]
            name: String,
        }
        serde_json::from_slice::<Named>(self.stdin)
            .map(|n| n.name)
            .unwrap_or_default()
    }

    fn var(&self, name: &str) -> &str {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Wraps another [`Exec`] and calls `observe` after every plugin run it passes on.
pub struct ObservedExec<F> {
    inner: Arc<dyn Exec>,
    observe: F,
}

impl<F> ObservedExec<F>
where
    F: Fn(&PluginRun<'_>) + Send + Sync,
{
    /// Runs plugins with `inner` and reports each run to `observe`.
    pub fn new(inner: Arc<dyn Exec>, observe: F) -> Self {
        ObservedExec { inner, observe }
    }
}

#[async_trait]
impl<F> Exec for ObservedExec<F>
where
    F: Fn(&PluginRun<'_>) + Send + Sync,
{
    async fn find_plugin(&self, name: &str, dirs: &[PathBuf]) -> Result<PathBuf> {
        self.inner.find_plugin(name, dirs).await
    }

    async fn exec_plugin(
        &self,
        plugin: &Path,
        env: &[(String, String)],
        stdin: &[u8],
    ) -> Result<PluginOutput> {
        let started = Instant::now();
        let out = self.inner.exec_plugin(plugin, env, stdin).await;
        (self.observe)(&PluginRun {
            plugin,
            env,
            stdin,
            elapsed: started.elapsed(),
            ok: out.is_ok(),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::error::Error;

    struct Canned;

    #[async_trait]
    impl Exec for Canned {
        async fn find_plugin(&self, name: &str, _dirs: &[PathBuf]) -> Result<PathBuf> {
            Ok(PathBuf::from("/opt/cni/bin").join(name))
        }

        async fn exec_plugin(
            &self,
            plugin: &Path,
            _env: &[(String, String)],
            _stdin: &[u8],
        ) -> Result<PluginOutput> {
            if plugin.ends_with("broken") {
                return Err(Error::InvalidPluginName {
                    name: "broken".into(),
                    reason: "test",
                });
            }
            Ok(PluginOutput {
                stdout: b"{}".to_vec(),
                stderr_tail: "a warning".into(),
            })
        }
    }

    #[tokio::test]
    async fn every_run_is_reported_with_its_labels() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let exec = ObservedExec::new(Arc::new(Canned), move |run: &PluginRun<'_>| {
            sink.lock().unwrap().push((
                run.plugin_name(),
                run.command().to_owned(),
                run.container_id().to_owned(),
                run.network(),
                run.ok,
            ));
        });
        let env = [
            ("CNI_COMMAND".to_owned(), "ADD".to_owned()),
            ("CNI_CONTAINERID".to_owned(), "c1".to_owned()),
        ];
        let out = exec
            .exec_plugin(
                Path::new("/opt/cni/bin/bridge"),
                &env,
                br#"{"name":"crio","type":"bridge"}"#,
            )
            .await;
        // What the plugin said on stderr passes through the observer.
        let out = out.unwrap();
        assert_eq!(
            (out.stdout.as_slice(), out.stderr_tail.as_str()),
            (&b"{}"[..], "a warning")
        );
        assert!(
            exec.exec_plugin(Path::new("/x/broken"), &[], b"not json")
                .await
                .is_err()
        );
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen[0],
            (
                "bridge".into(),
                "ADD".into(),
                "c1".into(),
                "crio".into(),
                true
            )
        );
        assert_eq!(
            seen[1],
            (
                "broken".into(),
                String::new(),
                String::new(),
                String::new(),
                false
            )
        );
    }
}

//! Set-up: which networks a pod means, and attaching it to them.

use std::collections::HashSet;

use cni_exec::RuntimeConf;

use super::{Ocicni, Target};
use crate::args;
use crate::error::{Error, Result};
use crate::netns;
use crate::networks::Networks;
use crate::pod::{AttachmentResult, NetworkSelection, PodNetwork};

impl Ocicni {
    /// Resolves which networks a pod means, reloading once when one is missing.
    pub(super) async fn targets(&self, pod: &PodNetwork) -> Result<Vec<Target>> {
        let mut nets = self.snapshot();
        let wanted: Vec<&str> = pod.networks.iter().map(|n| n.name.as_str()).collect();
        let missing = |nets: &Networks| {
            if wanted.is_empty() {
                nets.default.is_none()
            } else {
                wanted.iter().any(|w| nets.get(w).is_none())
            }
        };
        if missing(&nets) {
            nets = self.inner.watcher.reload_now().await.value;
        }
        if pod.networks.is_empty() {
            let default = nets.default.clone().ok_or_else(|| self.no_network(&nets))?;
            return Ok(vec![Target {
                name: default.name().to_owned(),
                network: Some(default),
                ifname: "eth0".to_owned(),
            }]);
        }
        let mut targets = Vec::with_capacity(pod.networks.len());
        for (sel, ifname) in pod.networks.iter().zip(assign_ifnames(&pod.networks)) {
            let net = nets.get(&sel.name).cloned().ok_or_else(|| {
                match nets.unusable_reason(&sel.name) {
                    Some(reason) => Error::NetworkUnusable {
                        name: sel.name.clone(),
                        reason: reason.to_owned(),
                    },
                    None => Error::NetworkNotFound {
                        name: sel.name.clone(),
                        dir: self.inner.opts.conf_dir.clone(),
                    },
                }
            })?;
            targets.push(Target {
                name: sel.name.clone(),
                network: Some(net),
                ifname,
            });
        }
        Ok(targets)
    }

    pub(super) fn no_network(&self, nets: &Networks) -> Error {
        match &nets.dir_error {
            Some(reason) => Error::ConfDir {
                dir: self.inner.opts.conf_dir.clone(),
                reason: reason.clone(),
            },
            None => Error::NoNetwork {
                dir: self.inner.opts.conf_dir.clone(),
            },
        }
    }

    /// The runtime configuration of `pod`'s attachment to `network` on `ifname`.
    pub(crate) fn runtime_conf(
        &self,
        pod: &PodNetwork,
        network: &str,
        ifname: &str,
        netns: &str,
    ) -> Result<RuntimeConf> {
        let runtime = pod.runtime_config.get(network);
        let mut rt = RuntimeConf::new(pod.id.clone(), netns.to_owned(), ifname.to_owned());
        rt.args = args::cni_args(pod, runtime, self.inner.opts.cni_args)?;
        rt.capability_args = args::capability_args(pod, network, runtime, self.pod_cidr());
        Ok(rt)
    }

    pub(super) async fn add_one(
        &self,
        pod: &PodNetwork,
        target: &Target,
    ) -> Result<AttachmentResult> {
        let net = target
            .network
            .as_ref()
            .ok_or_else(|| Error::NetworkNotFound {
                name: target.name.clone(),
                dir: self.inner.opts.conf_dir.clone(),
            })?;
        let rt = self.runtime_conf(pod, &target.name, &target.ifname, &pod.netns)?;
        let wrap = |source| Error::Network {
            pod: pod.id.clone(),
            network: target.name.clone(),
            ifname: target.ifname.clone(),
            source: Box::new(source),
        };
        // cni-exec caches a result-less entry before the plugins run, so GC finds this attachment
        // even if the process dies mid-ADD.
        let result = self
            .inner
            .cni
            .add_network_list(net, &rt)
            .await
            .map_err(wrap)?;
        Ok(AttachmentResult {
            network: target.name.clone(),
            ifname: target.ifname.clone(),
            result,
        })
    }

    /// [`CniPlugin::setup_pod`]: every network attached (loopback up meanwhile), or none.
    pub(super) async fn setup(&self, pod: &PodNetwork) -> Result<Vec<AttachmentResult>> {
        if pod.netns.is_empty() {
            return Err(Error::InvalidPod {
                pod: pod.id.clone(),
                field: "netns".into(),
                reason: "empty".into(),
            });
        }
        let targets = self.targets(pod).await?;
        let (_gc, mut pod_lock) = self.lock_pod(&pod.id).await?;
        // Loopback comes up while the networks attach (as go-cni runs its loopback network):
        // the two do not depend on each other, and a failure of either rolls both back.
        let loopback = async {
            if !self.inner.opts.loopback {
                return Ok(());
            }
            netns::bring_up_loopback_async(&pod.netns)
                .await
                .map_err(|source| Error::Netns {
                    pod: pod.id.clone(),
                    source,
                })
        };
        let attach = async {
            if self.inner.opts.parallel_attach {
                return futures_util::future::join_all(
                    targets.iter().map(|t| self.add_one(pod, t)),
                )
                .await;
            }
            let mut outcomes = Vec::with_capacity(targets.len());
            for target in &targets {
                let outcome = self.add_one(pod, target).await;
                let failed = outcome.is_err();
                outcomes.push(outcome);
                if failed {
                    break;
                }
            }
            outcomes
        };
        let (loopback, outcomes): (Result<()>, Vec<Result<AttachmentResult>>) =
            tokio::join!(loopback, attach);
        let mut done = Vec::new();
        let mut errors: Vec<Error> = loopback.err().into_iter().collect();
        for (target, outcome) in targets.iter().zip(outcomes) {
            match outcome {
                Ok(result) => done.push((target, result)),
                Err(err) => errors.push(err),
            }
        }
        if errors.is_empty() {
            // The pod will be torn down: its lock file stays for that, and goes then (or at GC).
            pod_lock.keep_file();
            return Ok(done.into_iter().map(|(_, r)| r).collect());
        }
        // Undo what was attached, newest first, so a failed set-up leaves nothing behind.
        for (target, _) in done.iter().rev() {
            if let Err(err) = self.del_one(pod, target, &pod.netns).await {
                tracing::warn!(pod = pod.id, network = target.name, error = %err, "rollback after failed set-up failed");
                errors.push(err);
            }
        }
        Err(Error::from_many(errors).unwrap_or(Error::NoNetwork {
            dir: self.inner.opts.conf_dir.clone(),
        }))
    }
}

/// Interface names for a pod's selections: the ones given, and the first free `ethN` for the rest.
pub(super) fn assign_ifnames(selections: &[NetworkSelection]) -> Vec<String> {
    let taken: HashSet<&str> = selections
        .iter()
        .filter_map(|n| n.ifname.as_deref())
        .collect();
    let mut free = (0_usize..)
        .map(|i| format!("eth{i}"))
        .filter(|name| !taken.contains(name.as_str()));
    selections
        .iter()
        .map(|sel| {
            sel.ifname
                .clone()
                .unwrap_or_else(|| free.next().unwrap_or_default())
        })
        .collect()
}

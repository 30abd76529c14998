//! The two images of the bench, made offline from Debian's busybox-static and pushed to a local
//! docker-registry: the workload (`sleep 3600`) and, for containerd, a pause look-alike.

use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

/// The workload's repository and tag.
const WORKLOAD: &str = "bench/busybox:1";
/// The pause look-alike's.
const PAUSE: &str = "bench/pause:1";

/// What the pause look-alike runs as a pod's infra container: it sleeps until SIGTERM, which it
/// answers by exiting at once (as pause does), where a bare `sleep` as PID 1 would ignore it.
pub(crate) const PAUSE_SCRIPT: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done";

/// The references of the pushed images: (workload, pause).
pub(crate) struct Pushed {
    pub(crate) workload: String,
    pub(crate) pause: String,
}

/// Builds both images (busybox, then a layer of the applets run by name) and pushes them. The
/// two share their layers and differ in their configuration's `Cmd`.
pub(crate) fn push(registry: &Registry) -> Pushed {
    let mut applets = Tar::new().dir("bin", 0o755);
    for name in ["sleep", "true"] {
        applets = applets.symlink(&format!("bin/{name}"), "busybox");
    }
    let layers = [
        Layer::new(&Tar::busybox().build(), Compression::Gzip),
        Layer::new(&applets.build(), Compression::Gzip),
    ];
    let build = |cmd: &[&str]| {
        layers
            .iter()
            .fold(ImageBuilder::new(), |b, l| b.layer(l.clone()))
            .cmd(cmd)
            .build()
    };
    let workload = build(&["/bin/sleep", "3600"]);
    let pause = build(&["/bin/sh", "-c", PAUSE_SCRIPT]);
    for (reference, image) in [(WORKLOAD, &workload), (PAUSE, &pause)] {
        let (repo, tag) = reference.split_once(':').unwrap_or((reference, "latest"));
        registry.push_image(repo, Some(tag), image, Upload::Monolithic);
    }
    Pushed {
        workload: format!("{}/{WORKLOAD}", registry.host()),
        pause: format!("{}/{PAUSE}", registry.host()),
    }
}

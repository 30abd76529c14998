//! A pull's progress observer hears every byte of every layer it downloads, each layer's end,
//! which layers it reused, and the end of the pull.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use image_store::{Auth, Digest, Progress, PullOptions};
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

use crate::support::{self, reference};

#[derive(Default)]
struct Recorder {
    started: Mutex<BTreeMap<String, u64>>,
    bytes: Mutex<BTreeMap<String, u64>>,
    done: Mutex<Vec<(String, bool)>>,
    pulls: Mutex<Vec<(String, bool, u64)>>,
}

impl Recorder {
    fn take(&self) -> Recorded {
        Recorded {
            started: std::mem::take(&mut *self.started.lock().unwrap()),
            bytes: std::mem::take(&mut *self.bytes.lock().unwrap()),
            done: std::mem::take(&mut *self.done.lock().unwrap()),
            pulls: std::mem::take(&mut *self.pulls.lock().unwrap()),
        }
    }
}

struct Recorded {
    started: BTreeMap<String, u64>,
    bytes: BTreeMap<String, u64>,
    done: Vec<(String, bool)>,
    pulls: Vec<(String, bool, u64)>,
}

impl Progress for Recorder {
    fn layer_started(&self, _image: &str, layer: &Digest, size: u64) {
        self.started.lock().unwrap().insert(layer.to_string(), size);
    }

    fn bytes(&self, _image: &str, layer: &Digest, n: u64) {
        *self
            .bytes
            .lock()
            .unwrap()
            .entry(layer.to_string())
            .or_default() += n;
    }

    fn layer_done(&self, _image: &str, layer: &Digest, reused: bool) {
        self.done.lock().unwrap().push((layer.to_string(), reused));
    }

    fn pull_done(&self, image: &str, ok: bool, bytes: u64, _took: Duration) {
        self.pulls
            .lock()
            .unwrap()
            .push((image.to_owned(), ok, bytes));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn the_observer_hears_every_byte_and_every_reused_layer() {
    let registry = Registry::start();
    let base = Layer::new(&Tar::busybox().build(), Compression::Gzip);
    let first = ImageBuilder::new()
        .layer(base.clone())
        .layer(Layer::new(
            &Tar::new()
                .file("first", 0o644, &support::noise(300_000))
                .build(),
            Compression::Zstd,
        ))
        .build();
    let second = ImageBuilder::new()
        .layer(base.clone())
        .layer(Layer::new(
            &Tar::new().file("second", 0o644, b"two").build(),
            Compression::None,
        ))
        .build();
    registry.push_image("first", Some("latest"), &first, Upload::Chunked(10_000));
    registry.push_image("second", Some("latest"), &second, Upload::Monolithic);
    let dir = test_support::temp_dir("img-progress");
    let store = support::open(dir.path(), registry.host());
    let recorder = Arc::new(Recorder::default());
    let options = PullOptions::new().with_progress(Arc::clone(&recorder) as Arc<dyn Progress>);

    let name = reference(registry.host(), "first", "latest");
    store
        .pull_with(&name, &Auth::Anonymous, &options)
        .await
        .unwrap();
    let seen = recorder.take();
    let sizes: BTreeMap<String, u64> = first
        .layers
        .iter()
        .map(|l| (l.digest.clone(), l.blob.len() as u64))
        .collect();
    assert_eq!(seen.started, sizes, "every layer started, with its size");
    assert_eq!(seen.bytes, sizes, "every byte of every layer");
    let mut done = seen.done;
    done.sort();
    let mut want: Vec<(String, bool)> = sizes.keys().map(|d| (d.clone(), false)).collect();
    want.sort();
    assert_eq!(done, want, "each layer done once, none reused");
    let total: u64 = sizes.values().sum();
    assert_eq!(seen.pulls, [(name, true, total)]);

    // The second image shares the base layer: reused, not one byte of it downloaded.
    let name = reference(registry.host(), "second", "latest");
    store
        .pull_with(&name, &Auth::Anonymous, &options)
        .await
        .unwrap();
    let seen = recorder.take();
    let top = &second.layers[1];
    let only_top = BTreeMap::from([(top.digest.clone(), top.blob.len() as u64)]);
    assert_eq!(seen.started, only_top);
    assert_eq!(seen.bytes, only_top);
    let mut done = seen.done;
    done.sort();
    let mut want = vec![(base.digest.clone(), true), (top.digest.clone(), false)];
    want.sort();
    assert_eq!(done, want);
    assert_eq!(seen.pulls, [(name, true, top.blob.len() as u64)]);

    // A failed pull is heard too, once.
    let name = reference(registry.host(), "missing", "latest");
    store
        .pull_with(&name, &Auth::Anonymous, &options)
        .await
        .unwrap_err();
    assert_eq!(recorder.take().pulls, [(name, false, 0)]);
}

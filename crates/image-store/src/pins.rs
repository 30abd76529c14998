//! What pulls in progress have stored or are about to use and no index names yet: the
//! collector leaves it. This replaces a lock that pulls held (shared) for their whole length and
//! removals (exclusive) waited on: a pull from a slow registry then held up every removal, and
//! with it (the lock being fair) every later pull. A pin is taken in memory, briefly, before
//! the pull looks for the blob or layer it pins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::digest::Digest;
use crate::store::Inner;

/// Every pin of every pull in progress, counted: two pulls may pin the same layer.
#[derive(Debug, Default)]
pub(crate) struct Pinned {
    blobs: HashMap<Digest, usize>,
    layers: HashMap<Digest, usize>,
}

impl Pinned {
    /// Whether a pull in progress pinned the blob.
    pub(crate) fn has_blob(&self, digest: &Digest) -> bool {
        self.blobs.contains_key(digest)
    }

    /// Whether a pull in progress pinned the layer (by chain id).
    pub(crate) fn has_layer(&self, chain_id: &Digest) -> bool {
        self.layers.contains_key(chain_id)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Blob,
    Layer,
}

/// One pull's pins, released when it is dropped: after the pull indexed its image, or failed.
pub(crate) struct Pins {
    inner: Arc<Inner>,
    held: Mutex<Vec<(Kind, Digest)>>,
}

impl Pins {
    pub(crate) fn new(inner: &Arc<Inner>) -> Pins {
        Pins {
            inner: Arc::clone(inner),
            held: Mutex::new(Vec::new()),
        }
    }

    /// Pins a blob: call before looking whether it is stored.
    pub(crate) fn blob(&self, digest: &Digest) {
        self.pin(Kind::Blob, digest);
    }

    /// Pins a layer directory by chain id: call before looking whether it is unpacked.
    pub(crate) fn layer(&self, chain_id: &Digest) {
        self.pin(Kind::Layer, chain_id);
    }

    fn pin(&self, kind: Kind, digest: &Digest) {
        let mut held = lock(&self.held);
        let mut pinned = self.inner.pinned();
        *map(&mut pinned, kind).entry(digest.clone()).or_default() += 1;
        held.push((kind, digest.clone()));
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let held = std::mem::take(&mut *lock(&self.held));
        let mut pinned = self.inner.pinned();
        for (kind, digest) in held {
            let map = map(&mut pinned, kind);
            if let Some(count) = map.get_mut(&digest) {
                *count -= 1;
                if *count == 0 {
                    map.remove(&digest);
                }
            }
        }
    }
}

fn map(pinned: &mut Pinned, kind: Kind) -> &mut HashMap<Digest, usize> {
    match kind {
        Kind::Blob => &mut pinned.blobs,
        Kind::Layer => &mut pinned.layers,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change is complete once made: a panic elsewhere leaves nothing half done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// The pins of every pull in progress. Taken before the root file system table and the
    /// index, and held by the collector while it decides and unlinks.
    pub(crate) fn pinned(&self) -> MutexGuard<'_, Pinned> {
        lock(&self.pinned)
    }
}

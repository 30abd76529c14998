//! One sandbox or container in a manager's index: the lock that serializes its operations,
//! and its latest state (`None` once removed).

use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) op: Arc<tokio::sync::Mutex<()>>,
    snapshot: Mutex<Option<T>>,
}

impl<T: Clone> Entry<T> {
    pub(crate) fn new(item: T) -> Arc<Entry<T>> {
        Arc::new(Entry {
            op: Arc::default(),
            snapshot: Mutex::new(Some(item)),
        })
    }

    pub(crate) fn get(&self) -> Option<T> {
        self.snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set(&self, item: Option<T>) {
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = item;
    }
}

//! When a connection last had a request in flight, so that one holding a slot for nothing can
//! be closed.
//!
//! A connection is busy from the moment a request reaches the router until its response body
//! has been sent in full or dropped (a reset stream), which for gRPC is a stream's life, server
//! streaming included. HTTP/2 keep-alive PINGs, SETTINGS and WINDOW_UPDATEs are not requests:
//! a client that only answers pings is idle. Counting at the service rather than in the HTTP/2
//! front's frame parser means the count follows h2's own view of a stream (opened, answered,
//! reset), without a second stream state machine to keep in step with it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::{Request, Response};
use hyper::body::{Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's requests in flight and when the last one ended.
#[derive(Debug)]
pub(crate) struct Activity {
    open: AtomicUsize,
    last: Mutex<Instant>,
    changed: Notify,
}

impl Activity {
    /// A connection that has just been opened: idle since now.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            open: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
            changed: Notify::new(),
        })
    }

    /// Since when the connection has had no request in flight; `None` while it has one.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        (self.open.load(Ordering::SeqCst) == 0).then_some(last)
    }

    /// Counts a request until the returned guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> Busy {
        self.open.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    /// Resolves once the connection has had no request in flight for `timeout`.
    pub(crate) async fn idle_for(&self, timeout: Duration) {
        loop {
            // Registered before the state is read, so a change in between still wakes us.
            let changed = self.changed.notified();
            if self.open.load(Ordering::SeqCst) > 0 {
                changed.await;
                continue;
            }
            let since = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
            let deadline = since + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// A request in flight.
#[derive(Debug)]
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.0.open.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// A connection's service that counts its requests in `activity`.
#[derive(Debug, Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<S, B> hyper::service::Service<Request<B>> for Tracked<S>
where
    S: hyper::service::Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn call(&self, request: Request<B>) -> Self::Future {
        let busy = self.activity.begin();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Body::new(Guarded { body, _busy: busy })))
        })
    }
}

/// A response body that keeps its request counted until it is done with.
struct Guarded {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

//! Pending streaming requests behind single-use URL tokens, as kubelet's `requestCache`.
//!
//! The CRI Exec, Attach and PortForward calls answer with a URL
//! (`<base>/exec/<token>`, `/attach/<token>`, `/portforward/<token>`); the client then connects
//! to it. The token is the only thing that ties the connection to the request, so it is random
//! (128 bits from the kernel, where kubelet's 8 base64 characters carry 48), used once, and
//! forgotten after its time to live. The cache holds a bounded number of entries: when full it
//! refuses new requests ([`Error::TooManyInFlight`], which kubelet answers as
//! ResourceExhausted) rather than evicting a request a client is about to use.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::{Error, Result};

/// Kubelet's time to live of a token.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Kubelet's bound on requests in flight.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1000;
/// Random bytes per token: 128 bits.
const TOKEN_BYTES: usize = 16;
/// The length of a token: 16 bytes in unpadded base64url.
pub const TOKEN_LEN: usize = 22;

/// Where the cache reads the time; tests step a fake one.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A cache of requests, each behind a token that may be consumed once before it expires.
pub struct TokenCache<T> {
    ttl: Duration,
    max_in_flight: usize,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    by_token: HashMap<String, (Instant, T)>,
    /// Tokens in the order they expire (all share one TTL, so insertion order); a consumed
    /// token stays here until its turn comes and is skipped then.
    expiry: VecDeque<(Instant, String)>,
}

impl<T> TokenCache<T> {
    /// A cache whose tokens live `ttl` and which holds at most `max_in_flight` requests.
    pub fn new(ttl: Duration, max_in_flight: usize) -> TokenCache<T> {
        TokenCache::with_clock(ttl, max_in_flight, Arc::new(SystemClock))
    }

    /// As [`TokenCache::new`], reading the time from `clock`.
    pub fn with_clock(ttl: Duration, max_in_flight: usize, clock: Arc<dyn Clock>) -> TokenCache<T> {
        TokenCache {
            ttl,
            max_in_flight,
            clock,
            inner: Mutex::new(Inner {
                by_token: HashMap::new(),
                expiry: VecDeque::new(),
            }),
        }
    }

    /// Stores `request` and returns the token that retrieves it: 22 URL-safe characters.
    ///
    /// # Errors
    ///
    /// [`Error::TooManyInFlight`] when the cache holds `max_in_flight` live requests;
    /// [`Error::Random`] when the kernel gives no random bytes.
    pub fn insert(&self, request: T) -> Result<String> {
        let now = self.clock.now();
        let mut inner = self.lock();
        inner.expire(now);
        if inner.by_token.len() >= self.max_in_flight {
            return Err(Error::TooManyInFlight {
                limit: self.max_in_flight,
            });
        }
        // 128 random bits collide with a live token with odds of n / 2^128; a few tries are
        // for a broken random source, which then fails loudly instead of looping.
        for _ in 0..4 {
            let token = new_token()?;
            if !inner.by_token.contains_key(&token) {
                let expires = now + self.ttl;
                inner.expiry.push_back((expires, token.clone()));
                inner.by_token.insert(token.clone(), (expires, request));
                return Ok(token);
            }
        }
        Err(Error::Random(
            "the random source repeats itself: every token drawn is taken".into(),
        ))
    }

    /// Takes the request behind `token` out of the cache. `None` for an unknown, used or
    /// expired token (they are not told apart: a client learns nothing from guessing).
    pub fn consume(&self, token: &str) -> Option<T> {
        if token.len() != TOKEN_LEN {
            return None;
        }
        let now = self.clock.now();
        let mut inner = self.lock();
        let (expires, request) = inner.by_token.remove(token)?;
        // Still good at its expiry instant: kubelet expires a request when `now.After(expire)`.
        (now <= expires).then_some(request)
    }

    /// The number of requests held, expired ones included until the next insert drops them.
    pub fn len(&self) -> usize {
        self.lock().by_token.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        // The map stays consistent across a panic elsewhere: every change is one call.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Inner<T> {
    /// Drops every request whose time is up.
    fn expire(&mut self, now: Instant) {
        while let Some((expires, _)) = self.expiry.front() {
            if *expires >= now {
                break;
            }
            if let Some((_, token)) = self.expiry.pop_front() {
                // Gone already if consumed; a re-inserted token cannot be here (128 bits).
                if self.by_token.get(&token).is_some_and(|(e, _)| *e < now) {
                    self.by_token.remove(&token);
                }
            }
        }
        // Consumed tokens leave their expiry entry behind; keep the queue from growing past
        // the cap when clients consume faster than tokens expire.
        if self.expiry.len() > 2 * self.by_token.len() + 64 {
            let live = &self.by_token;
            self.expiry.retain(|(_, t)| live.contains_key(t));
        }
    }
}

fn new_token() -> Result<String> {
    let mut raw = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut raw).map_err(|e| Error::Random(e.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_22_url_safe_characters() {
        let token = new_token().unwrap();
        assert_eq!(token.len(), TOKEN_LEN);
        assert!(
            token
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            "{token}"
        );
    }
}

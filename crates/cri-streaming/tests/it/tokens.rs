//! The token cache: single use, time to live on an injected clock, a bound on entries.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cri_streaming::Error;
use cri_streaming::token::{Clock, DEFAULT_MAX_IN_FLIGHT, DEFAULT_TTL, TOKEN_LEN, TokenCache};

/// A clock the test moves.
struct FakeClock(Mutex<Instant>);

impl FakeClock {
    fn new() -> Arc<FakeClock> {
        Arc::new(FakeClock(Mutex::new(Instant::now())))
    }
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

#[test]
fn kubelets_defaults() {
    assert_eq!(DEFAULT_TTL, Duration::from_secs(60));
    assert_eq!(DEFAULT_MAX_IN_FLIGHT, 1000);
}

#[test]
fn a_token_is_used_once() {
    let cache = TokenCache::new(DEFAULT_TTL, 10);
    let token = cache.insert("exec c1").unwrap();
    assert_eq!(token.len(), TOKEN_LEN);
    assert_eq!(cache.consume(&token), Some("exec c1"));
    assert_eq!(cache.consume(&token), None, "second use");
    assert!(cache.is_empty());
}

#[test]
fn a_token_lives_its_ttl_and_no_longer() {
    let clock = FakeClock::new();
    let cache = TokenCache::with_clock(Duration::from_secs(60), 10, clock.clone());
    let on_time = cache.insert(1).unwrap();
    let late = cache.insert(2).unwrap();
    clock.advance(Duration::from_secs(60));
    assert_eq!(cache.consume(&on_time), Some(1), "at the ttl: still good");
    clock.advance(Duration::from_millis(1));
    assert_eq!(cache.consume(&late), None, "past the ttl");
}

#[test]
fn a_full_cache_refuses_until_a_slot_frees() {
    let clock = FakeClock::new();
    let cache = TokenCache::with_clock(Duration::from_secs(60), 3, clock.clone());
    let first = cache.insert(0).unwrap();
    clock.advance(Duration::from_secs(30));
    let _ = cache.insert(1).unwrap();
    let _ = cache.insert(2).unwrap();
    let err = cache.insert(3).unwrap_err();
    assert!(matches!(err, Error::TooManyInFlight { limit: 3 }), "{err}");
    assert_eq!(
        err.to_string(),
        "too many streaming requests in flight: all 3 slots are taken"
    );
    // Consumed: a slot frees.
    assert_eq!(cache.consume(&first), Some(0));
    let _ = cache.insert(3).unwrap();
    assert!(cache.insert(4).is_err());
    // Expired: the rest free once their time is up, and only then.
    clock.advance(Duration::from_secs(60));
    assert!(cache.insert(5).is_err(), "at the ttl they are live");
    clock.advance(Duration::from_millis(1));
    let _ = cache.insert(5).unwrap();
    assert_eq!(
        cache.len(),
        1,
        "the three inserted at 30 s are gone at 90 s"
    );
}

#[test]
fn tokens_are_distinct_and_unguessable_ones_find_nothing() {
    let cache = TokenCache::new(DEFAULT_TTL, 1000);
    let tokens: HashSet<String> = (0..1000).map(|i| cache.insert(i).unwrap()).collect();
    assert_eq!(tokens.len(), 1000);
    for guess in ["", "x", "AAAAAAAAAAAAAAAAAAAAAA", &"a".repeat(10_000)] {
        assert_eq!(cache.consume(guess), None);
    }
    assert_eq!(cache.len(), 1000);
}

#[test]
fn consumed_tokens_do_not_pile_up_in_the_expiry_queue() {
    // Clients consume faster than tokens expire: the cache stays usable and bounded.
    let cache = TokenCache::new(DEFAULT_TTL, 2);
    for i in 0..10_000 {
        let token = cache.insert(i).unwrap();
        assert_eq!(cache.consume(&token), Some(i));
    }
    assert!(cache.is_empty());
}

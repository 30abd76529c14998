//! Who a connection's client is, and how many connections each client may hold.
//!
//! The global cap alone let one client hold every slot (1100 idle connections locked kubelet and
//! crictl out). Each client gets a share well below it, keyed by the peer's credentials
//! (`SO_PEERCRED`, which the kernel fills in and the client cannot forge): a root peer by its
//! pid, so kubelet, crictl and a monitoring agent each have their own share; any other peer by
//! its uid, since an unprivileged user could otherwise fork its way past a per-pid cap. A root
//! process could still fork past it, but root owns the node anyway.
//!
//! A client at its cap that connects again gets its longest-idle connection closed (GOAWAY:
//! gRPC clients reconnect when they next need one) rather than a refusal; only when all its
//! connections have requests in flight is the new one refused. A client that opens a
//! connection per task and never closes them (critest does, one per spec) keeps working, and
//! none holds more than its share for longer than a graceful close takes.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

use super::idle::Activity;

/// What connections are counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Client {
    /// A root peer: one process.
    Pid(i32),
    /// A non-root peer (or a root one whose pid the kernel did not give): one user.
    Uid(u32),
    /// Credentials could not be read; all such peers share one share.
    Unknown,
}

/// A connection's peer, as credentials tell it: the key it is counted under and the line that
/// names it in the log.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) client: Client,
    /// `pid 1234 uid 0`, `uid 1000` or `unknown peer`.
    pub(crate) name: String,
}

impl Peer {
    /// The peer of an accepted connection.
    pub(crate) fn of(stream: &UnixStream) -> Self {
        match stream.peer_cred() {
            Ok(cred) => Self::from_cred(cred.uid(), cred.pid()),
            Err(_) => Self {
                client: Client::Unknown,
                name: "unknown peer".to_owned(),
            },
        }
    }

    fn from_cred(uid: u32, pid: Option<i32>) -> Self {
        let client = match pid {
            Some(pid) if uid == 0 => Client::Pid(pid),
            _ => Client::Uid(uid),
        };
        let name = match pid {
            Some(pid) => format!("pid {pid} uid {uid}"),
            None => format!("uid {uid}"),
        };
        Self { client, name }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// One open connection of a client.
#[derive(Debug)]
struct Held {
    id: u64,
    activity: Arc<Activity>,
    /// Cancelled to have the connection closed gracefully to make room.
    evict: CancellationToken,
}

type Open = Arc<Mutex<HashMap<Client, Vec<Held>>>>;

/// Open connections per client, capped.
#[derive(Debug, Clone)]
pub(crate) struct ClientSlots {
    limit: usize,
    open: Open,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

/// One connection counted against its client; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct ClientSlot {
    client: Client,
    id: u64,
    open: Open,
}

impl ClientSlots {
    /// At most `limit` connections per client.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            open: Arc::default(),
            next_id: Arc::default(),
        }
    }

    /// A slot for a connection of `client` whose requests `activity` counts and which closes
    /// when `evict` is cancelled. At the cap, the client's connection idle the longest (and not
    /// already closing) is told to close and the new one takes its place; `None` when every
    /// one has a request in flight.
    pub(crate) fn try_take(
        &self,
        client: Client,
        activity: Arc<Activity>,
        evict: CancellationToken,
    ) -> Option<ClientSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let held = open.entry(client).or_default();
        // those already told to close are on their way out
        let live: Vec<&Held> = held.iter().filter(|h| !h.evict.is_cancelled()).collect();
        if live.len() >= self.limit {
            let (_, oldest) = live
                .iter()
                .filter_map(|h| h.activity.idle_since().map(|since| (since, h)))
                .min_by_key(|(since, _)| *since)?;
            oldest.evict.cancel();
        }
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        held.push(Held {
            id,
            activity,
            evict,
        });
        Some(ClientSlot {
            client,
            id,
            open: Arc::clone(&self.open),
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = open.get_mut(&self.client) {
            held.retain(|h| h.id != self.id);
            // Entries go with their last connection: the map holds only clients connected now.
            if held.is_empty() {
                open.remove(&self.client);
            }
        }
    }
}

/// How often a client whose connections keep being refused is named in the log.
pub(crate) const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);
/// Clients remembered by [`RefusalLog`] before the quiet ones are forgotten.
const REFUSAL_LOG_CLIENTS: usize = 1024;

/// Rate-limits the warnings about refused connections: one per client per
/// [`REFUSAL_LOG_EVERY`], saying how many were refused in between, so a client retrying in a
/// loop cannot flood the log.
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    /// Per client: when it was last named, and refusals since.
    seen: HashMap<Client, (Instant, u64)>,
}

impl RefusalLog {
    /// Records a refusal of `client` at `now`; returns `Some(refusals since the last warning,
    /// this one included)` when a warning is due.
    pub(crate) fn refused(&mut self, client: Client, now: Instant) -> Option<u64> {
        if self.seen.len() >= REFUSAL_LOG_CLIENTS {
            self.seen
                .retain(|_, (last, _)| now.duration_since(*last) < REFUSAL_LOG_EVERY);
        }
        match self.seen.get_mut(&client) {
            Some((last, count)) if now.duration_since(*last) < REFUSAL_LOG_EVERY => {
                *count += 1;
                None
            }
            Some((last, count)) => {
                let refused = *count + 1;
                (*last, *count) = (now, 0);
                Some(refused)
            }
            None => {
                self.seen.insert(client, (now, 0));
                Some(1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_peers_are_counted_per_process_others_per_user() {
        assert_eq!(Peer::from_cred(0, Some(42)).client, Client::Pid(42));
        assert_eq!(Peer::from_cred(1000, Some(42)).client, Client::Uid(1000));
        assert_eq!(Peer::from_cred(0, None).client, Client::Uid(0));
        assert_eq!(Peer::from_cred(1000, Some(42)).name, "pid 42 uid 1000");
    }

    /// A connection's activity (busy with a request when `busy`) and eviction token.
    fn conn(
        busy: bool,
    ) -> (
        Arc<Activity>,
        Option<super::super::idle::Busy>,
        CancellationToken,
    ) {
        let activity = Activity::new();
        let guard = busy.then(|| activity.begin());
        (activity, guard, CancellationToken::new())
    }

    #[tokio::test]
    async fn at_its_cap_a_client_loses_its_longest_idle_connection_not_the_new_one() {
        let slots = ClientSlots::new(2);
        let a = Client::Pid(1);
        let (first, _, first_evict) = conn(false);
        let _one = slots.try_take(a, first, first_evict.clone()).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (second, _, second_evict) = conn(false);
        let _two = slots.try_take(a, second, second_evict.clone()).unwrap();
        let (third, _, third_evict) = conn(false);
        let three = slots.try_take(a, third, third_evict.clone());
        assert!(three.is_some(), "the new connection is taken");
        assert!(first_evict.is_cancelled(), "the one idle longest is closed");
        assert!(!second_evict.is_cancelled() && !third_evict.is_cancelled());
        // another client is not touched
        let (other, _, other_evict) = conn(false);
        assert!(slots.try_take(Client::Pid(2), other, other_evict).is_some());
    }

    #[tokio::test]
    async fn a_client_whose_connections_are_all_busy_is_refused_until_one_closes() {
        let slots = ClientSlots::new(2);
        let a = Client::Pid(1);
        let (one, _busy_one, one_evict) = conn(true);
        let first = slots.try_take(a, one, one_evict.clone()).unwrap();
        let (two, _busy_two, two_evict) = conn(true);
        let _second = slots.try_take(a, two, two_evict.clone()).unwrap();
        let (three, _, three_evict) = conn(false);
        assert!(
            slots
                .try_take(a, Arc::clone(&three), three_evict.clone())
                .is_none(),
            "over the cap, nothing idle to close"
        );
        assert!(!one_evict.is_cancelled() && !two_evict.is_cancelled());
        drop(first);
        assert!(
            slots.try_take(a, three, three_evict).is_some(),
            "a slot freed"
        );
    }

    #[test]
    fn refusals_are_logged_once_a_minute_per_client_with_a_count() {
        let mut log = RefusalLog::default();
        let start = Instant::now();
        let (a, b) = (Client::Pid(1), Client::Uid(1000));
        assert_eq!(log.refused(a, start), Some(1));
        assert_eq!(
            log.refused(b, start),
            Some(1),
            "another client is named too"
        );
        for i in 1..=99 {
            assert_eq!(log.refused(a, start + Duration::from_millis(i)), None);
        }
        assert_eq!(log.refused(a, start + REFUSAL_LOG_EVERY), Some(100));
        assert_eq!(log.refused(a, start + REFUSAL_LOG_EVERY), None);
    }
}

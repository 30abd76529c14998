//! Who a connection's client is, and how many connections each client may hold.
//!
//! The global cap alone let one client hold every slot (1100 idle connections locked kubelet and
//! crictl out). Each client gets a share well below it, keyed by the peer's credentials
//! (`SO_PEERCRED`, which the kernel fills in and the client cannot forge): a root peer by its
//! pid, so kubelet, crictl and a monitoring agent each have their own share; any other peer by
//! its uid, since an unprivileged user could otherwise fork its way past a per-pid cap. A root
//! process could still fork past it, but root owns the node anyway.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::UnixStream;

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

/// Open connections per client, capped.
#[derive(Debug, Clone)]
pub(crate) struct ClientSlots {
    limit: usize,
    open: Arc<Mutex<HashMap<Client, usize>>>,
}

/// One connection counted against its client; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct ClientSlot {
    client: Client,
    open: Arc<Mutex<HashMap<Client, usize>>>,
}

impl ClientSlots {
    /// At most `limit` connections per client.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            open: Arc::default(),
        }
    }

    /// A slot for `client`, or `None` when it already holds `limit` connections.
    pub(crate) fn try_take(&self, client: Client) -> Option<ClientSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(ClientSlot {
            client,
            open: Arc::clone(&self.open),
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count -= 1;
            // Entries go with their last connection: the map holds only clients connected now.
            if *count == 0 {
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

    #[test]
    fn a_client_gets_its_slots_back_as_its_connections_close() {
        let slots = ClientSlots::new(2);
        let a = Client::Pid(1);
        let (first, _second) = (slots.try_take(a).unwrap(), slots.try_take(a).unwrap());
        assert!(slots.try_take(a).is_none(), "over the cap");
        assert!(slots.try_take(Client::Pid(2)).is_some(), "another client");
        drop(first);
        assert!(slots.try_take(a).is_some(), "a slot freed");
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

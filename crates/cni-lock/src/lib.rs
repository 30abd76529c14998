//! Locks keyed by container ID, held across processes with flock and queued within a process.
//!
//! You probably want the `ocicni` crate, which builds on this one.

//! crio-lite: a thin CRI runtime daemon for pod sandboxes and their networks.
//!
//! Not built yet: the daemon binary arrives with its own issue.

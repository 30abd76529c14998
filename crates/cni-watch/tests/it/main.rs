//! Public-API tests for cni-watch. Every wait is for a condition with a generous timeout; no
//! test asserts that something happened within a given time.

mod burst;
mod changes;
mod common;
mod fallback;
mod lifecycle;
mod modes;
mod recovery;

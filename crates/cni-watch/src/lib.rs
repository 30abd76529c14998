//! Watch CNI configuration and plugin directories and publish "the configuration changed".
//!
//! You probably want the `ocicni` crate, which builds on this one.

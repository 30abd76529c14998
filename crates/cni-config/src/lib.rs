//! Parse, validate and load CNI network configuration files.
//!
//! You probably want the `ocicni` crate, which builds on this one.

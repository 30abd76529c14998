//! Find and run CNI plugins; the only crate of the workspace that spawns processes.
//!
//! You probably want the `ocicni` crate, which builds on this one.

//! ocicnitool's command line, run as a user runs it.

mod cli;
// The node-namespace lab of ocicni's real-plugin tests, shared by path rather than copied.
#[expect(dead_code, reason = "ocicni's tests use the rest of it")]
#[path = "../../../ocicni/tests/it/real_support.rs"]
mod real_support;

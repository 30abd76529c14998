//! Public-API tests of the process layer, driving the `cni-fake-plugin` binary through `ProcessExec`.

mod discovery;
mod fake_plugin;
mod netns;
mod process;
mod support;

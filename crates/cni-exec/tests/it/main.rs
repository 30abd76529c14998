//! Public-API tests: the process layer and the fake plugin, the CNI operations and the result cache
//! (with fakes), and real plugins inside network namespaces (ignored unless run as root).

mod cache;
mod cgroup;
mod discovery;
mod fake_plugin;
mod matrix;
mod messages;
mod netns;
mod ops;
mod process;
mod real_plugins;
mod realnet;
mod support;

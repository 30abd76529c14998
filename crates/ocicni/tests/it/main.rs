//! Public-API tests for ocicni, one module per area.

mod builtin_plugins;
mod facade;
mod facade_args;
mod facade_check;
mod facade_config;
mod facade_inputs;
mod facade_status;
mod fake_exec;
mod go_interop;
mod netns;
mod real_plugins;
mod real_support;

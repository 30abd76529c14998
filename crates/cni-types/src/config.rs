//! Network configurations: a plugin configuration and a network configuration list.

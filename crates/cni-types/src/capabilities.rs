//! Capability arguments (CNI CONVENTIONS.md), handed to plugins in `runtimeConfig`.

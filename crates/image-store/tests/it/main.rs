//! The store against a real registry (Debian's docker-registry, started by each test on a
//! random port) and against registries that misbehave. Tests that need root (whiteout device
//! nodes, `trusted.*` xattrs, owners) or the registry are ignored unless asked for:
//! `CNI_PRIVILEGED_TESTS=1 cargo test -p image-store -- --ignored` (`cargo xtask test` does).

mod crash;
mod full_disk;
mod hostile;
mod logged;
mod progress;
mod props;
mod pull;
mod redirect;
mod registries;
mod rootfs;
mod slow;
mod stall;
mod store;
mod stream;
mod support;
mod trust;

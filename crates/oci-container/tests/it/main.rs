//! Containers run by real runtimes (crun, runc) under a real conmon, in a busybox root file
//! system. They need root: `CNI_PRIVILEGED_TESTS=1 cargo test -p oci-container -- --ignored`
//! (`cargo xtask test` does).

mod control;
mod exec;
mod hooks;
mod lifecycle;
mod monitor;
mod seccomp;
mod stats;
mod stop;
mod streams;
mod support;

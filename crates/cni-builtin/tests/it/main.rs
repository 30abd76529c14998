//! Public-API tests: the built-ins against Debian's Go plugins in /usr/lib/cni (differential,
//! interop, concurrency), GC on its own, loopback in network namespaces of the tests' own
//! (ignored unless run as root), and a property test that no input panics host-local.

mod bridge;
mod gc;
mod host_local;
mod interop;
mod loopback;
mod portmap;
mod props;
mod seam;
mod support;

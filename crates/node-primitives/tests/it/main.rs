//! The public API of node-primitives, against the running kernel.

mod ns;

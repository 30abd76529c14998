//! Public-API tests of cni-types, one module per area.

mod config;

//! Public-API tests of cni-types, one module per area.

mod capabilities;
mod cni_error;
mod config;
mod result;

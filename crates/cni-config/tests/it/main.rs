//! Public-API tests of cni-config, one module per area.

mod corpus;
mod dir;
mod parse;
mod props;

use std::path::PathBuf;

/// A fixture under this crate's testdata/.
fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(rel)
}

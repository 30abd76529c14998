//! Generates the CRI bindings from `proto/runtime/v1/api.proto`.
//!
//! protox parses the proto in Rust, so neither this workspace nor a `cargo install` on a bare
//! machine needs a `protoc` binary (k8s-cri's build script does, which is why this crate exists).

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/runtime/v1/api.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    let mut builder = tonic_prost_build::configure()
        // Clients bring their own channel (a unix socket); no tonic transport feature needed.
        .build_transport(false)
        .emit_rerun_if_changed(false);
    if std::env::var_os("CARGO_FEATURE_SERDE").is_some() {
        builder = builder.type_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]");
    }
    builder.compile_fds(descriptors)?;
    Ok(())
}

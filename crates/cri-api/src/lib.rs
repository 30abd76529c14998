//! The Kubernetes Container Runtime Interface (CRI), `runtime.v1`, as Rust types with tonic
//! clients and servers.
//!
//! The code is generated at build time from the CRI's `api.proto` (kept in this crate's `proto/`
//! directory, as published by Kubernetes) by [protox], a protobuf compiler written in Rust, and
//! tonic-prost-build. Building it needs no `protoc` binary on the machine, so `cargo install` of a
//! runtime that uses it works on a bare system.
//!
//! What it does not do: transport. Clients are built over a channel the caller makes (CRI runtimes
//! listen on unix sockets), and servers are plain tonic services.
//!
//! With the `serde` feature every message derives `Serialize` and `Deserialize`.
//!
//! # Example
//!
//! ```
//! use cri_api::v1::{PodSandboxConfig, PodSandboxMetadata, RunPodSandboxRequest};
//!
//! let request = RunPodSandboxRequest {
//!     config: Some(PodSandboxConfig {
//!         metadata: Some(PodSandboxMetadata {
//!             name: "web".into(),
//!             namespace: "default".into(),
//!             uid: "8f7c".into(),
//!             attempt: 0,
//!         }),
//!         ..PodSandboxConfig::default()
//!     }),
//!     ..RunPodSandboxRequest::default()
//! };
//! assert_eq!(request.config.unwrap().metadata.unwrap().name, "web");
//! ```
//!
//! [protox]: https://docs.rs/protox

/// CRI `runtime.v1`: the `RuntimeService` and `ImageService` messages, clients and servers.
// The proto's comments become doc comments as Kubernetes wrote them (placeholders in angle
// brackets, bare URLs): not rustdoc's markup.
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links
)]
pub mod v1 {
    tonic::include_proto!("runtime.v1");
}

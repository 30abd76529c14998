//! The bodies of the fuzz targets in `fuzz_targets/`, as plain functions.
//!
//! Each module has a `check(data: &[u8])` that feeds one input to a parser that takes untrusted
//! input and panics when a property fails, not only when the parser panics. The libFuzzer binaries
//! call these; so does `tests/seeds.rs`, which replays every checked-in seed on stable Rust, so the
//! properties hold in `cargo xtask test` without nightly or libFuzzer.
//!
//! | target        | input                                   | what must hold                              |
//! |---------------|-----------------------------------------|---------------------------------------------|
//! | `conf`        | a `.conf` / `.conflist` file            | a parsed network survives re-serialising    |
//! | `result`      | plugin output / a cached result         | encodes and parses back equal; converts     |
//! | `cache_entry` | a result cache file                     | read as absent or as the attachment it names |
//! | `cni_args`    | a pod's names and extra CNI_ARGS        | refused exactly when `k=v;k=v` cannot carry it |
//! | `cri_request` | a RunPodSandbox request (protobuf)      | a sandbox it accepts is named and persists  |
//! | `sysctl`      | a sysctl key and value                  | an accepted key is a path under `net/`      |
//! | `unpack_layer` | a layer blob (tar, gzip or zstd)       | nothing outside the layer directory, files within the byte cap, no link climbing out, bounded memory and errors |
//! | `registry`    | a registry's manifest or index, config  | refused or planned, never a panic; bounded  |
//! | `h2_front`    | a client's bytes on a served connection | split-independent; h2 reads valid HPACK, a valid `:authority`, other frames as sent; the decoder agrees with loona-hpack |
//! | `spdy_frames` | a client's bytes on a SPDY/3.1 stream   | bounded, split-independent; every frame decoded re-encodes and comes back equal |

pub mod cache_entry;
pub mod cni_args;
pub mod conf;
pub mod cri_request;
pub mod h2_front;
pub mod registry;
pub mod result;
pub mod spdy_frames;
pub mod sysctl;
pub mod unpack_layer;

/// A target's body: feeds one input to the code under test, panics when a property fails.
pub type Check = fn(&[u8]);

/// Every target, by the name `cargo fuzz` knows it by.
pub const TARGETS: &[(&str, Check)] = &[
    ("conf", conf::check),
    ("result", result::check),
    ("cache_entry", cache_entry::check),
    ("cni_args", cni_args::check),
    ("cri_request", cri_request::check),
    ("sysctl", sysctl::check),
    ("unpack_layer", unpack_layer::check),
    ("registry", registry::check),
    ("h2_front", h2_front::check),
    ("spdy_frames", spdy_frames::check),
];

/// Seeds read in place beside `fuzz/seeds/<target>/`, relative to the workspace root: fixtures
/// the crates' own tests use, and the shared real-world corpus when it is there. `cargo xtask
/// fuzz` passes the same directories to libFuzzer (keep the two lists in step).
pub const EXTRA_SEED_DIRS: &[(&str, &[&str])] = &[
    (
        "conf",
        &["crates/cni-config/testdata", "../shared/testdata/conflists"],
    ),
    ("result", &["crates/cni-types/testdata/results"]),
    ("cache_entry", &["crates/cni-exec/testdata/cache"]),
];

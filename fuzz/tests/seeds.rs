//! Replays every seed of every target through its `check`, on stable Rust: the fast part of the
//! fuzzing that `cargo xtask test` runs. A reproducer saved under `fuzz/seeds/<target>/` keeps
//! failing here until the bug it found is fixed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ocicni_fuzz::{EXTRA_SEED_DIRS, TARGETS};

fn fuzz_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, recursively (libFuzzer reads corpus directories the same way).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

fn replay(target: &str) {
    let check = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, check)| *check)
        .expect("a known target");
    let own = fuzz_dir().join("seeds").join(target);
    let mut files = Vec::new();
    files_under(&own, &mut files);
    assert!(!files.is_empty(), "no seeds in {}", own.display());
    let root = fuzz_dir().parent().expect("fuzz/ is in the workspace");
    for (_, dirs) in EXTRA_SEED_DIRS.iter().filter(|(name, _)| *name == target) {
        for dir in *dirs {
            files_under(&root.join(dir), &mut files);
        }
    }
    files.sort();

    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failed.push(file.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} seeds fail (the panic of each is printed above):\n  {}",
        failed.len(),
        files.len(),
        failed.join("\n  ")
    );
    println!("{target}: {} seeds hold", files.len());
}

macro_rules! seeds {
    ($($target:ident),* $(,)?) => {$(
        #[test]
        fn $target() {
            replay(stringify!($target));
        }
    )*};
}

seeds!(
    conf,
    result,
    cache_entry,
    cni_args,
    cri_request,
    sysctl,
    unpack_layer,
    registry,
    h2_front,
    spdy_frames
);

/// Inputs that found a bug not fixed yet, in `fuzz/regressions/<target>/`: kept out of the seeds
/// (and of libFuzzer's corpus) so the replay stays green, and checked to still fail, so a fix is
/// noticed and the input moves to `fuzz/seeds/<target>/` as a regression seed.
#[test]
fn open_findings_still_fail() {
    let mut fixed = Vec::new();
    for (target, check) in TARGETS {
        let mut files = Vec::new();
        files_under(&fuzz_dir().join("regressions").join(target), &mut files);
        for file in files
            .iter()
            .filter(|f| f.extension().is_none_or(|e| e != "md"))
        {
            let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if catch_unwind(AssertUnwindSafe(|| check(&data))).is_ok() {
                fixed.push(format!("{} -> fuzz/seeds/{target}/", file.display()));
            }
        }
    }
    assert!(
        fixed.is_empty(),
        "these findings hold now (fixed?); move each to its seeds:\n  {}",
        fixed.join("\n  ")
    );
}

#[test]
fn every_target_is_replayed() {
    let replayed = [
        "conf",
        "result",
        "cache_entry",
        "cni_args",
        "cri_request",
        "sysctl",
        "unpack_layer",
        "registry",
        "h2_front",
        "spdy_frames",
    ];
    for (name, _) in TARGETS {
        assert!(replayed.contains(name), "{name} has no seed test");
    }
}

/// The `cri_request` seeds are protobuf; this writes them from readable requests. Run it after
/// changing the requests below: `cargo test --no-default-features -- --ignored write_cri_seeds`.
#[test]
#[ignore = "writes fuzz/seeds/cri_request"]
fn write_cri_seeds() {
    use cri_api::v1 as cri;
    use prost::Message;

    let metadata = |name: &str| cri::PodSandboxMetadata {
        name: name.into(),
        namespace: "default".into(),
        uid: format!("uid-{name}"),
        attempt: 1,
    };
    let linux = |network: i32, sysctls: &[(&str, &str)]| cri::LinuxPodSandboxConfig {
        security_context: Some(cri::LinuxSandboxSecurityContext {
            namespace_options: Some(cri::NamespaceOption {
                network,
                ..cri::NamespaceOption::default()
            }),
            ..cri::LinuxSandboxSecurityContext::default()
        }),
        sysctls: sysctls
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..cri::LinuxPodSandboxConfig::default()
    };
    let full = cri::PodSandboxConfig {
        metadata: Some(metadata("web")),
        hostname: "web".into(),
        log_directory: "/var/log/pods/web".into(),
        dns_config: Some(cri::DnsConfig {
            servers: vec!["10.96.0.10".into(), "fd00::10".into()],
            searches: vec!["default.svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        }),
        port_mappings: vec![
            cri::PortMapping {
                protocol: 0,
                container_port: 80,
                host_port: 8080,
                host_ip: "0.0.0.0".into(),
            },
            cri::PortMapping {
                protocol: 1,
                container_port: 53,
                host_port: 0,
                host_ip: String::new(),
            },
        ],
        labels: [("app".to_owned(), "web".to_owned())].into(),
        annotations: [("note".to_owned(), "x".to_owned())].into(),
        linux: Some(linux(
            0,
            &[
                ("net.ipv4.ip_forward", "1"),
                ("net/ipv4/conf/all/rp_filter", "0"),
            ],
        )),
        ..cri::PodSandboxConfig::default()
    };
    let host_network = cri::PodSandboxConfig {
        metadata: Some(metadata("host")),
        linux: Some(linux(2, &[])),
        ..cri::PodSandboxConfig::default()
    };
    let host_network_sysctl = cri::PodSandboxConfig {
        metadata: Some(metadata("host-sysctl")),
        linux: Some(linux(2, &[("net.ipv4.ip_forward", "1")])),
        ..cri::PodSandboxConfig::default()
    };
    let no_name = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: String::new(),
            ..metadata("x")
        }),
        ..cri::PodSandboxConfig::default()
    };
    let seeds = [
        ("full", full),
        ("host-network", host_network),
        ("host-network-sysctl", host_network_sysctl),
        ("no-name", no_name),
    ];
    let dir = fuzz_dir().join("seeds/cri_request");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, config) in seeds {
        let request = cri::RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: String::new(),
        };
        std::fs::write(dir.join(format!("{name}.pb")), request.encode_to_vec()).unwrap();
    }
}

/// The `h2_front` seeds: what clients send on a connection, after the target's three control
/// bytes. Run it after changing them:
/// `cargo test --no-default-features -- --ignored write_h2_front_seeds`.
#[test]
#[ignore = "writes fuzz/seeds/h2_front"]
fn write_h2_front_seeds() {
    use ocicni_fuzz::h2_front::{ADD_PREFACE, NO_REWRITE, PREFACE};

    const SOCKET: &[u8] = b"/var/run/crio-lite/crio-lite.sock";
    let tonic = h2_seeds::tonic_client_bytes();
    let after_preface = |bytes: &[u8]| bytes.strip_prefix(PREFACE).expect("a preface").to_vec();
    let mut grpc_go = h2_seeds::frame(0x4, 0, 0, &[]);
    grpc_go.extend(h2_seeds::frame(
        0x1,
        0x4,
        1,
        &h2_seeds::request_block(Some(SOCKET)),
    ));
    grpc_go.extend(h2_seeds::frame(0x0, 0x1, 1, &[0, 0, 0, 0, 0]));

    // :authority with incremental indexing (0x41), then a request that refers to it (0xbe).
    let mut indexed = vec![0x82, 0x86, 0x84, 0x41];
    h2_seeds::encode_string(&mut indexed, SOCKET);
    let mut indexing = h2_seeds::frame(0x1, 0x4 | 0x1, 1, &indexed);
    indexing.extend(h2_seeds::frame(
        0x1,
        0x4 | 0x1,
        3,
        &[0x82, 0x86, 0x84, 0xbe],
    ));

    // Padded, with priority, split over two CONTINUATIONs; a percent-encoded socket path.
    let block = h2_seeds::request_block(Some(b"%2Fvar%2Frun%2Fcrio-lite%2Fcrio-lite.sock"));
    let (a, rest) = block.split_at(block.len() / 3);
    let (b, c) = rest.split_at(rest.len() / 2);
    let mut first = vec![2, 0x80, 0, 0, 0, 15];
    first.extend_from_slice(a);
    first.extend_from_slice(&[0, 0]);
    let mut split = h2_seeds::frame(0x1, 0x8 | 0x20, 5, &first);
    split.extend(h2_seeds::frame(0x9, 0, 5, b));
    split.extend(h2_seeds::frame(0x9, 0x4, 5, c));
    split.extend(h2_seeds::frame(0x0, 0x1, 5, b"\0\0\0\0\0"));

    // Table size updates before the first field: to 0, then back to 4096.
    let mut resized = vec![0x20, 0x3f, 0xe1, 0x1f];
    resized.extend(h2_seeds::request_block(None));
    let resized = h2_seeds::frame(0x1, 0x4 | 0x1, 1, &resized);

    // Indexed field 0: the block h2 must refuse, then bytes that pass through.
    let mut fault = h2_seeds::frame(0x1, 0x4, 1, &[0x80]);
    fault.extend(h2_seeds::frame(0x0, 0x1, 1, b"after"));

    let seeds: [(&str, u8, Vec<u8>); 9] = [
        ("tonic-two-calls", ADD_PREFACE, after_preface(&tonic)),
        ("tonic-two-calls-own-preface", 0, tonic.clone()),
        ("grpc-go-socket-path", ADD_PREFACE, grpc_go.clone()),
        (
            "grpc-go-socket-path-no-rewrite",
            ADD_PREFACE | NO_REWRITE,
            grpc_go,
        ),
        ("indexed-authority-then-reference", ADD_PREFACE, indexing),
        ("padded-priority-continuations", ADD_PREFACE, split),
        ("size-updates-then-fields", ADD_PREFACE, resized),
        ("fault-then-passthrough", ADD_PREFACE, fault),
        (
            "http1-status-api",
            0,
            b"GET /info HTTP/1.1\r\nHost: /var/run/crio-lite/crio-lite.sock\r\n\r\n".to_vec(),
        ),
    ];
    let dir = fuzz_dir().join("seeds/h2_front");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (name, mode, bytes)) in seeds.into_iter().enumerate() {
        let i = u8::try_from(i).unwrap();
        let mut seed = vec![mode, i.wrapping_mul(37), i.wrapping_mul(101) ^ 0x5a];
        seed.extend(bytes);
        std::fs::write(dir.join(name), seed).unwrap();
    }
}

/// The `spdy_frames` seeds still reach what they are named after: a mutation-free seed that
/// stopped hitting its limit would leave the limit unfuzzed.
#[test]
fn spdy_frames_seeds_reach_their_cases() {
    use cri_streaming::spdy::FrameDecoder;
    use ocicni_fuzz::spdy_frames::{LIMITS, WRAP_BLOCKS, wrap_blocks};

    let outcome = |name: &str| {
        let seed = std::fs::read(fuzz_dir().join("seeds/spdy_frames").join(name)).expect(name);
        let (control, rest) = seed.split_first().expect("a control byte");
        let wire = if control & WRAP_BLOCKS == 0 {
            rest.to_vec()
        } else {
            wrap_blocks(rest)
        };
        let mut decoder = FrameDecoder::new(LIMITS);
        let (mut frames, mut at) = (0, 0);
        while at < wire.len() {
            match decoder.decode(&wire[at..]) {
                Ok(Some((_, used))) => (frames, at) = (frames + 1, at + used),
                Ok(None) => return format!("{frames} frames, then a partial one"),
                Err(e) => return format!("{frames} frames, then: {e}"),
            }
        }
        format!("{frames} frames")
    };
    for (seed, want) in [
        ("kubectl-exec-tty", "12 frames"),
        ("kubectl-port-forward", "5 frames"),
        ("spdystream-encode", "108 frames"),
        ("raw-blocks", "4 frames"),
        (
            "zlib-bomb-header-block",
            "0 frames, then: spdy SYN_STREAM header block inflates past the limit of 65536 bytes",
        ),
        (
            "raw-block-count-bomb",
            "0 frames, then: spdy SYN_STREAM header block has 4294967295 headers, over the limit of 64",
        ),
        (
            "frame-too-large",
            "0 frames, then: spdy SYN_STREAM frame of 16777215 bytes is over the limit of 262144 bytes",
        ),
        (
            "unknown-then-version-2",
            "2 frames, then: spdy PING frame of version 2: only version 3 is spoken",
        ),
    ] {
        assert_eq!(outcome(seed), want, "{seed}");
    }
}

/// The `spdy_frames` seeds: sessions as kubectl's exec and port-forward open them, hostile
/// frames, and raw header blocks to wrap. Run it after changing them:
/// `cargo test -p ocicni-fuzz --test seeds -- --ignored write_spdy_frames_seeds`.
/// (`spdystream-encode` is not written here: it is what cri-streaming's Go peer,
/// `tests/spdystream-peer encode`, writes with moby/spdystream's framer, behind a 0 byte.)
#[test]
#[ignore = "writes fuzz/seeds/spdy_frames"]
fn write_spdy_frames_seeds() {
    let dir = fuzz_dir().join("seeds/spdy_frames");
    std::fs::create_dir_all(&dir).expect("create the seed directory");
    let write = |name: &str, control: u8, body: &[u8]| {
        let mut seed = vec![control];
        seed.extend_from_slice(body);
        std::fs::write(dir.join(name), seed).expect("write a seed");
    };
    spdy_seeds::sessions(&write);
    spdy_seeds::bomb(&write);
    spdy_seeds::raw_blocks(&write);
    write(
        "frame-too-large",
        0,
        &[0x80, 3, 0, 1, 0, 0xff, 0xff, 0xff, 0, 0, 0, 1],
    );
    write(
        "unknown-then-version-2",
        0,
        &[
            0x80, 3, 0, 10, 0, 0, 0, 3, 1, 2, 3, 0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1, 0x80, 2, 0,
            6, 0, 0, 0, 4, 0, 0, 0, 3,
        ],
    );
}

/// Helpers of `write_spdy_frames_seeds`: each writes seeds through `write(name, control, body)`.
mod spdy_seeds {
    use cri_streaming::spdy::{
        DICTIONARY, Frame, FrameEncoder, Headers, Setting, SynStream, goaway, rst,
    };
    use flate2::{Compress, Compression};
    use ocicni_fuzz::spdy_frames::{WRAP_BLOCKS, deflate};

    fn syn(stream_id: u32, headers: Headers) -> Frame {
        Frame::SynStream(SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers,
        })
    }

    fn data(stream_id: u32, fin: bool, bytes: &[u8]) -> Frame {
        Frame::Data {
            stream_id,
            fin,
            data: bytes.to_vec(),
        }
    }

    fn session(frames: &[Frame]) -> Vec<u8> {
        let mut encoder = FrameEncoder::new();
        let mut wire = Vec::new();
        for f in frames {
            encoder.encode(f, &mut wire).expect("a seed frame encodes");
        }
        wire
    }

    fn stream(t: &str) -> Headers {
        Headers::new().with("streamtype", t)
    }

    /// Sessions as kubectl exec (with a tty) and port-forward open them.
    pub(super) fn sessions(write: &dyn Fn(&str, u8, &[u8])) {
        write(
            "kubectl-exec-tty",
            0,
            &session(&[
                Frame::Settings {
                    clear: false,
                    entries: vec![Setting {
                        flags: 0,
                        id: 7,
                        value: 65536,
                    }],
                },
                syn(1, stream("error")),
                syn(3, stream("stdin")),
                syn(5, stream("stdout")),
                syn(7, stream("resize")),
                data(7, false, br#"{"Width":80,"Height":24}"#),
                data(3, false, b"ls /\n"),
                Frame::WindowUpdate {
                    stream_id: 5,
                    delta: 4096,
                },
                Frame::Ping { id: 1 },
                data(3, true, b""),
                Frame::RstStream {
                    stream_id: 7,
                    status: rst::CANCEL,
                },
                Frame::GoAway {
                    last_good_stream_id: 0,
                    status: goaway::OK,
                },
            ]),
        );
        let pf = |t: &str, id: &str| stream(t).with("port", "8080").with("requestid", id);
        write(
            "kubectl-port-forward",
            0,
            &session(&[
                syn(1, pf("error", "0")),
                syn(3, pf("data", "0")),
                data(3, false, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
                data(3, true, b""),
                syn(5, pf("error", "1")),
            ]),
        );
    }

    /// One header value of 16 MiB behind 16 KiB of zlib: must cost the decoder its limit only.
    pub(super) fn bomb(write: &dyn Fn(&str, u8, &[u8])) {
        let mut z = Compress::new(Compression::best(), true);
        z.set_dictionary(&DICTIONARY).expect("a dictionary");
        let mut block = Vec::new();
        block.extend_from_slice(&1u32.to_be_bytes());
        block.extend_from_slice(&1u32.to_be_bytes());
        block.push(b'a');
        block.extend_from_slice(&(16u32 << 20).to_be_bytes());
        block.resize(block.len() + (16 << 20), b'x');
        let compressed = deflate(&mut z, &block);
        let len = u32::try_from(10 + compressed.len()).expect("small");
        let mut bomb = vec![0x80, 3, 0, 1, 0];
        bomb.extend_from_slice(&len.to_be_bytes()[1..]);
        bomb.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        bomb.extend_from_slice(&compressed);
        write("zlib-bomb-header-block", 0, &bomb);
    }

    fn raw(pairs: &[(&[u8], &[u8])], count: u32) -> Vec<u8> {
        let mut b = count.to_be_bytes().to_vec();
        for (n, v) in pairs {
            b.extend_from_slice(&u32::try_from(n.len()).expect("small").to_be_bytes());
            b.extend_from_slice(n);
            b.extend_from_slice(&u32::try_from(v.len()).expect("small").to_be_bytes());
            b.extend_from_slice(v);
        }
        b
    }

    fn blocks(list: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in list {
            out.extend_from_slice(&u16::try_from(b.len()).expect("small").to_le_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// Raw header blocks for the target to compress: valid ones and each way of breaking one.
    pub(super) fn raw_blocks(write: &dyn Fn(&str, u8, &[u8])) {
        write(
            "raw-blocks",
            WRAP_BLOCKS,
            &blocks(&[
                raw(&[(b"streamtype", b"error")], 1),
                raw(
                    &[
                        (b"port", b"80"),
                        (b"requestid", b"0"),
                        (b"streamtype", b"data"),
                    ],
                    3,
                ),
                raw(&[(b"x-multi", b"a\0b\0")], 1),
                raw(&[], 0),
            ]),
        );
        write(
            "raw-block-count-bomb",
            WRAP_BLOCKS,
            &blocks(&[vec![0xff; 4]]),
        );
        write(
            "raw-block-upper-case",
            WRAP_BLOCKS,
            &blocks(&[raw(&[(b"StreamType", b"error")], 1)]),
        );
        write(
            "raw-block-duplicate",
            WRAP_BLOCKS,
            &blocks(&[raw(&[(b"port", b"1"), (b"port", b"2")], 2)]),
        );
        write(
            "raw-block-truncated",
            WRAP_BLOCKS,
            &blocks(&[raw(&[(b"port", b"1")], 2)]),
        );
    }
}

/// Helpers of `write_h2_front_seeds`.
mod h2_seeds {
    use std::io;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

    /// One frame: 9-byte header, then `payload`.
    pub(super) fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
        let mut out = len[1..].to_vec();
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream_id.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// An HPACK string literal, not Huffman-coded.
    pub(super) fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
        let len = s.len();
        if len < 0x7f {
            out.push(u8::try_from(len).unwrap());
        } else {
            out.push(0x7f);
            let mut rest = len - 0x7f;
            while rest >= 0x80 {
                out.push(u8::try_from(rest & 0x7f).unwrap() | 0x80);
                rest >>= 7;
            }
            out.push(u8::try_from(rest).unwrap());
        }
        out.extend_from_slice(s);
    }

    /// A gRPC request block as grpc-go sends it, but with literals only (no table).
    pub(super) fn request_block(authority: Option<&[u8]>) -> Vec<u8> {
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/runtime.v1.RuntimeService/Version"),
        ];
        if let Some(a) = authority {
            fields.push((b":authority", a));
        }
        fields.push((b"content-type", b"application/grpc"));
        fields.push((b"user-agent", b"grpc-go/1.58.3"));
        fields.push((b"te", b"trailers"));
        let mut out = Vec::new();
        for (name, value) in fields {
            out.push(0x00);
            encode_string(&mut out, name);
            encode_string(&mut out, value);
        }
        out
    }

    /// A transport that keeps a copy of everything written to it.
    struct Recorder {
        io: DuplexStream,
        sent: Arc<Mutex<Vec<u8>>>,
    }

    impl AsyncRead for Recorder {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let polled = Pin::new(&mut this.io).poll_write(cx, buf);
            if let Poll::Ready(Ok(n)) = polled {
                this.sent.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            polled
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
        }
    }

    /// What h2's client (tonic's) sends for two unary calls on one connection: the preface,
    /// SETTINGS, WINDOW_UPDATE, and header blocks with Huffman strings, the second referring to
    /// what the first put in the table.
    pub(super) fn tonic_client_bytes() -> Vec<u8> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (client_io, server_io) = tokio::io::duplex(1 << 20);
            let written = Arc::default();
            let recorder = Recorder {
                io: client_io,
                sent: Arc::clone(&written),
            };
            let server = tokio::spawn(async move {
                let mut conn = h2::server::handshake(server_io).await.unwrap();
                while let Some(accepted) = conn.accept().await {
                    let (_, mut respond) = accepted.unwrap();
                    let response = http::Response::builder()
                        .header("content-type", "application/grpc")
                        .body(())
                        .unwrap();
                    let mut send = respond.send_response(response, false).unwrap();
                    send.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), false)
                        .unwrap();
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    send.send_trailers(trailers).unwrap();
                }
            });
            let (mut client, connection) = h2::client::handshake(recorder).await.unwrap();
            let connection = tokio::spawn(connection);
            for _ in 0..2 {
                let request =
                    http::Request::post("http://localhost/runtime.v1.RuntimeService/Version")
                        .header("content-type", "application/grpc")
                        .header("user-agent", "tonic/0.14.2")
                        .header("te", "trailers")
                        .body(())
                        .unwrap();
                client = client.ready().await.unwrap();
                let (response, mut body) = client.send_request(request, false).unwrap();
                body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 2, 10, 0]), true)
                    .unwrap();
                let mut response = response.await.unwrap().into_body();
                while response.data().await.is_some() {}
            }
            drop(client);
            connection.await.unwrap().unwrap();
            server.await.unwrap();
            written.lock().unwrap().clone()
        })
    }
}

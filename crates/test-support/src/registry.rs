//! A local OCI distribution registry for tests: Debian's docker-registry on 127.0.0.1 with a
//! random free port, plain HTTP and a temporary storage directory, killed on drop; pushing test
//! images to it over the distribution API; and misbehaving servers: one that accepts
//! connections and never answers, one that forwards to a registry slowly, one that redirects
//! every request to itself, and one that forwards to a registry but redirects one blob's
//! download elsewhere.

use std::fmt::Write as _;
use std::io::{BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine as _;
use tempfile::TempDir;

use crate::http::{self, Response};
use crate::image::{Image, Index, digest, media};

/// Debian's registry binary (package docker-registry).
pub const REGISTRY_BINARY: &str = "/usr/bin/docker-registry";

/// How blobs are uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upload {
    /// `POST`, then one `PUT ...?digest=` with the whole blob.
    Monolithic,
    /// `POST`, then `PATCH`es of this many bytes, then `PUT ...?digest=`.
    Chunked(usize),
}

/// The user name [`Registry::start_with_auth`] accepts.
pub const AUTH_USER: &str = "puller";
/// The password [`Registry::start_with_auth`] accepts.
pub const AUTH_PASSWORD: &str = "let-me-in";
/// `AUTH_USER:` and the bcrypt hash of [`AUTH_PASSWORD`] (the only hash docker-registry's
/// htpasswd reads), made once with `crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH,
/// rounds=16))` (glibc's bcrypt, cost 4: tests need no strength).
const HTPASSWD: &str = "puller:$2b$04$mI76KyxnLQS3ntoGiju0TemGp7mVibCz5nzYzUhcTFarsHypZXLM6\n";

/// A running docker-registry, killed (and its storage removed) on drop.
pub struct Registry {
    child: Child,
    addr: String,
    dir: TempDir,
    /// The `Authorization` header this side's own requests send, when the registry wants one.
    authorization: Option<String>,
}

impl Registry {
    /// Starts a registry and waits until `/v2/` answers.
    ///
    /// # Panics
    ///
    /// When docker-registry is missing (`apt-get install docker-registry`) or does not answer
    /// within ten seconds, with its log.
    pub fn start() -> Registry {
        Registry::start_inner(false)
    }

    /// Starts a registry that answers only requests with HTTP Basic credentials
    /// [`AUTH_USER`] and [`AUTH_PASSWORD`] (this side's own requests send them).
    ///
    /// # Panics
    ///
    /// As [`Registry::start`].
    pub fn start_with_auth() -> Registry {
        Registry::start_inner(true)
    }

    /// Starts a registry on `addr` (`127.0.0.1:5000`), once: for a network namespace of its
    /// own, where the port is known to be free and others are told it beforehand.
    ///
    /// # Panics
    ///
    /// As [`Registry::start`].
    pub fn start_on(addr: &str) -> Registry {
        Registry::start_at(false, Some(addr))
    }

    fn start_inner(auth: bool) -> Registry {
        Registry::start_at(auth, None)
    }

    fn start_at(auth: bool, fixed: Option<&str>) -> Registry {
        assert!(
            Path::new(REGISTRY_BINARY).exists(),
            "{REGISTRY_BINARY} is missing: install Debian's docker-registry package (cargo xtask test does)"
        );
        let dir = crate::temp_dir("registry");
        // The port is free when asked; another process may take it before the registry binds,
        // so a registry that dies at start is tried again on a new port.
        let tries = if fixed.is_some() { 1 } else { 5 };
        for _ in 0..tries {
            let addr = fixed.map_or_else(|| format!("127.0.0.1:{}", free_port()), str::to_owned);
            let config = dir.path().join("config.yml");
            let htpasswd = auth.then(|| dir.path().join("htpasswd"));
            if let Some(path) = &htpasswd {
                std::fs::write(path, HTPASSWD).expect("write the htpasswd file");
            }
            std::fs::write(
                &config,
                config_yaml(&dir.path().join("storage"), &addr, htpasswd.as_deref()),
            )
            .expect("write the registry config");
            let log = std::fs::File::create(dir.path().join("registry.log")).expect("registry log");
            let child = Command::new(REGISTRY_BINARY)
                .arg("serve")
                .arg(&config)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("registry log"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {REGISTRY_BINARY}: {e}"));
            let mut child = child;
            let authorization = auth.then(|| {
                let pair = format!("{AUTH_USER}:{AUTH_PASSWORD}");
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                )
            });
            if wait_ready(&mut child, &addr, authorization.as_deref()) {
                return Registry {
                    child,
                    addr,
                    dir,
                    authorization,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default();
        panic!("docker-registry did not start; its log:\n{log}");
    }

    /// `127.0.0.1:<port>`: the registry part of references to its images.
    pub fn host(&self) -> &str {
        &self.addr
    }

    /// Where the registry keeps the bytes of blob `digest` (`sha256:<hex>`): overwrite it to make
    /// the registry serve a blob that does not match its digest.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Sends a request to the registry.
    ///
    /// # Panics
    ///
    /// When the connection fails.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if let Some(value) = &self.authorization {
            all.push(("Authorization", value));
        }
        http::request(&self.addr, method, path, &all, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Uploads `bytes` as a blob of `repo`; returns its digest.
    ///
    /// # Panics
    ///
    /// When the registry refuses the upload.
    pub fn push_blob(&self, repo: &str, bytes: &[u8], upload: Upload) -> String {
        let digest = digest(bytes);
        let octets = [("Content-Type", "application/octet-stream")];
        match upload {
            Upload::Monolithic => {
                // POST, then one PUT with the whole blob (distribution 2.x ignores a body sent
                // with the POST).
                let r = self.request("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], &[]);
                expect(&r, 202, "start a blob upload");
                let location = location_of(&r);
                let sep = if location.contains('?') { '&' } else { '?' };
                let r = self.request(
                    "PUT",
                    &format!("{location}{sep}digest={digest}"),
                    &octets,
                    bytes,
                );
                expect(&r, 201, "monolithic blob upload");
            }
            Upload::Chunked(size) => {
                let r = self.request("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], &[]);
                expect(&r, 202, "start a blob upload");
                let mut location = location_of(&r);
                let mut offset = 0;
                for chunk in bytes.chunks(size.max(1)) {
                    let range = format!("{}-{}", offset, offset + chunk.len() - 1);
                    let r = self.request(
                        "PATCH",
                        &location,
                        &[
                            ("Content-Type", "application/octet-stream"),
                            ("Content-Range", &range),
                        ],
                        chunk,
                    );
                    expect(&r, 202, "upload a chunk");
                    location = location_of(&r);
                    offset += chunk.len();
                }
                let sep = if location.contains('?') { '&' } else { '?' };
                let r = self.request("PUT", &format!("{location}{sep}digest={digest}"), &[], &[]);
                expect(&r, 201, "finish a chunked upload");
            }
        }
        digest
    }

    /// Puts a manifest (or index) under `reference` (a tag or digest) of `repo`.
    ///
    /// # Panics
    ///
    /// When the registry refuses it.
    pub fn push_manifest(&self, repo: &str, reference: &str, media_type: &str, bytes: &[u8]) {
        let r = self.request(
            "PUT",
            &format!("/v2/{repo}/manifests/{reference}"),
            &[("Content-Type", media_type)],
            bytes,
        );
        expect(&r, 201, "put a manifest");
    }

    /// Pushes an image's blobs (layers with `upload`) and its manifest, tagged `tag` (or under
    /// its digest when `tag` is `None`).
    pub fn push_image(&self, repo: &str, tag: Option<&str>, image: &Image, upload: Upload) {
        self.push_blob(repo, &image.config, Upload::Monolithic);
        for layer in &image.layers {
            self.push_blob(repo, &layer.blob, upload);
        }
        let reference = tag.unwrap_or(&image.manifest_digest);
        self.push_manifest(repo, reference, media::MANIFEST, &image.manifest);
    }

    /// Pushes every image of an index by digest, then the index tagged `tag`.
    pub fn push_index(&self, repo: &str, tag: &str, index: &Index, images: &[&Image]) {
        for image in images {
            self.push_image(repo, None, image, Upload::Monolithic);
        }
        self.push_manifest(repo, tag, media::INDEX, &index.bytes);
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to ten seconds for the registry's `/v2/` to answer 200; false if it died or did not.
fn wait_ready(child: &mut Child, addr: &str, authorization: Option<&str>) -> bool {
    let headers: Vec<(&str, &str)> = authorization
        .map(|value| ("Authorization", value))
        .into_iter()
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if http::request(addr, "GET", "/v2/", &headers, &[]).is_ok_and(|r| r.status == 200) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn expect(r: &Response, status: u16, what: &str) {
    assert_eq!(
        r.status,
        status,
        "{what}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
}

/// The path and query of a response's Location (the registry may send an absolute URL).
fn location_of(r: &Response) -> String {
    let loc = r.header("location").expect("a Location header");
    match loc.split_once("://") {
        Some((_, rest)) => rest
            .find('/')
            .map_or("/".to_owned(), |i| rest[i..].to_owned()),
        None => loc.to_owned(),
    }
}

fn config_yaml(storage: &Path, addr: &str, htpasswd: Option<&Path>) -> String {
    let auth = htpasswd.map_or_else(String::new, |path| {
        format!(
            "auth:\n  htpasswd:\n    realm: test-registry\n    path: {}\n",
            path.display()
        )
    });
    format!(
        "version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: {addr}
{auth}",
        storage.display()
    )
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// A server that accepts connections and never answers: a stalled registry. Stops on drop.
pub struct Stall {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stall {
    /// Starts listening on 127.0.0.1 with a random port.
    ///
    /// # Panics
    ///
    /// When it cannot listen.
    pub fn start() -> Stall {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => held.push(conn),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Stall {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.addr
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A registry that answers `/v2/` and then, for any manifest, an endless body (no length, 64
/// KiB at a time until the client hangs up): a client that reads a whole body before looking
/// at its size runs out of memory. Runs until the process ends.
pub struct Endless {
    addr: String,
}

impl Endless {
    /// Starts listening on 127.0.0.1 with a random port.
    ///
    /// # Panics
    ///
    /// When it cannot listen.
    pub fn start() -> Endless {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address").to_string();
        std::thread::spawn(move || {
            for conn in listener.incoming().map_while(Result::ok) {
                std::thread::spawn(move || endless_answer(conn));
            }
        });
        Endless { addr }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.addr
    }
}

fn endless_answer(mut conn: TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 << 10 {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let request = String::from_utf8_lossy(&head);
    let path = request.split(' ').nth(1).unwrap_or_default();
    if path == "/v2/" {
        let _ =
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        return;
    }
    let _ = conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n\
          Connection: close\r\n\r\n{\"schemaVersion\": 2, \"layers\": [",
    );
    let chunk = vec![b' '; 64 << 10];
    while conn.write_all(&chunk).is_ok() {}
}

/// A TCP proxy to a registry that sends the registry's answers at most `bytes_per_sec`: a slow
/// link, so a test can catch a pull in the middle. Runs until the process ends.
pub struct Throttle {
    addr: String,
}

impl Throttle {
    /// Starts forwarding from a new port on 127.0.0.1 to `upstream`.
    ///
    /// # Panics
    ///
    /// When it cannot listen.
    pub fn start(upstream: &str, bytes_per_sec: usize) -> Throttle {
        Throttle::start_after(upstream, 0, bytes_per_sec)
    }

    /// As [`Throttle::start`], but the first `free` bytes of each answer connection go at full
    /// speed: the small documents of a pull (manifest, configuration) come at once, and the
    /// pull is caught in its layer.
    ///
    /// # Panics
    ///
    /// When it cannot listen.
    pub fn start_after(upstream: &str, free: usize, bytes_per_sec: usize) -> Throttle {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address").to_string();
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let (Ok(client_r), Ok(server_w)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                std::thread::spawn(move || pipe(client_r, server_w, 0, usize::MAX));
                std::thread::spawn(move || pipe(server, client, free, bytes_per_sec));
            }
        });
        Throttle { addr }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.addr
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream, mut free: usize, bytes_per_sec: usize) {
    // Ten slices a second.
    let slice = (bytes_per_sec / 10).clamp(1, 64 * 1024);
    let mut buf = vec![0u8; slice.max(free.min(64 * 1024))];
    loop {
        let len = if free > 0 { free.min(buf.len()) } else { slice };
        let n = match from.read(&mut buf[..len]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        if free > 0 {
            free -= n;
        } else if bytes_per_sec != usize::MAX {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// A server that answers every request with `307 Temporary Redirect` to the same path on
/// itself: a redirect loop. Counts the requests it answered. Stops on drop.
pub struct RedirectLoop {
    addr: String,
    answered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RedirectLoop {
    /// Starts listening on 127.0.0.1 with a random port.
    ///
    /// # Panics
    ///
    /// When it cannot listen.
    pub fn start() -> RedirectLoop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address").to_string();
        let answered = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (addr, answered, stop) = (addr.clone(), Arc::clone(&answered), Arc::clone(&stop));
            std::thread::spawn(move || {
                serve(&listener, &stop, move |conn| {
                    answer_each(conn, |request, to| {
                        answered.fetch_add(1, Ordering::Relaxed);
                        redirect(to, &format!("http://{addr}{}", request.path))
                    });
                });
            })
        };
        RedirectLoop {
            addr,
            answered,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.addr
    }

    /// How many requests it answered so far.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }
}

impl Drop for RedirectLoop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A proxy to a registry that forwards every request (one upstream connection each) except the
/// `GET` of one blob, which it redirects (`307`) to the same path on another host: a registry
/// whose blob storage (a CDN, say) is somewhere else, and there it stalls. Stops on drop.
pub struct RedirectBlob {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RedirectBlob {
    /// Starts forwarding from a new port on 127.0.0.1 to `upstream`; `GET`s of blob `digest`
    /// (`sha256:<hex>`) go to `to` (`host:port`).
    ///
    /// # Panics
    ///
    /// When it cannot listen.
    pub fn start(upstream: &str, digest: &str, to: &str) -> RedirectBlob {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let (upstream, to, blob) = (
            upstream.to_owned(),
            to.to_owned(),
            format!("/blobs/{digest}"),
        );
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                serve(&listener, &stop, move |conn| {
                    answer_each(conn, |request, out| {
                        if request.method == "GET" && request.path.ends_with(&blob) {
                            return redirect(out, &format!("http://{to}{}", request.path));
                        }
                        forward(&upstream, &request, out)
                    });
                });
            })
        };
        RedirectBlob {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> &str {
        &self.addr
    }
}

impl Drop for RedirectBlob {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts connections until `stop` is set, each handled by `handle` on a thread of its own.
fn serve<F>(listener: &TcpListener, stop: &AtomicBool, handle: F)
where
    F: Fn(TcpStream) + Clone + Send + 'static,
{
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let handle = handle.clone();
                // A client that goes quiet does not keep the thread forever.
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                std::thread::spawn(move || handle(conn));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Answers each request of a kept-alive connection with `answer`, until the client closes it
/// or an answer cannot be written.
fn answer_each(conn: TcpStream, answer: impl Fn(http::Request, &mut TcpStream) -> bool) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    while let Ok(Some(request)) = http::read_request(&mut reader) {
        if !answer(request, &mut out) {
            break;
        }
    }
}

fn redirect(out: &mut TcpStream, location: &str) -> bool {
    let head = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
    );
    out.write_all(head.as_bytes()).is_ok()
}

/// Sends `request` to `upstream` and its answer back; false when either side failed.
fn forward(upstream: &str, request: &http::Request, out: &mut TcpStream) -> bool {
    let skip = ["host", "connection", "content-length"];
    let headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .filter(|(n, _)| !skip.contains(&n.as_str()))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let Ok(answer) = http::request(
        upstream,
        &request.method,
        &request.path,
        &headers,
        &request.body,
    ) else {
        return false;
    };
    let head_only = request.method == "HEAD";
    let mut head = format!("HTTP/1.1 {} Forwarded\r\n", answer.status);
    for (name, value) in &answer.headers {
        let dropped = name == "transfer-encoding"
            || name == "connection"
            || (name == "content-length" && !head_only);
        if !dropped {
            let _ = write!(head, "{name}: {value}\r\n");
        }
    }
    if !head_only {
        let _ = write!(head, "content-length: {}\r\n", answer.body.len());
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes()).is_ok() && (head_only || out.write_all(&answer.body).is_ok())
}

//! A local registry serving test images built offline, for a program that is not a Rust test
//! (`cargo xtask critest` runs it inside a node network namespace).
//!
//! `test-registry --addr 127.0.0.1:5000 --image critest/busybox:1.29-2=busybox` starts Debian's
//! docker-registry on `--addr`, pushes each `--image REPO:TAG=KIND`, prints one JSON line
//! (`{"host": ..., "images": [...]}`), then serves until its standard input closes (or it is
//! killed: the registry is killed on drop, and a caller that kills this process kills what runs
//! in the namespace with it).
//!
//! An image is `REPO:TAG=KIND`, or `REPO:TAG=KIND@USER` for an image whose configuration names
//! `USER` (`1002`, `www-data`, `1003:1003`). Images of one repository are one image (its tags
//! share an id); images of different repositories differ (a label names the repository).
//!
//! Kinds:
//! - `busybox`: Debian's busybox-static with a link for every applet, `Cmd` `sh`;
//! - `httpd`: the same, serving `/www` (an `index.html`) on port 80 with busybox httpd, started
//!   by `httpd-foreground` (the httpd image's `Cmd`), which logs the command line as httpd does;
//! - `nginx`: the same server started by a shell script named `nginx` that writes its pid to
//!   `/var/run/nginx.pid` and stops on SIGTERM, as nginx does.

use std::io::Read as _;

use clap::Parser;
use test_support::image::{Compression, Image, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

/// The local registry and its test images.
#[derive(Parser)]
#[command(name = "test-registry")]
struct Args {
    /// Where the registry listens (a free port on this namespace's loopback).
    #[arg(long, default_value = "127.0.0.1:5000")]
    addr: String,
    /// An image to push: `REPO:TAG=KIND[@USER]`, KIND one of `busybox`, `httpd`, `nginx`.
    #[arg(long = "image", value_parser = image_arg)]
    images: Vec<Wanted>,
}

#[derive(Clone)]
struct Wanted {
    repo: String,
    tag: String,
    kind: Kind,
    user: Option<String>,
}

#[derive(Clone, Copy)]
enum Kind {
    Busybox,
    Httpd,
    Nginx,
    /// cri-tools' hostnet-nginx: nginx on port 12003, for a pod on the node's network.
    HostnetNginx,
    /// cri-tools' test-image-predefined-group: user 1000 (`default-user`), member of group
    /// 50000 in the image's /etc/group, the image's user.
    PredefinedGroup,
}

fn image_arg(text: &str) -> Result<Wanted, String> {
    let (name, kind) = text
        .rsplit_once('=')
        .ok_or(format!("{text:?}: want REPO:TAG=KIND[@USER]"))?;
    let (repo, tag) = name
        .rsplit_once(':')
        .ok_or(format!("{name:?}: want REPO:TAG"))?;
    let (kind, user) = match kind.split_once('@') {
        Some((kind, user)) => (kind, Some(user.to_owned())),
        None => (kind, None),
    };
    let kind = match kind {
        "busybox" => Kind::Busybox,
        "httpd" => Kind::Httpd,
        "nginx" => Kind::Nginx,
        "hostnet-nginx" => Kind::HostnetNginx,
        "predefined-group" => Kind::PredefinedGroup,
        other => {
            return Err(format!(
                "unknown image kind {other:?} (busybox, httpd, nginx, hostnet-nginx, \
                 predefined-group)"
            ));
        }
    };
    Ok(Wanted {
        repo: repo.to_owned(),
        tag: tag.to_owned(),
        kind,
        user,
    })
}

/// The nginx stand-in on `port`: pid file, busybox httpd in the background, SIGTERM handled
/// (as pid 1 it would otherwise be ignored).
fn nginx(port: u16) -> Vec<u8> {
    format!(
        "#!/bin/sh\n# nginx look-alike: busybox httpd on port {port}, its pid file as nginx's\n\
         mkdir -p /var/run\necho $$ > /var/run/nginx.pid\n\
         trap 'kill $server 2>/dev/null; exit 0' TERM INT QUIT\n\
         httpd -f -p {port} -h /www &\nserver=$!\nwait $server\n"
    )
    .into_bytes()
}

/// The httpd image's `Cmd` stand-in: httpd's start-up line, the server, SIGTERM handled.
const HTTPD_FOREGROUND: &[u8] = b"#!/bin/sh\n# httpd look-alike: busybox httpd on port 80\n\
    echo \"[core:notice] AH00094: Command line: 'httpd -D FOREGROUND'\" >&2\n\
    trap 'kill $server 2>/dev/null; exit 0' TERM INT QUIT\n\
    httpd -f -p 80 -h /www &\nserver=$!\nwait $server\n";

fn build(wanted: &Wanted) -> Image {
    let env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"];
    let root = Layer::new(&Tar::busybox_full().build(), Compression::Gzip);
    let page = || {
        Tar::new().dir("www", 0o755).file(
            "www/index.html",
            0o644,
            b"<html>hello from busybox httpd</html>\n",
        )
    };
    let mut builder = ImageBuilder::new()
        .env(&env)
        .label("org.opencontainers.image.title", &wanted.repo)
        .layer(root);
    if let Some(user) = &wanted.user {
        builder = builder.user(user);
    }
    match wanted.kind {
        Kind::Busybox => builder.cmd(&["sh"]),
        Kind::PredefinedGroup => builder.cmd(&["sh"]).user("1000").layer(Layer::new(
            &Tar::new()
                .dir("etc", 0o755)
                .dir("home", 0o755)
                .dir("home/default-user", 0o755)
                .file(
                    "etc/passwd",
                    0o644,
                    b"root:x:0:0:root:/root:/bin/sh\n\
                      default-user:x:1000:1000::/home/default-user:/bin/sh\n",
                )
                .file(
                    "etc/group",
                    0o644,
                    b"root:x:0:\ndefault-user:x:1000:\n\
                      group-defined-in-image:x:50000:default-user\n",
                )
                .build(),
            Compression::Gzip,
        )),
        Kind::Httpd => builder.cmd(&["httpd-foreground"]).layer(Layer::new(
            &page()
                .dir("usr/local", 0o755)
                .dir("usr/local/bin", 0o755)
                .file("usr/local/bin/httpd-foreground", 0o755, HTTPD_FOREGROUND)
                .build(),
            Compression::Gzip,
        )),
        Kind::Nginx | Kind::HostnetNginx => {
            let port = if matches!(wanted.kind, Kind::Nginx) {
                80
            } else {
                12003
            };
            builder.cmd(&["nginx"]).layer(Layer::new(
                &page().file("usr/sbin/nginx", 0o755, &nginx(port)).build(),
                Compression::Gzip,
            ))
        }
    }
    .build()
}

fn main() {
    let args = Args::parse();
    let registry = Registry::start_on(&args.addr);
    let mut pushed = Vec::new();
    for wanted in &args.images {
        let image = build(wanted);
        let (repo, tag) = (&wanted.repo, &wanted.tag);
        registry.push_image(repo, Some(tag), &image, Upload::Monolithic);
        pushed.push(serde_json::json!({
            "reference": format!("{}/{repo}:{tag}", registry.host()),
            "digest": image.manifest_digest,
        }));
    }
    println!(
        "{}",
        serde_json::json!({"host": registry.host(), "images": pushed})
    );
    // Serve until the caller closes our standard input.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(registry);
}

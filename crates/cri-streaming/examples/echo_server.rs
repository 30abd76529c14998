//! A streaming server over a runtime that only echoes, for trying clients against it by hand
//! (kubectl's client-go, crictl's vendored copy, websocat):
//!
//! ```text
//! cargo run -p cri-streaming --example echo_server [ADDR]
//! ```
//!
//! It prints one line per URL, `<name> <url>`, then serves until stdin closes or Ctrl-C:
//! `exec` (`cat 3`: stdin echoed on stdout, `err` on stderr, exit code 3), `exec-tty` (the
//! terminal sizes it is sent, one `WxH` line each, once stdin ends), `attach` (stdin echoed),
//! `portforward` (to an echo listener on 127.0.0.1 whose port is printed as `echo-port`).
//! Each URL works once, within a minute: run it again for fresh ones.

use std::fmt::Write as _;
use std::sync::Arc;

use cri_streaming::runtime::{
    AttachRequest, Duplex, ExecRequest, PortForwardRequest, RuntimeError, StreamRuntime, Streams,
};
use cri_streaming::server::{Config, Server};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

struct Echo;

fn io_err(context: &'static str) -> impl FnOnce(std::io::Error) -> RuntimeError {
    move |source| RuntimeError::Io {
        context: context.to_owned(),
        source,
    }
}

async fn echo(streams: &mut Streams) -> Result<(), RuntimeError> {
    if let Some(err) = streams.stderr.as_mut() {
        err.write_all(b"err").await.map_err(io_err("stderr"))?;
    }
    if let (Some(input), Some(output)) = (streams.stdin.as_mut(), streams.stdout.as_mut()) {
        tokio::io::copy(input, output)
            .await
            .map_err(io_err("copy"))?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl StreamRuntime for Echo {
    async fn exec(&self, req: ExecRequest, mut streams: Streams) -> Result<i32, RuntimeError> {
        if req.tty {
            if let Some(input) = streams.stdin.as_mut() {
                tokio::io::copy(input, &mut tokio::io::sink())
                    .await
                    .map_err(io_err("stdin"))?;
            }
            let mut report = String::new();
            if let Some(mut sizes) = streams.resize.take() {
                // The client's resize stream may outlive its stdin: take what came meanwhile.
                while let Ok(size) = sizes.try_recv() {
                    // Writing to a String cannot fail.
                    let _ = writeln!(report, "{}x{}", size.width, size.height);
                }
            }
            if let Some(out) = streams.stdout.as_mut() {
                out.write_all(report.as_bytes())
                    .await
                    .map_err(io_err("stdout"))?;
            }
            return Ok(0);
        }
        echo(&mut streams).await?;
        Ok(req.cmd.get(1).and_then(|c| c.parse().ok()).unwrap_or(0))
    }

    async fn attach(&self, _req: AttachRequest, mut streams: Streams) -> Result<(), RuntimeError> {
        echo(&mut streams).await
    }

    async fn port_forward(
        &self,
        _pod_sandbox_id: &str,
        port: u16,
    ) -> Result<Box<dyn Duplex>, RuntimeError> {
        let conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| RuntimeError::Failed(format!("dial tcp 127.0.0.1:{port}: {e}")))?;
        Ok(Box::new(conn))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = Config::default();
    if let Some(addr) = std::env::args().nth(1) {
        config.addr = addr.parse()?;
    }
    let server = Server::start(config, Arc::new(Echo)).await?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let echo_port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });

    let exec = |tty: bool| ExecRequest {
        container_id: "c1".into(),
        cmd: vec!["cat".into(), "3".into()],
        tty,
        stdin: true,
        stdout: true,
        stderr: !tty,
    };
    println!("echo-port {echo_port}");
    println!("exec {}", server.get_exec(exec(false))?);
    println!("exec-tty {}", server.get_exec(exec(true))?);
    println!(
        "attach {}",
        server.get_attach(AttachRequest {
            container_id: "c1".into(),
            tty: false,
            stdin: true,
            stdout: true,
            stderr: false,
        })?
    );
    println!(
        "portforward {}",
        server.get_port_forward(PortForwardRequest {
            pod_sandbox_id: "pod1".into(),
            ports: vec![],
        })?
    );

    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async { while let Ok(Some(_)) = stdin.next_line().await {} } => {}
    }
    eprintln!("open streams at exit: {:?}", server.open_streams());
    server.shutdown().await;
    Ok(())
}

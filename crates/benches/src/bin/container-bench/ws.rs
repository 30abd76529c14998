//! A WebSocket client of the CRI streaming URLs, `v4.channel.k8s.io`, as kubectl 1.30+ speaks
//! it: the same client for crio-lite's streaming server and for containerd's (kubelet's
//! streaming library), so that neither side's figure carries a different client's cost.
//!
//! Every message is one channel byte and its data. Remote command: 0 stdin, 1 stdout,
//! 2 stderr, 3 the exit status (a JSON Status). Port forward of one port: 0 its data, 1 its
//! errors, each opened by the server with the port, two bytes little-endian.

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{WebSocketStream, client_async};

/// What any one message may take to arrive before the run counts as stuck.
const WAIT: Duration = Duration::from_secs(30);
const PROTOCOL: &str = "v4.channel.k8s.io";

/// One upgraded stream.
pub(crate) struct Ws(WebSocketStream<TcpStream>);

impl Ws {
    /// Connects to `url` (`http://host:port/...`) and upgrades with `v4.channel.k8s.io`.
    pub(crate) async fn connect(url: &str) -> Result<Ws, String> {
        let authority = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .ok_or_else(|| format!("not a plain http streaming URL: {url}"))?;
        let mut req = url
            .replacen("http://", "ws://", 1)
            .into_client_request()
            .map_err(|e| format!("{url}: {e}"))?;
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(PROTOCOL));
        let tcp = TcpStream::connect(authority)
            .await
            .map_err(|e| format!("connect {authority}: {e}"))?;
        // As Go's net package does for every client, kubectl's included.
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (ws, reply) = client_async(req, tcp)
            .await
            .map_err(|e| format!("websocket upgrade at {url}: {e}"))?;
        let chosen = reply
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok());
        if chosen != Some(PROTOCOL) {
            return Err(format!("{url}: the server chose protocol {chosen:?}"));
        }
        Ok(Ws(ws))
    }

    /// The next message as (channel, data); `None` once the server closed.
    pub(crate) async fn next(&mut self) -> Result<Option<(u8, Vec<u8>)>, String> {
        loop {
            let msg = tokio::time::timeout(WAIT, self.0.next())
                .await
                .map_err(|_| format!("no message within {WAIT:?}"))?;
            let bytes = match msg {
                None | Some(Ok(Message::Close(_))) => return Ok(None),
                Some(Err(e)) => return Err(format!("websocket: {e}")),
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Text(t))) => t.as_bytes().to_vec().into(),
                Some(Ok(_)) => continue,
            };
            if let Some((&channel, data)) = bytes.split_first() {
                return Ok(Some((channel, data.to_vec())));
            }
        }
    }

    /// Sends `data` on `channel`.
    pub(crate) async fn send(&mut self, channel: u8, data: &[u8]) -> Result<(), String> {
        let mut msg = Vec::with_capacity(data.len() + 1);
        msg.push(channel);
        msg.extend_from_slice(data);
        self.0
            .send(Message::binary(msg))
            .await
            .map_err(|e| format!("websocket send: {e}"))
    }

    /// A close frame, best effort: the server may have closed first.
    pub(crate) async fn close(mut self) {
        let _ = self.0.close(None).await;
    }

    /// Remote command: reads until the exit status arrives; fails unless it is Success.
    pub(crate) async fn exit_status(&mut self) -> Result<(), String> {
        let mut status = Vec::new();
        while let Some((channel, data)) = self.next().await? {
            if channel == 3 {
                status.extend_from_slice(&data);
                if !status.is_empty() {
                    break;
                }
            }
        }
        let status = String::from_utf8_lossy(&status);
        if status.contains("\"Success\"") {
            Ok(())
        } else {
            Err(format!("exit status: {status:?}"))
        }
    }

    /// Remote command: reads stdout until `want` more bytes came.
    pub(crate) async fn read_stdout(&mut self, want: usize) -> Result<(), String> {
        let mut got = 0;
        while got < want {
            match self.next().await? {
                Some((1, data)) => got += data.len(),
                Some((3, data)) if !data.is_empty() => {
                    return Err(format!(
                        "the command ended: {}",
                        String::from_utf8_lossy(&data)
                    ));
                }
                Some(_) => {}
                None => return Err("the server closed the stream".into()),
            }
        }
        Ok(())
    }

    /// Port forward of one port: reads its data until `want` bytes came (past the port
    /// prefix); an error on its error channel fails.
    pub(crate) async fn forwarded(&mut self, want: usize) -> Result<(), String> {
        let (mut prefix, mut err_prefix, mut got) = (2usize, 2usize, 0);
        while got < want {
            let Some((channel, data)) = self.next().await? else {
                return Err(format!("the stream closed after {got} of {want} bytes"));
            };
            let (skip, data) = match channel {
                0 => (&mut prefix, data),
                1 => (&mut err_prefix, data),
                _ => continue,
            };
            let cut = (*skip).min(data.len());
            *skip -= cut;
            let rest = &data[cut..];
            if channel == 0 {
                got += rest.len();
            } else if !rest.is_empty() {
                return Err(format!(
                    "port forward error: {}",
                    String::from_utf8_lossy(rest)
                ));
            }
        }
        Ok(())
    }
}

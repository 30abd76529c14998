//! What the server answers an HTTP request with, as kubelet's routes and handshakes do:
//! `GET` or `POST` `/exec/<token>`, `/attach/<token>`, `/portforward/<token>`; the token is
//! consumed first, then the upgrade is negotiated (WebSocket if the request asks for one,
//! SPDY/3.1 otherwise) and the upgraded connection handed to a task of its own.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    ALLOW, CONNECTION, CONTENT_TYPE, HeaderMap, HeaderValue, SEC_WEBSOCKET_ACCEPT,
    SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL, SEC_WEBSOCKET_VERSION, UPGRADE,
};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::{Pending, Shared, StreamKind, over_spdy, over_ws};
use crate::channel::{
    HEADER_ACCEPTED_PROTOCOL_VERSIONS, HEADER_PROTOCOL_VERSION, SPDY_PORT_FORWARD,
    SPDY_REMOTE_COMMAND, WS_PORT_FORWARD, WS_REMOTE_COMMAND, WsProtocol, negotiate,
};

type Reply = Response<Full<Bytes>>;

/// The upgrade SPDY clients ask for.
const SPDY_UPGRADE: &str = "SPDY/3.1";
/// Ports one WebSocket port forward may name: two channels each, in one byte.
const MAX_WS_PORTS: usize = 64;

pub(super) fn route(shared: &Arc<Shared>, mut req: Request<Incoming>) -> Reply {
    // hyper's buffer limit is approximate (a read may fill past it): hold every request to it.
    let head: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if head > super::MAX_REQUEST_HEAD {
        return text(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &format!(
                "request headers of {head} bytes are over the limit of {} bytes",
                super::MAX_REQUEST_HEAD
            ),
        );
    }
    let Some((kind, token)) = parse_path(req.uri().path()) else {
        return text(StatusCode::NOT_FOUND, "404 page not found\n");
    };
    if req.method() != Method::GET && req.method() != Method::POST {
        let mut reply = text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
        reply
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, POST"));
        return reply;
    }
    // Consumed before the upgrade is looked at, as kubelet does: a token is good for one try.
    let ((StreamKind::Exec, Some(pending @ Pending::Exec(_)))
    | (StreamKind::Attach, Some(pending @ Pending::Attach(_)))
    | (StreamKind::PortForward, Some(pending @ Pending::PortForward(_)))) =
        (kind, shared.tokens.consume(token))
    else {
        return text(StatusCode::NOT_FOUND, "404 page not found\n");
    };
    if is_websocket(req.headers()) {
        upgrade_websocket(shared, &mut req, kind, pending)
    } else {
        upgrade_spdy(shared, &mut req, kind, pending)
    }
}

fn parse_path(path: &str) -> Option<(StreamKind, &str)> {
    let (first, token) = path.strip_prefix('/')?.split_once('/')?;
    let kind = match first {
        "exec" => StreamKind::Exec,
        "attach" => StreamKind::Attach,
        "portforward" => StreamKind::PortForward,
        _ => return None,
    };
    (!token.is_empty() && !token.contains('/')).then_some((kind, token))
}

/// wsstream's `IsWebSocketRequest`: `Upgrade: websocket` and `Connection` naming upgrade.
fn is_websocket(headers: &HeaderMap) -> bool {
    let upgrade = header_str(headers, UPGRADE.as_str());
    upgrade.eq_ignore_ascii_case("websocket") && connection_upgrades(headers)
}

fn connection_upgrades(headers: &HeaderMap) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Every value of a header that may be given several times or as a comma list.
fn header_list<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect()
}

fn upgrade_spdy(
    shared: &Arc<Shared>,
    req: &mut Request<Incoming>,
    kind: StreamKind,
    pending: Pending,
) -> Reply {
    // httpstream.Handshake, then the SPDY upgrader's header check, in kubelet's order.
    let offered = header_list(req.headers(), HEADER_PROTOCOL_VERSION);
    if offered.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            &format!("unable to upgrade: {HEADER_PROTOCOL_VERSION} is required"),
        );
    }
    let server: Vec<&'static str> = match kind {
        StreamKind::PortForward => vec![SPDY_PORT_FORWARD],
        StreamKind::Exec | StreamKind::Attach => {
            SPDY_REMOTE_COMMAND.iter().map(|p| p.name).collect()
        }
    };
    let Some(&protocol) = negotiate(&offered, &server, |p| p) else {
        let mut reply = text(
            StatusCode::FORBIDDEN,
            &format!(
                "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]",
                offered.join(" "),
                server.join(" ")
            ),
        );
        for name in &server {
            reply.headers_mut().append(
                HEADER_ACCEPTED_PROTOCOL_VERSIONS,
                HeaderValue::from_static(name),
            );
        }
        return reply;
    };
    let wants_spdy = header_list(req.headers(), UPGRADE.as_str())
        .iter()
        .any(|u| u.eq_ignore_ascii_case(SPDY_UPGRADE));
    if !wants_spdy || !connection_upgrades(req.headers()) {
        return text(
            StatusCode::BAD_REQUEST,
            "unable to upgrade: missing upgrade headers in request: want Connection: Upgrade and Upgrade: SPDY/3.1",
        );
    }
    let on_upgrade = hyper::upgrade::on(req);
    let task_shared = Arc::clone(shared);
    spawn_upgraded(shared, kind, async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                over_spdy::serve(task_shared, TokioIo::new(upgraded), protocol, pending).await;
            }
            Err(e) => tracing::debug!("spdy upgrade: {e}"),
        }
    });
    let mut reply = empty(StatusCode::SWITCHING_PROTOCOLS);
    let headers = reply.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static(SPDY_UPGRADE));
    headers.insert(HEADER_PROTOCOL_VERSION, HeaderValue::from_static(protocol));
    reply
}

fn upgrade_websocket(
    shared: &Arc<Shared>,
    req: &mut Request<Incoming>,
    kind: StreamKind,
    pending: Pending,
) -> Reply {
    // Port forward's ports come from the query, read (as kubelet's NewV4Options does) before
    // the upgrade.
    let pending = match pending {
        Pending::PortForward(mut pf) => {
            match ws_ports(req.uri().query().unwrap_or(""), &pf.ports) {
                Ok(ports) => pf.ports = ports,
                Err(why) => return text(StatusCode::BAD_REQUEST, &why),
            }
            Pending::PortForward(pf)
        }
        other => other,
    };
    if header_str(req.headers(), SEC_WEBSOCKET_VERSION.as_str()) != "13" {
        let mut reply = text(
            StatusCode::BAD_REQUEST,
            "unsupported websocket version: Sec-WebSocket-Version 13 is required",
        );
        reply
            .headers_mut()
            .insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        return reply;
    }
    let key = header_str(req.headers(), SEC_WEBSOCKET_KEY.as_str());
    if key.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "websocket upgrade without Sec-WebSocket-Key",
        );
    }
    let accept = derive_accept_key(key.as_bytes());
    let offered = header_list(req.headers(), SEC_WEBSOCKET_PROTOCOL.as_str());
    let table: &'static [WsProtocol] = match kind {
        StreamKind::PortForward => WS_PORT_FORWARD,
        StreamKind::Exec | StreamKind::Attach => WS_REMOTE_COMMAND,
    };
    let Some(protocol) = negotiate(&offered, table, |p| p.name) else {
        let supported: Vec<&str> = table.iter().map(|p| p.name).collect();
        return text(
            StatusCode::FORBIDDEN,
            &format!(
                "requested protocol(s) are not supported: [{}]; supports [{}]",
                offered.join(" "),
                supported.join(" ")
            ),
        );
    };
    let on_upgrade = hyper::upgrade::on(req);
    let task_shared = Arc::clone(shared);
    spawn_upgraded(shared, kind, async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                over_ws::serve(task_shared, TokioIo::new(upgraded), *protocol, pending).await;
            }
            Err(e) => tracing::debug!("websocket upgrade: {e}"),
        }
    });
    let mut reply = empty(StatusCode::SWITCHING_PROTOCOLS);
    let headers = reply.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(SEC_WEBSOCKET_ACCEPT, accept);
    }
    if !protocol.name.is_empty() {
        headers.insert(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(protocol.name),
        );
    }
    reply
}

/// The ports of a WebSocket port forward: every `port` query value, each a comma list
/// (kubelet's `NewV4Options`); without any, the ports the CRI request named. A port the CRI
/// request did not name, when it named some, is refused.
fn ws_ports(query: &str, allowed: &[u16]) -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    let values = query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .filter(|(k, _)| *k == "port");
    for (_, value) in values {
        let value = value.replace("%2C", ",").replace("%2c", ",");
        if value.is_empty() {
            return Err("query parameter \"port\" cannot be empty".into());
        }
        for p in value.split(',') {
            let port: u16 = p
                .parse()
                .map_err(|e| format!("unable to parse {value:?} as a port: {e}"))?;
            if port < 1 {
                return Err(format!("port {value:?} must be > 0"));
            }
            if !allowed.is_empty() && !allowed.contains(&port) {
                return Err(format!(
                    "port {port} is not among the ports the request named"
                ));
            }
            ports.push(port);
        }
        if ports.len() > MAX_WS_PORTS {
            return Err(format!("more than {MAX_WS_PORTS} ports in one request"));
        }
    }
    if ports.is_empty() {
        if allowed.is_empty() {
            return Err("query parameter \"port\" is required".into());
        }
        ports = allowed.iter().copied().take(MAX_WS_PORTS + 1).collect();
        if ports.len() > MAX_WS_PORTS {
            return Err(format!("more than {MAX_WS_PORTS} ports in one request"));
        }
    }
    Ok(ports)
}

/// Runs an upgraded stream's task: counted as open while it runs, dropped at shutdown.
fn spawn_upgraded(
    shared: &Arc<Shared>,
    kind: StreamKind,
    serve: impl Future<Output = ()> + Send + 'static,
) {
    let guard = shared.open_guard(kind);
    let shutdown = shared.shutdown.clone();
    shared.tracker.spawn(async move {
        let _open = guard;
        tokio::select! {
            () = shutdown.cancelled() => tracing::debug!(kind = kind.path(), "stream ended by shutdown"),
            () = serve => {}
        }
    });
}

fn text(status: StatusCode, body: &str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body.to_owned())));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

fn empty(status: StatusCode) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::new()));
    *reply.status_mut() = status;
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(parse_path("/exec/abc"), Some((StreamKind::Exec, "abc")));
        assert_eq!(
            parse_path("/portforward/abc"),
            Some((StreamKind::PortForward, "abc"))
        );
        assert_eq!(parse_path("/exec/"), None);
        assert_eq!(parse_path("/exec/a/b"), None);
        assert_eq!(parse_path("/logs/a"), None);
        assert_eq!(parse_path("exec/a"), None);
    }

    #[test]
    fn websocket_ports() {
        assert_eq!(ws_ports("port=80&port=81,82", &[]), Ok(vec![80, 81, 82]));
        assert_eq!(ws_ports("port=80%2C81", &[]), Ok(vec![80, 81]));
        assert_eq!(ws_ports("", &[8080]), Ok(vec![8080]));
        assert!(ws_ports("", &[]).unwrap_err().contains("is required"));
        assert!(ws_ports("port=0", &[]).unwrap_err().contains("must be > 0"));
        assert!(
            ws_ports("port=x", &[])
                .unwrap_err()
                .contains("unable to parse")
        );
        assert!(
            ws_ports("port=", &[])
                .unwrap_err()
                .contains("cannot be empty")
        );
        assert!(
            ws_ports("port=81", &[80])
                .unwrap_err()
                .contains("not among")
        );
        let many = (1..=65)
            .map(|p| format!("port={p}"))
            .collect::<Vec<_>>()
            .join("&");
        assert!(ws_ports(&many, &[]).unwrap_err().contains("more than 64"));
    }
}

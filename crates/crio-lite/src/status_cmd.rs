//! `crio-lite status`: reads the HTTP status API over the socket, as `crio status` does.

use std::path::Path;

use axum::body::Body;
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use crate::error::{Error, Result};
pub use crate::status_output::{OutputFormat, render};

/// Answers larger than this are refused (the API's answers are a few kilobytes).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// What `crio-lite status` asks for.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum StatusQuery {
    /// Versions and directories (`GET /info`).
    Info,
    /// The daemon's effective configuration (`GET /config`).
    Config,
    /// One sandbox (`GET /containers/ID`).
    Containers {
        /// The sandbox ID, or a unique prefix of it.
        id: String,
    },
    /// Every sandbox, oldest first (`GET /sandboxes`).
    Sandboxes,
}

impl StatusQuery {
    /// The request path.
    pub fn path(&self) -> String {
        match self {
            StatusQuery::Info => "/info".to_owned(),
            StatusQuery::Config => "/config".to_owned(),
            StatusQuery::Containers { id } => format!("/containers/{id}"),
            StatusQuery::Sandboxes => "/sandboxes".to_owned(),
        }
    }
}

/// Runs the query and returns what to print in `format` (the configuration as TOML for a table).
///
/// # Errors
///
/// [`Error::StatusApi`] when the socket does not answer, or answers with an error (the daemon's
/// message is kept, for instance "pod sandbox ... not found").
pub async fn run(socket: &Path, query: &StatusQuery, format: OutputFormat) -> Result<String> {
    if let StatusQuery::Containers { id } = query
        && (id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()))
    {
        return Err(status_error(socket, format!("{id:?} is not a sandbox ID")));
    }
    let (status, body) = get(socket, &query.path()).await?;
    if status != StatusCode::OK {
        return Err(status_error(
            socket,
            format!("{status}: {}", body.trim_end()),
        ));
    }
    let value = if *query == StatusQuery::Config {
        if format == OutputFormat::Table {
            return Ok(body);
        }
        let toml: toml::Value = toml::from_str(&body)
            .map_err(|e| status_error(socket, format!("/config is not TOML: {e}")))?;
        serde_json::to_value(toml)
            .map_err(|e| status_error(socket, format!("/config as JSON: {e}")))?
    } else {
        serde_json::from_str::<serde_json::Value>(&body)
            .map_err(|e| status_error(socket, format!("{} is not JSON: {e}", query.path())))?
    };
    Ok(render(&value, format))
}

/// One HTTP/1.1 GET over the unix socket; returns the status and the body.
///
/// # Errors
///
/// [`Error::StatusApi`] when the socket cannot be reached or the answer cannot be read.
pub async fn get(socket: &Path, path: &str) -> Result<(StatusCode, String)> {
    let fail = |what: &str, e: &dyn std::fmt::Display| status_error(socket, format!("{what}: {e}"));
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| fail("cannot connect (is crio-lite running?)", &e))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| fail("handshake failed", &e))?;
    let driver = tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, "localhost")
        .body(String::new())
        .map_err(|e| fail("bad request", &e))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| fail("request failed", &e))?;
    let status = response.status();
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), MAX_ANSWER)
        .await
        .map_err(|e| fail("cannot read the answer", &e))?;
    driver.abort();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

fn status_error(socket: &Path, reason: String) -> Error {
    Error::StatusApi {
        socket: socket.to_owned(),
        reason,
    }
}

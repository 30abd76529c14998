//! A failed pull is logged at warn (the registry, the image, the node's rules at fault) or
//! error (the node's own disk and files), naming the image and why, the why capped: an error
//! may quote what a registry sent.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use image_store::{Auth, Store};

use crate::support;

/// A registry that answers every manifest with 404 and a 4 KiB body of its own words.
fn verbose_registry() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().map_while(Result::ok) {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let body = if head.starts_with(b"GET /v2/ ") {
                "{}".to_owned()
            } else {
                "the registry says: ".to_owned() + &"blah ".repeat(800)
            };
            let status = if body == "{}" {
                "200 OK"
            } else {
                "404 Not Found"
            };
            let _ = write!(
                conn,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    host
}

/// What a tracing subscriber writes, kept.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// One thread: the pull's task logs on the thread the subscriber is set on.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_pull_is_a_warning_naming_the_image_with_the_reason_capped() {
    let host = verbose_registry();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let captured = captured.clone();
            move || captured.clone()
        })
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let dir = test_support::temp_dir("img-logged");
    let store = Store::open(support::config(dir.path(), &host)).unwrap();
    let name = support::reference(&host, "chatty", "latest");
    let err = store.pull(&name, &Auth::Anonymous).await.unwrap_err();
    assert!(
        err.to_string().len() > 4000,
        "the error quotes the registry"
    );

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let failed: Vec<&str> = text.lines().filter(|l| l.contains("pull failed")).collect();
    let [line] = failed.as_slice() else {
        panic!("one line says the pull failed:\n{text}")
    };
    assert!(line.contains(" WARN "), "logged as a warning: {line}");
    assert!(line.contains(&name), "names the image: {line}");
    assert!(line.contains("the registry says: blah"), "says why: {line}");
    assert!(
        line.len() < 1400,
        "the reason is capped ({} bytes): {line}",
        line.len()
    );
    for line in text.lines() {
        assert!(
            line.len() < 1400,
            "no line carries the whole answer: {line}"
        );
    }
}

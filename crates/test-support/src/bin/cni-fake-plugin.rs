//! `cni-fake-plugin`: a configurable CNI plugin for tests.
//!
//! It behaves as told by the `"fake"` object of the network configuration on its stdin, on top of
//! the object in `<argv0>.fake.json` and overridden by the `CNI_FAKE` environment variable (a JSON
//! object); the docs of `test_support::fake_plugin` list the keys. It never panics: bad input gets a
//! spec error on stdout and exit code 1.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use serde_json::{Map, Value, json};

/// Every version the fake claims to support unless told otherwise.
const ALL_VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// Commands of CNI 1.1.0.
const COMMANDS: &[&str] = &["ADD", "DEL", "CHECK", "VERSION", "STATUS", "GC"];

fn main() {
    std::process::exit(run());
}

/// What the configuration asks the plugin to do wrong before answering: hang, crash, fail with
/// an error object, print garbage or too much. `Some(exit status)` when it must stop there.
fn misbehave(fake: &Map<String, Value>, version: &str, child: bool) -> Option<i32> {
    let flag = |key: &str| fake.get(key).and_then(Value::as_bool).unwrap_or(false);
    if child {
        loop {
            std::thread::sleep(Duration::from_secs(1000));
        }
    }
    if let Some(secs) = fake.get("hangSecs").and_then(Value::as_f64)
        && secs.is_finite()
        && secs > 0.0
    {
        std::thread::sleep(Duration::from_secs_f64(secs.min(86_400.0)));
    }
    match fake.get("crash").and_then(Value::as_str) {
        Some("abort") => std::process::abort(),
        Some("segv") => return Some(segv()),
        Some("exit3-no-json") => {
            let _ = std::io::stderr().write_all(b"fake plugin crashed on purpose\n");
            return Some(3);
        }
        _ => {}
    }
    if let Some(fail) = fake.get("fail") {
        let code = fail.get("code").and_then(Value::as_u64).unwrap_or(999);
        let msg = fail
            .get("msg")
            .and_then(Value::as_str)
            .unwrap_or("fake failure");
        let details = fail.get("details").and_then(Value::as_str).unwrap_or("");
        return Some(spec_error(version, code, msg, details));
    }
    if flag("garbage") {
        print(b"this is { not json\n");
        return Some(0);
    }
    if let Some(n) = fake.get("hugeBytes").and_then(Value::as_u64) {
        print_huge(n);
        return Some(0);
    }
    None
}

fn run() -> i32 {
    let command = std::env::var("CNI_COMMAND").unwrap_or_default();
    let mut raw = Vec::new();
    let read = std::io::stdin().read_to_end(&mut raw);

    // VERSION may come with empty stdin from hand-written callers; everything else needs a config.
    let parsed: Option<Value> = if read.is_err() {
        None
    } else if command == "VERSION" && raw.iter().all(u8::is_ascii_whitespace) {
        Some(json!({}))
    } else {
        serde_json::from_slice(&raw).ok()
    };
    let config = match &parsed {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let version = config
        .get("cniVersion")
        .and_then(Value::as_str)
        .unwrap_or("1.0.0")
        .to_owned();

    // Keys from `<argv0>.fake.json` come first: they reach commands whose stdin carries no
    // configuration of ours (VERSION), for one plugin name at a time.
    let mut fake = sidecar();
    if let Some(own) = config.get("fake").and_then(Value::as_object) {
        fake.extend(own.clone());
    }
    let mut bad_override = false;
    if let Some(text) = std::env::var_os("CNI_FAKE") {
        match serde_json::from_slice::<Value>(text.as_encoded_bytes()) {
            Ok(Value::Object(keys)) => fake.extend(keys),
            _ => bad_override = true,
        }
    }

    let applies = match fake.get("failOn") {
        Some(Value::Array(list)) => list.iter().any(|c| c.as_str() == Some(command.as_str())),
        _ => true,
    };
    let flag = |key: &str| fake.get(key).and_then(Value::as_bool).unwrap_or(false);

    let child_pid = if applies && flag("spawnChild") {
        Command::new("sleep")
            .arg("1000")
            .spawn()
            .ok()
            .map(|c| c.id())
    } else {
        None
    };

    if let Some(path) = fake.get("record").and_then(Value::as_str) {
        let stdin = parsed
            .clone()
            .unwrap_or_else(|| Value::String(String::from_utf8_lossy(&raw).into_owned()));
        record(path, &command, stdin, child_pid);
    }
    if let Some(text) = fake.get("stderr").and_then(Value::as_str) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }

    if parsed.is_none() {
        return spec_error(&version, 6, "failed to decode content", "stdin is not JSON");
    }
    if bad_override {
        return spec_error(
            &version,
            7,
            "invalid CNI_FAKE",
            "CNI_FAKE must be a JSON object",
        );
    }
    if !COMMANDS.contains(&command.as_str()) {
        return spec_error(&version, 4, "unknown CNI_COMMAND", &command);
    }

    if applies && let Some(code) = misbehave(&fake, &version, child_pid.is_some()) {
        return code;
    }

    match command.as_str() {
        "VERSION" => {
            let supported = fake
                .get("supportedVersions")
                .cloned()
                .unwrap_or_else(|| json!(ALL_VERSIONS));
            print_json(&json!({"cniVersion": version, "supportedVersions": supported}));
        }
        "ADD" => print_json(&add_result(&fake, &config, &version)),
        _ => {}
    }
    0
}

fn add_result(fake: &Map<String, Value>, config: &Map<String, Value>, version: &str) -> Value {
    if let Some(result) = fake.get("result") {
        return result.clone();
    }
    if let Some(v) = fake.get("resultVersion").and_then(Value::as_str) {
        return canned_result(v);
    }
    if fake.get("passPrevResult").and_then(Value::as_bool) == Some(true)
        && let Some(prev) = config.get("prevResult")
    {
        return prev.clone();
    }
    canned_result(version)
}

/// The object in `<argv0>.fake.json`, if there is one.
fn sidecar() -> Map<String, Value> {
    let Some(argv0) = std::env::args_os().next() else {
        return Map::new();
    };
    let mut path = argv0;
    path.push(".fake.json");
    std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
}

/// A result of `version`'s shape whose address is derived from `CNI_CONTAINERID`, so each container
/// gets its own and the same container always the same one.
fn canned_result(version: &str) -> Value {
    let id = std::env::var("CNI_CONTAINERID").unwrap_or_default();
    // FNV-1a: stable across runs and platforms.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let (a, b) = ((hash % 254) + 1, ((hash >> 8) % 254) + 1);
    let address = format!("10.88.{a}.{b}/16");
    let gateway = "10.88.0.1";
    match version {
        "0.1.0" | "0.2.0" => json!({
            "cniVersion": version,
            "ip4": {"ip": address, "gateway": gateway},
            "dns": {},
        }),
        _ => {
            let ifname = std::env::var("CNI_IFNAME").unwrap_or_else(|_| "eth0".into());
            let netns = std::env::var("CNI_NETNS").unwrap_or_default();
            let mut ip = json!({"interface": 0, "address": address, "gateway": gateway});
            if matches!(version, "0.3.0" | "0.3.1" | "0.4.0") {
                ip["version"] = json!("4");
            }
            json!({
                "cniVersion": version,
                "interfaces": [{"name": ifname, "mac": format!("0a:58:0a:58:{a:02x}:{b:02x}"), "sandbox": netns}],
                "ips": [ip],
                "dns": {},
            })
        }
    }
}

/// Appends one JSON line in a single write, so concurrent invocations do not interleave.
fn record(path: &str, command: &str, stdin: Value, child_pid: Option<u32>) {
    let env: Map<String, Value> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                Value::String(v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    let mut entry = json!({
        "command": command,
        "env": env,
        "stdin": stdin,
        "pid": std::process::id(),
    });
    if let Some(pid) = child_pid {
        entry["childPid"] = json!(pid);
    }
    let mut line = serde_json::to_vec(&entry).unwrap_or_default();
    line.push(b'\n');
    if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path) {
        let _ = file.write_all(&line);
    }
}

fn spec_error(version: &str, code: u64, msg: &str, details: &str) -> i32 {
    print_json(&json!({"cniVersion": version, "code": code, "msg": msg, "details": details}));
    1
}

fn print_json(value: &Value) {
    let mut out = serde_json::to_vec(value).unwrap_or_default();
    out.push(b'\n');
    print(&out);
}

/// Writes to stdout, ignoring a reader that went away.
fn print(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(bytes).and_then(|()| stdout.flush());
}

fn print_huge(n: u64) {
    let chunk = vec![b'x'; 64 * 1024];
    let mut stdout = std::io::stdout().lock();
    let mut left = n;
    while left > 0 {
        let len = left.min(chunk.len() as u64) as usize;
        if stdout.write_all(&chunk[..len]).is_err() {
            return;
        }
        left -= len as u64;
    }
    let _ = stdout.flush();
}

fn segv() -> i32 {
    use nix::sys::signal::{SigHandler, Signal, raise, signal};
    // SAFETY: installing SIG_DFL runs no code of ours in signal context; it undoes the handler Rust's
    // runtime installs for stack overflows, which would otherwise swallow a raised SIGSEGV.
    let _ = unsafe { signal(Signal::SIGSEGV, SigHandler::SigDfl) };
    let _ = raise(Signal::SIGSEGV);
    139
}

//! What libcni's `skel.PluginMain` does around a plugin's commands: read the `CNI_*` variables,
//! check them, the network name and the configuration's version, dispatch, and turn any error
//! into the spec's error object. Messages and codes are the Go skeleton's (libcni 1.0.1, which
//! Debian's plugins 1.1.1 are built with).

use serde_json::{Map, Value, json};

use crate::gojson;

/// The versions the built-ins support: the Go plugins' and 1.1.0, which brings GC and STATUS.
pub(crate) const VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// `types.ErrInternal`: what libcni's skeleton reports for any error that is not a `types.Error`.
pub(crate) const ERR_INTERNAL: u32 = 999;

/// The spec's error object, as a failing plugin prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) code: u32,
    pub(crate) msg: String,
    pub(crate) details: String,
}

impl Failure {
    pub(crate) fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Failure {
        Failure {
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    /// A plain Go `error` returned by a command: code 999.
    pub(crate) fn internal(msg: impl Into<String>) -> Failure {
        Failure::new(ERR_INTERNAL, msg, "")
    }

    /// What libcni's `invoke` makes of a failed plugin's stdout: its error object, or a
    /// message quoting what it printed instead.
    pub(crate) fn from_stdout(stdout: &[u8]) -> Failure {
        if stdout.is_empty() {
            return Failure::internal("netplugin failed with no error message");
        }
        let parsed: std::result::Result<Value, _> = serde_json::from_slice(stdout);
        match parsed {
            Ok(Value::Object(o)) => {
                let text = |k: &str| {
                    o.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                Failure::new(
                    o.get("code")
                        .and_then(Value::as_u64)
                        .and_then(|c| u32::try_from(c).ok())
                        .unwrap_or(0),
                    text("msg"),
                    text("details"),
                )
            }
            _ => Failure::new(
                0,
                format!(
                    "netplugin failed but error parsing its diagnostic message {}",
                    gojson::quote(&String::from_utf8_lossy(stdout))
                ),
                "",
            ),
        }
    }

    /// `types.Error.Print()`: `{"code", "msg", "details"}`, no `cniVersion`, indented.
    pub(crate) fn to_stdout(&self) -> Vec<u8> {
        let mut o = Map::new();
        o.insert("code".into(), json!(self.code));
        o.insert("msg".into(), json!(self.msg));
        if !self.details.is_empty() {
            o.insert("details".into(), json!(self.details));
        }
        gojson::marshal_indent(&Value::Object(o))
    }
}

/// A built-in's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Add,
    Check,
    Del,
    Gc,
    Status,
}

/// What a command gets: the `CNI_*` variables and the parsed configuration.
#[derive(Debug, Clone)]
pub(crate) struct Invocation {
    pub(crate) command: Command,
    pub(crate) container_id: String,
    pub(crate) netns: String,
    pub(crate) ifname: String,
    pub(crate) cni_args: String,
    pub(crate) config: Map<String, Value>,
    /// `cniVersion` as written, `""` when absent.
    pub(crate) version: String,
}

/// What a run that succeeded wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

/// The last value of `name` in `env`, `""` when unset (Go's `os.Getenv`).
fn getenv<'a>(env: &'a [(String, String)], name: &str) -> &'a str {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Reads and checks the invocation as the skeleton does, up to the call of a command.
/// `Ok(Err(outcome))` is an invocation that ends without calling one (VERSION, no command).
pub(crate) fn prepare(
    env: &[(String, String)],
    stdin: &[u8],
    about: &str,
) -> Result<Result<Invocation, Outcome>, Failure> {
    let command = getenv(env, "CNI_COMMAND");
    let required = |add, check, del| match command {
        "ADD" => add,
        "CHECK" => check,
        "DEL" => del,
        _ => false,
    };
    let vars = [
        ("CNI_COMMAND", true),
        ("CNI_CONTAINERID", required(true, true, true)),
        ("CNI_NETNS", required(true, true, false)),
        ("CNI_IFNAME", required(true, true, true)),
        ("CNI_ARGS", false),
        ("CNI_PATH", required(true, true, true)),
    ];
    let missing: Vec<&str> = vars
        .iter()
        .filter(|(name, needed)| *needed && getenv(env, name).is_empty())
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        if command.is_empty() {
            return Ok(Err(Outcome {
                stdout: Vec::new(),
                stderr: about.to_owned(),
            }));
        }
        return Err(Failure::new(
            4,
            format!("required env variables [{}] missing", missing.join(",")),
            "",
        ));
    }
    if command == "VERSION" {
        let answer = json!({"cniVersion": "1.1.0", "supportedVersions": VERSIONS});
        let mut stdout = serde_json::to_vec(&answer).unwrap_or_default();
        stdout.push(b'\n');
        return Ok(Err(Outcome {
            stdout,
            stderr: String::new(),
        }));
    }
    let config = decode_config(stdin)?;
    let name = match gojson::field(&config, "name") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(Failure::new(
                6,
                format!(
                    "error unmarshall network config: json: cannot unmarshal {} into Go struct field .name of type string",
                    gojson::kind(other)
                ),
                "",
            ));
        }
    };
    if name.is_empty() {
        return Err(Failure::new(7, "missing network name", ""));
    }
    if !valid_name(&name) {
        return Err(Failure::new(
            7,
            "invalid characters found in network name",
            name,
        ));
    }
    let command = match command {
        "ADD" => Command::Add,
        "CHECK" => Command::Check,
        "DEL" => Command::Del,
        "GC" => Command::Gc,
        "STATUS" => Command::Status,
        other => {
            // The Go skeleton checks the container and the interface before it finds the
            // command unknown.
            check_container_and_ifname(env)?;
            return Err(Failure::new(4, format!("unknown CNI_COMMAND: {other}"), ""));
        }
    };
    if matches!(command, Command::Add | Command::Check | Command::Del) {
        check_container_and_ifname(env)?;
    }
    let version = decode_version(&config)?;
    check_version(command, &version)?;
    Ok(Ok(Invocation {
        command,
        container_id: getenv(env, "CNI_CONTAINERID").to_owned(),
        netns: getenv(env, "CNI_NETNS").to_owned(),
        ifname: getenv(env, "CNI_IFNAME").to_owned(),
        cni_args: getenv(env, "CNI_ARGS").to_owned(),
        config,
        version,
    }))
}

fn decode_config(stdin: &[u8]) -> Result<Map<String, Value>, Failure> {
    let value: Value = serde_json::from_slice(stdin)
        .map_err(|e| Failure::new(6, format!("error unmarshall network config: {e}"), ""))?;
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(Failure::new(
            6,
            format!(
                "error unmarshall network config: json: cannot unmarshal {} into Go value of type struct {{ Name string \"json:\\\"name\\\"\" }}",
                gojson::kind(&other)
            ),
            "",
        )),
    }
}

fn check_container_and_ifname(env: &[(String, String)]) -> Result<(), Failure> {
    let id = getenv(env, "CNI_CONTAINERID");
    if id.is_empty() {
        return Err(Failure::new(3, "missing containerID", ""));
    }
    if !valid_name(id) {
        return Err(Failure::new(4, "invalid characters in containerID", id));
    }
    let ifname = getenv(env, "CNI_IFNAME");
    if ifname.is_empty() {
        return Err(Failure::new(4, "interface name is empty", ""));
    }
    if ifname.len() > 15 {
        return Err(Failure::new(
            4,
            "interface name is too long",
            "interface name should be less than 16 characters",
        ));
    }
    if ifname == "." || ifname == ".." {
        return Err(Failure::new(4, "interface name is . or ..", ""));
    }
    if ifname
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        return Err(Failure::new(
            4,
            "interface name contains / or : or whitespace characters",
            "",
        ));
    }
    Ok(())
}

/// libcni's name rule for networks and containers: `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

fn decode_version(config: &Map<String, Value>) -> Result<String, Failure> {
    match gojson::field(config, "cniVersion") {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(Failure::new(
            6,
            format!(
                "decoding version from network config: json: cannot unmarshal {} into Go struct field .cniVersion of type string",
                gojson::kind(other)
            ),
            "",
        )),
    }
}

fn check_version(command: Command, version: &str) -> Result<(), Failure> {
    // The skeleton reads an absent version as 0.1.0.
    let effective = if version.is_empty() { "0.1.0" } else { version };
    let decoding = |e: String| Failure::new(6, e, "");
    match command {
        Command::Check => {
            if !at_least(effective, "0.4.0").map_err(decoding)? {
                return Err(Failure::new(1, "config version does not allow CHECK", ""));
            }
            let mut allowed = false;
            for supported in VERSIONS {
                if at_least(supported, effective).map_err(decoding)? {
                    allowed = true;
                    break;
                }
            }
            if !allowed {
                return Err(Failure::new(1, "plugin version does not allow CHECK", ""));
            }
        }
        Command::Gc | Command::Status => {
            if !at_least(effective, "1.1.0").map_err(decoding)? {
                let what = if command == Command::Gc {
                    "GC"
                } else {
                    "STATUS"
                };
                return Err(Failure::new(
                    1,
                    format!("config version does not allow {what}"),
                    "",
                ));
            }
        }
        Command::Add | Command::Del => {}
    }
    if !VERSIONS.contains(&effective) {
        return Err(Failure::new(
            1,
            "incompatible CNI versions",
            format!(
                "config is {}, plugin supports {}",
                gojson::quote(effective),
                gojson::quote_list(VERSIONS)
            ),
        ));
    }
    Ok(())
}

/// libcni's `version.ParseVersion`.
fn parse_version(version: &str) -> Result<[i64; 3], String> {
    if version.is_empty() {
        return Err(format!(
            "invalid version {}: the version is empty",
            gojson::quote(version)
        ));
    }
    let parts: Vec<&str> = version.split('.').collect();
    if parts.len() >= 4 {
        return Err(format!(
            "invalid version {}: too many parts",
            gojson::quote(version)
        ));
    }
    let mut out = [0; 3];
    for (i, (part, what)) in parts.iter().zip(["major", "minor", "micro"]).enumerate() {
        out[i] = atoi(part).map_err(|e| {
            format!(
                "failed to convert {what} version part {}: {e}",
                gojson::quote(part)
            )
        })?;
    }
    Ok(out)
}

/// Go's `strconv.Atoi`, with its error text.
pub(crate) fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.Atoi: parsing {}: invalid syntax",
            gojson::quote(s)
        ));
    }
    s.parse::<i64>().map_err(|_| {
        format!(
            "strconv.Atoi: parsing {}: value out of range",
            gojson::quote(s)
        )
    })
}

/// libcni's `version.GreaterThanOrEqualTo`.
pub(crate) fn at_least(version: &str, other: &str) -> Result<bool, String> {
    Ok(parse_version(version)? >= parse_version(other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn add_env() -> Vec<(String, String)> {
        env(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_NETNS", "/run/netns/x"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/usr/lib/cni"),
        ])
    }

    fn code(env: &[(String, String)], stdin: &str) -> u32 {
        prepare(env, stdin.as_bytes(), "about").unwrap_err().code
    }

    #[test]
    fn the_skeletons_codes() {
        let ok = r#"{"cniVersion":"0.4.0","name":"n"}"#;
        assert!(matches!(prepare(&add_env(), ok.as_bytes(), ""), Ok(Ok(_))));
        assert_eq!(code(&add_env(), "{"), 6);
        assert_eq!(code(&add_env(), r#"{"name":5}"#), 6);
        assert_eq!(code(&add_env(), r#"{"cniVersion":"0.4.0"}"#), 7);
        assert_eq!(code(&add_env(), r#"{"name":"a b"}"#), 7);
        assert_eq!(code(&add_env(), r#"{"name":"n","cniVersion":5}"#), 6);
        assert_eq!(code(&add_env(), r#"{"name":"n","cniVersion":"9.9.9"}"#), 1);
        let mut no_path = add_env();
        no_path.retain(|(k, _)| k != "CNI_PATH");
        let err = prepare(&no_path, ok.as_bytes(), "").unwrap_err();
        assert_eq!(err.msg, "required env variables [CNI_PATH] missing");
        let mut check = add_env();
        check[0].1 = "CHECK".into();
        assert_eq!(code(&check, r#"{"name":"n","cniVersion":"0.3.1"}"#), 1);
        assert_eq!(code(&check, r#"{"name":"n","cniVersion":"x"}"#), 6);
    }

    #[test]
    fn no_command_prints_the_about_text() {
        let out = prepare(&[], b"", "about").unwrap().unwrap_err();
        assert_eq!(out.stderr, "about");
        assert!(out.stdout.is_empty());
    }

    #[test]
    fn errors_print_like_go() {
        let text = Failure::new(7, "missing network name", "").to_stdout();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "{\n    \"code\": 7,\n    \"msg\": \"missing network name\"\n}"
        );
    }

    #[test]
    fn versions_compare_like_libcni() {
        assert_eq!(at_least("1.0.0", "0.4.0"), Ok(true));
        assert_eq!(at_least("0.3.1", "0.4.0"), Ok(false));
        assert!(at_least("1.x", "0.4.0").unwrap_err().contains("minor"));
    }
}

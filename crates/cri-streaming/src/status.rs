//! What the error stream carries when an exec or attach ends.
//!
//! Protocol v4 and later (`v4.channel.k8s.io`, `v5.channel.k8s.io`, and the WebSocket v4
//! variants) write a `metav1.Status` as JSON, which client-go turns into the exit code `kubectl
//! exec` returns. v1 to v3 write nothing on success and the status's message as plain text on
//! failure. The JSON is byte for byte what kubelet's `json.Marshal` writes: fields in
//! `metav1.Status`'s order, empty ones left out, strings escaped as Go escapes them.

/// How an exec or attach ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitStatus {
    /// The command exited 0.
    Success,
    /// The command exited with `code`. `detail` is the runtime's error text, which kubelet puts
    /// after "command terminated with non-zero exit code: " (CRI-O's reads
    /// "command terminated with exit code N"); clients read only the code.
    NonZeroExit {
        /// The exit code.
        code: i32,
        /// The runtime's error text.
        detail: String,
    },
    /// The command could not be run or waited for.
    Internal {
        /// What went wrong (kubelet prefixes "error executing command in container: ").
        error: String,
    },
    /// An attach failed.
    AttachFailed {
        /// What went wrong (kubelet prefixes "error attaching to container: ").
        error: String,
    },
}

impl ExitStatus {
    /// A non-zero exit with CRI-O's detail text.
    pub fn exit_code(code: i32) -> ExitStatus {
        if code == 0 {
            return ExitStatus::Success;
        }
        ExitStatus::NonZeroExit {
            code,
            detail: format!("command terminated with exit code {code}"),
        }
    }

    /// The status as v4 and later write it on the error stream.
    pub fn v4_json(&self) -> String {
        match self {
            ExitStatus::Success => r#"{"metadata":{},"status":"Success"}"#.to_owned(),
            ExitStatus::NonZeroExit { code, .. } => format!(
                r#"{{"metadata":{{}},"status":"Failure","message":{},"reason":"NonZeroExitCode","details":{{"causes":[{{"reason":"ExitCode","message":"{code}"}}]}}}}"#,
                go_json_string(&self.message()),
            ),
            ExitStatus::Internal { .. } | ExitStatus::AttachFailed { .. } => {
                let cause = self.internal_cause();
                format!(
                    r#"{{"metadata":{{}},"status":"Failure","message":{},"reason":"InternalError","details":{{"causes":[{{"message":{}}}]}},"code":500}}"#,
                    go_json_string(&self.message()),
                    go_json_string(&cause),
                )
            }
        }
    }

    /// The text v1 to v3 write on the error stream: none on success.
    pub fn v1_text(&self) -> Option<String> {
        match self {
            ExitStatus::Success => None,
            _ => Some(self.message()),
        }
    }

    /// The status's message (what `StatusError.Error()` returns).
    fn message(&self) -> String {
        match self {
            ExitStatus::Success => String::new(),
            ExitStatus::NonZeroExit { detail, .. } => {
                format!("command terminated with non-zero exit code: {detail}")
            }
            ExitStatus::Internal { .. } | ExitStatus::AttachFailed { .. } => {
                format!("Internal error occurred: {}", self.internal_cause())
            }
        }
    }

    /// The cause kubelet wraps in an internal error.
    fn internal_cause(&self) -> String {
        match self {
            ExitStatus::AttachFailed { error } => format!("error attaching to container: {error}"),
            ExitStatus::Internal { error } => {
                format!("error executing command in container: {error}")
            }
            ExitStatus::Success | ExitStatus::NonZeroExit { .. } => String::new(),
        }
    }
}

/// `s` as a JSON string the way Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029
/// escaped as `\u....` (its HTML-safe default), control characters as `\n`, `\r`, `\t`, `\b`,
/// `\f` or `\u00xx`.
pub fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => unicode_escape(&mut out, c),
            c if u32::from(c) < 0x20 => unicode_escape(&mut out, c),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn unicode_escape(out: &mut String, c: char) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u");
    let n = u32::from(c);
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[((n >> shift) & 0xf) as usize]));
    }
}

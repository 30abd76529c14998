//! JSON as Go's `encoding/json` reads and writes it, so the built-ins see the same configuration
//! and print the same bytes as the reference plugins.
//!
//! Reading: Go matches object keys to struct fields ignoring case, and when several keys match
//! one field the last one wins; `null` leaves a field as it was. Writing: `json.MarshalIndent`
//! with four spaces, and Go 1.19's escaping (cni-types' `go_json`: `<`, `>`, `&`, U+2028, U+2029 and control
//! characters other than `\n`, `\r` and `\t` as `\u00xx`).

use std::fmt::Write as _;

use cni_types::go_json::{self, Escaping};
use serde_json::{Map, Value};

/// Debian 12's plugins are built with Go 1.19.
const ESCAPING: Escaping = Escaping::BeforeGo122;

/// The value Go would decode into the field named `key` of a struct: the last key of `object`
/// equal to `key` ignoring ASCII case whose value is not `null`.
pub(crate) fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object
        .iter()
        .rfind(|(k, v)| k.eq_ignore_ascii_case(key) && !v.is_null())
        .map(|(_, v)| v)
}

/// Go's name for the JSON type of `value`, as its "cannot unmarshal X into" errors say it.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `value` as `json.MarshalIndent(value, "", "    ")` writes it (no trailing newline).
pub(crate) fn marshal_indent(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.into_bytes()
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("    ");
    }
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => go_json::write_number(out, n),
        Value::String(s) => go_json::write_string(out, s, ESCAPING),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                go_json::write_string(out, key, ESCAPING);
                out.push_str(": ");
                write_value(out, item, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

/// Go's `%q` of a string (`strconv.Quote`) for the characters that occur in practice: quotes,
/// backslashes and control characters escaped, everything printable kept.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_control() => {
                let n = c as u32;
                let _ = if n < 0x80 {
                    write!(out, "\\x{n:02x}")
                } else if n < 0x1_0000 {
                    write!(out, "\\u{n:04x}")
                } else {
                    write!(out, "\\U{n:08x}")
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub(crate) fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn indents_like_marshal_indent() {
        let v = json!({"cniVersion": "1.0.0", "ips": [{"interface": 0, "address": "10.0.0.2/24"}], "dns": {}, "e": []});
        let text = String::from_utf8(marshal_indent(&v)).unwrap();
        assert_eq!(
            text,
            "{\n    \"cniVersion\": \"1.0.0\",\n    \"ips\": [\n        {\n            \"interface\": 0,\n            \"address\": \"10.0.0.2/24\"\n        }\n    ],\n    \"dns\": {},\n    \"e\": []\n}"
        );
    }

    #[test]
    fn escapes_like_go() {
        let text = marshal_indent(&json!("<a&b>\u{8}\u{2028}\"\\\n"));
        assert_eq!(
            String::from_utf8(text).unwrap(),
            r#""\u003ca\u0026b\u003e\u0008\u2028\"\\\n""#
        );
    }

    #[test]
    fn fields_fold_case_and_the_last_wins() {
        let v = json!({"Name": "a", "name": "b", "NAME": null});
        let Value::Object(map) = v else {
            unreachable!()
        };
        assert_eq!(field(&map, "name"), Some(&json!("b")));
        assert_eq!(field(&map, "type"), None);
    }

    #[test]
    fn quotes_like_percent_q() {
        assert_eq!(quote_list(&["a=b", "c\"d"]), r#"["a=b" "c\"d"]"#);
    }
}

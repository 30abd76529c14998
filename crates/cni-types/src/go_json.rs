//! JSON written the way Go's `encoding/json` writes it, so bytes Rust writes for a Go reader (a
//! promoted `.conf` libcni caches, a plugin's result) are the bytes Go would have written.
//!
//! Go writes no spaces in `Marshal` (four-space indents in the plugins' `MarshalIndent`),
//! escapes `<`, `>`, `&`, U+2028 and U+2029, and holds every number of an `interface{}` as a
//! float64: integers beyond 2^53 lose precision, `1.0` prints as `1`, and exponents appear below
//! 1e-6 and from 1e21 on (`1e-7`, `1e+21`). A map's keys are sorted byte-wise ([`marshal`]); a
//! struct's fields keep their order (the caller writes them, with [`write_string`] and
//! [`write_number`]). Which Go wrote it matters for two characters ([`Escaping`]).

use std::fmt::Write as _;

use serde_json::{Number, Value};

/// How backspace and form feed are escaped: Go 1.22 began to write `\b` and `\f`; earlier
/// releases (Debian 12's CNI plugins are built with Go 1.19) wrote `\u0008` and `\u000c`, as
/// every other control character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escaping {
    /// Go 1.22 and later.
    Go122,
    /// Go before 1.22.
    BeforeGo122,
}

/// `value` encoded as Go's `json.Marshal` would encode it after `json.Unmarshal` into
/// `interface{}` (object keys sorted).
pub fn marshal(value: &Value, escaping: Escaping) -> String {
    let mut out = String::new();
    write_value(&mut out, value, escaping);
    out
}

fn write_value(out: &mut String, value: &Value, escaping: Escaping) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s, escaping),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, escaping);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key, escaping);
                out.push(':');
                write_value(out, item, escaping);
            }
            out.push('}');
        }
    }
}

/// Appends `n` as Go prints a float64 (integers up to 2^53 exactly).
pub fn write_number(out: &mut String, n: &Number) {
    const EXACT: u64 = 1 << 53;
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        let _ = write!(out, "{u}");
    } else if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        let _ = write!(out, "{i}");
    } else if let Some(f) = n.as_f64() {
        write_float(out, f);
    }
}

/// Go's float64 encoder: shortest digits, plain notation in [1e-6, 1e21), else `e` notation with a
/// sign and at least two exponent digits for positive exponents.
fn write_float(out: &mut String, f: f64) {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        let _ = write!(out, "{f}");
        return;
    }
    let text = format!("{f:e}");
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < 0 {
        let _ = write!(out, "{mantissa}e-{}", exp.unsigned_abs());
    } else {
        let _ = write!(out, "{mantissa}e+{exp:02}");
    }
}

/// Appends `s` as a JSON string with Go's escaping.
pub fn write_string(out: &mut String, s: &str, escaping: Escaping) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' if escaping == Escaping::Go122 => out.push_str("\\b"),
            '\u{c}' if escaping == Escaping::Go122 => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go_encoding_json() {
        // Expected strings are what Go 1.22+ prints for json.Marshal of the decoded value.
        let cases = [
            (
                r#"{"b":1,"a":{"z":true,"B":null}}"#,
                r#"{"a":{"B":null,"z":true},"b":1}"#,
            ),
            ("[1.0, 2.5, -0.0, 100]", "[1,2.5,-0,100]"),
            (
                "[1e21, 1e-7, 1.5e-10, 0.000001, 123456789e12]",
                "[1e+21,1e-7,1.5e-10,0.000001,123456789000000000000]",
            ),
            (
                "[9007199254740993, -9007199254740993, 18446744073709551615]",
                "[9007199254740992,-9007199254740992,18446744073709552000]",
            ),
            (
                r#"["<a&b>", "\u2028", "\u0001\b\f\n", "é\"\\"]"#,
                r#"["\u003ca\u0026b\u003e","\u2028","\u0001\b\f\n","é\"\\"]"#,
            ),
        ];
        for (input, want) in cases {
            let value: Value = serde_json::from_str(input).unwrap();
            assert_eq!(marshal(&value, Escaping::Go122), want, "{input}");
        }
    }

    #[test]
    fn go_before_1_22_escapes_backspace_and_form_feed_as_unicode() {
        let value = Value::String("\u{8}\u{c}\u{1}".into());
        assert_eq!(
            marshal(&value, Escaping::BeforeGo122),
            r#""\u0008\u000c\u0001""#
        );
        assert_eq!(marshal(&value, Escaping::Go122), r#""\b\f\u0001""#);
    }
}

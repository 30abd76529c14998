//! How `crio-lite status` prints an answer: a table for a person at a terminal, JSON or YAML for
//! a program (`--output`).

use std::fmt::Write as _;

use serde_json::Value;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned `key: value` lines, or one row per sandbox.
    #[default]
    Table,
    /// Pretty-printed JSON, as the status API answers.
    Json,
    /// YAML.
    Yaml,
}

/// `value` in `format`.
pub fn render(value: &Value, format: OutputFormat) -> String {
    match format {
        OutputFormat::Json => {
            let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
            text.push('\n');
            text
        }
        OutputFormat::Yaml => {
            let mut out = String::new();
            yaml(value, 0, &mut out);
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out
        }
        OutputFormat::Table => match value {
            Value::Array(rows) => table(rows),
            other => key_values(other),
        },
    }
}

/// Nested objects flattened to dotted keys, lists joined with commas, keys aligned.
fn key_values(value: &Value) -> String {
    let mut pairs = Vec::new();
    flatten("", value, &mut pairs);
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in pairs {
        let _ = writeln!(out, "{key:<width$}  {value}");
    }
    out
}

fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let key = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&key, value, out);
            }
        }
        other => out.push((prefix.to_owned(), scalar(other))),
    }
}

/// A value as one table cell.
fn scalar(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        Value::Object(map) if map.is_empty() => String::new(),
        other => other.to_string(),
    }
}

/// One row per object, a column per key of the first, widths fitted, keys upper-cased as
/// crictl's headers are.
fn table(rows: &[Value]) -> String {
    let Some(Value::Object(first)) = rows.first() else {
        return String::new();
    };
    let columns: Vec<&String> = first.keys().collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| row.get(c.as_str()).map(scalar).unwrap_or_default())
                .collect()
        })
        .collect();
    let headers: Vec<String> = columns.iter().map(|c| c.to_uppercase()).collect();
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].len())
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in std::iter::once(&headers).chain(cells.iter()) {
        let text: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    }
    out
}

/// Block-style YAML. Strings are written double-quoted with JSON's escapes, which YAML reads the
/// same, so no value can turn into another type or break the structure.
fn yaml(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            // The caller has put the cursor where the first key goes.
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(&pad);
                }
                let _ = write!(out, "{}:", yaml_key(key));
                nested(item, indent, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&pad);
                }
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        out.push_str("- ");
                        yaml(item, indent + 2, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str("-\n");
                        out.push_str(&" ".repeat(indent + 2));
                        yaml(item, indent + 2, out);
                    }
                    other => {
                        out.push_str("- ");
                        out.push_str(&yaml_scalar(other));
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            out.push_str(&yaml_scalar(other));
            out.push('\n');
        }
    }
}

/// What follows `key:`: a scalar on the same line, a block on the next ones.
fn nested(item: &Value, indent: usize, out: &mut String) {
    let block = match item {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    };
    if block {
        out.push('\n');
        out.push_str(&" ".repeat(indent + 2));
        yaml(item, indent + 2, out);
    } else {
        out.push(' ');
        out.push_str(&yaml_scalar(item));
        out.push('\n');
    }
}

fn yaml_scalar(value: &Value) -> String {
    match value {
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        other => other.to_string(),
    }
}

fn yaml_key(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
    if plain {
        key.to_owned()
    } else {
        serde_json::to_string(key).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Keys in sorted order, so the text is the same whether maps keep insertion order or sort.
    fn sample() -> Value {
        json!({
            "empty": {},
            "id": "abc",
            "ips": ["10.0.0.2", "fd00::2"],
            "labels": {"app": "web", "k8s.io/x y": "a: b # c"},
            "n": 3,
            "nested": [[1, 2], []],
            "networks": [{"ips": ["10.0.0.2"], "network": "crio"}, {"ips": [], "network": "n2"}],
            "none": null,
            "ok": true
        })
    }

    #[test]
    fn yaml_is_block_style_with_every_string_quoted() {
        let text = render(&sample(), OutputFormat::Yaml);
        let want = r#"empty: {}
id: "abc"
ips:
  - "10.0.0.2"
  - "fd00::2"
labels:
  app: "web"
  "k8s.io/x y": "a: b # c"
n: 3
nested:
  -
    - 1
    - 2
  - []
networks:
  - ips:
      - "10.0.0.2"
    network: "crio"
  - ips: []
    network: "n2"
none: null
ok: true
"#;
        assert_eq!(text, want, "{text}");
    }

    #[test]
    fn tables_align_keys_and_rows() {
        let text = render(
            &json!({"a": 1, "long_key": {"x": "y"}}),
            OutputFormat::Table,
        );
        assert_eq!(text, "a           1\nlong_key.x  y\n");
        let rows = json!([
            {"id": "0123", "name": "web", "ips": ["10.0.0.2"]},
            {"id": "4567", "name": "database", "ips": []}
        ]);
        assert_eq!(
            render(&rows, OutputFormat::Table),
            "ID    NAME      IPS\n0123  web       10.0.0.2\n4567  database\n"
        );
    }
}

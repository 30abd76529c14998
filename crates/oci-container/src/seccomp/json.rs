//! Reading JSON someone else wrote, with errors that say where: `syscalls[2].args[0].op: ...`.

use serde_json::{Map, Value};

/// A JSON object and where it is in the file, for errors that name the field.
pub(super) struct Obj<'a> {
    map: &'a Map<String, Value>,
    pub(super) at: String,
}

impl<'a> Obj<'a> {
    pub(super) fn new(value: &'a Value, at: String) -> Result<Obj<'a>, String> {
        match value {
            Value::Object(map) => Ok(Obj { map, at }),
            other => Err(format!(
                "{}: expected an object, found {}",
                if at.is_empty() { "profile" } else { &at },
                kind(other)
            )),
        }
    }

    pub(super) fn field(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    /// The field's value; `null` counts as missing, as in Go's decoding.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn str(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.expected(key, "a string", other)),
        }
    }

    pub(super) fn u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.expected(key, "an unsigned integer", v)),
        }
    }

    pub(super) fn obj(&self, key: &str) -> Result<Option<Obj<'a>>, String> {
        self.get(key)
            .map(|v| Obj::new(v, self.field(key)))
            .transpose()
    }

    pub(super) fn array(&self, key: &str) -> Result<&'a [Value], String> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(self.expected(key, "an array", other)),
        }
    }

    pub(super) fn strings(&self, key: &str) -> Result<Vec<&'a str>, String> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().ok_or_else(|| {
                    format!(
                        "{}[{i}]: expected a string, found {}",
                        self.field(key),
                        kind(v)
                    )
                })
            })
            .collect()
    }

    fn expected(&self, key: &str, what: &str, found: &Value) -> String {
        format!(
            "{}: expected {what}, found {}",
            self.field(key),
            kind(found)
        )
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "an unsigned integer",
        Value::Number(_) => "a negative or fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

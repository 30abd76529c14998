//! "Did you mean": the known key an unknown one is probably a typo or an old name of.

use super::load::{join, lookup};

/// Names of crio-lite before 0.x's CRI-O layout, and where they went.
const RENAMED: &[(&str, &str)] = &[
    ("socket", "crio.api.listen"),
    ("state_dir", "crio.root"),
    ("run_dir", "crio.runroot"),
    ("default_network", "crio.network.cni_default_network"),
    ("daemon", "crio"),
];

/// A known key (or table) `name` under `prefix` probably meant: the closest name in the same table,
/// else a key or table of the same or a close name anywhere, else where an old name went.
pub(super) fn suggest(schema: &toml::Table, prefix: &str, name: &str) -> Option<String> {
    let limit = (name.chars().count() / 3).max(1);
    let closest = |candidates: Vec<String>| {
        candidates
            .into_iter()
            .map(|path| {
                let last = path.rsplit('.').next().unwrap_or(&path).to_owned();
                (distance(name, &last), path)
            })
            .filter(|(d, _)| *d <= limit)
            .min_by_key(|(d, _)| *d)
            .map(|(_, path)| path)
    };
    let siblings = match prefix {
        "" => Some(schema),
        prefix => lookup(schema, prefix).and_then(toml::Value::as_table),
    };
    let siblings: Vec<String> = siblings
        .into_iter()
        .flat_map(|table| table.keys().map(|k| join(prefix, k)))
        .collect();
    let mut everywhere = Vec::new();
    paths(schema, "", &mut everywhere);
    closest(siblings)
        .or_else(|| closest(everywhere))
        .or_else(|| {
            RENAMED
                .iter()
                .map(|(old, new)| (distance(name, old), new))
                .filter(|(d, _)| *d <= limit)
                .min_by_key(|(d, _)| *d)
                .map(|(_, new)| (*new).to_owned())
        })
}

/// Every key and table path of `table`.
fn paths(table: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (name, value) in table {
        let path = join(prefix, name);
        if let toml::Value::Table(sub) = value {
            paths(sub, &path, out);
        }
        out.push(path);
    }
}

/// Levenshtein distance, by characters.
pub(super) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

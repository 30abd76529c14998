//! `cargo xtask tidy`: the architecture's invariants, checked mechanically.
//!
//! ARCHITECTURE.md says which crate may depend on which, that crio-lite's domain knows nothing of
//! gRPC or CRI, which crates may spawn processes or mount, and STYLE.md that a lint is silenced
//! with `#[expect(..., reason)]`, never `#[allow]`. Prose drifts; these checks do not. Each
//! failure names the rule and where it is written, so whoever trips it reads the reasoning before
//! changing either the code or the rule. Run first in `cargo xtask test`: it takes a second.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd::workspace_root;

pub(crate) const USAGE: &str = "usage: cargo xtask tidy

The architecture's invariants, checked over the source tree (also the first step of
`cargo xtask test`):
  - the crate dependency graph (ARCHITECTURE.md, \"Bird's-eye view\": arrows point one way);
  - no tonic or CRI type under crates/crio-lite/src/domain/ (ARCHITECTURE.md, crio-lite);
  - processes are spawned and file systems mounted only by the crates allowed to;
  - lints are silenced with #[expect(..., reason = \"...\")], never #[allow] (STYLE.md).";

/// Where the dependency rule is written.
const GRAPH_RULE: &str = "ARCHITECTURE.md, \"Bird's-eye view\" (arrows point one way)";
/// Where the domain rule is written.
const DOMAIN_RULE: &str = "ARCHITECTURE.md, \"crates/crio-lite\" (the domain speaks its own types)";
/// Where the process and mount rule is written.
const SYSCALL_RULE: &str = "ARCHITECTURE.md, \"Cross-cutting concerns\" (processes and mounts)";
/// Where the lint rule is written.
const LINT_RULE: &str =
    "../shared/STYLE.md, \"Cargo.toml\" and ARCHITECTURE.md, \"Cross-cutting concerns\"";

/// For each workspace crate, the workspace crates it may depend on (normal and build
/// dependencies). A crate missing here fails the check: a new crate takes its place in the graph
/// on purpose. `test-support` may only ever be a dev-dependency, but of the tools ([`TOOLS`]).
const GRAPH: &[(&str, &[&str])] = &[
    ("cni-types", &[]),
    ("safe-file", &[]),
    ("node-primitives", &[]),
    ("cri-api", &[]),
    ("test-support", &["node-primitives"]),
    ("xtask", &[]),
    ("h2-front", &["node-primitives"]),
    ("cri-streaming", &["node-primitives"]),
    ("cni-lock", &[]),
    ("cni-config", &["cni-types", "safe-file"]),
    ("cni-watch", &["cni-types", "node-primitives"]),
    (
        "cni-exec",
        &["cni-types", "cni-config", "safe-file", "node-primitives"],
    ),
    (
        "cni-builtin",
        &["cni-types", "cni-exec", "cni-lock", "node-primitives"],
    ),
    (
        "ocicni",
        &[
            "cni-types",
            "cni-config",
            "cni-exec",
            "cni-watch",
            "cni-lock",
            "cni-builtin",
            "node-primitives",
        ],
    ),
    ("ocicnitool", &["ocicni"]),
    ("image-store", &["safe-file", "node-primitives"]),
    ("oci-container", &["safe-file", "node-primitives"]),
    (
        "crio-lite",
        &[
            "cri-api",
            "ocicni",
            "image-store",
            "oci-container",
            "h2-front",
            "cri-streaming",
            "node-primitives",
            "safe-file",
        ],
    ),
    (
        "ocicni-fuzz",
        &[
            "cni-types",
            "cni-config",
            "cni-exec",
            "ocicni",
            "cri-api",
            "crio-lite",
            "oci-container",
            "image-store",
            "h2-front",
            "cri-streaming",
            "cni-builtin",
        ],
    ),
    (
        "benches",
        &[
            "cri-api",
            "ocicni",
            "image-store",
            "oci-container",
            "h2-front",
            "node-primitives",
            "test-support",
        ],
    ),
];

/// The crates whose library code may start processes. cni-builtin runs iptables-save and
/// iptables-restore (bridge `ipMasq`): netfilter has no stable netlink interface for rules, and
/// the Go plugins it must match byte for byte drive the same tools.
const MAY_SPAWN: &[&str] = &[
    "cni-exec",
    "cni-builtin",
    "oci-container",
    "node-primitives",
];
/// The crates whose library code may mount or unmount file systems.
const MAY_MOUNT: &[&str] = &["image-store", "oci-container", "ocicni", "node-primitives"];
/// Crates that are tools rather than libraries: they spawn and mount as tests and benches do.
const TOOLS: &[&str] = &["test-support", "benches", "xtask", "ocicni-fuzz"];
/// Files where `#[allow]` stays, and why: `expect` would fail on a lint the generated code does
/// not trip in a given build.
const ALLOW_EXEMPT: &[(&str, &str)] = &[(
    "crates/cri-api/src/lib.rs",
    "code generated from the CRI proto: which lints it trips varies with the proto",
)];

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The file or crate at fault, and the line where there is one.
    pub(crate) place: String,
    /// What is wrong.
    pub(crate) what: String,
    /// Where the rule is written.
    pub(crate) rule: &'static str,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}\n    (the rule: {})",
            self.place, self.what, self.rule
        )
    }
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(arg) = args.first() {
        bail!("tidy: unknown argument {arg:?}");
    }
    println!("\n=== tidy (the architecture's invariants) ===");
    let root = workspace_root();
    let mut found = check_graph(&workspace_graph()?);
    let files = source_files(&root)?;
    found.extend(check_domain(&files));
    found.extend(check_syscalls(&files));
    found.extend(check_lints(&files));
    if found.is_empty() {
        println!("xtask: tidy: {} files, every invariant holds", files.len());
        return Ok(());
    }
    for v in &found {
        eprintln!("tidy: {v}");
    }
    bail!("tidy: {} invariant(s) broken (above)", found.len())
}

/// A workspace crate's dependencies on other workspace crates.
#[derive(Debug, Default, Clone)]
pub(crate) struct Deps {
    /// Normal and build dependencies.
    pub(crate) normal: Vec<String>,
    /// Dev-dependencies.
    pub(crate) dev: Vec<String>,
}

/// The workspace's crates and their workspace dependencies, from `cargo metadata`.
fn workspace_graph() -> Result<BTreeMap<String, Deps>> {
    let meta = crate::cmd::workspace_metadata()?;
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    let mut graph = BTreeMap::new();
    for p in &packages {
        let mut deps = Deps::default();
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let Some(name) = d["name"].as_str() else {
                continue;
            };
            if !names.iter().any(|n| n == name) {
                continue;
            }
            if d["kind"].as_str() == Some("dev") {
                deps.dev.push(name.to_owned());
            } else {
                deps.normal.push(name.to_owned());
            }
        }
        if let Some(name) = p["name"].as_str() {
            graph.insert(name.to_owned(), deps);
        }
    }
    Ok(graph)
}

/// Every edge of `graph` is one [`GRAPH`] allows.
pub(crate) fn check_graph(graph: &BTreeMap<String, Deps>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (krate, deps) in graph {
        let Some((_, allowed)) = GRAPH.iter().find(|(name, _)| name == krate) else {
            found.push(Violation {
                place: format!("crate {krate}"),
                what:
                    "has no place in the dependency graph: give it one in ARCHITECTURE.md and in \
                       xtask/src/tidy.rs (GRAPH)"
                        .into(),
                rule: GRAPH_RULE,
            });
            continue;
        };
        for dep in &deps.normal {
            if dep == "test-support" && !TOOLS.contains(&krate.as_str()) {
                found.push(Violation {
                    place: format!("crate {krate}"),
                    what: "depends on test-support outside [dev-dependencies]".into(),
                    rule: GRAPH_RULE,
                });
            } else if !allowed.contains(&dep.as_str()) {
                found.push(Violation {
                    place: format!("crate {krate}"),
                    what: format!(
                        "depends on {dep}, which the graph does not allow (it may depend on: {})",
                        if allowed.is_empty() {
                            "no workspace crate".to_owned()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                    rule: GRAPH_RULE,
                });
            }
        }
    }
    found
}

/// A source file: its path from the workspace root, its crate, its text with test code cut
/// away (for the rules about library code) and whole (for the lint rule).
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) path: String,
    pub(crate) krate: String,
    /// Under the crate's `src/`, and not a test module.
    pub(crate) library: bool,
    pub(crate) text: String,
}

impl Source {
    /// A file at `path` (from the workspace root) holding `text`.
    pub(crate) fn new(path: &str, text: &str) -> Source {
        let parts: Vec<&str> = path.split('/').collect();
        let krate = match parts.as_slice() {
            ["crates", name, ..] => (*name).to_owned(),
            [first, ..] => (*first).to_owned(),
            [] => String::new(),
        };
        let file = parts.last().copied().unwrap_or_default();
        let in_src =
            parts.get(2) == Some(&"src") || (krate == "xtask" && parts.get(1) == Some(&"src"));
        let test_file =
            file == "tests.rs" || file.ends_with("_tests.rs") || parts.contains(&"tests");
        Source {
            path: path.to_owned(),
            krate,
            library: in_src && !test_file,
            text: text.to_owned(),
        }
    }

    /// The lines of library code: numbered from 1, stopping at a `#[cfg(test)]` module.
    fn library_lines(&self) -> impl Iterator<Item = (usize, &str)> {
        let mut in_tests = false;
        let mut previous_cfg_test = false;
        self.text.lines().enumerate().filter_map(move |(i, line)| {
            let t = line.trim_start();
            if previous_cfg_test && (t.starts_with("mod ") || t.starts_with("pub(crate) mod ")) {
                in_tests = true;
            }
            previous_cfg_test = t.starts_with("#[cfg(test)]");
            let code = !t.starts_with("//");
            (!in_tests && code).then_some((i + 1, line))
        })
    }
}

/// The `.rs` files of the workspace's crates, xtask and the fuzz targets.
fn source_files(root: &Path) -> Result<Vec<Source>> {
    let mut paths = Vec::new();
    for top in ["crates", "xtask", "fuzz"] {
        collect_rs(&root.join(top), &mut paths)?;
    }
    let mut files = Vec::new();
    for path in paths {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        files.push(Source::new(&rel, &text));
    }
    Ok(files)
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        let name = entry.file_name();
        if kind.is_dir() {
            if name == "target" || name == "corpus" || name == "artifacts" {
                continue;
            }
            collect_rs(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Nothing under crio-lite's `src/domain/` names tonic or the CRI types.
pub(crate) fn check_domain(files: &[Source]) -> Vec<Violation> {
    let mut found = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.path.starts_with("crates/crio-lite/src/domain/"))
    {
        for (n, line) in f.library_lines() {
            for word in ["tonic", "cri_api", "runtime_v1"] {
                if contains_word(line, word) {
                    found.push(Violation {
                        place: format!("{}:{n}", f.path),
                        what: format!(
                            "the domain names `{word}`: CRI and gRPC types end at src/cri/"
                        ),
                        rule: DOMAIN_RULE,
                    });
                }
            }
        }
    }
    found
}

/// Library code spawns processes and mounts only in the crates allowed to.
pub(crate) fn check_syscalls(files: &[Source]) -> Vec<Violation> {
    const SPAWN: &[&str] = &["process::Command", "Command::new(", "tokio::process"];
    const MOUNT: &[&str] = &[
        "nix::mount",
        "rustix::mount",
        "libc::mount",
        "umount2(",
        "move_mount(",
        "fsmount(",
    ];
    let mut found = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.library && !TOOLS.contains(&f.krate.as_str()))
    {
        for (n, line) in f.library_lines() {
            if !MAY_SPAWN.contains(&f.krate.as_str())
                && let Some(hit) = SPAWN.iter().find(|p| line.contains(*p))
            {
                found.push(Violation {
                    place: format!("{}:{n}", f.path),
                    what: format!(
                        "`{hit}` in {}: only {} start processes",
                        f.krate,
                        MAY_SPAWN.join(", ")
                    ),
                    rule: SYSCALL_RULE,
                });
            }
            if !MAY_MOUNT.contains(&f.krate.as_str())
                && let Some(hit) = MOUNT.iter().find(|p| line.contains(*p))
            {
                found.push(Violation {
                    place: format!("{}:{n}", f.path),
                    what: format!(
                        "`{hit}` in {}: only {} mount",
                        f.krate,
                        MAY_MOUNT.join(", ")
                    ),
                    rule: SYSCALL_RULE,
                });
            }
        }
    }
    found
}

/// `#[expect(..., reason = "...")]`, never `#[allow(...)]` nor an `expect` without a reason.
pub(crate) fn check_lints(files: &[Source]) -> Vec<Violation> {
    let mut found = Vec::new();
    for f in files {
        if ALLOW_EXEMPT.iter().any(|(path, _)| *path == f.path) {
            continue;
        }
        for (start, attr) in attributes(&f.text) {
            let inner = attr.trim_start_matches("#!").trim_start_matches('#');
            let inner = inner.trim_start_matches('[').trim_start();
            if inner.starts_with("allow(") {
                found.push(Violation {
                    place: format!("{}:{start}", f.path),
                    what: "#[allow(...)]: use #[expect(..., reason = \"...\")], which also says \
                           when the exception is no longer needed"
                        .into(),
                    rule: LINT_RULE,
                });
            } else if inner.starts_with("expect(") && !attr.contains("reason") {
                found.push(Violation {
                    place: format!("{}:{start}", f.path),
                    what:
                        "#[expect(...)] without `reason = \"...\"`: say why the lint is wrong here"
                            .into(),
                    rule: LINT_RULE,
                });
            }
        }
    }
    found
}

/// The attributes (`#[...]` and `#![...]`) of `text` that start a line, with their first line's
/// number, each whole even where it spans lines.
fn attributes(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if t.starts_with("#[") || t.starts_with("#![") {
            let start = i;
            let mut attr = t.to_owned();
            let mut depth = bracket_depth(t);
            while depth > 0 && i + 1 < lines.len() {
                i += 1;
                attr.push(' ');
                attr.push_str(lines[i].trim());
                depth += bracket_depth(lines[i]);
            }
            out.push((start + 1, attr));
        }
        i += 1;
    }
    out
}

fn bracket_depth(line: &str) -> i32 {
    line.chars()
        .map(|c| match c {
            '[' => 1,
            ']' => -1,
            _ => 0,
        })
        .sum()
}

/// `word` in `line` as an identifier (not inside a longer one).
fn contains_word(line: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str], &[&str])]) -> BTreeMap<String, Deps> {
        edges
            .iter()
            .map(|(name, normal, dev)| {
                (
                    (*name).to_owned(),
                    Deps {
                        normal: normal.iter().map(|s| (*s).to_owned()).collect(),
                        dev: dev.iter().map(|s| (*s).to_owned()).collect(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn the_graph_holds_and_a_backward_arrow_is_named() {
        let ok = graph(&[
            ("cni-types", &[], &[]),
            ("ocicni", &["cni-exec", "cni-types"], &["test-support"]),
        ]);
        assert!(check_graph(&ok).is_empty());
        let bad = graph(&[("cni-types", &["ocicni"], &[])]);
        let v = check_graph(&bad);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("depends on ocicni"), "{}", v[0]);
        assert!(v[0].to_string().contains("ARCHITECTURE.md"), "{}", v[0]);
    }

    #[test]
    fn node_primitives_depends_on_no_workspace_crate() {
        let v = check_graph(&graph(&[("node-primitives", &["safe-file"], &[])]));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("no workspace crate"), "{}", v[0]);
    }

    #[test]
    fn test_support_is_only_a_dev_dependency() {
        let v = check_graph(&graph(&[("ocicni", &["test-support"], &[])]));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("test-support"), "{}", v[0]);
    }

    #[test]
    fn a_crate_with_no_place_in_the_graph_is_refused() {
        let v = check_graph(&graph(&[("new-thing", &[], &[])]));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("no place"), "{}", v[0]);
    }

    #[test]
    fn tonic_under_the_domain_is_refused_and_elsewhere_is_not() {
        let domain = Source::new(
            "crates/crio-lite/src/domain/containers.rs",
            "use std::fmt;\nuse tonic::Status;\n",
        );
        let edge = Source::new(
            "crates/crio-lite/src/cri/runtime.rs",
            "use tonic::Status;\n",
        );
        let v = check_domain(&[domain, edge]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].place, "crates/crio-lite/src/domain/containers.rs:2");
        // a word that merely contains it is not the crate
        let ok = Source::new("crates/crio-lite/src/domain/x.rs", "let tonicity = 1;\n");
        assert!(check_domain(&[ok]).is_empty());
    }

    #[test]
    fn spawning_outside_the_allowed_crates_is_refused_but_tests_may() {
        let lib = Source::new(
            "crates/crio-lite/src/wiring.rs",
            "fn f() {\n    std::process::Command::new(\"ip\");\n}\n",
        );
        let v = check_syscalls(&[lib]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].place, "crates/crio-lite/src/wiring.rs:2");
        assert!(v[0].what.contains("only cni-exec"), "{}", v[0]);
        let test_module = Source::new(
            "crates/cni-lock/src/flock.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { std::process::Command::new(\"mkfifo\"); }\n}\n",
        );
        let integration = Source::new(
            "crates/crio-lite/tests/it/e2e.rs",
            "std::process::Command::new(\"crictl\");\n",
        );
        let allowed = Source::new(
            "crates/cni-exec/src/exec.rs",
            "tokio::process::Command::new(path);\n",
        );
        assert!(check_syscalls(&[test_module, integration, allowed]).is_empty());
    }

    #[test]
    fn mounting_outside_the_allowed_crates_is_refused() {
        let lib = Source::new(
            "crates/cni-exec/src/cgroup.rs",
            "use nix::mount::{mount, MsFlags};\n",
        );
        let v = check_syscalls(&[lib]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].what.contains("only image-store"), "{}", v[0]);
    }

    #[test]
    fn allow_is_refused_expect_needs_a_reason() {
        let f = Source::new(
            "crates/x/src/lib.rs",
            "#[allow(dead_code)]\nfn a() {}\n#[expect(\n    dead_code,\n    reason = \"kept for b\"\n)]\nfn b() {}\n#![expect(clippy::pedantic)]\n",
        );
        let v = check_lints(&[f]);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].place, "crates/x/src/lib.rs:1");
        assert!(v[0].what.contains("#[allow"), "{}", v[0]);
        assert_eq!(v[1].place, "crates/x/src/lib.rs:8");
        assert!(v[1].what.contains("without `reason"), "{}", v[1]);
        assert!(v[1].to_string().contains("STYLE.md"), "{}", v[1]);
    }

    #[test]
    fn the_generated_cri_code_keeps_its_allow() {
        let f = Source::new(
            "crates/cri-api/src/lib.rs",
            "#[allow(missing_docs)]\npub mod v1 {}\n",
        );
        assert!(check_lints(&[f]).is_empty());
    }

    #[test]
    fn every_crate_of_this_workspace_has_a_place_in_the_graph() {
        // The real tree: the table must name each member (a new crate is placed on purpose).
        let graph = workspace_graph().expect("cargo metadata");
        let v = check_graph(&graph);
        assert!(
            v.is_empty(),
            "{}",
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

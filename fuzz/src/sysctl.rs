//! `sysctl`: the network sysctls a RunPodSandbox request asks for.

use std::path::Component;

use ocicni::netns::{check_sysctl, sysctl_path};

/// Reads `data` as `key=value` (the key ends at the first `=`).
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (key, value) = text.split_once('=').unwrap_or((text, ""));
    holds(key, value);
}

/// An accepted key is a relative path of plain components under `net/`, the key itself with `.`
/// as the separator unless it uses `/`; an accepted value is short, non-empty, printable.
pub fn holds(key: &str, value: &str) {
    let Ok(path) = check_sysctl(key, value) else {
        return;
    };
    let text = path.to_str().expect("a path built from a str");
    assert!(text.starts_with("net/"), "{key:?} -> {text:?}");
    let components: Vec<Component<'_>> = path.components().collect();
    assert!(components.len() >= 2, "{key:?} -> {text:?}");
    assert!(
        components.iter().all(|c| matches!(c, Component::Normal(_))),
        "{key:?} -> {text:?} has a component that is not a plain name"
    );
    let expected = if key.contains('/') {
        key.to_owned()
    } else {
        key.replace('.', "/")
    };
    assert_eq!(text, expected, "key {key:?}");
    assert_eq!(sysctl_path(key).ok().as_ref(), Some(&path));
    assert!(!value.is_empty() && value.len() <= 4096, "value {value:?}");
    assert!(!value.chars().any(char::is_control), "value {value:?}");
}

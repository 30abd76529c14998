//! Plugin discovery through `Exec::find_plugin`.

use std::path::PathBuf;

use cni_exec::{Error, Exec, ProcessExec, find_plugin_in};

use test_support::fs::{set_mode, write_executable};

use crate::support::PluginDir;

fn executable(dir: &PluginDir, name: &str) -> PathBuf {
    let path = dir.path().join(name);
    write_executable(&path, "#!/bin/sh\n");
    path
}

#[tokio::test]
async fn first_directory_wins() {
    let (a, b) = (PluginDir::new(), PluginDir::new());
    executable(&a, "bridge");
    executable(&b, "bridge");
    let dirs = [a.path().to_owned(), b.path().to_owned()];
    let found = ProcessExec::new()
        .find_plugin("bridge", &dirs)
        .await
        .expect("found");
    assert_eq!(found, a.path().join("bridge"));
    let reversed = [b.path().to_owned(), a.path().to_owned()];
    let found = ProcessExec::new()
        .find_plugin("bridge", &reversed)
        .await
        .expect("found");
    assert_eq!(found, b.path().join("bridge"));
}

#[test]
fn unusable_candidates_are_skipped() {
    let (first, second) = (PluginDir::new(), PluginDir::new());
    let not_exec = first.path().join("noexec");
    std::fs::write(&not_exec, "#!/bin/sh\n").expect("write");
    set_mode(&not_exec, 0o644);
    std::fs::create_dir(first.path().join("adir")).expect("mkdir");
    std::os::unix::fs::symlink(first.path().join("nowhere"), first.path().join("dangling"))
        .expect("symlink");
    for name in ["noexec", "adir", "dangling"] {
        executable(&second, name);
    }
    let dirs = [first.path().to_owned(), second.path().to_owned()];
    for name in ["noexec", "adir", "dangling"] {
        let found = find_plugin_in(name, &dirs).expect("found in the second directory");
        assert_eq!(found, second.path().join(name), "{name}");
    }
}

#[test]
fn symlinks_to_executables_are_followed() {
    let (real, links) = (PluginDir::new(), PluginDir::new());
    let target = executable(&real, "host-local-1.4");
    std::os::unix::fs::symlink(&target, links.path().join("host-local")).expect("symlink");
    let found = find_plugin_in("host-local", &[links.path().to_owned()]).expect("found");
    assert_eq!(found, links.path().join("host-local"));
}

#[test]
fn not_found_lists_every_directory_and_skipped_candidate() {
    let (a, b) = (PluginDir::new(), PluginDir::new());
    std::fs::create_dir(a.path().join("macvlan")).expect("mkdir");
    let dirs = vec![a.path().to_owned(), b.path().to_owned()];
    let err = find_plugin_in("macvlan", &dirs).expect_err("not there");
    let message = err.to_string();
    assert!(
        matches!(&err, Error::PluginNotFound { name, dirs: d, .. } if name == "macvlan" && *d == dirs),
        "{message}"
    );
    for dir in &dirs {
        assert!(message.contains(&dir.display().to_string()), "{message}");
    }
    assert!(message.contains("is a directory"), "{message}");

    let err = find_plugin_in("macvlan", &[]).expect_err("no dirs");
    assert!(err.to_string().contains("no plugin directories"), "{err}");
}

#[tokio::test]
async fn bad_names_are_rejected() {
    let dir = PluginDir::new();
    executable(&dir, "bridge");
    let dirs = [dir.path().join("sub")];
    std::fs::create_dir(&dirs[0]).expect("mkdir");
    let table = [
        ("", "empty"),
        (".", "not a file name"),
        ("..", "not a file name"),
        ("../bridge", "contains '/'"),
        ("/bin/sh", "contains '/'"),
        ("a\0b", "contains NUL"),
    ];
    for (name, want) in table {
        let err = ProcessExec::new()
            .find_plugin(name, &dirs)
            .await
            .expect_err("bad name");
        assert!(
            matches!(&err, Error::InvalidPluginName { reason, .. } if *reason == want),
            "{name:?}: {err}"
        );
    }
}

//! Pulls under a registries.conf, against the local registry: mirrors tried before a dead
//! primary, blocked prefixes, insecure mirrors, search registries; and drop-in files.

use image_store::{Auth, Error, PullOptions, Registries, Store, StoreConfig};
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

/// Nothing listens on port 1 of the loopback address: connections are refused at once.
const DEAD: &str = "127.0.0.1:1";
const DEAD_TOO: &str = "127.0.0.1:2";

fn push_small(registry: &Registry, repo: &str, tag: &str) -> String {
    let image = ImageBuilder::new()
        .label("repo", repo)
        .layer(Layer::new(
            &Tar::new().file("hello", 0o644, b"hello").build(),
            Compression::Gzip,
        ))
        .build();
    registry.push_image(repo, Some(tag), &image, Upload::Monolithic);
    image.manifest_digest
}

/// A store that knows no insecure registry of its own: only registries.conf makes one so.
fn open(dir: &std::path::Path) -> Store {
    let mut config = StoreConfig::new(dir);
    config.request_timeout = std::time::Duration::from_secs(20);
    Store::open(config).expect("open the store")
}

fn options(conf: &str) -> PullOptions {
    PullOptions::new().with_registries(
        Registries::from_toml(conf, "/etc/containers/registries.conf")
            .expect("valid registries.conf"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn a_mirror_serves_when_the_primary_is_dead_and_the_name_stays() {
    let registry = Registry::start();
    let mirror = registry.host();
    let digest = push_small(&registry, "hub/team/app", "v1");
    let dir = test_support::temp_dir("reg-store");
    let store = open(dir.path());
    let options = options(&format!(
        r#"
[[registry]]
location = "{DEAD}"
insecure = true

[[registry.mirror]]
location = "{mirror}/hub"
insecure = true
"#
    ));
    let wanted = format!("{DEAD}/team/app:v1");
    let image = store
        .pull_with(&wanted, &Auth::Anonymous, &options)
        .await
        .expect("pulled from the mirror");
    assert_eq!(
        image.names,
        std::slice::from_ref(&wanted),
        "named as asked, not as mirrored"
    );
    assert_eq!(image.manifest_digest.to_string(), digest);
    assert_eq!(image.repo_digests, [format!("{DEAD}/team/app@{digest}")]);
    assert_eq!(store.get(&wanted).unwrap().id, image.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn the_primary_serves_when_the_mirror_is_dead() {
    let registry = Registry::start();
    let host = registry.host();
    push_small(&registry, "app", "v1");
    let dir = test_support::temp_dir("reg-store");
    let store = open(dir.path());
    let options = options(&format!(
        r#"
[[registry]]
location = "{host}"
insecure = true

[[registry.mirror]]
location = "{DEAD}"
insecure = true
"#
    ));
    let image = store
        .pull_with(&format!("{host}/app:v1"), &Auth::Anonymous, &options)
        .await
        .expect("the primary after the dead mirror");
    assert_eq!(image.names, [format!("{host}/app:v1")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn every_failed_source_is_reported_and_insecure_is_per_source() {
    let registry = Registry::start();
    let host = registry.host();
    push_small(&registry, "app", "v1");
    let dir = test_support::temp_dir("reg-store");
    let store = open(dir.path());
    // The live registry as a mirror that is not marked insecure: HTTPS to a plain HTTP server
    // fails, so it is no use, and the dead primary fails too.
    let options = options(&format!(
        r#"
[[registry]]
location = "{DEAD_TOO}"
insecure = true

[[registry.mirror]]
location = "{host}"
"#
    ));
    let err = store
        .pull_with(&format!("{DEAD_TOO}/app:v1"), &Auth::Anonymous, &options)
        .await
        .expect_err("no source works");
    let Error::AllSourcesFailed { image, attempts } = &err else {
        panic!("expected every source to fail: {err:?}");
    };
    assert_eq!(image, &format!("{DEAD_TOO}/app:v1"));
    let from: Vec<&str> = attempts.iter().map(|a| a.from.as_str()).collect();
    assert_eq!(
        from,
        [format!("{host}/app:v1"), format!("{DEAD_TOO}/app:v1")]
    );
    assert!(
        err.to_string().contains(&format!("[{host}/app:v1: ")),
        "{err}"
    );
    crate::support::assert_empty_after_reopen(store, host);

    // Marked insecure, the same mirror serves.
    let dir = test_support::temp_dir("reg-store");
    let store = open(dir.path());
    let options = self::options(&format!(
        r#"
[[registry]]
location = "{DEAD_TOO}"
insecure = true

[[registry.mirror]]
location = "{host}"
insecure = true
"#
    ));
    store
        .pull_with(&format!("{DEAD_TOO}/app:v1"), &Auth::Anonymous, &options)
        .await
        .expect("an insecure mirror speaks plain HTTP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn blocked_prefixes_are_refused_and_siblings_are_not() {
    let registry = Registry::start();
    let host = registry.host();
    push_small(&registry, "banned/app", "v1");
    push_small(&registry, "fine/app", "v1");
    let dir = test_support::temp_dir("reg-store");
    let store = open(dir.path());
    let options = options(&format!(
        r#"
[[registry]]
location = "{host}"
insecure = true

[[registry]]
location = "{host}/banned"
blocked = true
insecure = true
"#
    ));
    let err = store
        .pull_with(&format!("{host}/banned/app:v1"), &Auth::Anonymous, &options)
        .await
        .expect_err("blocked");
    match &err {
        Error::Blocked { prefix, path, .. } => {
            assert_eq!(prefix, &format!("{host}/banned"));
            assert_eq!(
                path,
                std::path::Path::new("/etc/containers/registries.conf")
            );
        }
        other => panic!("expected blocked: {other:?}"),
    }
    store
        .pull_with(&format!("{host}/fine/app:v1"), &Auth::Anonymous, &options)
        .await
        .expect("a sibling prefix is not blocked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn short_names_complete_with_the_search_registry() {
    let registry = Registry::start();
    let host = registry.host();
    push_small(&registry, "tools/app", "v1");
    let dir = test_support::temp_dir("reg-store");
    let store = open(dir.path());
    let options = options(&format!(
        r#"
unqualified-search-registries = ["{host}"]

[[registry]]
location = "{host}"
insecure = true
"#
    ));
    let image = store
        .pull_with("tools/app:v1", &Auth::Anonymous, &options)
        .await
        .expect("completed with the one search registry");
    assert_eq!(image.names, [format!("{host}/tools/app:v1")]);
}

#[test]
fn drop_ins_override_the_main_file_in_name_order() {
    let dir = test_support::temp_dir("reg-conf");
    let main = dir.path().join("registries.conf");
    let drop_ins = dir.path().join("registries.conf.d");
    std::fs::create_dir(&drop_ins).unwrap();
    std::fs::write(
        &main,
        r#"
unqualified-search-registries = ["quay.io"]
[aliases]
"app" = "quay.io/team/app"
"old" = "quay.io/old"
[[registry]]
location = "quay.io"
"#,
    )
    .unwrap();
    std::fs::write(
        drop_ins.join("10-block.conf"),
        "[[registry]]\nlocation = \"quay.io\"\nblocked = true\n[aliases]\n\"old\" = \"\"\n",
    )
    .unwrap();
    std::fs::write(
        drop_ins.join("20-search.conf"),
        "unqualified-search-registries = [\"registry.example.com\"]\n",
    )
    .unwrap();
    std::fs::write(drop_ins.join("30-ignored.txt"), "this is not = [toml").unwrap();

    let registries = Registries::load(&main, Some(&drop_ins)).expect("main file and drop-ins");
    assert_eq!(
        registries.unqualified_search_registries(),
        ["registry.example.com"]
    );
    let app = registries.candidates("app:v1").unwrap();
    assert_eq!(app[0].to_string(), "quay.io/team/app:v1");
    let old = registries.candidates("old").unwrap();
    assert_eq!(
        old[0].to_string(),
        "registry.example.com/old:latest",
        "the alias was erased"
    );
    match registries.sources(&app[0]) {
        Err(Error::Blocked { path, .. }) => assert_eq!(path, drop_ins.join("10-block.conf")),
        other => panic!("the drop-in's table replaced the main file's: {other:?}"),
    }
    // Only the main file: nothing blocked.
    let main_only = Registries::from_file(&main).unwrap();
    assert!(main_only.sources(&app[0]).is_ok());

    // A bad drop-in is named.
    std::fs::write(
        drop_ins.join("40-bad.conf"),
        "short-name-mode = \"maybe\"\n",
    )
    .unwrap();
    match Registries::load(&main, Some(&drop_ins)) {
        Err(Error::InvalidRegistries { path, reason }) => {
            assert_eq!(path, drop_ins.join("40-bad.conf"));
            assert!(reason.contains("maybe"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

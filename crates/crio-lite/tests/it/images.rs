//! ImageService through the socket, against a local docker-registry the tests start and images
//! they build offline: pull, list, status, image file system, removal, credentials.

use std::path::Path;
use std::sync::Arc;

use cri_api::v1 as cri;
use cri_api::v1::image_service_client::ImageServiceClient;
use crio_lite::{Config, Daemon};
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{AUTH_PASSWORD, AUTH_USER, Registry, Throttle, Upload};
use tonic::Code;
use tonic::transport::Channel;

use crate::support::{self, FakeCni, FakeNetns};

/// Pushes a busybox image with two layers, running as user `user`, as `repo:tag`.
fn push_busybox(registry: &Registry, repo: &str, tag: &str, user: &str) -> String {
    let app = Tar::new()
        .dir("app", 0o755)
        .file("app/hello", 0o644, b"hello\n");
    let image = ImageBuilder::new()
        .layer(Layer::new(&Tar::busybox().build(), Compression::Gzip))
        .layer(Layer::new(&app.build(), Compression::Zstd))
        .user(user)
        .build();
    registry.push_image(repo, Some(tag), &image, Upload::Monolithic);
    image.config_digest.trim_start_matches("sha256:").to_owned()
}

async fn start(
    dir: &Path,
    edit: impl FnOnce(&mut Config),
) -> (Daemon, ImageServiceClient<Channel>) {
    let mut config = support::config(dir);
    edit(&mut config);
    let cni: Arc<dyn ocicni::CniPlugin> = FakeCni::new();
    let daemon = Daemon::start(config, cni, Arc::new(FakeNetns))
        .await
        .expect("daemon starts");
    let client = support::image_client(daemon.socket_path()).await;
    (daemon, client)
}

fn spec(image: &str) -> cri::ImageSpec {
    cri::ImageSpec {
        image: image.to_owned(),
        ..cri::ImageSpec::default()
    }
}

async fn pull(
    client: &mut ImageServiceClient<Channel>,
    image: &str,
    auth: Option<cri::AuthConfig>,
) -> Result<String, tonic::Status> {
    client
        .pull_image(cri::PullImageRequest {
            image: Some(spec(image)),
            auth,
            sandbox_config: None,
        })
        .await
        .map(|r| r.into_inner().image_ref)
}

async fn status(
    client: &mut ImageServiceClient<Channel>,
    image: &str,
    verbose: bool,
) -> cri::ImageStatusResponse {
    client
        .image_status(cri::ImageStatusRequest {
            image: Some(spec(image)),
            verbose,
        })
        .await
        .expect("ImageStatus answers")
        .into_inner()
}

async fn list(client: &mut ImageServiceClient<Channel>, filter: Option<&str>) -> Vec<cri::Image> {
    client
        .list_images(cri::ListImagesRequest {
            filter: filter.map(|f| cri::ImageFilter {
                image: Some(spec(f)),
            }),
        })
        .await
        .expect("ListImages answers")
        .into_inner()
        .images
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn pull_list_status_fsinfo_and_remove_as_crictl_does() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let id = push_busybox(&registry, "tools/busybox", "1.36", "1000");
    let dir = tempfile::tempdir().unwrap();
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
    })
    .await;
    let reference = format!("{host}/tools/busybox:1.36");

    // Nothing yet: an empty status, not an error; an empty filtered list.
    assert!(status(&mut client, &reference, false).await.image.is_none());
    assert!(list(&mut client, Some(&reference)).await.is_empty());

    let image_ref = pull(&mut client, &reference, None).await.expect("pull");
    assert_eq!(image_ref, id, "PullImage answers the image id");
    // Pulled again: the same image, nothing new.
    assert_eq!(pull(&mut client, &reference, None).await.unwrap(), id);

    let all = list(&mut client, None).await;
    assert_eq!(all.len(), 1, "{all:?}");
    let image = &all[0];
    assert_eq!(image.id, id);
    assert_eq!(image.repo_tags, std::slice::from_ref(&reference));
    assert_eq!(image.repo_digests.len(), 1, "{image:?}");
    assert!(image.repo_digests[0].starts_with(&format!("{host}/tools/busybox@sha256:")));
    assert!(image.size > 1_000_000, "busybox is in it: {}", image.size);
    assert_eq!(image.uid.as_ref().map(|u| u.value), Some(1000));
    assert_eq!(image.username, "");

    // Found by tag, id, id prefix and repo digest; the filter uses the same look-up.
    for query in [
        reference.as_str(),
        id.as_str(),
        &id[..12],
        image.repo_digests[0].as_str(),
    ] {
        let found = status(&mut client, query, false).await;
        assert_eq!(
            found.image.as_ref().map(|i| i.id.as_str()),
            Some(id.as_str()),
            "{query}"
        );
        assert!(found.info.is_empty(), "info only when verbose");
        assert_eq!(list(&mut client, Some(query)).await.len(), 1, "{query}");
    }
    let verbose = status(&mut client, &reference, true).await;
    let info: serde_json::Value =
        serde_json::from_str(&verbose.info["info"]).expect("verbose info is JSON");
    assert_eq!(info["id"], id.as_str());
    assert_eq!(info["layers"].as_array().map(Vec::len), Some(2), "{info}");
    assert_eq!(info["imageSpec"]["config"]["User"], "1000", "{info}");

    let fs = client
        .image_fs_info(cri::ImageFsInfoRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fs.image_filesystems.len(), 1);
    let usage = &fs.image_filesystems[0];
    let storage = dir.path().join("state/storage");
    assert_eq!(
        usage.fs_id.as_ref().map(|f| f.mountpoint.as_str()),
        Some(storage.to_str().unwrap())
    );
    let used = usage.used_bytes.as_ref().unwrap().value;
    assert!(
        used > image.size,
        "blobs and layers: {used} > {}",
        image.size
    );
    assert!(usage.inodes_used.as_ref().unwrap().value > 10);

    client
        .remove_image(cri::RemoveImageRequest {
            image: Some(spec(&reference)),
        })
        .await
        .expect("RemoveImage");
    assert!(list(&mut client, None).await.is_empty());
    // Removing what is gone succeeds, as CRI asks.
    client
        .remove_image(cri::RemoveImageRequest {
            image: Some(spec(&id)),
        })
        .await
        .expect("RemoveImage of a removed image");
    let after = client
        .image_fs_info(cri::ImageFsInfoRequest::default())
        .await
        .unwrap()
        .into_inner();
    let used_after = after.image_filesystems[0]
        .used_bytes
        .as_ref()
        .unwrap()
        .value;
    assert!(
        used_after < used / 10,
        "the layers went: {used_after} of {used}"
    );
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn images_survive_a_restart_and_pull_failures_name_the_image() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let id = push_busybox(&registry, "app", "v1", "nobody");
    let dir = tempfile::tempdir().unwrap();
    let insecure = |c: &mut Config| c.crio.image.insecure_registries = vec![host.clone()];
    let (daemon, mut client) = start(dir.path(), insecure).await;
    let reference = format!("{host}/app:v1");
    pull(&mut client, &reference, None).await.expect("pull");
    daemon.shutdown().await.unwrap();

    let (daemon, mut client) = start(dir.path(), insecure).await;
    let listed = list(&mut client, None).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].uid, None);
    assert_eq!(listed[0].username, "nobody");

    // A tag the registry does not have.
    let err = pull(&mut client, &format!("{host}/app:v2"), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("app:v2"), "{}", err.message());
    // Not a reference.
    let err = pull(&mut client, "library/Busybox", None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    // No image named at all.
    let err = client
        .pull_image(cri::PullImageRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("image is required"),
        "{}",
        err.message()
    );
    // A registry not listed as insecure is spoken to over HTTPS, which it does not speak.
    let dir2 = tempfile::tempdir().unwrap();
    let (other, mut other_client) = start(dir2.path(), |_| {}).await;
    let err = pull(&mut other_client, &reference, None).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    other.shutdown().await.unwrap();
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn credentials_come_from_the_request_or_the_global_auth_file() {
    let registry = Registry::start_with_auth();
    let host = registry.host().to_owned();
    push_busybox(&registry, "private/app", "v1", "0");
    let reference = format!("{host}/private/app:v1");
    let dir = tempfile::tempdir().unwrap();
    let auth_file = dir.path().join("auth.json");
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
        c.crio.image.global_auth_file = auth_file.clone();
    })
    .await;

    // No credentials anywhere (the auth file does not exist yet): refused by the registry.
    let err = pull(&mut client, &reference, None).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    // Wrong ones in the request.
    let wrong = cri::AuthConfig {
        username: AUTH_USER.into(),
        password: "nope".into(),
        ..cri::AuthConfig::default()
    };
    let err = pull(&mut client, &reference, Some(wrong))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    // The right ones in the request, as kubelet sends an image pull secret.
    let right = cri::AuthConfig {
        username: AUTH_USER.into(),
        password: AUTH_PASSWORD.into(),
        server_address: host.clone(),
        ..cri::AuthConfig::default()
    };
    let id = pull(&mut client, &reference, Some(right))
        .await
        .expect("pull with credentials");
    client
        .remove_image(cri::RemoveImageRequest {
            image: Some(spec(&id)),
        })
        .await
        .unwrap();

    // The global auth file, written after the daemon started: read at each pull.
    use base64::Engine as _;
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{AUTH_USER}:{AUTH_PASSWORD}"));
    std::fs::write(
        &auth_file,
        format!(r#"{{"auths": {{"{host}/private": {{"auth": "{encoded}"}}}}}}"#),
    )
    .unwrap();
    assert_eq!(pull(&mut client, &reference, None).await.unwrap(), id);

    // A broken auth file is the node's problem, named.
    std::fs::write(&auth_file, "{not json").unwrap();
    client
        .remove_image(cri::RemoveImageRequest {
            image: Some(spec(&id)),
        })
        .await
        .unwrap();
    let err = pull(&mut client, &reference, None).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("auth.json"), "{}", err.message());
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn the_signature_policy_refuses_by_rule_and_is_read_again_when_it_changes() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let id = push_busybox(&registry, "team/app", "v1", "0");
    let reference = format!("{host}/team/app:v1");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
        c.crio.image.signature_policy = policy.clone();
    })
    .await;
    std::fs::write(
        &policy,
        format!(
            r#"{{"default": [{{"type": "insecureAcceptAnything"}}],
                "transports": {{"docker": {{"{host}/team": [{{"type": "reject"}}]}}}}}}"#
        ),
    )
    .unwrap();
    let err = pull(&mut client, &reference, None).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("policy.json"), "{}", err.message());
    assert!(err.message().contains("reject"), "{}", err.message());
    assert!(list(&mut client, None).await.is_empty(), "nothing stored");

    // Edited while the daemon runs: the next pull reads it.
    std::fs::write(
        &policy,
        r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    assert_eq!(pull(&mut client, &reference, None).await.unwrap(), id);

    // Broken: pulls fail naming the file, until it is fixed.
    std::fs::write(&policy, "{").unwrap();
    let err = pull(
        &mut client,
        &format!("{host}/team/app@sha256:{}", "0".repeat(64)),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("policy.json"), "{}", err.message());
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn pulls_show_in_metrics() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let base = Layer::new(&Tar::busybox().build(), Compression::Gzip);
    let top = Layer::new(
        &Tar::new().file("top", 0o644, b"on top").build(),
        Compression::None,
    );
    let first = ImageBuilder::new().layer(base.clone()).build();
    let second = ImageBuilder::new()
        .layer(base.clone())
        .layer(top.clone())
        .build();
    registry.push_image("first", Some("latest"), &first, Upload::Monolithic);
    registry.push_image("second", Some("latest"), &second, Upload::Monolithic);
    let dir = tempfile::tempdir().unwrap();
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
    })
    .await;

    pull(&mut client, &format!("{host}/first:latest"), None)
        .await
        .expect("pull the first image");
    // Shares the base layer with the first: reused, not downloaded again.
    pull(&mut client, &format!("{host}/second:latest"), None)
        .await
        .expect("pull the second image");
    pull(&mut client, &format!("{host}/missing:latest"), None)
        .await
        .unwrap_err();

    let (code, metrics) = crio_lite::status_cmd::get(daemon.socket_path(), "/metrics")
        .await
        .unwrap();
    assert_eq!(code, hyper::StatusCode::OK);
    let bytes = base.blob.len() + top.blob.len();
    for line in [
        "# TYPE crio_image_pulls_bytes_total counter".to_owned(),
        format!("crio_image_pulls_bytes_total {bytes}"),
        "crio_image_pulls_success_total 2".to_owned(),
        "crio_image_pulls_failure_total 1".to_owned(),
        "crio_image_layer_reuse_total 1".to_owned(),
        "crio_lite_image_pull_duration_seconds_count 3".to_owned(),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line:?} missing in\n{metrics}"
        );
    }
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn without_a_policy_file_pulls_are_refused_naming_the_file_to_create() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let id = push_busybox(&registry, "team/app", "v1", "0");
    let reference = format!("{host}/team/app:v1");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("etc/policy.json");
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
        c.crio.image.signature_policy = policy.clone();
    })
    .await;
    let err = pull(&mut client, &reference, None).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let message = err.message();
    for says in [
        &format!("{} does not exist", policy.display()),
        "pulls are refused",
        r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
    ] {
        assert!(message.contains(says), "{says:?} in {message}");
    }
    assert!(list(&mut client, None).await.is_empty(), "nothing stored");

    // The file the message names, as it shows it: pulls work, without a restart.
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    std::fs::write(&policy, image_store::Policy::ACCEPT_ANYTHING).unwrap();
    assert_eq!(pull(&mut client, &reference, None).await.unwrap(), id);
    daemon.shutdown().await.unwrap();

    // Not configured, and neither default there (this node): refused too, naming the first.
    if crio_lite::domain::DEFAULT_POLICIES
        .iter()
        .all(|p| !Path::new(p).exists())
    {
        let (daemon, mut client) = start(dir.path(), |c| {
            c.crio.image.insecure_registries = vec![host.clone()];
            c.crio.image.signature_policy = std::path::PathBuf::new();
        })
        .await;
        let err = pull(&mut client, &format!("{host}/team/app:v2"), None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        let default = crio_lite::domain::DEFAULT_POLICIES[0];
        assert!(err.message().contains(default), "{}", err.message());
        daemon.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn removing_one_tag_keeps_the_image_under_its_others() {
    let registry = Registry::start();
    let host = registry.host().to_owned();
    let id = push_busybox(&registry, "team/app", "v1", "0");
    assert_eq!(push_busybox(&registry, "team/app", "stable", "0"), id);
    let (v1, stable) = (
        format!("{host}/team/app:v1"),
        format!("{host}/team/app:stable"),
    );
    let dir = tempfile::tempdir().unwrap();
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
    })
    .await;
    for name in [&v1, &stable] {
        assert_eq!(pull(&mut client, name, None).await.unwrap(), id);
    }
    let remove = |image: &str| cri::RemoveImageRequest {
        image: Some(spec(image)),
    };

    // crictl rmi of one tag: that name goes, the image stays under the other.
    client.remove_image(remove(&v1)).await.expect("RemoveImage");
    let all = list(&mut client, None).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].id, id);
    assert_eq!(all[0].repo_tags, std::slice::from_ref(&stable));
    assert!(status(&mut client, &v1, false).await.image.is_none());
    assert!(status(&mut client, &stable, false).await.image.is_some());

    // Its last name takes the image; so does its id, whatever names it has.
    client
        .remove_image(remove(&stable))
        .await
        .expect("RemoveImage");
    assert!(list(&mut client, None).await.is_empty());
    for name in [&v1, &stable] {
        pull(&mut client, name, None).await.unwrap();
    }
    client.remove_image(remove(&id)).await.expect("RemoveImage");
    assert!(list(&mut client, None).await.is_empty());
    daemon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + docker-registry: cargo xtask test"]
async fn a_pull_the_registry_only_trickles_to_ends_at_the_progress_timeout() {
    let registry = Registry::start();
    let noise: Vec<u8> = (0..64u32 << 10)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let image = ImageBuilder::new()
        .layer(Layer::new(
            &Tar::new().file("noise", 0o644, &noise).build(),
            Compression::None,
        ))
        .build();
    registry.push_image("slow", Some("latest"), &image, Upload::Monolithic);
    // Manifest and configuration at once, then the layer at 200 B/s.
    let slow = Throttle::start_after(registry.host(), 8 << 10, 200);
    let dir = tempfile::tempdir().unwrap();
    let host = slow.host().to_owned();
    let (daemon, mut client) = start(dir.path(), |c| {
        c.crio.image.insecure_registries = vec![host.clone()];
        c.crio.image.pull_progress_timeout = std::time::Duration::from_secs(2);
        c.crio_lite.image.pull_min_rate = 1024;
    })
    .await;
    let started = std::time::Instant::now();
    let name = format!("{host}/slow:latest");
    let pulled = pull(&mut client, &name, None);
    let err = tokio::time::timeout(std::time::Duration::from_secs(30), pulled)
        .await
        .expect("the pull was not cancelled within 30 s")
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    for says in [host.as_str(), &image.layers[0].digest, "progress timeout"] {
        assert!(
            err.message().contains(says),
            "{says:?} in {}",
            err.message()
        );
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(list(&mut client, None).await.is_empty(), "nothing stored");
    daemon.shutdown().await.unwrap();
}

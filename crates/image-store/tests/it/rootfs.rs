//! Containers' root file systems on both drivers: the merged view, writes, removal, image
//! removal refused while in use, recovery at open, 100+ layers, hostile container ids.
//!
//! Every test that mounts runs again in a child process in a private mount namespace
//! (`unshare --mount --propagation private`): its mounts never reach the host's table and go
//! with the child, whatever happens; the child's own `Unmount` guards take them down too.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use image_store::{Auth, Error, StorageDriver, Store};
use test_support::fs::file_names;
use test_support::image::{Compression, ImageBuilder, Layer, Tar};
use test_support::registry::{Registry, Upload};

use crate::support::{self, Unmount, in_private_mount_ns};

const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn mounted_overlay(merged: &Path, upper: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        fields.get(4) == Some(&merged.to_str().unwrap())
            && line.contains(" - overlay ")
            && line.contains(&format!("upperdir={}", upper.display()))
    })
}

/// Layer 1 a small system, layer 2 deleting, hiding and adding over it, including a file under
/// `bin/` where layer 1 has `bin -> usr/bin` (a usr-merged base).
fn layered_image() -> test_support::image::Image {
    let base = Tar::new()
        .dir("etc", 0o755)
        .file("etc/keep", 0o644, b"keep")
        .hardlink("etc/keep-link", "etc/keep")
        .file("etc/gone", 0o644, b"gone")
        .dir("var/cache", 0o755)
        .file("var/cache/old", 0o644, b"old")
        .dir("usr/bin", 0o755)
        .file_owned("usr/bin/tool", 0o4755, 1000, 1001, b"tool")
        .symlink("bin", "usr/bin")
        .fifo("run-fifo", 0o600)
        .build();
    let top = Tar::new()
        .whiteout("etc/gone")
        .file("etc/added", 0o640, b"added")
        .opaque("var/cache")
        .file("var/cache/new", 0o644, b"new")
        .file("bin/foo", 0o755, b"foo")
        .build();
    ImageBuilder::new()
        .layer(Layer::new(&base, Compression::Gzip))
        .layer(Layer::new(&top, Compression::Gzip))
        .build()
}

/// What a container sees at `root`, whichever driver made it.
fn assert_view(root: &Path, driver: StorageDriver) {
    let read = |p: &str| {
        std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{driver}: {p}: {e}"))
    };
    assert_eq!(read("etc/keep"), "keep", "{driver}");
    assert_eq!(read("etc/added"), "added", "{driver}");
    assert!(
        !root.join("etc/gone").exists(),
        "{driver}: a whiteout hides etc/gone"
    );
    assert_eq!(
        file_names(&root.join("var/cache")),
        ["new"],
        "{driver}: the opaque directory hides var/cache/old"
    );
    let tool = std::fs::symlink_metadata(root.join("usr/bin/tool")).unwrap();
    assert_eq!(
        (tool.mode() & 0o7777, tool.uid(), tool.gid()),
        (0o4755, 1000, 1001),
        "{driver}: mode and owners"
    );
    let keep = std::fs::metadata(root.join("etc/keep")).unwrap();
    let link = std::fs::metadata(root.join("etc/keep-link")).unwrap();
    assert_eq!(keep.ino(), link.ino(), "{driver}: a hard link stays one");
    assert!(
        std::fs::symlink_metadata(root.join("run-fifo"))
            .unwrap()
            .file_type()
            .is_fifo(),
        "{driver}"
    );
    // usr-merge: layer 2's bin/ is a directory of its own that hides layer 1's link, as
    // containers/storage's overlay driver and containerd show it.
    assert!(
        std::fs::symlink_metadata(root.join("bin"))
            .unwrap()
            .is_dir(),
        "{driver}"
    );
    assert_eq!(file_names(&root.join("bin")), ["foo"], "{driver}");
    assert_eq!(file_names(&root.join("usr/bin")), ["tool"], "{driver}");
}

/// Every entry under `dir`: kind, mode, owner, size, contents or link target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let what = if meta.is_dir() {
            for e in std::fs::read_dir(&path).unwrap() {
                stack.push(e.unwrap().path());
            }
            String::new()
        } else if meta.is_file() {
            String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
        } else if meta.file_type().is_symlink() {
            std::fs::read_link(&path).unwrap().display().to_string()
        } else {
            format!("rdev {}", meta.rdev())
        };
        let key = path.strip_prefix(dir).unwrap().to_owned();
        out.insert(
            key,
            format!(
                "{:o} {}:{} {} {what}",
                meta.mode(),
                meta.uid(),
                meta.gid(),
                meta.len()
            ),
        );
    }
    out
}

/// While a container uses the image: a name of it goes while another stays (CRI-O's rmi of
/// one tag), but the image, by id, stays.
async fn untag_in_use(store: &Store, id: &str, registry: &str) {
    let (reference, other_tag) = (
        support::reference(registry, "app", "v1"),
        support::reference(registry, "app", "also"),
    );
    store.pull(&other_tag, &Auth::Anonymous).await.unwrap();
    let removed = store.remove(&other_tag).await.unwrap();
    assert!(!removed.image_gone(), "{removed:?}");
    assert_eq!(
        store.get(&reference).unwrap().names,
        std::slice::from_ref(&reference)
    );
    let by_id = store.remove(id).await.unwrap_err();
    assert!(matches!(by_id, Error::ImageInUse { .. }), "{by_id}");
}

fn open(root: &Path, registry: &str, driver: StorageDriver) -> Store {
    let mut config = support::config(root, registry);
    config.storage_driver = Some(driver);
    Store::open(config).expect("open the store")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn both_drivers_show_the_merged_layers_and_write_beside_them() {
    if !in_private_mount_ns("rootfs::both_drivers_show_the_merged_layers_and_write_beside_them") {
        return;
    }
    let registry = Registry::start();
    for tag in ["v1", "also"] {
        registry.push_image("app", Some(tag), &layered_image(), Upload::Monolithic);
    }
    let reference = support::reference(registry.host(), "app", "v1");
    for driver in [StorageDriver::Overlay, StorageDriver::Vfs] {
        let dir = test_support::temp_dir("img-rootfs");
        let _unmount = Unmount(dir.path().to_owned());
        let store = open(dir.path(), registry.host(), driver);
        assert_eq!(store.storage_driver(), driver);
        let image = store.pull(&reference, &Auth::Anonymous).await.unwrap();
        let layers: Vec<PathBuf> = image
            .layers
            .iter()
            .map(|l| store.layer_dir(&l.chain_id))
            .collect();
        let before: Vec<_> = layers.iter().map(|l| snapshot(l)).collect();
        let images_before = store.disk_usage().unwrap();

        let rootfs = store.create_rootfs(ID, &reference).unwrap();
        assert_eq!(rootfs.driver, driver);
        assert_eq!(rootfs.image_id, image.id);
        assert_eq!(rootfs.container_id, ID);
        assert_eq!(store.rootfs(ID).unwrap(), rootfs);
        assert_eq!(store.list_rootfs(), vec![rootfs.clone()]);
        let container_dir = dir
            .path()
            .canonicalize()
            .unwrap()
            .join("containers")
            .join(ID);
        let upper = container_dir.join("upper");
        match driver {
            StorageDriver::Overlay => {
                assert_eq!(rootfs.path, container_dir.join("merged"));
                assert!(
                    mounted_overlay(&rootfs.path, &upper),
                    "overlay mounted on merged"
                );
            }
            StorageDriver::Vfs => {
                assert_eq!(rootfs.path, container_dir.join("rootfs"));
                assert!(test_support::fs::mounts_at_or_below(dir.path()).is_empty());
            }
        }
        assert_view(&rootfs.path, driver);
        assert!(matches!(
            store.create_rootfs(ID, &reference),
            Err(Error::RootfsExists { .. })
        ));

        // Writes land in the container's layer, never in the image's.
        std::fs::write(rootfs.path.join("etc/keep"), b"changed").unwrap();
        std::fs::write(rootfs.path.join("big"), vec![7u8; 1 << 20]).unwrap();
        std::fs::remove_file(rootfs.path.join("etc/added")).unwrap();
        if driver == StorageDriver::Overlay {
            assert_eq!(std::fs::read(upper.join("etc/keep")).unwrap(), b"changed");
            assert!(upper.join("big").is_file());
        }
        let after: Vec<_> = layers.iter().map(|l| snapshot(l)).collect();
        assert_eq!(
            before, after,
            "{driver}: the layer directories are untouched"
        );
        let used = store.rootfs_disk_usage(ID).unwrap();
        assert!(used.bytes >= 1 << 20, "{driver}: {used:?}");
        assert!(store.containers_disk_usage().bytes >= 1 << 20);
        assert_eq!(
            store.disk_usage().unwrap(),
            images_before,
            "{driver}: images only"
        );

        untag_in_use(&store, &image.id, registry.host()).await;
        let err = store.remove(&reference).await.unwrap_err();
        assert!(
            matches!(&err, Error::ImageInUse { image: i, containers } if *i == image.id && containers == &[ID]),
            "{err}"
        );
        assert!(err.to_string().contains(ID), "{err}");
        assert!(layers.iter().all(|l| l.is_dir()));

        assert!(store.remove_rootfs(ID).unwrap());
        assert!(!mounted_overlay(&rootfs.path, &upper));
        assert!(test_support::fs::mounts_at_or_below(dir.path()).is_empty());
        assert!(!container_dir.exists(), "{driver}: the directory is gone");
        assert_eq!(
            file_names(&dir.path().join("containers")),
            Vec::<String>::new()
        );
        assert!(!store.remove_rootfs(ID).unwrap(), "idempotent");
        assert!(matches!(
            store.rootfs(ID),
            Err(Error::RootfsNotFound { .. })
        ));
        assert_eq!(store.containers_disk_usage().bytes, 0);

        store.remove(&reference).await.unwrap();
        assert!(
            layers.iter().all(|l| !l.exists()),
            "{driver}: layers collected"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn open_takes_down_half_made_ones_and_mounts_ready_ones_again() {
    if !in_private_mount_ns("rootfs::open_takes_down_half_made_ones_and_mounts_ready_ones_again") {
        return;
    }
    let registry = Registry::start();
    registry.push_image("app", Some("v1"), &layered_image(), Upload::Monolithic);
    let reference = support::reference(registry.host(), "app", "v1");
    let dir = test_support::temp_dir("img-rootfs");
    let _unmount = Unmount(dir.path().to_owned());
    let store = open(dir.path(), registry.host(), StorageDriver::Overlay);
    store.pull(&reference, &Auth::Anonymous).await.unwrap();
    let ready = store.create_rootfs("ready", &reference).unwrap();
    std::fs::write(ready.path.join("written"), b"kept").unwrap();
    let half = store.create_rootfs("half", &reference).unwrap();
    let containers = dir.path().canonicalize().unwrap().join("containers");
    drop(store);

    // As if killed after the intent was recorded: the record says creating, the mount is up.
    let record = containers.join("half/rootfs.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    json["state"] = "creating".into();
    std::fs::write(&record, serde_json::to_vec(&json).unwrap()).unwrap();
    // As if killed after mkdir, before the record.
    std::fs::create_dir_all(containers.join("norecord/upper")).unwrap();
    // As after a reboot: the ready one's mount is gone.
    test_support::process::must("umount", &[ready.path.to_str().unwrap()]);
    assert!(!mounted_overlay(
        &ready.path,
        &containers.join("ready/upper")
    ));

    let (store, swept) = Store::open_swept({
        let mut c = support::config(dir.path(), registry.host());
        c.storage_driver = Some(StorageDriver::Overlay);
        c
    })
    .unwrap();
    assert_eq!(swept.rootfs, 2, "{swept:?}");
    assert_eq!(file_names(&containers), ["ready"]);
    assert!(!mounted_overlay(&half.path, &containers.join("half/upper")));
    assert!(mounted_overlay(
        &ready.path,
        &containers.join("ready/upper")
    ));
    assert_eq!(std::fs::read(ready.path.join("written")).unwrap(), b"kept");
    assert_view(&ready.path, StorageDriver::Overlay);
    assert_eq!(store.list_rootfs(), vec![store.rootfs("ready").unwrap()]);

    // A ready one whose mount is still there is left alone: mounted once, not twice.
    drop(store);
    let store = open(dir.path(), registry.host(), StorageDriver::Overlay);
    let count = test_support::fs::mounts_at_or_below(&containers).len();
    assert_eq!(count, 1);
    assert!(store.remove_rootfs("ready").unwrap());
    store.remove(&reference).await.unwrap();
    support::assert_empty_after_reopen(store, registry.host());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: cargo xtask test"]
async fn an_image_of_120_layers_mounts() {
    if !in_private_mount_ns("rootfs::an_image_of_120_layers_mounts") {
        return;
    }
    const LAYERS: usize = 120;
    let mut builder = ImageBuilder::new();
    for i in 0..LAYERS {
        let tar = Tar::new()
            .file(&format!("layer-{i:03}"), 0o644, format!("{i}").as_bytes())
            .file("top", 0o644, format!("{i}").as_bytes())
            .build();
        builder = builder.layer(Layer::new(&tar, Compression::None));
    }
    let registry = Registry::start();
    registry.push_image("tall", Some("v1"), &builder.build(), Upload::Monolithic);
    let reference = support::reference(registry.host(), "tall", "v1");
    let dir = test_support::temp_dir("img-rootfs");
    let _unmount = Unmount(dir.path().to_owned());
    let store = open(dir.path(), registry.host(), StorageDriver::Overlay);
    let image = store.pull(&reference, &Auth::Anonymous).await.unwrap();
    assert_eq!(image.layers.len(), LAYERS);
    let absolute: usize = image
        .layers
        .iter()
        .map(|l| store.layer_dir(&l.chain_id).as_os_str().len() + 1)
        .sum();
    assert!(
        absolute > 4096,
        "the absolute lowerdir alone ({absolute}) passes a page"
    );

    let rootfs = store.create_rootfs("tall", &reference).unwrap();
    let names = file_names(&rootfs.path);
    assert_eq!(names.len(), LAYERS + 1, "{names:?}");
    assert_eq!(
        std::fs::read_to_string(rootfs.path.join("top")).unwrap(),
        format!("{}", LAYERS - 1)
    );
    assert_eq!(
        std::fs::read_to_string(rootfs.path.join("layer-000")).unwrap(),
        "0"
    );
    assert!(store.remove_rootfs("tall").unwrap());
}

#[test]
#[ignore = "needs root: cargo xtask test"]
fn the_driver_is_probed_or_forced() {
    if !in_private_mount_ns("rootfs::the_driver_is_probed_or_forced") {
        return;
    }
    let dir = test_support::temp_dir("img-rootfs");
    let _unmount = Unmount(dir.path().to_owned());
    let store = Store::open(image_store::StoreConfig::new(dir.path())).unwrap();
    assert_eq!(
        store.storage_driver(),
        StorageDriver::Overlay,
        "root on this node"
    );
    drop(store);
    let mut config = image_store::StoreConfig::new(dir.path());
    config.storage_driver = Some(StorageDriver::Vfs);
    assert_eq!(
        Store::open(config).unwrap().storage_driver(),
        StorageDriver::Vfs
    );
    assert!(
        test_support::fs::mounts_at_or_below(dir.path()).is_empty(),
        "the probe is gone"
    );
    assert_eq!(
        file_names(&dir.path().join("containers")),
        Vec::<String>::new()
    );
}

#[test]
fn hostile_container_ids_are_refused_and_make_nothing() {
    let dir = test_support::temp_dir("img-rootfs");
    let _unmount = Unmount(dir.path().to_owned());
    let mut config = image_store::StoreConfig::new(dir.path());
    config.storage_driver = Some(StorageDriver::Vfs);
    let store = Store::open(config).unwrap();
    for id in [
        "",
        ".",
        "..",
        "../../etc",
        "a/b",
        "/tmp/x",
        ".removing-x",
        "-rf",
        "a\nb",
        "x y",
    ] {
        for err in [
            store.create_rootfs(id, "busybox").unwrap_err(),
            store.remove_rootfs(id).unwrap_err(),
            store.rootfs(id).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::InvalidContainerId { id: got, .. } if got == id),
                "{id:?}: {err}"
            );
        }
    }
    assert_eq!(
        file_names(&dir.path().join("containers")),
        Vec::<String>::new()
    );
    assert!(file_names(dir.path()).iter().all(|n| !n.contains("etc")));
    assert!(matches!(
        store.create_rootfs("fine", "busybox"),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(
        file_names(&dir.path().join("containers")),
        Vec::<String>::new()
    );
}

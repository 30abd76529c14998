//! Images whose layers hold what an honest image may hold but a container must not use: device
//! nodes, as images imported from a root file-system tarball (debootstrap's `/dev`) carry them.
//! The image pulls and runs; the device cgroup keeps the container from opening them.

use cri_api::v1 as cri;
use test_support::image::{Compression, Layer, Tar};

use crate::containers::{self, container_config, exec, run, status, wait_log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root + netns + runc: cargo xtask test"]
async fn device_nodes_in_a_layer_are_pulled_but_the_container_cannot_open_them() {
    // The host's first disk and /dev/mem, by their numbers.
    let devices = Tar::new()
        .dir("devnodes", 0o755)
        .block_device("devnodes/sda", 8, 0)
        .char_device("devnodes/mem", 1, 1)
        .fifo("devnodes/fifo", 0o600);
    let mut setup = containers::setup_with(
        "devs",
        "devnodes",
        vec![Layer::new(&devices.build(), Compression::Gzip)],
        |_| {},
    )
    .await;
    let (image, sandbox) = (setup.image.clone(), setup.sandbox.clone());
    let logs = setup.node.path("logs/devnodes");
    let client = &mut setup.client;

    let id = run(
        client,
        &sandbox,
        container_config(&image, "holder", "echo up; exec sleep 3600"),
    )
    .await;
    wait_log(&logs.join("holder/0.log"), "up").await;

    // The nodes are there as the layer has them: type, major and minor (hex).
    let out = exec(
        client,
        &id,
        &[
            "sh",
            "-c",
            "stat -c '%n %F %t:%T' /devnodes/sda /devnodes/mem",
        ],
        10,
    )
    .await
    .expect("ExecSync stat");
    let listing = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        (out.exit_code, listing.lines().collect::<Vec<_>>()),
        (
            0,
            vec![
                "/devnodes/sda block special file 8:0",
                "/devnodes/mem character special file 1:1",
            ]
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for node in ["/devnodes/sda", "/devnodes/mem"] {
        let out = exec(client, &id, &["head", "-c", "1", node], 10)
            .await
            .expect("ExecSync head");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.exit_code, 0, "{node} was read: {:?}", out.stdout);
        assert!(
            stderr.contains("Operation not permitted"),
            "opening {node} fails as the device cgroup refuses it: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{node}: nothing read");
    }

    // The container runs on as before.
    let out = exec(client, &id, &["echo", "still here"], 10)
        .await
        .expect("ExecSync echo");
    assert_eq!(
        (out.exit_code, out.stdout.as_slice()),
        (0, &b"still here\n"[..])
    );
    assert_eq!(
        status(client, &id).await.state,
        cri::ContainerState::ContainerRunning as i32
    );
    setup.finish().await;
}

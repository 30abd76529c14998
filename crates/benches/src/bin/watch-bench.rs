//! How long after a configuration file is renamed into place does a runtime see the new network?
//!
//! For each directory size (networks already present), writes a new `.conflist` to a temporary
//! name in the configuration directory, renames it into place (as operators and network
//! providers install configs), and times until `Ocicni::networks()` lists it as loaded. Plugins
//! are a no-op script, so the time is the library's: event coalescing, reload, validation.
//! Prints one JSON line per directory size.

use std::path::Path;
use std::time::{Duration, Instant};

use ocicni::{Ocicni, WatchPolicy};
use serde_json::json;

const NOOP_PLUGIN: &str = "#!/bin/sh\n\
case \"$CNI_COMMAND\" in\n\
VERSION) echo '{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.1\",\"0.4.0\",\"1.0.0\"]}' ;;\n\
esac\n";

fn conflist(name: &str) -> String {
    format!(
        r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"bridge","bridge":"br-{name}","ipam":{{"type":"host-local","ranges":[[{{"subnet":"10.99.0.0/16"}}]]}}}},{{"type":"portmap","capabilities":{{"portMappings":true}}}}]}}"#
    )
}

fn write_plugins(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    for name in ["bridge", "host-local", "portmap"] {
        let path = dir.join(name);
        std::fs::write(&path, NOOP_PLUGIN)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

async fn measure(networks: usize, rounds: usize) -> Result<serde_json::Value, String> {
    let root = std::env::temp_dir().join(format!("watch-bench.{}.{networks}", std::process::id()));
    let conf = root.join("net.d");
    let bin = root.join("bin");
    let cache = root.join("cache");
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(&conf).map_err(io)?;
    write_plugins(&bin).map_err(io)?;
    for i in 0..networks {
        std::fs::write(
            conf.join(format!("{i:04}-net{i}.conflist")),
            conflist(&format!("net{i}")),
        )
        .map_err(io)?;
    }
    let plugin = Ocicni::builder()
        .conf_dir(&conf)
        .plugin_dirs([&bin])
        .cache_dir(&cache)
        .run_dir(root.join("run"))
        .watch(WatchPolicy::Inotify)
        .build()
        .await
        .map_err(|e| e.to_string())?;
    let loaded = |name: &str| {
        plugin
            .networks()
            .iter()
            .any(|n| n.network.as_deref() == Some(name) && n.verdict == "loaded")
    };
    let mut samples = Vec::with_capacity(rounds);
    let started_gen = plugin.generation();
    for round in 0..rounds {
        let name = format!("new{round}");
        let tmp = conf.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, conflist(&name)).map_err(io)?;
        let t0 = Instant::now();
        std::fs::rename(&tmp, conf.join(format!("9000-{name}.conflist"))).map_err(io)?;
        let deadline = t0 + Duration::from_secs(10);
        while !loaded(&name) {
            if Instant::now() > deadline {
                return Err(format!("{name} not seen within 10 s"));
            }
            let seen = plugin.generation();
            let _ = tokio::time::timeout(
                Duration::from_millis(200),
                plugin.wait_for_generation_after(seen),
            )
            .await;
        }
        samples.push(t0.elapsed());
        // Let the watcher go quiet so rounds do not overlap.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reloads = plugin.generation() - started_gen;
    ocicni::CniPlugin::shutdown(&plugin).await;
    let _ = std::fs::remove_dir_all(&root);
    samples.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
    let pct = |p: f64| {
        ms(samples
            [((p / 100.0 * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1])
    };
    Ok(json!({
        "bench": "watch-rename-to-visible", "networks": networks, "rounds": rounds,
        "p50_ms": pct(50.0), "p90_ms": pct(90.0), "max_ms": pct(100.0),
        "reloads": reloads, "reloads_per_rename": (reloads as f64 / rounds as f64 * 100.0).round() / 100.0,
    }))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut sizes = vec![1_usize, 50, 200];
    let mut rounds = 30;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--sizes", Some(v)) => sizes = v.split(',').filter_map(|s| s.parse().ok()).collect(),
            ("--rounds", Some(v)) => rounds = v.parse().unwrap_or(rounds),
            _ => {
                eprintln!("usage: watch-bench [--sizes 1,50,200] [--rounds 30]");
                std::process::exit(2);
            }
        }
    }
    let mut failed = false;
    for n in sizes {
        match measure(n, rounds.max(1)).await {
            Ok(line) => println!("{line}"),
            Err(err) => {
                println!(
                    "{}",
                    json!({"bench": "watch-rename-to-visible", "networks": n, "error": err})
                );
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

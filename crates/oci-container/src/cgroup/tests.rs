use super::*;

fn testdata(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/cgroup")
        .join(dir)
}

/// This test host's layout: v1 controllers, each its own hierarchy, and an empty unified one.
const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
const HYBRID_PROC: &str = "\
9:name=systemd:/c1
8:pids:/c1
4:memory:/process_api/2261ff/c1
2:cpu,cpuacct:/c1
0::/c1
";

#[test]
fn the_cgroup_is_found_through_the_process_and_the_mount_table() {
    let v2_mounts = "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    // (case, /proc/<pid>/cgroup, mountinfo, expected)
    let cases = [
        (
            "hybrid",
            HYBRID_PROC,
            HYBRID_MOUNTS,
            Dirs {
                cpuacct: Some("/sys/fs/cgroup/cpu,cpuacct/c1".into()),
                memory: Some("/sys/fs/cgroup/memory/process_api/2261ff/c1".into()),
                pids: Some("/sys/fs/cgroup/pids/c1".into()),
                unified: Some("/sys/fs/cgroup/unified/c1".into()),
            },
        ),
        (
            "unified only",
            "0::/kubepods/pod1/c1\n",
            v2_mounts,
            Dirs {
                unified: Some("/sys/fs/cgroup/kubepods/pod1/c1".into()),
                ..Dirs::default()
            },
        ),
        (
            "a namespaced or bind-mounted root is taken off the path",
            "0::/kubepods/pod1/c1\n",
            "25 1 0:22 /kubepods /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            Dirs {
                unified: Some("/sys/fs/cgroup/pod1/c1".into()),
                ..Dirs::default()
            },
        ),
        (
            "a mount of another subtree cannot reach the cgroup",
            "0::/kubepods/pod1/c1\n",
            "25 1 0:22 /kube /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            Dirs::default(),
        ),
        (
            "a mount point with a space is unescaped",
            "0::/c1\n",
            "25 1 0:22 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n",
            Dirs {
                unified: Some("/mnt/cg two/c1".into()),
                ..Dirs::default()
            },
        ),
        ("no cgroup mounts", HYBRID_PROC, "", Dirs::default()),
        (
            "a path that climbs out is refused",
            "0::/c1/../..\n",
            v2_mounts,
            Dirs::default(),
        ),
    ];
    for (case, proc_cgroup, mountinfo, expected) in cases {
        let dirs = Dirs::resolve(
            &parse_membership(proc_cgroup),
            &parse_mounts(&table(mountinfo)),
        );
        assert_eq!(dirs, expected, "{case}");
    }
}

#[test]
fn v1_usage_uses_the_hierarchy_totals() {
    let root = testdata("v1");
    let dirs = Dirs {
        cpuacct: Some(root.join("cpuacct")),
        memory: Some(root.join("memory")),
        pids: Some(root.join("pids")),
        unified: None,
    };
    let stats = read_stats("c1", &dirs).unwrap();
    assert!(stats.timestamp_ns > 0);
    assert_eq!(
        stats,
        ContainerStats {
            timestamp_ns: stats.timestamp_ns,
            cpu_usage_ns: Some(123_456_789),
            memory_usage_bytes: Some(10 << 20),
            // usage less total_inactive_file
            memory_working_set_bytes: Some(6 << 20),
            memory_rss_bytes: Some(2 << 20),
            // 9223372036854771712 is v1's "no limit"
            memory_limit_bytes: None,
            page_faults: Some(1500),
            major_page_faults: Some(3),
            pids: Some(3),
        }
    );
}

#[test]
fn v2_usage_reads_cpu_stat_and_memory_stat() {
    let dirs = Dirs {
        unified: Some(testdata("v2")),
        ..Dirs::default()
    };
    let stats = read_stats("c1", &dirs).unwrap();
    assert_eq!(
        stats,
        ContainerStats {
            timestamp_ns: stats.timestamp_ns,
            cpu_usage_ns: Some(250_000_000),
            memory_usage_bytes: Some(20 << 20),
            memory_working_set_bytes: Some(14 << 20),
            memory_rss_bytes: Some(3 << 20),
            memory_limit_bytes: Some(64 << 20),
            page_faults: Some(2500),
            major_page_faults: Some(7),
            pids: Some(5),
        }
    );
}

#[test]
fn missing_controllers_are_none_and_bad_files_name_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path();
    let dirs = Dirs {
        unified: Some(cg.to_owned()),
        ..Dirs::default()
    };
    // nothing enabled: every figure None, not an error
    let stats = read_stats("c1", &dirs).unwrap();
    assert_eq!(
        stats,
        ContainerStats {
            timestamp_ns: stats.timestamp_ns,
            ..ContainerStats::default()
        }
    );

    // `max` is no limit; a working set is the usage when memory.stat says nothing of files
    std::fs::write(cg.join("memory.current"), "4096\n").unwrap();
    std::fs::write(cg.join("memory.max"), "max\n").unwrap();
    let stats = read_stats("c1", &dirs).unwrap();
    assert_eq!(
        (stats.memory_limit_bytes, stats.memory_working_set_bytes),
        (None, Some(4096))
    );

    std::fs::write(cg.join("pids.current"), "many\n").unwrap();
    let err = read_stats("c1", &dirs).unwrap_err().to_string();
    assert!(err.starts_with("container c1: "), "{err}");
    assert!(
        err.contains("pids.current") && err.contains("\"many\""),
        "{err}"
    );

    // a FIFO is refused at once, not waited on
    std::fs::remove_file(cg.join("pids.current")).unwrap();
    nix::unistd::mkfifo(&cg.join("pids.current"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = read_stats("c1", &dirs).unwrap_err().to_string();
    assert!(err.contains("pids.current: not a regular file"), "{err}");

    std::fs::remove_file(cg.join("pids.current")).unwrap();
    std::fs::write(cg.join("memory.stat"), "anon lots\n").unwrap();
    let err = read_stats("c1", &dirs).unwrap_err().to_string();
    assert!(
        err.contains("memory.stat") && err.contains("anon is not a number"),
        "{err}"
    );
}

#[test]
fn this_process_has_a_cgroup_here() {
    // whatever this host is, the test process's own cgroup is found and read without error
    let me = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mounts = node_primitives::mounts::read_own().unwrap();
    let dirs = Dirs::resolve(&parse_membership(&me), &parse_mounts(&mounts));
    assert!(
        dirs.memory.is_some() || dirs.unified.is_some(),
        "{me}\n{dirs:?}"
    );
    read_stats("self", &dirs).unwrap();
}

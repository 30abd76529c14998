//! What the watcher learns from the disk itself: where a watch can be placed for a directory
//! that may not exist, and a cheap fingerprint of the watched directories for polling and rescans.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use node_primitives::{FileId, Fingerprint};

/// The directories to place a watch on: each wanted directory if it exists, otherwise its
/// nearest existing ancestor (watched non-recursively, so its creation is noticed).
pub(crate) fn anchors(dirs: &[PathBuf]) -> BTreeSet<PathBuf> {
    dirs.iter().filter_map(|d| anchor_of(d)).collect()
}

fn anchor_of(dir: &Path) -> Option<PathBuf> {
    let mut p = dir;
    loop {
        if let Ok(m) = fs::metadata(p)
            && m.is_dir()
        {
            return Some(p.to_path_buf());
        }
        p = p.parent().filter(|p| !p.as_os_str().is_empty())?;
    }
}

/// Fingerprint of the watched directories: for each, whether it exists and its identity, and for
/// each entry its name and [`Fingerprint`] (identity, size, type and permissions, mtime and
/// ctime). Contents are not read; a rewrite keeping size and both timestamps (coarse clocks)
/// goes unnoticed by polling alone.
pub(crate) fn fingerprint(dirs: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    for dir in dirs {
        dir.hash(&mut h);
        match fs::metadata(dir) {
            Ok(m) => FileId::of(&m).hash(&mut h),
            Err(e) => e.kind().hash(&mut h),
        }
        let Ok(read) = fs::read_dir(dir) else {
            0xdead_u32.hash(&mut h);
            continue;
        };
        let mut entries: Vec<(OsString, Option<Fingerprint>)> = read
            .filter_map(Result::ok)
            .map(|e| {
                let path = e.path();
                // follow symlinks so a re-pointed plugin link counts; keep broken ones by name
                let stamp = fs::metadata(&path)
                    .or_else(|_| fs::symlink_metadata(&path))
                    .ok()
                    .map(|m| Fingerprint::from_metadata(&m));
                (e.file_name(), stamp)
            })
            .collect();
        entries.sort_unstable();
        entries.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_climbs_to_nearest_existing_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        let want = tmp.path().join("a/b/c");
        let got = anchors(std::slice::from_ref(&want));
        assert_eq!(got.iter().collect::<Vec<_>>(), vec![tmp.path()]);

        fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let got = anchors(std::slice::from_ref(&want));
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            vec![&tmp.path().join("a/b")]
        );

        fs::create_dir_all(&want).unwrap();
        let got = anchors(std::slice::from_ref(&want));
        assert_eq!(got.iter().collect::<Vec<_>>(), vec![&want]);
    }

    #[test]
    fn anchor_skips_a_file_in_the_way() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "x").unwrap();
        let got = anchors(&[file]);
        assert_eq!(got.iter().collect::<Vec<_>>(), vec![tmp.path()]);
    }

    #[test]
    fn recreated_directory_changes_the_fingerprint() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("d");
        fs::create_dir(&d).unwrap();
        let before = fingerprint(std::slice::from_ref(&d));
        // rename rather than delete, so the old inode number cannot be reused
        fs::rename(&d, tmp.path().join("old")).unwrap();
        fs::create_dir(&d).unwrap();
        assert_ne!(before, fingerprint(std::slice::from_ref(&d)));
    }

    #[test]
    fn fingerprint_sees_what_matters() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("net.d");
        let dirs = [d.clone()];
        let mut seen = vec![fingerprint(&dirs)];
        let mut step = |f: &dyn Fn()| {
            f();
            let fp = fingerprint(&dirs);
            assert!(!seen.contains(&fp), "fingerprint did not change");
            seen.push(fp);
        };
        step(&|| fs::create_dir(&d).unwrap());
        step(&|| fs::write(d.join("10-a.conflist"), "{}").unwrap());
        step(&|| fs::write(d.join("10-a.conflist"), "{\"a\":1}").unwrap());
        step(&|| fs::rename(d.join("10-a.conflist"), d.join("20-a.conflist")).unwrap());
        #[cfg(unix)]
        step(&|| {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(d.join("20-a.conflist"), fs::Permissions::from_mode(0o755))
                .unwrap();
        });
        // unchanged disk, unchanged fingerprint
        assert_eq!(fingerprint(&dirs), fingerprint(&dirs));
        // back to an earlier state, back to its fingerprint
        fs::remove_file(d.join("20-a.conflist")).unwrap();
        assert_eq!(fingerprint(&dirs), seen[1], "back to the empty directory");
        fs::remove_dir(&d).unwrap();
        assert_eq!(fingerprint(&dirs), seen[0], "back to the missing directory");
    }
}

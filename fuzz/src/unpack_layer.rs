//! `unpack_layer`: a layer blob (plain tar, gzip or zstd, told apart by magic number, as a pull
//! gets it from a registry) through image-store's unpacker, into a directory of a temporary one.
//!
//! What must hold, whether the unpack succeeds or not: nothing appears beside the layer
//! directory; the files under it take at most the byte cap (by apparent size, each inode once);
//! no symbolic link there has a relative target that climbs above the layer root; the Rust heap
//! grows by a few MiB at most while unpacking (the header cap is 1 MiB, the layer 8 MiB); an
//! error quotes at most a bounded part of a name.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use image_store::Limits;

/// The byte cap the layers are unpacked under.
pub const MAX_LAYER_BYTES: u64 = 8 << 20;

/// The most the heap may grow by while a layer unpacks: the 1 MiB header cap held once or twice
/// (a buffer grows by doubling), decompressor state and buffers. zstd's window is C memory and
/// not counted here.
pub const MAX_HEAP_GROWTH: usize = 8 << 20;

/// The longest error text: the image-store error with a name quoted at 256 bytes and a link
/// target at 256 bytes, and the words around them.
pub const MAX_ERROR_LEN: usize = 2048;

/// Feeds `data` to the unpacker as a layer blob.
pub fn check(data: &[u8]) {
    let limits = Limits {
        max_layer_bytes: MAX_LAYER_BYTES,
        max_layer_entries: 10_000,
    };
    let top = tempfile::tempdir().expect("a temporary directory");
    let layer = top.path().join("layer");
    fs::create_dir(&layer).expect("the layer directory");

    let start = heap::mark();
    let result = image_store::fuzzing::unpack_layer(data, &layer, &limits);
    let growth = heap::peak_since(start);
    assert!(
        growth <= MAX_HEAP_GROWTH,
        "the heap grew by {growth} bytes while unpacking"
    );
    if let Err(e) = &result {
        let text = e.to_string();
        assert!(
            text.len() <= MAX_ERROR_LEN,
            "a {} byte error: {}...",
            text.len(),
            text.chars().take(512).collect::<String>()
        );
    }

    let beside: Vec<_> = fs::read_dir(top.path())
        .expect("read the temporary directory")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(
        beside,
        [std::ffi::OsString::from("layer")],
        "written beside the layer"
    );

    let mut seen = HashSet::new();
    let mut bytes = 0;
    walk(&layer, 0, &mut seen, &mut bytes);
    assert!(
        bytes <= MAX_LAYER_BYTES,
        "{bytes} bytes of files under a cap of {MAX_LAYER_BYTES}"
    );
}

/// Adds up the apparent size of the files under `dir` (`depth` below the layer root), each inode
/// once, and checks every symbolic link there.
fn walk(dir: &Path, depth: usize, seen: &mut HashSet<(u64, u64)>, bytes: &mut u64) {
    for entry in fs::read_dir(dir).expect("read a layer directory") {
        let path = entry.expect("an entry").path();
        let meta = fs::symlink_metadata(&path).expect("lstat");
        if meta.is_dir() {
            walk(&path, depth + 1, seen, bytes);
        } else if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).expect("readlink");
            assert!(
                stays_inside(depth, target.as_os_str().as_bytes()),
                "{} -> {} climbs out of the layer",
                path.display(),
                target.display()
            );
        } else if meta.is_file() && seen.insert((meta.dev(), meta.ino())) {
            *bytes += meta.size();
        }
    }
}

/// Whether a symbolic link `depth` directories below the layer root pointing at `target` stays
/// in it (an absolute target resolves inside the container's root).
fn stays_inside(depth: usize, target: &[u8]) -> bool {
    if target.first() == Some(&b'/') {
        return true;
    }
    let mut depth = depth;
    for part in target.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return false,
            },
            _ => depth += 1,
        }
    }
    true
}

/// The heap this thread has allocated and not freed, and its peak: a counting allocator over
/// the system's, per thread, so targets replayed on parallel test threads do not mix.
mod heap {
    use super::{Cell, GlobalAlloc, Layout, System};

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    struct Counting;

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn add(delta: isize) {
        // `try_with`: never panic in the allocator, even while the thread's locals are torn down.
        let _ = LIVE.try_with(|live| {
            let now = live.get() + delta;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    fn size(layout: Layout) -> isize {
        isize::try_from(layout.size()).unwrap_or(isize::MAX)
    }

    // SAFETY: every call is passed to the system allocator unchanged; the counting touches only
    // thread-locals that need no allocation.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's guarantees on `layout` are the system allocator's.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                add(size(layout));
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: as `alloc`.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                add(size(layout));
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from this allocator, that is from the system's, with `layout`.
            unsafe { System.dealloc(ptr, layout) };
            add(-size(layout));
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: as `dealloc`, and `new_size` is the caller's to guarantee.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                add(isize::try_from(new_size).unwrap_or(isize::MAX) - size(layout));
            }
            p
        }
    }

    /// Starts a measure: the peak is reset to what is live now, which is returned.
    pub(super) fn mark() -> isize {
        let live = LIVE.with(Cell::get);
        PEAK.with(|peak| peak.set(live));
        live
    }

    /// How far above `mark` the heap has been since.
    pub(super) fn peak_since(mark: isize) -> usize {
        usize::try_from(PEAK.with(Cell::get) - mark).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::stays_inside;

    #[test]
    fn the_symlink_rule_of_the_check() {
        assert!(stays_inside(0, b"/etc"));
        assert!(stays_inside(2, b"../../etc"));
        assert!(!stays_inside(0, b"../etc"));
        assert!(!stays_inside(1, b"a/../../.."));
        assert!(stays_inside(0, b"a/.."));
    }
}

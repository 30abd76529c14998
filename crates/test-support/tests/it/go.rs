//! A Go program built offline, once per process.

use std::path::Path;

#[test]
#[ignore = "needs golang-go: cargo xtask test"]
fn a_go_program_is_built_once_and_runs() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/go-hello");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let built = test_support::go::build(&source, tmp, "needs golang-go");
    assert_eq!(built, tmp.join("go-hello"));
    let modified = std::fs::metadata(&built).unwrap().modified().unwrap();
    assert_eq!(
        test_support::go::build(&source, tmp, "needs golang-go"),
        built
    );
    assert_eq!(
        std::fs::metadata(&built).unwrap().modified().unwrap(),
        modified,
        "not built twice"
    );
    let out = test_support::process::must(&built.display().to_string(), &[]);
    assert!(out.starts_with("hello from"), "{out}");
}

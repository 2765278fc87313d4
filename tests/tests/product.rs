//! The guardian that ships (SPEC: static, no C library, within the size budget), checked on the
//! binaries themselves: the debug build every other test drives and the release build
//! `cargo build --release` (workspace or `-p refine-guardian`) writes. `scripts/test` builds both.

use std::fs;
use std::path::PathBuf;

use refine_tests::elf::{self, ET_EXEC, PT_INTERP};

/// Size budget of the release guardian, in bytes (also `scripts/bench-guardian`'s). Raise it only
/// with a reason in the commit.
const SIZE_BUDGET: u64 = 64 * 1024;

/// `target/release/refine-guardian`, beside `target/debug` where this test runs.
fn release_guardian() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/debug/deps/<test> -> target/release/refine-guardian
    let target = exe.ancestors().nth(3).expect("target dir");
    refine_tests::built(
        target.join("release/refine-guardian"),
        "build it with `cargo build --release -p refine-guardian` (scripts/test does)",
    )
}

/// Static, not position-independent, no loader, no shared library.
fn assert_static_libc_free(path: &std::path::Path) {
    let e = elf::parse(&fs::read(path).expect("read the guardian"));
    let shown = path.display();
    assert_eq!(e.e_type, ET_EXEC, "{shown}: not a fixed-address executable");
    assert!(!e.has(PT_INTERP), "{shown} asks for a loader: {e:?}");
    assert_eq!(e.needed, 0, "{shown} names shared libraries: {e:?}");
}

#[test]
fn every_guardian_build_is_static_and_libc_free() {
    // Negative control: a dynamically linked program asks for a loader and names libc.
    let sh = elf::parse(&fs::read("/bin/sh").expect("/bin/sh"));
    assert!(sh.has(PT_INTERP) && sh.needed > 0, "/bin/sh: {sh:?}");

    assert_static_libc_free(&refine_tests::bin("refine-guardian"));
    assert_static_libc_free(&release_guardian());
}

#[test]
fn the_release_guardian_is_within_the_size_budget() {
    let path = release_guardian();
    let size = fs::metadata(&path).expect("stat the guardian").len();
    assert!(
        size <= SIZE_BUDGET,
        "{}: {size} bytes, over the budget of {SIZE_BUDGET}",
        path.display()
    );
}

/// The CLI starts without the dynamic loader (supervisor/build.rs): a `run` pays no loading,
/// relocation and binding of libc, libm and libgcc_s (the launch's time budget), and, not being
/// position-independent, does not relocate itself either: a fixed-address executable with no
/// loader and no shared library.
#[test]
fn the_cli_needs_no_loader() {
    let path = refine_tests::bin("refine-supervisor");
    let e = elf::parse(&fs::read(&path).expect("read the CLI"));
    assert_eq!(
        e.e_type,
        ET_EXEC,
        "{}: not a fixed-address executable",
        path.display()
    );
    assert!(
        !e.has(PT_INTERP),
        "{} asks for a loader: {e:?}",
        path.display()
    );
    assert_eq!(
        e.needed,
        0,
        "{} names shared libraries: {e:?}",
        path.display()
    );
}

//! Link settings for the guardian binary: it links no C library at all (see `src/sys/raw.rs`):
//! its own `_start`, raw system calls, a static non-PIE executable with nothing to relocate at
//! start-up. A static glibc build spent part of every launch in glibc's start-up code and
//! weighed many times more; this one starts in the time the kernel takes to map it and stays
//! within its size budget (`tests/tests/product.rs`; figures in `scripts/README.md`). Every
//! build of the guardian (workspace or alone, debug or release, `cargo install`) is this one:
//! its only dependencies are `refine-protocol-core` and `libc`, neither of which has a feature
//! that could bring `std` in.
//!
//! It also finds the build's provenance (V1: commit, dirty flag, class; `refine-build-info`),
//! which `src/sys/mark.rs` embeds: the guardian's sources are its own folder, the protocol core
//! it links, the build-info crate, and the workspace's manifest and lock file.
fn main() {
    for arg in ["-nostartfiles", "-nostdlib", "-static", "-no-pie"] {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let manifest =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let workspace = manifest.parent().unwrap_or(&manifest);
    refine_build_info::emit(
        &std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        workspace,
        &[
            "guardian",
            "protocol/core",
            "protocol/build-info",
            "Cargo.toml",
            "Cargo.lock",
        ],
    );
}

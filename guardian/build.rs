//! Link settings for the guardian binary: it links no C library at all (see `src/sys/raw.rs`):
//! its own `_start`, raw system calls, a static non-PIE executable with nothing to relocate at
//! start-up. A static glibc build spent part of every launch in glibc's start-up code and
//! weighed many times more; this one starts in the time the kernel takes to map it and stays
//! within its size budget (`tests/tests/product.rs`; figures in `scripts/README.md`). Every
//! build of the guardian (workspace or alone, debug or release, `cargo install`) is this one:
//! its only dependencies are `refine-protocol-core` and `libc`, neither of which has a feature
//! that could bring `std` in.
fn main() {
    for arg in ["-nostartfiles", "-nostdlib", "-static", "-no-pie"] {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}

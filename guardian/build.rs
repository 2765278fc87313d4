//! Build settings for the guardian binary.
//!
//! - `protocol_std`: Cargo unifies features across one workspace build, so `cargo build
//!   --workspace` hands the guardian a `std` build of `refine-protocol` (the supervisor and tests
//!   need it), which links the `std` crate, glibc and `std`'s panic handler. That variant starts
//!   through glibc's `main` and must not define its own panic handler, `_start` or memory
//!   routines. `cargo build -p refine-guardian` gets the pure `no_std` build: the product.
//! - The product links no C library at all (see `src/raw.rs`): its own `_start`, raw system
//!   calls, a static non-PIE executable with nothing to relocate at start-up. A static glibc
//!   build spent about 0.3 ms per launch in glibc's start-up code and weighed 735 KiB; this one
//!   starts in the time the kernel takes to map it and weighs about 30 KiB.
use std::env;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(protocol_std)");
    println!("cargo:rerun-if-env-changed=DEP_REFINE_PROTOCOL_STD");
    if env::var_os("DEP_REFINE_PROTOCOL_STD").is_some() {
        println!("cargo:rustc-cfg=protocol_std");
        return;
    }
    for arg in ["-nostartfiles", "-nostdlib", "-static", "-no-pie"] {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}

//! Build settings for the guardian binary.
//!
//! - `protocol_std`: Cargo unifies features across one workspace build, so `cargo build
//!   --workspace` hands the guardian a `std` build of `refine-protocol` (the supervisor and tests
//!   need it), which links the `std` crate and its panic handler. The guardian then must not
//!   define its own. `cargo build -p refine-guardian` gets the pure `no_std` build.
//! - Static PIE (pure `no_std` build only): a static executable skips the dynamic loader's
//!   work on every launch and keeps no dirty relocated pages of shared libraries, which is most
//!   of the guardian's footprint (see the figures in the lead's benchmark). glibc's `libc.a`
//!   needs `libgcc_eh`/`libgcc`; rust-lld mislinks glibc's static-pie start files (an unresolved
//!   weak `__gmon_start__` gets relocated and called from `_init`), so the system linker is used.
//!   Set `REFINE_GUARDIAN_DYNAMIC=1` to build the dynamic variant (for comparison).
use std::env;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(protocol_std)");
    println!("cargo:rerun-if-env-changed=DEP_REFINE_PROTOCOL_STD");
    println!("cargo:rerun-if-env-changed=REFINE_GUARDIAN_DYNAMIC");
    if env::var_os("DEP_REFINE_PROTOCOL_STD").is_some() {
        // std links libgcc_s and friends dynamically: stay dynamic.
        println!("cargo:rustc-cfg=protocol_std");
        return;
    }
    let linux_gnu = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && env::var_os("REFINE_GUARDIAN_DYNAMIC").is_none() {
        for lib in ["c", "gcc_eh", "gcc"] {
            println!("cargo:rustc-link-lib=static:-bundle={lib}");
        }
        println!("cargo:rustc-link-arg-bins=-static-pie");
        println!("cargo:rustc-link-arg-bins=-fuse-ld=bfd");
    }
}

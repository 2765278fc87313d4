//! Build settings for the guardian binary.
//!
//! - `protocol_std`: Cargo unifies features across one workspace build, so `cargo build
//!   --workspace` hands the guardian a `std` build of `refine-protocol` (the supervisor and tests
//!   need it), which links the `std` crate and its panic handler. The guardian then must not
//!   define its own. `cargo build -p refine-guardian` gets the pure `no_std` build.
fn main() {
    println!("cargo:rustc-check-cfg=cfg(protocol_std)");
    println!("cargo:rerun-if-env-changed=DEP_REFINE_PROTOCOL_STD");
    if std::env::var_os("DEP_REFINE_PROTOCOL_STD").is_some() {
        println!("cargo:rustc-cfg=protocol_std");
    }
}

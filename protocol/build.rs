//! Tells direct dependents (through `links` metadata, `DEP_REFINE_PROTOCOL_STD`) whether this
//! build of the crate has the `std` feature. Cargo unifies features across a workspace build, so
//! the `no_std` guardian can be handed a `std` build of this crate (and with it the `std` crate's
//! panic handler); its build script reads this to avoid defining a second one.
fn main() {
    if std::env::var_os("CARGO_FEATURE_STD").is_some() {
        println!("cargo:std=1");
    }
}

//! The allocation-free formats of refine: the guardian handshake ([`frame`]), the fixed-layout
//! scope-exit receipt ([`receipt`]), identities ([`ids`]) and the byte [`codec`] under them.
//!
//! `no_std`, no allocation, no features, no dependencies: this crate is all the protocol the
//! `no_std` guardian links, so no feature unified in a workspace build can bring `std` (and with it
//! a C library and a second panic handler) into the guardian.
//!
//! Every decoder takes `&[u8]` and returns a typed [`DecodeError`] for truncated, oversized,
//! wrong-magic, wrong-version, bad-checksum or trailing input and never panics; no length field is
//! trusted before it has been checked against the input and a fixed maximum. Encoders write into a
//! caller-owned `&mut [u8]`.
//!
//! `refine-protocol` compiles these same source files as its own modules and adds the serde
//! implementations the supervisor's records and JSON documents need (see its `serde_impls`).
//! Every path below is therefore `crate::`-relative and the same in both crates.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod capture;
pub mod codec;
mod error;
pub mod frame;
pub mod ids;
pub mod mark;
pub mod provenance;
pub mod receipt;
pub mod time;

pub use error::{DecodeError, EncodeError};
pub use frame::{Frame, Hello, LaunchParams, LaunchSpec, Rlimit};
pub use ids::{BootId, ProcessWitness, ProofIdentity, RegistrationId, RuntimeId};
pub use receipt::{is_unwritten, Receipt, ScopeEnd, TreeUsage, WorkloadStatus};

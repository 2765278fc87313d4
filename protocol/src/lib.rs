//! The wire and disk formats of refine: every byte that crosses a process boundary or survives a
//! restart is defined here and nowhere else.
//!
//! - [`frame`]: the guardian handshake, one frame per `SOCK_SEQPACKET` message.
//! - [`receipt`]: the fixed-layout scope-exit receipt the guardian writes into the proof file.
//! - [`record`]: the durable registration record, the capture receipt, stop and result records.
//! - [`api`]: the service socket's requests and responses (JSON lines).
//! - [`docs`]: the JSON contract: every `--json` document and socket reply, and the closed enums
//!   they name states, outcomes and reasons with.
//!
//! The allocation-free core ([`codec`], [`frame`], [`receipt`], [`ids`], the errors) lives in
//! `refine-protocol-core` (`protocol/core/`), the only protocol crate the `no_std` guardian links.
//! This crate compiles the same source files as its own modules, so that it can add the serde
//! implementations the records and the supervisor's JSON documents need (`serde_impls.rs`): Rust
//! allows a serde implementation only in the crate of the type (or of serde), and the core must
//! not depend on serde (a workspace build turns on serde's `std` feature, which would bring `std`
//! into the guardian). One source, two compilations; the bytes are the same by construction.
#![forbid(unsafe_code)]

#[path = "../core/src/capture.rs"]
pub mod capture;
#[path = "../core/src/codec.rs"]
pub mod codec;
#[path = "../core/src/error.rs"]
mod error;
#[path = "../core/src/frame.rs"]
pub mod frame;
#[path = "../core/src/ids.rs"]
pub mod ids;
#[path = "../core/src/mark.rs"]
pub mod mark;
#[path = "../core/src/provenance.rs"]
pub mod provenance;
#[path = "../core/src/receipt.rs"]
pub mod receipt;
#[path = "../core/src/time.rs"]
pub mod time;

pub mod api;
pub mod docs;
pub mod record;
pub mod schema;
mod serde_impls;

pub use error::{DecodeError, EncodeError};
pub use frame::{Frame, Hello, LaunchParams, LaunchSpec, Rlimit};
pub use ids::{BootId, ProcessWitness, ProofIdentity, RegistrationId, RuntimeId};
pub use receipt::{is_unwritten, Receipt, ScopeEnd, TreeUsage, WorkloadStatus};
pub use record::{
    BuildClass, BuildProvenance, CaptureReceipt, CgroupUsage, Kind, LaunchResultRecord, Limits,
    Registration, ResidueStopRecord, ScopeCgroup, ScopePolicy, StopCause, StopRequest, StreamEnd,
    StreamReceipt,
};

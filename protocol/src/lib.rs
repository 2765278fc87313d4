//! The wire and disk formats of refine: every byte that crosses a process boundary or survives a
//! restart is defined here and nowhere else.
//!
//! - [`frame`]: the guardian handshake, one frame per `SOCK_SEQPACKET` message.
//! - [`receipt`]: the fixed-layout scope-exit receipt the guardian writes into the proof file.
//! - [`record`] (feature `std`): the durable registration record and the capture receipt.
//! - [`api`] (feature `std`): the service socket's requests and responses (JSON lines).
//!
//! The core ([`codec`], [`frame`], [`receipt`], [`ids`]) is `no_std` and allocation-free:
//! `encode_into(&mut [u8])` and `decode(&[u8])`. Every decoder returns a typed [`DecodeError`] for
//! truncated, oversized, wrong-magic, wrong-version, bad-checksum or trailing input and never panics;
//! no length field is trusted before it has been checked against the input and a fixed maximum.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]

#[cfg(feature = "std")]
pub mod api;
pub mod codec;
mod error;
pub mod frame;
pub mod ids;
pub mod receipt;
#[cfg(feature = "std")]
pub mod record;

pub use error::{DecodeError, EncodeError};
pub use frame::{Frame, Hello, LaunchParams, LaunchSpec, Rlimit};
pub use ids::{BootId, ProcessWitness, ProofIdentity, RegistrationId, RuntimeId};
pub use receipt::{is_unwritten, Receipt, ScopeEnd, WorkloadStatus};
#[cfg(feature = "std")]
pub use record::{
    CaptureReceipt, Kind, LaunchResultRecord, Limits, Registration, ScopePolicy, StopCause,
    StopRequest, StreamEnd, StreamReceipt,
};

//! The runtime directory `run/P` and how it stays true across crashes.
//!
//! - [`registry`]: the runtime directory (records, proofs, logs, locks).
//! - [`durable`]: the one way to write a file that must survive a crash.
//! - [`fence`]: bounded `flock` fences (the runtime stop fence, per-registration locks).
//! - [`output_index`]: the time index beside an artifact (L2).
//! - [`journal`]: the events journal (V2).

pub mod durable;
pub mod fence;
pub mod journal;
pub mod output_index;
pub mod registry;

//! Admission before a launch (SPEC C1–C4, the `unique` rule): a slot for an `agent` launch, and
//! one open scope per label for a `unique` one, decided under the admission lock that the host
//! then holds until the launch's registration is durable (C4). A host that launches on its own
//! asks [`admit`] (it waits, as `run` does); one with an event loop of its own asks
//! [`try_admit`] once per census and waits between two on a timer ([`super::SlotWait`], as the
//! service does), with its own [`HostProbe`] (from [`super::capacity_probe`]).
//!
//! The mechanism is [`crate::capacity`]'s.
//!
//! # Caveats
//! - The lock ([`super::Fence`]) is the admission: dropped before the registration is durable,
//!   two launches may both count the same free slot.
//! - A census is a sample of the host: memory another program takes after it is not counted.

/// What admission looks at ([`Admission::of`] a socket's launch ask), the blocking driver and
/// the single check.
pub use crate::capacity::{admit, try_admit, Admission};
/// Where the host and tree figures of a census come from.
pub use crate::capacity::{HostProbe, HostSample, TreeSample};

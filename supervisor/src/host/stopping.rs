//! The one stop (SPEC T) as a host with an event loop of its own drives it step by step (T7,
//! D2): the polite signal, the grace as a timer of the host's loop over the guardian's pidfd,
//! then the stop proper ([`super::ops::stop_after_grace`]); and the shared stop of a launch's
//! residue, which a host sees through before it exits (as `run` does).
//!
//! The mechanisms are [`crate::end::stop`]'s, [`crate::kernel::signal`]'s and the launch
//! engine's ([`crate::launch::shared_stop`]); this module names what a host drives.
//!
//! # Caveats
//! - [`Stopping`] holds no clock and waits for nothing: the host tells it the time and whether
//!   the tree is empty. A guardian whose pidfd cannot be opened ([`Verified::open`] fails) is
//!   gone or its pid reused: the service then counts the tree as empty, and the stop proper
//!   proves the end at once.
//! - A stop is proven by the guardian's receipt, not by the grace ending.

/// A signal to the workload's process group through a verified member, and no stop (a host's
/// `signal ID SIG`): what was sent, nothing when no member of the group is left.
pub use crate::end::stop::signal_workload;
/// The step ([`Stopping::advance`] answers what is [`Next`]), the grace it starts with and the
/// options of the stop it ends in.
pub use crate::end::stop::{Grace, Next, StopOptions, Stopping};
/// A guardian held by a pidfd and verified to be its witness: readable once it has exited
/// ([`Verified::has_exited`]).
pub use crate::kernel::signal::Verified;
/// The shared stop of a launch's scope (fence, quiesce, kill, proof by the receipt).
pub use crate::launch::shared_stop;

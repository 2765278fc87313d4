//! What a host that serves a runtime for as long as it lives needs beside the operations (as
//! `serve` does): its own lock on the runtime, the stall watch over every live scope (H3), and
//! the health probes of scopes whose prober is gone (H7).
//!
//! The mechanisms are [`crate::store::fence`]'s, [`crate::hygiene::stall`]'s and
//! [`crate::launch::health`]'s; this module names what such a host drives.
//!
//! # Caveats
//! - The lock is a `flock`: it ends with the process (and every descriptor of it), never left
//!   behind by a crash; a second host of the same runtime finds it taken.
//! - The watch only reports: it never signals anything. Its passes and the probes' timer are
//!   the host's (a timer of its event loop, each pass on a blocking thread).

/// The stall watch of every live scope: [`Watcher::pass`] once a period, with the boot
/// ([`KERNEL_BOOT`]) and the monotonic [`boottime`]; each [`StallEvent`] named for a log line
/// ([`stall_signal_name`], [`stall_cleared_name`]).
pub use crate::end::assess::{BootSource, KERNEL_BOOT};
pub use crate::hygiene::stall::sample::{boottime, Watcher};
pub use crate::hygiene::stall::{
    cleared_name as stall_cleared_name, signal_name as stall_signal_name, Cleared as StallCleared,
    Event as StallEvent, Incident as StallIncident, Signal as StallSignal,
};
/// The probes a host runs (one queue of due times, one timer) and whether the process that
/// last probed a scope is gone (then this host resumes them).
pub use crate::launch::health::{prober_gone, prober_gone_or_here, Queue as HealthQueue};
/// Takes a lock only if it is free now (the service's lock: one service per runtime).
pub use crate::store::fence::try_acquire;

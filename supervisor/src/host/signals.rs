//! A host's own signal state (SPEC W2, W9, W10, G11): what it inherited, a clean `SIGCHLD`, and
//! signals blocked and taken synchronously from a `signalfd` instead of handlers. A host that
//! is itself a command line relays what it receives to its workload with these (as `run` does),
//! holds interrupts across a stop (as `stop` does), or keeps a signal blocked across `execve`
//! (as the service's upgrade in place does).
//!
//! The mechanism is [`crate::kernel::child_signals`]'s; this module names what a host uses.
//!
//! # Caveats
//! - A signal mask is per thread and inherited: [`Blocked::block`] (and [`reset`],
//!   [`capture_inherited`]) belong before the host starts any thread, or the threads started
//!   earlier keep the old mask and take the signals by their default action.
//! - Signals coalesce: two of one kind before a [`read_signal`] are read as one.

pub use crate::kernel::child_signals::{
    capture_inherited, inherited, inherited_ignored, read_signal, reset, unblock, Blocked, Taken,
};

//! What a host that is itself a command line needs of its own terminal and standard streams
//! (as `run` does, SPEC W3, W12, W15): the terminal's foreground handed to the workload's
//! process group and taken back, the terminal's size and raw mode for an interactive PTY
//! launch, and the workload's output copied to this process's stdout and stderr at the
//! reader's pace.
//!
//! The mechanisms stay where they are ([`crate::kernel::terminal`], [`crate::launch::pty`],
//! [`crate::launch::capture`]); this module names the part of them a host uses.
//!
//! # Caveats
//! - These act on this process's own terminal and descriptors: a host that is not the
//!   foreground job of a terminal (a service, a daemon) has none to claim, and
//!   [`Foreground::claim`] says so with `None`.
//! - [`RawMode`] puts the terminal back when dropped; a host killed with `SIGKILL` leaves it raw
//!   (as any raw-mode program does).

/// The terminal's foreground process group, claimed for a workload's group and given back (W15).
pub use crate::kernel::terminal::Foreground;
/// A stream copied to this process's own stdout or stderr as it is read, never blocking the
/// engine (W3); `poll_until`: `poll` until an event or a deadline, `EINTR` retried.
pub use crate::launch::capture::{poll_until, CaptureError, Forward};
/// The size of a terminal (to give an interactive launch's PTY the operator's) and the
/// operator's terminal in raw mode while such a launch runs (W12).
pub use crate::launch::pty::{window_size, PtyError, RawMode, WindowSize};

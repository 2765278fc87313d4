//! What a live scope and its processes are doing now, read from the kernel (H8): the figures
//! of a scope (CPU, memory, pids, I/O) from its cgroups or `/proc`, and one process's state. A
//! host draws its own live view with these (as `top` does), watches a workload that job
//! control may stop (as `run` does), or tells an exited child of its own from a live one (as
//! the service does for guardians it inherited across an upgrade in place).
//!
//! The mechanisms are [`crate::kernel::observe`], [`crate::kernel::procfs`] and
//! [`crate::kernel::tree`]'s; this module names the part a host uses.
//!
//! # Caveats
//! - A sample is a moment: a scope may gain or lose processes right after it. Rates need two
//!   samples and a clock, which is the caller's.
//! - A process is a witness (pid, start time, boot id), never a bare pid: [`stat_of`] answers
//!   `None` for a pid the kernel gave to another process since.

/// A scope's figures ([`sample`] of a [`Place`]: its cgroup, its limits' directories and the
/// roots of its tree without one).
pub use crate::kernel::observe::{sample, ObserveError, Place, Sample, Source};
/// One process as `/proc/PID/stat` has it, if the witness still names it; the boot id that
/// binds witnesses to this boot.
pub use crate::kernel::procfs::{boot_id, stat_of, ProcfsError, Stat, State};
/// Where a scope's processes are found without a cgroup of its own.
pub use crate::kernel::tree::Roots;

//! The child-subreaper bit (G1): set before the workload is forked, so every descendant whose
//! parent dies — double forks, `setsid` daemons — is reparented to the guardian instead of
//! init, and the guardian's `waitpid` sees (and reaps) the whole scope.
//!
//! # Caveats
//! A descendant can still escape by becoming the child of another subreaper below us, or by a
//! PID namespace of its own; the guardian reaps what the kernel hands it. The bit is not
//! inherited across `fork`, so the workload does not get it.

use crate::error::Error;
use crate::sys;

#[doc(alias = "PR_SET_CHILD_SUBREAPER")]
pub fn become_subreaper() -> Result<(), Error> {
    sys::set_child_subreaper().map_err(Error::Subreaper)
}

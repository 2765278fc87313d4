//! Where a host's scopes get their cgroup v2 directories (SPEC H8): a host chooses once, before
//! its first launch (the service's `--no-cgroup` and `--cgroup-root`, else the environment's
//! `REFINE_CGROUP` and `REFINE_CGROUP_ROOT`), and can say where scopes go or why they get none.
//!
//! The mechanism is [`crate::kernel::cgroup`]'s.
//!
//! # Caveats
//! - The choice is the process's, once: [`configure`] after the first launch (or after
//!   [`base`] has been asked) changes nothing and returns `false`.
//! - A scope without a cgroup of its own is found and stopped through `/proc` (its processes'
//!   owner marker): a process that clears its environment and escapes its tree escapes that.

/// The choice ([`Setting`]: off, automatic, or a root), made with [`configure`]; [`base`]: the
/// folder scopes' cgroups go in, or why there is none.
pub use crate::kernel::cgroup::{base, configure, Setting, ENV_ROOT, ENV_SWITCH};

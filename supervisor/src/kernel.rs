//! Reading and acting on the kernel: `/proc`, process trees, the one pidfd-verified signal,
//! inherited signal state, descriptor limits, the guardian's identity mark and provenance, and cgroup
//! v2 scopes.
//! Nothing here knows about registrations or launches.
//!
//! - [`clock`]: the wall clock, read once for every record.
//! - [`procfs`]: `/proc` reading (stat, boot id) and process witnesses.
//! - [`tree`]: discovery of a guardian's scope (descendants, owner markers).
//! - [`signal`]: the one pidfd-verified signal helper.
//! - [`child_signals`]: a clean `SIGCHLD` for processes that wait for children (`unsafe` allowed
//!   there and in `stand_in` only).
//! - [`limits`]: the descriptor limit this process depends on.
//! - [`nested`]: recognising a guardian by the mark its binary carries.
//! - [`provenance`]: this build's provenance and a guardian executable's (V1).
//! - [`cgroup`]: a cgroup v2 directory of its own per scope where one can be made.
//! - [`resources`]: a scope's resource limits through cgroups, v2 or v1 (H8).
//! - [`observe`]: what a live scope uses now, from its cgroups or `/proc` (H8's `top`).
//! - [`landlock`]: Landlock rulesets the guardian's gated child applies (X11, X12; `unsafe`
//!   allowed there too).
//! - [`terminal`]: the terminal's foreground group, handed to a workload's group (W15).
//! - [`stand_in`]: a forked copy that works while this process is stopped (job control; `unsafe` allowed there too).

pub mod cgroup;
pub mod child_signals;
pub mod clock;
pub mod landlock;
pub mod limits;
pub mod nested;
pub mod observe;
pub mod procfs;
pub mod provenance;
pub mod resources;
pub mod signal;
pub mod stand_in;
pub mod terminal;
pub mod tree;

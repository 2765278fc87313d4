//! `top --json` (SPEC H8): one sample of every live scope's resource use, as
//! `podman stats --no-stream --format json` gives one of every container's.

use serde::{Deserialize, Serialize};

crate::vocabulary! {
    /// Where a figure of `top` was read.
    pub enum TopSource: "figure source" {
        /// A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
        /// directory of one of its H8 limits.
        Cgroup,
        /// Sums over the scope's processes in `/proc`.
        Proc,
    }
}

/// `top --json`: the live scopes of the port, each measured twice, `window_ms` apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TopDoc {
    pub port: u16,
    /// When the second sample was taken (UTC).
    pub sampled_at: String,
    /// The measurement window the CPU shares are taken over (the pause between the two
    /// samples), milliseconds.
    pub window_ms: u64,
    /// Newest first, as `ps` lists them; a scope that ended during the window is left out.
    pub scopes: Vec<TopScopeDoc>,
}

/// One live scope's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TopScopeDoc {
    pub id: String,
    pub label: String,
    pub kind: crate::Kind,
    /// Where the scope's processes were found and its CPU time read: `cgroup` (its own cgroup
    /// v2 directory: exact membership, `cpu.stat`), or `proc` (the tree below its guardian).
    pub source: TopSource,
    /// CPU time spent during the window, in percent of one core (`200.0`: two cores busy).
    pub cpu_percent: f64,
    /// CPU time spent during the window, microseconds.
    pub cpu_window_us: u64,
    /// The window this scope was measured over (between its two samples), microseconds.
    pub window_us: u64,
    /// Memory in use at the second sample: the cgroup's `memory.current` (v2) or
    /// `memory.usage_in_bytes` (v1), page cache included; or the sum of the processes' resident
    /// sets (`VmRSS`), where shared pages count once per process.
    pub memory_bytes: u64,
    pub memory_source: TopSource,
    /// Tasks (threads) at the second sample: `pids.current`, or the processes' `Threads`.
    pub pids: u64,
    pub pids_source: TopSource,
    /// Bytes read from and written to block devices so far: `io.stat` (v2 `rbytes`, `wbytes`),
    /// or the processes' `read_bytes`, `write_bytes` in `/proc/PID/io` (their reaped children
    /// included, processes that already ended not).
    pub block_read_bytes: u64,
    pub block_write_bytes: u64,
    pub io_source: TopSource,
}

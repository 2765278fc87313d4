//! Sampling a scope for the stall watch: the tree's cumulative CPU time and the bytes it produced.
//!
//! Bytes produced (D6) are the artifacts' size plus what the tree's live members have written
//! (`wchar` of `/proc/PID/io`: every byte passed to `write` and its kin, whatever the target). A
//! scope writing past its `--log-cap` leaves its artifacts' size unchanged but its members'
//! `wchar` grows, so it is neither `silent` nor `stalled`.
//!
//! The tree's CPU time is read from `/proc/PID/stat` (fields 14–17): for every live member its
//! own and its reaped children's user + system time, plus the guardian's reaped-children time
//! (the guardian reaps every orphan, so a member that exited is folded into its reaper). The
//! guardian's own time is left out: it is the supervisor's cost, not the workload's.
//!
//! # Caveats
//! A member's time moves into its parent's child counters only when the parent waits for it; a
//! zombie still counts as itself. A member that exits takes its `wchar` with it: the sum drops,
//! which the watch reads as a change (output), at worst one sample of activity too many. A member
//! whose `/proc/PID/io` cannot be read (another user's, not dumpable) adds nothing. The marker scan (every process's environment) is skipped:
//! escaped processes outside the guardian's tree are not sampled.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use refine_protocol::record::{Registration, StallRecord};
use refine_protocol::{BootId, RegistrationId};

use super::{Event, Sample, StallConfig, Status, Watch};
use crate::end::assess::{self, BootSource};
use crate::kernel::procfs;
use crate::kernel::tree::{self, Roots, TreeError};
use crate::store::registry::{Runtime, Stream};

/// What one look at a scope's tree found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeSample {
    /// Cumulative CPU time (see the module docs).
    pub cpu: Duration,
    /// Bytes the live members have written (`wchar`), summed.
    pub written: u64,
}

/// `wchar` of `/proc/PID/io`, when readable.
fn wchar(pid: rustix::process::Pid) -> Option<u64> {
    let text = crate::kernel::procfs::read_pseudo_string(
        format!("/proc/{}/io", pid.as_raw_nonzero()).as_ref(),
    )
    .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The tree's cumulative CPU time and written bytes; `None` once the guardian is gone.
pub(crate) fn tree_usage(
    reg: &Registration,
    boot: BootId,
) -> Result<Option<TreeSample>, TreeError> {
    let hz = procfs::ticks_per_second();
    let guardian = reg.hello.guardian;
    let Some(gpid) = procfs::pid_of(&guardian) else {
        return Ok(None);
    };
    let reaped = match procfs::stat_cpu(gpid) {
        Ok((s, cpu)) if s.matches(&guardian) && !s.state.is_exited() => {
            cpu.children_user + cpu.children_system
        }
        Ok(_) => return Ok(None),
        Err(e) if e.is_vanished() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let scope = tree::discover(
        &Roots {
            guardian: Some(guardian),
            members: Vec::new(),
            owner: None,
        },
        boot,
    )?;
    let mut ticks = reaped;
    let mut written: u64 = 0;
    for m in scope.live() {
        let Some(pid) = procfs::pid_of(&m.witness) else {
            continue;
        };
        match procfs::stat_cpu(pid) {
            Ok((s, cpu)) if s.matches(&m.witness) => {
                ticks = ticks.saturating_add(cpu.with_children());
                written = written.saturating_add(wchar(pid).unwrap_or(0));
            }
            Ok(_) => {}
            Err(e) if e.is_vanished() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(TreeSample {
        cpu: Duration::from_secs(ticks / hz)
            + Duration::from_nanos((ticks % hz) * 1_000_000_000 / hz),
        written,
    }))
}

/// The total size of the registration's output artifacts (stdout, stderr), bytes; a missing
/// artifact counts as empty.
pub fn artifact_bytes(runtime: &Runtime, reg: &Registration) -> u64 {
    [Stream::Stdout, Stream::Stderr]
        .into_iter()
        .filter_map(|s| std::fs::metadata(runtime.log_path(reg.id, s)).ok())
        .map(|m| m.len())
        .sum()
}

/// Time since boot including suspend (`CLOCK_BOOTTIME`): the watch's clock, so a sample after
/// a suspend is seen as late (`CLOCK_MONOTONIC`, behind [`std::time::Instant`], stops while
/// suspended).
#[doc(alias = "CLOCK_BOOTTIME")]
pub fn boottime() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The service's side of the watch: one [`Watch`] per live registration of a runtime, fed one
/// sample each per [`Watcher::pass`], with each status written beside the registration
/// ([`Runtime::write_stall`]) for `ps` and `show`.
#[derive(Debug)]
pub struct Watcher {
    cfg: StallConfig,
    watches: HashMap<RegistrationId, Watch>,
}

impl Watcher {
    /// A watcher; the status files a previous service left behind are removed by the first
    /// [`Watcher::pass`] (nothing is known of the time in between).
    pub fn new(cfg: StallConfig) -> Watcher {
        Watcher {
            cfg,
            watches: HashMap::new(),
        }
    }

    /// How many watched scopes have an open `stalled` and an open `silent` incident.
    pub fn counts(&self) -> (usize, usize) {
        self.watches
            .values()
            .map(Watch::status)
            .fold((0, 0), |(a, b), s| {
                (
                    a + usize::from(s.stalled.is_some()),
                    b + usize::from(s.silent.is_some()),
                )
            })
    }

    /// The open incidents of `id`, if it is watched.
    pub fn status(&self, id: RegistrationId) -> Option<Status> {
        self.watches.get(&id).map(Watch::status)
    }

    /// Samples every live registration of `runtime` once: `at` is a monotonic time, `unix_ms`
    /// the wall clock. Returns the incidents that began or ended (the caller logs them). A
    /// scope that is no longer live is forgotten without an event.
    pub fn pass(
        &mut self,
        runtime: &Runtime,
        boot: &dyn BootSource,
        at: Duration,
        unix_ms: u64,
    ) -> Vec<(RegistrationId, Event)> {
        let mut events = Vec::new();
        let mut seen = HashSet::new();
        let Ok(current) = boot.boot_id() else {
            return events;
        };
        // Only the open index can hold a live scope (F1: a pass costs O(open), not O(history)).
        for id in runtime.open_ids().unwrap_or_default() {
            let Ok(reg) = runtime.read_registration(id) else {
                continue;
            };
            if !assess::assess(runtime, &reg, boot).is_live() {
                continue;
            }
            let Ok(Some(tree)) = tree_usage(&reg, current) else {
                continue;
            };
            seen.insert(id);
            let watch = self
                .watches
                .entry(id)
                .or_insert_with(|| Watch::new(self.cfg));
            let before = watch.status();
            let sample = Sample {
                at,
                unix_ms,
                cpu: tree.cpu,
                produced_bytes: artifact_bytes(runtime, &reg).wrapping_add(tree.written),
            };
            events.extend(watch.observe(sample).into_iter().map(|e| (id, e)));
            let status = watch.status();
            if status.label().is_some() {
                let rec = StallRecord {
                    id,
                    runtime: runtime.id(),
                    sampled_at_unix_ms: unix_ms,
                    stalled: status.stalled,
                    silent: status.silent,
                };
                if let Err(e) = runtime.write_stall(&rec) {
                    tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot record the stall watch's status");
                }
            } else if before.label().is_some() || self.first_pass(id) {
                let _ = std::fs::remove_file(runtime.stall_path(id));
            }
        }
        self.watches.retain(|id, _| {
            let keep = seen.contains(id);
            if !keep {
                let _ = std::fs::remove_file(runtime.stall_path(*id));
            }
            keep
        });
        events
    }

    fn first_pass(&self, id: RegistrationId) -> bool {
        self.watches.get(&id).is_some_and(|w| w.samples() == 1)
    }
}

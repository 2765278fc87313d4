//! Capacity admission (SPEC C1–C3): how many workloads this node may run at once.
//!
//! The policy is pure ([`Policy::admit`]): it spends at most `limit_percent` (70 % by default) of
//! the logical cores and of the *currently available* memory, always allows at least one slot, and
//! reserves at least [`DEFAULT_FLOOR`] (2 GiB) per workload. The figures come from a [`HostProbe`]
//! (sysinfo in production, [`FixedProbe`] as the test seam) and per-scope [`TreeSample`]s.
//!
//! A workload is its root *and every descendant*. A tree sample raises the reservation above the
//! floor only when it is complete (every member's memory was read) and stable (two consecutive
//! scans saw the same members); anything less keeps the floor. When memory telemetry is not
//! available at all, admission gives exactly one slot.
//!
//! Admission counts the scopes observed `live` or `unverified` right now (C3), never durable
//! reservations: an unverified scope may still hold its memory, an exited one holds nothing.
//! Check and reserve happen under one runtime lock ([`admission_lock`], C4); the formula is on
//! [`Policy::admit`].
//!
//! # Caveats
//! Available memory moves under our feet; a sample is a snapshot. A tree can fork between the two
//! scans of a stability check: that sample is then incomplete and keeps the floor (the safe side).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::store::fence::{self, Fence, FenceError};
use crate::store::registry::Runtime;

mod admission;
pub use admission::{
    admit, capacity_report, probe, try_admit, Admission, AdmitError, Census, SlotTurn, SlotWait,
    UNKNOWN_KIND,
};

/// The reservation floor per workload: 2 GiB.
pub const DEFAULT_FLOOR: u64 = 2 * 1024 * 1024 * 1024;
/// Default share of cores and available memory that automatic admission may spend.
pub const DEFAULT_LIMIT_PERCENT: u8 = 70;

/// Admission policy parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// 1..=100.
    pub limit_percent: u8,
    /// Minimum reservation per workload, bytes.
    pub floor_bytes: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            limit_percent: DEFAULT_LIMIT_PERCENT,
            floor_bytes: DEFAULT_FLOOR,
        }
    }
}

/// Host telemetry at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSample {
    pub logical_cores: usize,
    /// `None`: the kernel did not tell us (telemetry unavailable).
    pub available_memory: Option<u64>,
}

/// Memory of one workload tree (root plus all descendants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeSample {
    /// Every member was read, and two consecutive scans saw the same members.
    Complete { members: usize, rss_bytes: u64 },
    /// Something was missing or moving: this sample may not raise a reservation.
    Incomplete { reason: &'static str },
}

/// How the per-workload reservation was derived (the floor, or a sample): the contract's name.
pub use refine_protocol::docs::ReservationSource;

/// The admission figures (`capacity --json` prints them as the contract's `CapacityDoc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityReport {
    pub cores: usize,
    /// Bytes; `null` when telemetry is unavailable.
    pub available_memory: Option<u64>,
    pub limit_percent: u8,
    pub reservation_bytes: u64,
    pub reservation_source: ReservationSource,
    pub floor_bytes: u64,
    /// Human explanation of the reservation and slot figures.
    pub derivation: String,
    pub cpu_slots: usize,
    /// `null` when telemetry is unavailable.
    pub memory_slots: Option<usize>,
    pub slots: usize,
    pub live: usize,
    pub unverified: usize,
    pub free: usize,
    /// Tree samples that were taken, by registration id.
    pub samples: BTreeMap<String, SampleReport>,
}

/// One tree sample, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleReport {
    pub complete: bool,
    pub members: usize,
    pub rss_bytes: u64,
    pub reason: Option<String>,
}

impl From<&TreeSample> for SampleReport {
    fn from(s: &TreeSample) -> Self {
        match *s {
            TreeSample::Complete { members, rss_bytes } => SampleReport {
                complete: true,
                members,
                rss_bytes,
                reason: None,
            },
            TreeSample::Incomplete { reason } => SampleReport {
                complete: false,
                members: 0,
                rss_bytes: 0,
                reason: Some(reason.to_owned()),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error("limit percent must be between 1 and 100, got {0}")]
    BadPercent(u8),
}

impl Policy {
    pub fn new(limit_percent: u8, floor_bytes: u64) -> Result<Self, CapacityError> {
        if limit_percent == 0 || limit_percent > 100 {
            return Err(CapacityError::BadPercent(limit_percent));
        }
        Ok(Policy {
            limit_percent,
            floor_bytes,
        })
    }

    /// The reservation per workload: the floor, raised only by complete samples (C2).
    pub fn reservation<'a>(
        &self,
        samples: impl IntoIterator<Item = &'a TreeSample>,
    ) -> (u64, ReservationSource) {
        let mut best = self.floor_bytes;
        let mut source = ReservationSource::Floor;
        for s in samples {
            if let TreeSample::Complete { rss_bytes, .. } = *s {
                if rss_bytes > best {
                    best = rss_bytes;
                    source = ReservationSource::Sample;
                }
            }
        }
        (best, source)
    }

    /// Slots, and free slots given the scopes observed `live` and `unverified` (C1–C3, C4).
    ///
    /// ```text
    /// busy         = live + unverified                      (scopes that may hold resources)
    /// cpu_slots    = ⌊limit% × logical cores⌋               (counts every workload, busy ones too)
    /// memory_slots = ⌊limit% × available memory / reservation⌋
    ///                (workloads that fit *besides* the busy ones: available memory already
    ///                 excludes what running workloads use, so they are not subtracted again)
    /// slots        = max(1, min(cpu_slots, memory_slots + busy))
    ///                (1 when memory telemetry is unavailable)
    /// free         = slots − busy   (never below 0)
    /// ```
    pub fn admit(
        &self,
        host: HostSample,
        samples: &BTreeMap<String, TreeSample>,
        live: usize,
        unverified: usize,
    ) -> CapacityReport {
        let pct = u64::from(self.limit_percent);
        let (reservation, source) = self.reservation(samples.values());
        let cpu_slots = ((host.logical_cores as u64 * pct) / 100) as usize;
        let memory_slots = host.available_memory.map(|avail| {
            let budget = (u128::from(avail) * u128::from(pct) / 100) as u64;
            (budget / reservation.max(1)) as usize
        });
        let busy = live + unverified;
        let slots = match memory_slots {
            // C2: no memory telemetry, one slot.
            None => 1,
            // C4: memory in use by busy scopes is already missing from `available`.
            Some(m) => cpu_slots.min(m.saturating_add(busy)).max(1),
        };
        let derivation = format!(
            "reservation {} ({}); slots = max(1, min({}% of {} cores = {}, {} + {busy} busy))",
            human_bytes(reservation),
            match source {
                ReservationSource::Floor => "floor: no complete, stable sample above it",
                ReservationSource::Sample => "largest complete, stable tree sample",
            },
            self.limit_percent,
            host.logical_cores,
            cpu_slots,
            match (host.available_memory, memory_slots) {
                (Some(a), Some(m)) => format!(
                    "{}% of {} available / reservation = {m}",
                    self.limit_percent,
                    human_bytes(a)
                ),
                _ => "memory telemetry unavailable: one slot".to_owned(),
            }
        );
        CapacityReport {
            cores: host.logical_cores,
            available_memory: host.available_memory,
            limit_percent: self.limit_percent,
            reservation_bytes: reservation,
            reservation_source: source,
            floor_bytes: self.floor_bytes,
            derivation,
            cpu_slots,
            memory_slots,
            slots,
            live,
            unverified,
            free: slots.saturating_sub(busy),
            samples: samples
                .iter()
                .map(|(k, v)| (k.clone(), SampleReport::from(v)))
                .collect(),
        }
    }
}

/// How long an admission waits for another one to finish its check-and-reserve.
pub(crate) const ADMISSION_LOCK_WAIT: Duration = Duration::from_secs(30);

/// The runtime's admission lock (C4), `locks/admission.lock`. An admission holds it from its
/// check until its registration is durable (the registration is the reservation: later checks
/// count it `live`), so concurrent launches never overshoot the slots. It is not held while an
/// admission waits for a slot to free up.
pub fn admission_lock(rt: &Runtime) -> Result<Fence, FenceError> {
    fence::acquire(
        &rt.dir().join("locks").join("admission.lock"),
        ADMISSION_LOCK_WAIT,
    )
}

/// `1.5 GiB`-style rendering for humans.
pub fn human_bytes(n: u64) -> String {
    crate::human::bytes(n)
}

/// Where host and tree figures come from.
pub trait HostProbe {
    fn host(&mut self) -> HostSample;
    /// Samples each tree rooted at `(pid, start time)`, root included, in one pass over the
    /// process table (two scans for the stability check, however many roots).
    fn trees(&mut self, roots: &[(u32, u64)]) -> Vec<TreeSample>;
}

/// Test seam: fixed host figures; trees are always incomplete (they never raise a reservation).
#[derive(Debug, Clone, Copy)]
pub struct FixedProbe(pub HostSample);

impl HostProbe for FixedProbe {
    fn host(&mut self) -> HostSample {
        self.0
    }
    fn trees(&mut self, roots: &[(u32, u64)]) -> Vec<TreeSample> {
        roots
            .iter()
            .map(|_| TreeSample::Incomplete {
                reason: "fixed probe does not sample trees",
            })
            .collect()
    }
}

/// Production figures from sysinfo.
pub struct SysinfoProbe {
    sys: sysinfo::System,
}

impl Default for SysinfoProbe {
    fn default() -> Self {
        Self::new()
    }
}

impl SysinfoProbe {
    pub fn new() -> Self {
        SysinfoProbe {
            sys: sysinfo::System::new(),
        }
    }

    /// Refreshes the process table (memory only).
    fn refresh(&mut self) {
        use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, UpdateKind};
        self.sys.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing()
                .with_memory()
                .without_tasks()
                .with_exe(UpdateKind::Never),
        );
    }

    /// Parent -> children of the last refresh.
    fn children(&self) -> BTreeMap<u32, Vec<u32>> {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (pid, p) in self.sys.processes() {
            if p.thread_kind().is_some() {
                continue;
            }
            if let Some(pp) = p.parent() {
                children.entry(pp.as_u32()).or_default().push(pid.as_u32());
            }
        }
        children
    }

    /// One tree of the last refresh: members (pid, start time) and summed RSS; `None` if any
    /// member's figures were missing or the root is not the witnessed process.
    fn walk(
        &self,
        children: &BTreeMap<u32, Vec<u32>>,
        root: u32,
        root_start_ticks: u64,
    ) -> Option<(BTreeSet<(u32, u64)>, u64)> {
        // The witness: sysinfo does not expose field 22 in ticks, so compare through procfs.
        if stat_start_ticks(root)? != root_start_ticks {
            return None;
        }
        let mut members = BTreeSet::new();
        let mut rss = 0u64;
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            let p = self.sys.process(sysinfo::Pid::from_u32(pid))?;
            let start = stat_start_ticks(pid)?;
            rss = rss.saturating_add(p.memory());
            members.insert((pid, start));
            if let Some(c) = children.get(&pid) {
                stack.extend(c.iter().copied());
            }
        }
        Some((members, rss))
    }
}

impl HostProbe for SysinfoProbe {
    fn host(&mut self) -> HostSample {
        self.sys
            .refresh_memory_specifics(sysinfo::MemoryRefreshKind::nothing().with_ram());
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let avail = self.sys.available_memory();
        HostSample {
            logical_cores: cores,
            // sysinfo reports 0 when /proc/meminfo could not be read.
            available_memory: (avail > 0).then_some(avail),
        }
    }

    fn trees(&mut self, roots: &[(u32, u64)]) -> Vec<TreeSample> {
        if roots.is_empty() {
            return Vec::new();
        }
        self.refresh();
        let children = self.children();
        let first: Vec<_> = roots
            .iter()
            .map(|&(pid, start)| self.walk(&children, pid, start))
            .collect();
        self.refresh();
        let children = self.children();
        roots
            .iter()
            .zip(first)
            .map(
                |(&(pid, start), first)| match (first, self.walk(&children, pid, start)) {
                    (Some((a, _)), Some((b, rss))) if a == b => TreeSample::Complete {
                        members: b.len(),
                        rss_bytes: rss,
                    },
                    (Some(_), Some(_)) => TreeSample::Incomplete {
                        reason: "membership changed between scans",
                    },
                    _ => TreeSample::Incomplete {
                        reason: "a member vanished or could not be read",
                    },
                },
            )
            .collect()
    }
}

/// Field 22 of `/proc/PID/stat` (parsed after the last `)`: comm may contain anything).
fn stat_start_ticks(pid: u32) -> Option<u64> {
    let text =
        crate::kernel::procfs::read_pseudo_string(format!("/proc/{pid}/stat").as_ref()).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    // After ')': field 3 (state) is index 0, so field 22 is index 19.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    fn host(cores: usize, mem: Option<u64>) -> HostSample {
        HostSample {
            logical_cores: cores,
            available_memory: mem,
        }
    }

    #[test]
    fn floor_limits_slots_by_memory() {
        let p = Policy::default();
        // 10 GiB * 70 % = 7 GiB / 2 GiB = 3 slots; 16 cores * 70 % = 11.
        let r = p.admit(host(16, Some(10 * GIB)), &BTreeMap::new(), 0, 0);
        assert_eq!((r.memory_slots, r.cpu_slots, r.slots), (Some(3), 11, 3));
        assert_eq!(r.free, 3);
        assert_eq!(r.reservation_source, ReservationSource::Floor);
    }

    #[test]
    fn memory_in_use_by_busy_scopes_is_not_counted_twice() {
        let p = Policy::default();
        // C4: the 10 GiB available already exclude what the two busy scopes use; 3 more fit.
        let r = p.admit(host(16, Some(10 * GIB)), &BTreeMap::new(), 1, 1);
        assert_eq!((r.memory_slots, r.slots, r.free), (Some(3), 5, 3));
        // Cores count every workload, busy ones too: 4 cores * 70 % = 2, both busy.
        let r = p.admit(host(4, Some(10 * GIB)), &BTreeMap::new(), 2, 0);
        assert_eq!((r.cpu_slots, r.slots, r.free), (2, 2, 0));
        // One slot without telemetry, taken by the one busy scope.
        let r = p.admit(host(16, None), &BTreeMap::new(), 1, 0);
        assert_eq!((r.slots, r.free), (1, 0));
    }

    #[test]
    fn at_least_one_slot_and_one_without_telemetry() {
        let p = Policy::default();
        assert_eq!(p.admit(host(1, Some(GIB)), &BTreeMap::new(), 0, 0).slots, 1);
        let r = p.admit(host(64, None), &BTreeMap::new(), 0, 0);
        assert_eq!((r.slots, r.memory_slots), (1, None));
        assert_eq!(p.admit(host(64, None), &BTreeMap::new(), 3, 0).free, 0);
    }

    #[test]
    fn only_complete_samples_raise_the_reservation() {
        let p = Policy::default();
        let mut s = BTreeMap::new();
        s.insert(
            "a".to_owned(),
            TreeSample::Incomplete {
                reason: "membership changed between scans",
            },
        );
        s.insert(
            "b".to_owned(),
            TreeSample::Complete {
                members: 3,
                rss_bytes: GIB,
            },
        );
        assert_eq!(
            p.reservation(s.values()),
            (2 * GIB, ReservationSource::Floor)
        );
        s.insert(
            "c".to_owned(),
            TreeSample::Complete {
                members: 9,
                rss_bytes: 3 * GIB,
            },
        );
        assert_eq!(
            p.reservation(s.values()),
            (3 * GIB, ReservationSource::Sample)
        );
        // 100 GiB * 70 % / 3 GiB = 23 slots.
        assert_eq!(
            p.admit(host(64, Some(100 * GIB)), &s, 0, 0).memory_slots,
            Some(23)
        );
    }

    #[test]
    fn percent_is_configurable_and_checked() {
        assert!(Policy::new(0, DEFAULT_FLOOR).is_err());
        assert!(Policy::new(101, DEFAULT_FLOOR).is_err());
        let p = Policy::new(50, DEFAULT_FLOOR).unwrap();
        let r = p.admit(host(8, Some(100 * GIB)), &BTreeMap::new(), 0, 0);
        assert_eq!((r.cpu_slots, r.slots), (4, 4));
    }

    #[test]
    fn sysinfo_samples_this_process_as_a_complete_tree() {
        let mut probe = SysinfoProbe::new();
        let h = probe.host();
        assert!(h.logical_cores >= 1);
        let me = std::process::id();
        let start = stat_start_ticks(me).unwrap();
        match probe.trees(&[(me, start)]).remove(0) {
            TreeSample::Complete { members, rss_bytes } => {
                assert!(members >= 1);
                assert!(rss_bytes > 0);
            }
            // The test harness may fork helpers meanwhile; that is an incomplete sample.
            TreeSample::Incomplete { .. } => {}
        }
        assert!(matches!(
            probe.trees(&[(me, start + 1)]).remove(0),
            TreeSample::Incomplete { .. }
        ));
    }
}

//! The open index `run/P/open/` (SPEC F1): which registrations may still be running, so that
//! `ps`, the service's maintenance pass and recovery read O(open) registrations, not the whole
//! history.
//!
//! The index only says where to look; the one assessment ([`crate::end::assess::assess`]) decides,
//! on every call. Markers are created by [`Runtime::write_registration`] before the record (see
//! the [`crate::store::registry`] docs for the order) and leave the index here, in [`settle`], only:
//!
//! - when the assessment, run under the registration's lock, says `exited` (a verified receipt,
//!   or an earlier boot whose witnesses all ended with it); or
//! - when there is no record and the marker is older than [`UNWRITTEN_AFTER`] (a launch that
//!   died between its marker and its record: the launch's start timeout has passed, so its
//!   guardian killed the gated workload and nothing of it can run).
//!
//! # Why it is crash-safe
//! The marker is durable before the record exists, so every record a crash leaves behind is
//! either indexed or was proven exited under its lock first. A removal lost in a crash brings the
//! marker back, and the next pass assesses the registration again: extra work, never a hidden
//! scope. A marker without a record is kept while a launch may still be writing the record.
//!
//! # Caveats
//! A record without a marker is not re-assessed by `ps`, the maintenance pass or recovery. Only
//! tampering with its proof (or a record written by a binary that predates the index) can make
//! such a registration anything but `exited`; [`reindex`] (run by `gc`) puts every record that
//! the assessment does not call `exited` back into the index. `ps --all` and `show` always
//! assess from current evidence.

use std::fs;
use std::time::{Duration, SystemTime};

use refine_protocol::RegistrationId;

use crate::end::assess::{self, Assessment, BootSource};
use crate::store::fence::Fence;
use crate::store::registry::{RegistryError, Runtime};

/// A marker without a record older than this is a launch that died before registering: the
/// guardian's start timeout (it kills the gated workload then) plus a margin.
pub const UNWRITTEN_AFTER: Duration =
    Duration::from_millis(refine_protocol::frame::DEFAULT_START_TIMEOUT_MS as u64 + 30 * 1000);

/// What [`settle`] found and did.
#[derive(Debug)]
pub enum Settled {
    /// The assessment said `exited`: the marker was removed.
    Closed(Assessment),
    /// Live or unverified: the marker stays.
    Open(Assessment),
    /// The record does not decode: nothing proves the scope ended; the marker stays.
    Corrupt(RegistryError),
    /// A marker without a record: dropped when older than [`UNWRITTEN_AFTER`], else kept (a
    /// launch may be writing the record).
    Unwritten { dropped: bool },
}

/// Assesses `id` under its lock (`held`) and removes its marker if the assessment says `exited`
/// (or if no record was ever written, see the module docs).
pub fn settle(
    rt: &Runtime,
    id: RegistrationId,
    held: &Fence,
    boot: &dyn BootSource,
) -> Result<Settled, RegistryError> {
    let reg = match rt.read_registration(id) {
        Ok(reg) => reg,
        Err(RegistryError::NotFound(_)) => {
            let old = fs::metadata(rt.open_marker_path(id))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age >= UNWRITTEN_AFTER);
            let dropped = old && rt.remove_open_marker(id, held)?;
            return Ok(Settled::Unwritten { dropped });
        }
        Err(e) => return Ok(Settled::Corrupt(e)),
    };
    settle_known(rt, &reg, held, boot)
}

/// [`settle`] of a registration the caller holds as it committed it (a launch's own engine at
/// its result): the same assessment, without reading the record back.
pub fn settle_known(
    rt: &Runtime,
    reg: &refine_protocol::Registration,
    held: &Fence,
    boot: &dyn BootSource,
) -> Result<Settled, RegistryError> {
    let a = assess::assess(rt, reg, boot);
    if a.is_exited() {
        finish_cgroup(rt, reg, &a);
    }
    close_if_exited(rt, reg.id, held, a)
}

/// F4: the cgroup of an exited scope, when it is still there (its launcher died between the
/// receipt and its removal): its accounting goes into the result record, then the empty
/// directory goes. Nothing when the launcher removed it (the usual case).
pub fn finish_cgroup(rt: &Runtime, reg: &refine_protocol::Registration, a: &Assessment) {
    // H8: the limits' directories likewise (read before F4's directory goes).
    let left = |dir: &str| std::path::Path::new(dir).exists();
    let limit_usage = reg
        .resources
        .as_ref()
        .filter(|r| r.placements.iter().any(|p| left(&p.dir)))
        .and_then(|_| crate::kernel::resources::finish(reg));
    let cgroup = reg
        .cgroup
        .as_ref()
        .filter(|c| c.holds_scope() && left(&c.path));
    if cgroup.is_none() && limit_usage.is_none() {
        return;
    }
    let usage = cgroup.and_then(|_| crate::kernel::cgroup::finish(reg));
    super::assess::complete_result_usage(
        rt,
        reg.id,
        crate::kernel::cgroup::with_usage(a.receipt().and_then(|r| r.usage), usage),
        usage,
        limit_usage,
    );
}

/// Removes the marker of `id` when `a`, the assessment just made under the registration's lock
/// `held`, says `exited`; for callers that already assessed (recovery).
pub(crate) fn close_if_exited(
    rt: &Runtime,
    id: RegistrationId,
    held: &Fence,
    a: Assessment,
) -> Result<Settled, RegistryError> {
    if a.is_exited() {
        // Whoever proves the end (the launcher, the service, recovery) completes the result.
        super::assess::complete_result_usage(rt, id, a.receipt().and_then(|r| r.usage), None, None);
        rt.remove_open_marker(id, held)?;
        Ok(Settled::Closed(a))
    } else {
        Ok(Settled::Open(a))
    }
}

/// [`settle`] if the registration's lock is free now; `None` when its owner holds it (a
/// launcher keeps it until the receipt, and settles its own marker then).
pub fn settle_if_free(
    rt: &Runtime,
    id: RegistrationId,
    boot: &dyn BootSource,
) -> Result<Option<Settled>, RegistryError> {
    match rt.try_lock(id) {
        Ok(Some(held)) => settle(rt, id, &held, boot).map(Some),
        Ok(None) => Ok(None),
        // Every name is gone (forgotten meanwhile): nothing to settle.
        Err(RegistryError::NotFound(_)) => Ok(Some(Settled::Unwritten { dropped: false })),
        Err(e) => Err(e),
    }
}

/// Counts of one [`settle_all`] pass.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SettleCounts {
    /// Markers examined.
    pub open: usize,
    /// Removed: proven exited.
    pub closed: usize,
    /// Removed: no record, older than [`UNWRITTEN_AFTER`].
    pub dropped: usize,
    /// Skipped: the lock was held by its owner.
    pub busy: usize,
}

/// Settles every marker whose lock is free now (the maintenance pass): O(open).
pub fn settle_all(rt: &Runtime, boot: &dyn BootSource) -> Result<SettleCounts, RegistryError> {
    let mut c = SettleCounts::default();
    for id in rt.open_ids()? {
        c.open += 1;
        match settle_if_free(rt, id, boot)? {
            None => c.busy += 1,
            Some(Settled::Closed(_)) => c.closed += 1,
            Some(Settled::Unwritten { dropped: true }) => c.dropped += 1,
            Some(_) => {}
        }
    }
    Ok(c)
}

/// Puts back into the index every record without a marker that the assessment does not call
/// `exited` (see the module caveats). O(history): run by `gc`, never by `ps`. Adding a marker
/// needs no lock: it only asks the next passes to look. Returns the ids re-indexed.
pub fn reindex(rt: &Runtime, boot: &dyn BootSource) -> Result<Vec<RegistrationId>, RegistryError> {
    let open: std::collections::BTreeSet<RegistrationId> = rt.open_ids()?.into_iter().collect();
    let mut added = Vec::new();
    for id in rt.list_ids()? {
        if open.contains(&id) {
            continue;
        }
        let exited = match rt.read_registration(id) {
            Ok(reg) => assess::assess(rt, &reg, boot).is_exited(),
            // Forgotten meanwhile.
            Err(RegistryError::NotFound(_)) => continue,
            Err(_) => false,
        };
        if !exited {
            rt.add_open_marker(id)?;
            added.push(id);
        }
    }
    Ok(added)
}

//! The maintenance pass (the deadline stops nobody in this process launched), capacity and
//! housekeeping.

use super::*;

/// Which deadline of `reg` has passed, if any (the one definition of activity, W7).
pub fn deadline_passed(reg: &Registration) -> Option<StopCause> {
    use crate::launch::deadline::{expired_on_record, Expired};
    expired_on_record(reg, std::time::Instant::now()).map(|e| match e {
        Expired::Completion => StopCause::CompletionDeadline,
        Expired::Idle => StopCause::IdleDeadline,
    })
}

/// A deadline stop the maintenance pass found due: the registration, which deadline passed,
/// and its grace (W11's `--kill-after`; none: the kill at once).
#[derive(Debug, Clone)]
pub struct DueStop {
    pub reg: Registration,
    pub cause: StopCause,
    pub grace: Option<Duration>,
}

/// What one maintenance pass found: the open registrations it looked at, those it settled
/// (proven exited, or a marker whose launch never wrote its record), and the deadline stops
/// due, for the caller to carry out (its own way of waiting out a grace).
#[derive(Debug, Clone, Default)]
pub struct Maintenance {
    pub open: usize,
    pub settled: usize,
    pub due: Vec<DueStop>,
    /// H7: the live registrations with a health check it looked at, for the caller to see
    /// that each has a prober.
    pub health_checked: Vec<Registration>,
}

/// One maintenance pass over the open index (O(open), F1): a stop abandoned while it held the
/// fence is completed (issue 38 item 7); registrations for which `skip` holds (a launcher's
/// own, whose engines enforce their deadlines and settle) are left alone; `each` sees every
/// other registration read; what the assessment proves exited is settled under its lock; a
/// live scope past a deadline is a [`DueStop`]. Nothing is signalled here.
pub fn maintenance_pass(
    rt: &Runtime,
    skip: impl Fn(RegistrationId) -> bool,
    mut each: impl FnMut(&Registration),
) -> Maintenance {
    use crate::end::open_index::Settled;
    stop::complete_if_abandoned(rt, &assess::KERNEL_BOOT, Duration::ZERO);
    let mut pass = Maintenance::default();
    let Ok(ids) = rt.open_ids() else {
        return pass;
    };
    for id in ids {
        pass.open += 1;
        if skip(id) {
            continue;
        }
        let reg = match rt.read_registration(id) {
            Ok(reg) => reg,
            // A marker whose launch may still be writing its record, or died before it.
            Err(RegistryError::NotFound(_)) => {
                if let Ok(Some(Settled::Unwritten { dropped: true })) =
                    open_index::settle_if_free(rt, id, &assess::KERNEL_BOOT)
                {
                    pass.settled += 1;
                }
                continue;
            }
            Err(_) => continue,
        };
        each(&reg);
        match assess_one(rt, &reg).state {
            State::Live => {
                if reg.health.is_some() {
                    pass.health_checked.push(reg.clone());
                }
                if let Some(cause) = deadline_passed(&reg) {
                    let grace = reg.limits.kill_after_ms.map(Duration::from_millis);
                    pass.due.push(DueStop { reg, cause, grace });
                }
            }
            State::Exited => {
                if let Ok(Some(Settled::Closed(_))) =
                    open_index::settle_if_free(rt, id, &assess::KERNEL_BOOT)
                {
                    pass.settled += 1;
                }
            }
            State::Unverified | State::Corrupt => {}
        }
    }
    pass
}

/// C1-C4: the host's capacity for launches, with `limit_percent` of it usable (none: the
/// default policy's), and what the open scopes of `rt` (none: no runtime yet) take of it; the
/// `capacity --json` document.
pub fn capacity(
    rt: Option<&Runtime>,
    limit_percent: Option<u8>,
) -> Result<CapacityDoc, RegistryError> {
    let mut policy = crate::capacity::Policy::default();
    if let Some(p) = limit_percent {
        policy.limit_percent = p;
    }
    let report = crate::capacity::capacity_report(rt, policy, &mut *crate::capacity::probe())?;
    Ok(crate::host::docs::capacity_doc(&report))
}

/// Housekeeping over the whole history (R1-R4): retention of artifacts older than `retain`,
/// then forgetting of records exited longer than `forget_after`. O(history): a service runs it
/// at start and then seldom. Each pass's report, or why it failed.
pub fn housekeeping(
    rt: &Runtime,
    retain: Duration,
    forget_after: Duration,
) -> (
    Result<retention::Report, retention::RetentionError>,
    Result<forget::Report, forget::ForgetError>,
) {
    let retired = retire(
        rt,
        retention::Options {
            older_than: retain,
            dry_run: false,
        },
    );
    let opts = forget::Options {
        after: forget_after,
        dry_run: false,
    };
    (retired, forget::forget(rt, opts, &assess::KERNEL_BOOT))
}

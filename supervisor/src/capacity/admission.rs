//! Admission (SPEC C1–C4): the census of the open scopes that capacity counts, and the check a
//! launch passes under the admission lock (capacity for agents, the label of a unique launch).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use refine_protocol::api::LaunchAsk;
use refine_protocol::docs::State;
use refine_protocol::{Kind, RegistrationId};

use super::{CapacityReport, FixedProbe, HostProbe, HostSample, Policy, SysinfoProbe, TreeSample};
use crate::end::assess;
use crate::store::fence::{Fence, FenceError};
use crate::store::registry::{RegistryError, Runtime};

/// Admission refused a launch (C1–C4, and the one open scope per label of a unique launch), or
/// could not take the census that decides.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    #[error("no capacity slot free for an agent ({live} live and {unverified} unverified of {slots} slot{}); retry later or pass --wait-for-slot DUR", if *slots == 1 { "" } else { "s" })]
    NoCapacity {
        slots: usize,
        live: usize,
        unverified: usize,
    },
    #[error("--unique: the label {label:?} is held by {holder}, which is {state}; it is free once that scope is proven exited")]
    LabelHeld {
        label: String,
        holder: RegistrationId,
        state: &'static str,
    },
    #[error("a unique launch needs a label")]
    UniqueWithoutLabel,
    #[error("cannot take the admission lock")]
    Lock(#[source] FenceError),
    #[error("cannot read the open scopes for admission")]
    Census(#[source] RegistryError),
    #[error("the admission task did not finish")]
    Task(#[source] tokio::task::JoinError),
}

/// The host probe: sysinfo, or the fixed figures of the test seam
/// (`REFINE_CAPACITY_MEMORY=<bytes>|unavailable`, `REFINE_CAPACITY_CORES=<n>`).
pub fn probe() -> Box<dyn HostProbe + Send> {
    let mem = std::env::var("REFINE_CAPACITY_MEMORY").ok();
    let cores = std::env::var("REFINE_CAPACITY_CORES")
        .ok()
        .and_then(|c| c.parse().ok());
    if mem.is_none() && cores.is_none() {
        return Box::new(SysinfoProbe::new());
    }
    let mut real = SysinfoProbe::new().host();
    if let Some(c) = cores {
        real.logical_cores = c;
    }
    if let Some(m) = mem {
        real.available_memory = m.parse().ok();
    }
    Box::new(FixedProbe(HostSample {
        logical_cores: real.logical_cores,
        available_memory: real.available_memory,
    }))
}

/// The kind of a scope whose record does not decode.
pub const UNKNOWN_KIND: &str = "unknown";

/// The open scopes of `run/P` as one pass of the shared assessment sees them: what capacity
/// admission counts, and what the service's metrics show. Exited registrations are passed over.
#[derive(Debug, Default)]
pub struct Census {
    /// Open scopes by state (`live`, `unverified`, `corrupt`) and kind (its name; `unknown`: the
    /// record does not decode).
    pub scopes: BTreeMap<(State, &'static str), usize>,
    /// Each scope that is not proven alive or ended, with why (the assessment's reason, by name).
    pub unverified: Vec<(RegistrationId, &'static str)>,
    /// Live agents' guardians (pid, start time): capacity samples their trees.
    agents: Vec<(String, (u32, u64))>,
}

impl Census {
    /// One pass of the shared assessment (A1) over the open index of `rt` (only what is not yet
    /// proven exited can be live or unverified: O(open), F1).
    pub fn take(rt: &Runtime) -> Result<Census, RegistryError> {
        let mut c = Census::default();
        for id in rt.open_ids()? {
            let reg = match rt.read_registration(id) {
                Ok(reg) => reg,
                Err(RegistryError::NotFound(_)) => continue,
                Err(_) => {
                    // A corrupt record: nothing proves its scope ended; it holds a slot (C3).
                    *c.scopes.entry((State::Corrupt, UNKNOWN_KIND)).or_default() += 1;
                    c.unverified.push((id, "record_corrupt"));
                    continue;
                }
            };
            let state = match assess::assess(rt, &reg, &assess::KERNEL_BOOT) {
                assess::Assessment::Exited { .. } => continue,
                assess::Assessment::Live => {
                    if reg.kind == Kind::Agent {
                        let g = reg.hello.guardian;
                        c.agents.push((id.to_string(), (g.pid, g.start_time)));
                    }
                    State::Live
                }
                assess::Assessment::Unverified { reason } => {
                    c.unverified.push((id, reason.check().name()));
                    State::Unverified
                }
            };
            *c.scopes.entry((state, reg.kind.as_str())).or_default() += 1;
        }
        Ok(c)
    }

    /// Open scopes in `state`, of every kind.
    pub fn count(&self, state: State) -> usize {
        self.scopes
            .iter()
            .filter(|((s, _), _)| *s == state)
            .map(|(_, n)| n)
            .sum()
    }

    /// Slots and free slots (C1–C3): live scopes, and unverified or corrupt ones, hold a slot.
    pub fn capacity(&self, policy: Policy, probe: &mut dyn HostProbe) -> CapacityReport {
        let roots: Vec<(u32, u64)> = self.agents.iter().map(|(_, r)| *r).collect();
        let samples: BTreeMap<String, TreeSample> = self
            .agents
            .iter()
            .map(|(id, _)| id.clone())
            .zip(probe.trees(&roots))
            .collect();
        let live = self.count(State::Live);
        let unverified = self.count(State::Unverified) + self.count(State::Corrupt);
        policy.admit(probe.host(), &samples, live, unverified)
    }
}

/// The capacity report for `run/P` (live and unverified scopes counted from current evidence).
pub fn capacity_report(
    rt: Option<&Runtime>,
    policy: Policy,
    probe: &mut dyn HostProbe,
) -> Result<CapacityReport, RegistryError> {
    let census = match rt {
        Some(rt) => Census::take(rt)?,
        None => Census::default(),
    };
    Ok(census.capacity(policy, probe))
}

/// What admission looks at (C1–C4, the `unique` rule).
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    pub kind: Kind,
    pub label: &'a str,
    pub unique: bool,
    pub wait_for_slot: Option<Duration>,
}

impl<'a> Admission<'a> {
    pub fn of(spec: &'a LaunchAsk) -> Self {
        Admission {
            kind: spec.kind,
            label: &spec.label,
            unique: spec.unique,
            wait_for_slot: spec.wait_for_slot,
        }
    }
}

/// Admission: capacity for `agent` launches (C1–C4) and the one-scope-per-label rule of
/// `unique` launches. `Ok` when a slot is free now or frees up within the ask's
/// `wait_for_slot`, and no other open scope holds a unique launch's label, with the admission
/// lock held: the caller keeps it until the launch's registration is durable (C4), so
/// concurrent launches never overshoot the slots and two unique launches of one label never
/// both start (the second one's check sees the first one's record). The blocking driver of a
/// [`SlotWait`]; the service drives the same value from its event loop.
pub fn admit(rt: &Runtime, spec: &Admission<'_>) -> Result<Option<Fence>, AdmitError> {
    if spec.kind != Kind::Agent && !spec.unique {
        return Ok(None);
    }
    if spec.unique && spec.label.is_empty() {
        return Err(AdmitError::UniqueWithoutLabel);
    }
    let wait = SlotWait::new(Instant::now(), spec.wait_for_slot);
    let mut probe = (spec.kind == Kind::Agent).then(probe);
    loop {
        let check = try_admit(
            rt,
            probe.as_mut().map(|p| &mut **p as &mut dyn HostProbe),
            spec,
        );
        match wait.after(check, Instant::now()) {
            SlotTurn::Admitted(lock) => return Ok(Some(lock)),
            SlotTurn::Refused(e) => return Err(e),
            SlotTurn::LookAgainAt(at) => {
                std::thread::sleep(at.saturating_duration_since(Instant::now()))
            }
        }
    }
}

/// The wait for a capacity slot (C1, `--wait-for-slot`, the API's `wait_for_slot_ms`) as a
/// timer: told each admission check's answer, it says whether the launch goes, is refused, or
/// when to look again. Nothing but the census tells that a slot freed up (a scope of another
/// process may end), so the wait looks again every [`SlotWait::PERIOD`] until its bound. One
/// rule for the blocking caller ([`admit`]) and the service's event loop, which keeps its
/// waiters in one FIFO so that only its head takes censuses (D2).
#[derive(Debug, Clone, Copy)]
pub struct SlotWait {
    until: Instant,
}

/// What a [`SlotWait`] says after one admission check.
#[derive(Debug)]
pub enum SlotTurn {
    /// The launch goes: the admission lock, held until its registration is durable.
    Admitted(Fence),
    /// No slot yet: check again at this instant (never after the wait's bound).
    LookAgainAt(Instant),
    /// Refused: no slot within the bound, a held label, or a census that failed.
    Refused(AdmitError),
}

impl SlotWait {
    /// How often a waiter takes a census while no slot is free.
    pub const PERIOD: Duration = Duration::from_millis(200);

    /// A wait from `now` of at most `wait_for_slot` (`None`: none, one check decides). A bound
    /// the clock cannot hold is [`refine_protocol::api::MAX_DURATION`].
    pub fn new(now: Instant, wait_for_slot: Option<Duration>) -> SlotWait {
        let bound = wait_for_slot
            .unwrap_or_default()
            .min(refine_protocol::api::MAX_DURATION);
        SlotWait {
            until: now.checked_add(bound).unwrap_or(now),
        }
    }

    /// When the wait is over: the last check is made then.
    pub fn until(&self) -> Instant {
        self.until
    }

    /// What the answer of a check made at `now` means.
    pub fn after(&self, check: Result<Fence, AdmitError>, now: Instant) -> SlotTurn {
        match check {
            Ok(lock) => SlotTurn::Admitted(lock),
            Err(AdmitError::NoCapacity { .. }) if now < self.until => {
                SlotTurn::LookAgainAt(self.until.min(now + SlotWait::PERIOD))
            }
            Err(e) => SlotTurn::Refused(e),
        }
    }
}

/// One admission check under the admission lock: a `unique` launch's label (refused while an open
/// scope holds it), then, for an agent (`probe` given), one capacity census. The lock when the
/// launch may go now, else [`AdmitError::LabelHeld`] or [`AdmitError::NoCapacity`] (the
/// service's slot queue waits between two on a timer, D2).
pub fn try_admit(
    rt: &Runtime,
    probe: Option<&mut dyn HostProbe>,
    spec: &Admission<'_>,
) -> Result<Fence, AdmitError> {
    let lock = super::admission_lock(rt).map_err(AdmitError::Lock)?;
    if spec.unique {
        if let Some((holder, state)) = label_holder(rt, spec.label).map_err(AdmitError::Census)? {
            return Err(AdmitError::LabelHeld {
                label: spec.label.to_owned(),
                holder,
                state: state.name(),
            });
        }
    }
    let Some(probe) = probe else {
        return Ok(lock);
    };
    let report = capacity_report(Some(rt), Policy::default(), probe).map_err(AdmitError::Census)?;
    if report.free > 0 {
        return Ok(lock);
    }
    Err(AdmitError::NoCapacity {
        slots: report.slots,
        live: report.live,
        unverified: report.unverified,
    })
}

/// The open scope (live or unverified, by the shared assessment) whose label is `label`, if
/// any: what a `unique` launch of that label is refused for. Only the open index is read (F1);
/// a record that does not decode has no label to hold.
fn label_holder(
    rt: &Runtime,
    label: &str,
) -> Result<Option<(RegistrationId, State)>, RegistryError> {
    for id in rt.open_ids()? {
        let Ok(reg) = rt.read_registration(id) else {
            continue;
        };
        if reg.label != label {
            continue;
        }
        match assess::assess(rt, &reg, &assess::KERNEL_BOOT) {
            assess::Assessment::Exited { .. } => {}
            assess::Assessment::Live => return Ok(Some((id, State::Live))),
            assess::Assessment::Unverified { .. } => return Ok(Some((id, State::Unverified))),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::{admit, Admission, AdmitError, SlotTurn, SlotWait};
    use crate::store::registry::{create_home, Runtime, DEFAULT_PORT};
    use refine_protocol::Kind;
    use std::time::{Duration, Instant};

    /// A wait the clock cannot hold is no panic (W11: never an abort, anywhere): a free label
    /// is admitted at once whatever the caller's bound.
    #[test]
    fn a_wait_the_clock_cannot_hold_admits_without_a_panic() {
        let home = tempfile::tempdir().expect("a home");
        create_home(home.path()).expect("the home");
        let rt = Runtime::open(home.path(), DEFAULT_PORT).expect("the runtime");
        let ask = Admission {
            kind: Kind::Command,
            label: "only-one",
            unique: true,
            wait_for_slot: Some(Duration::MAX),
        };
        assert!(admit(&rt, &ask).expect("admitted").is_some());
    }

    fn no_capacity() -> AdmitError {
        AdmitError::NoCapacity {
            slots: 1,
            live: 1,
            unverified: 0,
        }
    }

    #[test]
    fn no_slot_looks_again_each_period_until_the_bound_then_refuses() {
        let now = Instant::now();
        let wait = SlotWait::new(now, Some(Duration::from_millis(500)));
        assert_eq!(wait.until(), now + Duration::from_millis(500));
        match wait.after(Err(no_capacity()), now) {
            SlotTurn::LookAgainAt(at) => assert_eq!(at, now + SlotWait::PERIOD),
            other => panic!("{other:?}"),
        }
        // The last look is at the bound, never after it.
        let late = now + Duration::from_millis(400);
        match wait.after(Err(no_capacity()), late) {
            SlotTurn::LookAgainAt(at) => assert_eq!(at, wait.until()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            wait.after(Err(no_capacity()), wait.until()),
            SlotTurn::Refused(AdmitError::NoCapacity { .. })
        ));
    }

    #[test]
    fn without_a_wait_one_check_decides_and_other_refusals_never_wait() {
        let now = Instant::now();
        let wait = SlotWait::new(now, None);
        assert!(matches!(
            wait.after(Err(no_capacity()), now),
            SlotTurn::Refused(_)
        ));
        let long = SlotWait::new(now, Some(Duration::from_secs(60)));
        assert!(matches!(
            long.after(Err(AdmitError::UniqueWithoutLabel), now),
            SlotTurn::Refused(AdmitError::UniqueWithoutLabel)
        ));
    }
}

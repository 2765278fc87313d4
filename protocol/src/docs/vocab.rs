//! The closed enums of the contract: every name a document carries for a state, a kind of
//! end, an action or a reason. Each is declared once, here; the supervisor's mechanisms use
//! these enums (or map their own richer types onto them with an exhaustive `match`), and the
//! views print their names.

use serde::{Deserialize, Serialize};

crate::vocabulary! {
    /// What the evidence says about a registration's scope (SPEC A1), as every document shows
    /// it.
    pub enum State: "scope state" {
        /// The guardian is alive: the scope may still hold processes.
        Live,
        /// A verified receipt (or an ended boot) proves every process of the scope ended.
        Exited,
        /// Neither proven alive nor proven ended.
        Unverified,
        /// The registration record does not decode: shown, never guessed at.
        Corrupt,
    }
}

/// A registration's kind as `ps` shows it: its [`Kind`](crate::Kind), or `?` when its record
/// does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ScopeKind {
    Known(crate::Kind),
    Unreadable(KindUnreadable),
}

impl ScopeKind {
    pub fn name(self) -> &'static str {
        match self {
            ScopeKind::Known(k) => k.as_str(),
            ScopeKind::Unreadable(u) => u.name(),
        }
    }
}

crate::vocabulary! {
    /// The kind of a registration whose record does not decode.
    pub enum KindUnreadable: "unreadable kind" {
        #[serde(rename = "?")]
        Unknown,
    }
}

crate::vocabulary! {
    /// The scope when a launch's engine returned (`run --json` `scope`).
    pub enum RunScope: "scope at return" {
        /// The guardian's receipt arrived: nothing of the tree is left.
        Exited,
        /// A descendant holds the scope and the policy keeps it.
        Live,
        /// A descendant holds the scope and the shared stop ends it.
        Stopping,
        /// The guardian is gone without a receipt.
        Unknown,
    }
}

crate::vocabulary! {
    /// How a launch ended (SPEC S7): what its engine returned, or (`stop_failed`) that the stop
    /// of the scope's residue failed afterwards.
    pub enum Outcome: "launch outcome" {
        /// The workload ran and exited on its own (any status).
        Completed,
        /// The completion deadline passed; the tree was stopped.
        TimedOut,
        /// The idle deadline passed; the tree was stopped.
        IdleTimeout,
        /// The caller cancelled; the tree was stopped.
        Cancelled,
        /// The output budget was exceeded; the tree was stopped.
        OutputLimit,
        /// A step of the release failed; the workload never ran.
        SpawnFailed,
        /// Capture failed; the tree was stopped.
        CaptureFault,
        /// An operator stopped it.
        Stopped,
        /// The guardian reported a fatal error or vanished.
        GuardianLost,
        /// The stop of the scope's residue failed (only a launch result record says this; an
        /// engine never returns it).
        StopFailed,
    }
}

crate::vocabulary! {
    /// H6: where a scope with readiness stands.
    pub enum ReadyState: "ready state" {
        /// Started, not ready yet.
        Starting,
        /// It said it is ready (or its probe succeeded).
        Ready,
        /// It was not ready in time, or ended before it was (`reason`).
        Failed,
    }
}

crate::vocabulary! {
    /// H7: where a scope with a health check stands (docker's HEALTHCHECK states).
    pub enum HealthState: "health state" {
        /// Within its start period, or no probe has decided yet.
        Starting,
        /// Its last probe succeeded.
        Healthy,
        /// Its last `retries` probes failed (or timed out) in a row.
        Unhealthy,
    }
}

crate::vocabulary! {
    /// Why a workload ended, where the kernel says more than its status.
    pub enum ResultReason: "result reason" {
        /// The out-of-memory killer killed a member at the scope's memory limit.
        Oom,
    }
}

crate::vocabulary! {
    /// How the workload itself ended, as `status` (with `exit_code` or `signal`).
    pub enum StatusName: "workload status" {
        Exited,
        Signaled,
        NeverStarted,
        Unknown,
    }
}

crate::vocabulary! {
    /// What a stop achieved.
    pub enum StopOutcome: "stop outcome" {
        /// The assessment said `exited` before anything was signalled.
        AlreadyExited,
        /// The tree was stopped and the guardian's receipt proves it ended.
        Stopped,
        /// The guardian was already gone without a receipt: the witnessed tree was killed, but
        /// there is no proof (the assessment stays `unverified`).
        KilledUnverified,
        /// `unverified` with no current-boot evidence: nothing was signalled.
        NotSignalled,
    }
}

crate::vocabulary! {
    /// The `outcome` of a stop that failed (`stop --json`, the socket's `stop` reply).
    pub enum StopFailed: "failed stop" {
        Failed,
    }
}

crate::vocabulary! {
    /// Why a scope is `unverified`: the check that failed.
    pub enum UnverifiedCheck: "unverified reason" {
        /// No file at the registered proof path.
        ProofMissing,
        /// The proof file could not be read.
        ProofUnreadable,
        /// The file at the proof path is not the registered inode.
        ProofReplaced,
        /// The proof file holds bytes that are not a valid receipt.
        ReceiptCorrupt,
        /// A valid receipt, but a bound field differs from the registration.
        FieldMismatch,
        /// Same boot, the guardian is gone, and no receipt was written.
        GuardianGoneWithoutReceipt,
        /// The registration carries no boot id.
        BootIdMissing,
        /// The current boot id cannot be read.
        CurrentBootUnknown,
        /// Earlier-boot evidence whose boot ids disagree.
        MixedBootIds,
    }
}

crate::vocabulary! {
    /// What recovery did (or, `--dry-run`, would do) with one registration.
    pub enum RecoverAction: "recovery action" {
        Stopped,
        Released,
        Kept,
        StopFailed,
        Owned,
        Corrupt,
        /// Live and stale, kept on its launcher's loss (L6): left running, identity checked.
        Adopted,
        /// `--dry-run`: live and stale, recovery would stop it.
        WouldStop,
        /// `--dry-run`: live and stale, kept on its launcher's loss: recovery would adopt it.
        WouldAdopt,
        /// `--dry-run`: exited, recovery would release it.
        WouldRelease,
        /// `--dry-run`: unverified, recovery would keep it.
        WouldKeep,
    }
}

crate::vocabulary! {
    /// How a process was found to belong to a scope.
    pub enum Found: "scope membership" {
        /// Below the guardian (or below a given root).
        Descendant,
        /// A given root itself (the workload, when the guardian is gone).
        Root,
        /// Carries `REFINE_OWNER=<registration id>` (or descends from such a process).
        OwnerMarker,
    }
}

crate::vocabulary! {
    /// How a process holds a path (`holders`).
    pub enum Via: "way of holding" {
        Cwd,
        Root,
        OpenFile,
        MappedFile,
    }
}

crate::vocabulary! {
    /// How a holder's owning registration was found.
    pub enum OwnerLink: "owner link" {
        /// The registration's guardian is an ancestor (or the process itself).
        Guardian,
        /// `REFINE_OWNER=<id>` in its environment.
        Marker,
    }
}

crate::vocabulary! {
    /// The owning registration's state: the assessment's answer, or `unknown` for a marker that
    /// names no registration under this home.
    pub enum OwnerState: "owner state" {
        Live,
        Exited,
        Unverified,
        Unknown,
    }
}

crate::vocabulary! {
    /// How the per-workload memory reservation was derived (`capacity`).
    pub enum ReservationSource: "reservation source" {
        /// No complete sample exceeded the floor.
        Floor,
        /// The largest complete, stable sample of a live tree.
        Sample,
    }
}

crate::vocabulary! {
    /// What retention did with a registration's artifacts (`gc`).
    pub enum RetentionAction: "retention action" {
        Deleted,
        WouldDelete,
        Kept,
        /// Nothing to do: no artifacts left.
        Empty,
    }
}

crate::vocabulary! {
    /// What forgetting did with a whole registration (`gc`).
    pub enum ForgetAction: "forget action" {
        Forgotten,
        WouldForget,
        /// Past the horizon by its files' age, but not forgotten (the reason says why).
        Kept,
    }
}

crate::vocabulary! {
    /// What `gc` did with a file no record covers (SPEC D5).
    pub enum StrayAction: "stray action" {
        Removed,
        WouldRemove,
        Kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docs::Vocabulary;

    fn check<T: Vocabulary + std::fmt::Display>() {
        for v in T::ALL {
            let json = serde_json::to_value(v).unwrap();
            assert_eq!(json.as_str(), Some(v.name()), "{}", T::WHAT);
            assert_eq!(v.to_string(), v.name());
            assert!(!v.name().is_empty());
            assert_eq!(T::from_name(v.name()).map(|b| b.name()), Some(v.name()));
        }
    }

    #[test]
    fn every_name_is_the_serde_name() {
        check::<State>();
        check::<KindUnreadable>();
        check::<crate::Kind>();
        assert_eq!(
            serde_json::to_string(&ScopeKind::Unreadable(KindUnreadable::Unknown)).unwrap(),
            r#""?""#
        );
        assert_eq!(
            serde_json::from_str::<ScopeKind>(r#""agent""#).unwrap(),
            ScopeKind::Known(crate::Kind::Agent)
        );
        check::<RunScope>();
        check::<Outcome>();
        check::<StatusName>();
        check::<StopOutcome>();
        check::<StopFailed>();
        check::<UnverifiedCheck>();
        check::<RecoverAction>();
        check::<Found>();
        check::<Via>();
        check::<OwnerLink>();
        check::<OwnerState>();
        check::<ReservationSource>();
        check::<RetentionAction>();
        check::<ForgetAction>();
        check::<StrayAction>();
        check::<crate::docs::TopSource>();
        assert_eq!(Outcome::TimedOut.name(), "timed_out");
        assert_eq!(StopOutcome::AlreadyExited.words(), "already exited");
        assert_eq!(Outcome::from_name("nonsense"), None);
    }
}

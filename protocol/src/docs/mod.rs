//! The JSON contract (SPEC E2): every document `refine-supervisor … --json` prints and every
//! reply the service socket returns, and the closed enums they name things with. A key added,
//! renamed or removed here is a change for every script and host; the JSON Schemas generated
//! from these types ([`crate::schema`], `refine-supervisor schema NAME`) are committed under
//! `protocol/schema/` and a test keeps them equal, so such a change is made on purpose.
//!
//! Names come from serde alone: [`Vocabulary::name`] reads the name `#[derive(Serialize)]`
//! writes, and the views print that name; no table of names sits beside a derive.

mod name;

pub mod build;
pub mod capacity;
pub mod events;
pub mod history;
pub mod hygiene;
pub mod reason;
pub mod scope;
pub mod top;
pub mod vocab;

pub use name::{by_name, variant_name, Vocabulary};

pub use build::{BuildsDoc, GuardianBuildDoc, VersionDoc};
pub use capacity::{CapacityDoc, SampleDoc};
pub use events::{EventDoc, EventKind, EventsEndDoc};
pub use history::{
    ForgetDoc, ForgetEntryDoc, ForgetReason, GcDoc, RetentionDoc, RetentionEntryDoc,
    RetentionReason, StrayDoc, StrayReasonDoc,
};
pub use hygiene::{
    AdopterDoc, GuardianOfDoc, HolderDoc, HoldersDoc, LeftDoc, OwnerDoc, ReapDoc, ScopeStopDoc,
    WhyDoc,
};
pub use reason::{BoundField, ProofInode, ScopeReason, UnverifiedReason};
pub use scope::{
    ArtifactDoc, ArtifactsDoc, AssessmentDoc, CgroupDoc, CgroupUsageDoc, DetachedSpawnFailedDoc,
    HealthDoc, IncidentDoc, IncompleteDoc, LaunchedDoc, LimitPlacementDoc, LimitUsageDoc,
    LimitsDoc, ProbeDoc, ProcessDoc, ProofDoc, PsDoc, ReadinessDoc, ReceiptDoc, ReceiptVerdictDoc,
    RecordDoc, RecoverDoc, RecoverEntryDoc, ResidueStopDoc, ResultDoc, RunDoc, ShowDoc,
    StatusFields, StopDetail, StopDoc, StopOutcomeDoc, StopTimingsDoc, StreamDoc, StreamEndDoc,
    UsageDoc, WaitDoc, WaitScope, WatchDoc, WitnessDoc, WorkloadDoc,
};
pub use top::{TopDoc, TopScopeDoc, TopSource};
pub use vocab::{
    ForgetAction, Found, HealthState, KindUnreadable, Outcome, OwnerLink, OwnerState, ReadyState,
    RecoverAction, ReservationSource, ResultReason, RetentionAction, RunScope, ScopeKind, State,
    StatusName, StopFailed, StopOutcome, StrayAction, UnverifiedCheck, Via,
};

//! The JSON contract (SPEC E2): every document `refine-supervisor … --json` prints and every
//! reply the service socket returns, and the closed enums they name things with. A key added,
//! renamed or removed here is a change for every script and host; the JSON Schemas generated
//! from these types (feature `schema`, `refine-supervisor schema NAME`) are committed under
//! `protocol/schema/` and a test keeps them equal, so such a change is made on purpose.
//!
//! Names come from serde alone: [`Vocabulary::name`] reads the name `#[derive(Serialize)]`
//! writes, and the views print that name; no table of names sits beside a derive.

mod name;

pub mod capacity;
pub mod history;
pub mod hygiene;
pub mod scope;
pub mod vocab;

pub use name::{by_name, variant_name, Vocabulary};

pub use capacity::{CapacityDoc, SampleDoc};
pub use history::{
    ForgetDoc, ForgetEntryDoc, GcDoc, RetentionDoc, RetentionEntryDoc, StrayDoc, StrayReasonDoc,
};
pub use hygiene::{
    AdopterDoc, GuardianOfDoc, HolderDoc, HoldersDoc, LeftDoc, OwnerDoc, ReapDoc, ScopeStopDoc,
    WhyDoc,
};
pub use scope::{
    ArtifactDoc, ArtifactsDoc, AssessmentDoc, CgroupDoc, CgroupUsageDoc, DetachedSpawnFailedDoc,
    IncidentDoc, LaunchedDoc, LimitsDoc, ProcessDoc, ProofDoc, PsDoc, ReceiptDoc,
    ReceiptVerdictDoc, RecordDoc, RecoverDoc, RecoverEntryDoc, ResidueStopDoc, ResultDoc, RunDoc,
    ShowDoc, StatusFields, StopDetail, StopDoc, StopOutcomeDoc, StopTimingsDoc, StreamDoc,
    UsageDoc, WaitDoc, WaitScope, WatchDoc, WitnessDoc, WorkloadDoc,
};
pub use vocab::{
    ForgetAction, Found, KindUnreadable, Outcome, OwnerLink, OwnerState, RecoverAction,
    ReservationSource, RetentionAction, RunScope, ScopeKind, State, StatusName, StopFailed,
    StopOutcome, StrayAction, UnverifiedCheck, Via,
};

/// Every document of the contract by name, with what prints or returns it (feature `schema`:
/// [`schema`] gives each one's JSON Schema).
pub const DOCUMENTS: &[(&str, &str)] = &[
    ("run", "run --json"),
    ("launched", "run --detach --json"),
    (
        "spawn-failed",
        "run --detach --json when the workload never ran",
    ),
    ("wait", "wait --json"),
    ("ps", "ps --json"),
    ("show", "show --json, and the socket's show reply"),
    ("stop", "stop --json, and the socket's stop reply"),
    ("recover", "recover --json"),
    ("receipt", "receipt --json"),
    ("gc", "gc --json"),
    ("capacity", "capacity --json"),
    ("holders", "holders --json"),
    ("reap", "reap --checkout --json"),
    ("request", "a request line to the service socket"),
    ("response", "a response line from the service socket"),
];

/// The JSON Schema of the document `name` (one of [`DOCUMENTS`]), or `None` for a name that is
/// not one.
#[cfg(feature = "schema")]
pub fn schema(name: &str) -> Option<schemars::Schema> {
    use schemars::schema_for;
    Some(match name {
        "run" => schema_for!(RunDoc),
        "launched" => schema_for!(LaunchedDoc),
        "spawn-failed" => schema_for!(DetachedSpawnFailedDoc),
        "wait" => schema_for!(WaitDoc),
        "ps" => schema_for!(PsDoc),
        "show" => schema_for!(ShowDoc),
        "stop" => schema_for!(StopDoc),
        "recover" => schema_for!(RecoverDoc),
        "receipt" => schema_for!(ReceiptVerdictDoc),
        "gc" => schema_for!(GcDoc),
        "capacity" => schema_for!(CapacityDoc),
        "holders" => schema_for!(HoldersDoc),
        "reap" => schema_for!(ReapDoc),
        "request" => schema_for!(crate::api::Request),
        "response" => schema_for!(crate::api::Response),
        _ => return None,
    })
}

/// [`schema`] as the pretty JSON committed under `protocol/schema/NAME.json` (with its final
/// newline).
#[cfg(feature = "schema")]
pub fn schema_text(name: &str) -> Option<String> {
    let schema = schema(name)?;
    let mut text = serde_json::to_string_pretty(&schema).ok()?;
    text.push('\n');
    Some(text)
}

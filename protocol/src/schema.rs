//! The contract's documents by name and their JSON Schemas (feature `schema`): what
//! `refine-supervisor schema [NAME]` prints and `protocol/schema/NAME.json` holds. It sits above
//! both [`crate::docs`] and [`crate::api`], so neither needs the other's names to list them.

#[cfg(feature = "schema")]
use crate::api::{Request, Response};
#[cfg(feature = "schema")]
use crate::docs::*;

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
    ("version", "version --json"),
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
        "version" => schema_for!(VersionDoc),
        "request" => schema_for!(Request),
        "response" => schema_for!(Response),
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

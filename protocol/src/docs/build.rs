//! `version --json` and the builds a record names (SPEC V1).

use serde::{Deserialize, Serialize};

use crate::record::BuildProvenance;

/// `version --json`: this supervisor's build, and the guardian's it would launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VersionDoc {
    pub supervisor: BuildProvenance,
    pub guardian: GuardianBuildDoc,
}

/// The guardian a launch would start (`$REFINE_GUARDIAN`, else beside the supervisor), and the
/// build its `.refine.provenance` section names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GuardianBuildDoc {
    pub path: String,
    /// `null` when it cannot be read or carries none: `problem` says why.
    pub provenance: Option<BuildProvenance>,
    pub problem: Option<String>,
}

/// The builds a registration recorded: `null` for a record older than provenance, or a
/// guardian that carried none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BuildsDoc {
    pub supervisor: Option<BuildProvenance>,
    pub guardian: Option<BuildProvenance>,
}

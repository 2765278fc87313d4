//! `capacity --json`: the admission figures (SPEC C1–C3).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::vocab::ReservationSource;

/// `capacity --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityDoc {
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
    pub samples: BTreeMap<String, SampleDoc>,
}

/// One tree sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SampleDoc {
    pub complete: bool,
    pub members: usize,
    pub rss_bytes: u64,
    pub reason: Option<String>,
}

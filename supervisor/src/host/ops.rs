//! E3: the operations on a runtime that the CLI, the service and a Rust host share: the one
//! assessment as they all show it, the `ps` rows, the `show`/`stop`/`recover` documents,
//! retention with the assessment as evidence, and `gc`. Each returns the protocol's document
//! (`refine_protocol::docs`); none needs tokio. [`crate::Supervisor`] offers them beside `spawn`.
//!
//! One file per part: `view` (the assessment as shown, `ps`, `show`), `stops` (`stop` and the
//! stop after a grace driven elsewhere), `recovery` (`recover` and its plan), `gc` (retention,
//! forgetting, retirement), `wait` (until ended or healthy), `hygiene` (`holders`, `reap`),
//! `maintenance` (the maintenance pass, capacity, housekeeping), `shutdown` (W8's rule); this file has the error and
//! the [`crate::Supervisor`] methods.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use refine_protocol::api::ScopeView;
use refine_protocol::docs::ScopeReason;
use refine_protocol::record::StallRecord;
use refine_protocol::{Receipt, Registration, RegistrationId, StopCause};

use super::docs::{
    artifact_doc, forget_doc, record_doc, retention_doc, stray_doc, utc, watch_doc, ArtifactDoc,
    ArtifactsDoc, AssessmentDoc, GcDoc, KindUnreadable, ProcessDoc, ReceiptDoc, RecoverAction,
    RecoverDoc, RecoverEntryDoc, ResidueStopDoc, ResultDoc, ScopeKind, ShowDoc, State,
    StatusFields, StopDetail, StopDoc, StopFailed, StopOutcomeDoc, StopTimingsDoc, UsageDoc,
};
use super::docs::{holders_doc, reap_doc, CapacityDoc, HoldersDoc, ReapDoc};
use crate::error_chain;
use crate::hygiene::holders::{HoldersError, Registrations, Target};
use crate::hygiene::reap_checkout::{self, ReapError};
use crate::store::registry::{RegistryError, Runtime, Stream};
use crate::{
    end::assess, end::open_index, end::recover, end::stop, history::forget, history::retention,
    kernel::procfs, kernel::tree,
};

/// Why an operation on a runtime failed (each kind as the mechanism that failed says it).
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Retention(#[from] retention::RetentionError),
    #[error(transparent)]
    Forget(#[from] forget::ForgetError),
    #[error("recovery failed")]
    Recover(#[from] recover::RecoverError),
}

mod gc;
mod hygiene;
mod maintenance;
mod recovery;
mod shutdown;
mod stops;
mod view;
mod wait;

pub use gc::*;
pub use hygiene::*;
pub use maintenance::*;
pub use recovery::*;
pub use shutdown::*;
pub use stops::*;
pub use view::*;
pub use wait::*;

/// E3: the operations on the supervisor's runtime, as the CLI and the service perform them.
impl crate::Supervisor {
    /// W8: the shutdown rule for `ids` ([`shutdown()`]): SIGTERM to each live one, up to
    /// `grace` for them to end (waited on their guardians' pidfds), then the shared stop.
    pub fn shutdown(&self, ids: &[RegistrationId], grace: Duration) -> Shutdown {
        shutdown(self.runtime(), ids, grace)
    }

    /// The `ps` rows: with `all`, every registration of the history; without, the scopes not
    /// yet proven exited. Newest first.
    pub fn list(&self, all: bool) -> Result<Vec<ScopeView>, RegistryError> {
        list_views(self.runtime(), all)
    }

    /// The `show` document of one registration: record, result, receipt, assessment, and a
    /// live scope's processes.
    pub fn show(&self, id: RegistrationId) -> Result<ShowDoc, RegistryError> {
        show_doc(self.runtime(), id)
    }

    /// Stops the scope of `id` as an operator (`stop ID`): with a grace, SIGTERM to the
    /// workload's group and `grace` to end before the whole tree is killed; without, the kill at
    /// once. The document says whether a receipt proves the end; a failed stop is a document too.
    pub fn stop(
        &self,
        id: RegistrationId,
        grace: Option<Duration>,
    ) -> Result<StopDoc, RegistryError> {
        let grace = grace.map(|g| (g, crate::kernel::signal::Signal::TERM));
        self.stop_with(id, StopCause::Operator, grace)
    }

    /// [`crate::Supervisor::stop`] with its cause and the grace's polite signal.
    pub fn stop_with(
        &self,
        id: RegistrationId,
        cause: StopCause,
        grace: Option<(Duration, crate::kernel::signal::Signal)>,
    ) -> Result<StopDoc, RegistryError> {
        let reg = self.runtime().read_registration(id)?;
        Ok(stop_one(self.runtime(), &reg, cause, grace))
    }

    /// The recovery pass (A4): scopes whose launcher is gone are stopped, released or adopted.
    pub fn recover(&self) -> Result<RecoverDoc, OpsError> {
        recover_all(self.runtime())
    }

    /// What [`crate::Supervisor::recover`] would do now, doing nothing.
    pub fn recover_plan(&self) -> Result<RecoverDoc, RegistryError> {
        recover_plan(self.runtime())
    }

    /// `gc`: retention, forgetting, re-indexing and the strays (D5).
    pub fn gc(&self, opts: GcOptions) -> Result<GcDoc, OpsError> {
        gc(self.runtime(), opts.retention, opts.forget)
    }

    /// One maintenance pass ([`maintenance_pass`]) with its due deadline stops carried out here,
    /// each grace waited out in turn (a service runs them as tasks instead): the pass and the
    /// stops' documents.
    pub fn maintain(&self) -> (Maintenance, Vec<StopDoc>) {
        let pass = maintenance_pass(self.runtime(), |_| false, |_| {});
        let docs = pass
            .due
            .iter()
            .map(|d| {
                let grace = d.grace.map(|g| (g, crate::kernel::signal::Signal::TERM));
                stop_one(self.runtime(), &d.reg, d.cause, grace)
            })
            .collect();
        (pass, docs)
    }

    /// [`capacity`] of this runtime's host, with the default policy.
    pub fn capacity(&self) -> Result<CapacityDoc, RegistryError> {
        capacity(Some(self.runtime()), None)
    }

    /// [`holders`] of `path` over every port of this runtime's home.
    pub fn holders(&self, path: &Path) -> Result<HoldersDoc, HoldersError> {
        holders(self.runtime().home(), path)
    }

    /// [`reap`] of the checkout `path`, this runtime's fence for the kill.
    pub fn reap(&self, path: &Path, budget: Duration) -> Result<(ReapDoc, bool), ReapError> {
        reap(self.runtime().home(), Some(self.runtime()), path, budget)
    }
}

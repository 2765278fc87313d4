//! Where everything of a runtime lives under `run/P` (the layout in [`super`]'s docs): paths
//! only, no file is read or written here.

use super::*;

/// The layout of one `run/P`: the home, the port and every path under it. A [`Runtime`] is one
/// (it dereferences to its paths).
#[derive(Debug, Clone)]
pub struct Paths {
    pub(super) home: PathBuf,
    pub(super) port: u16,
    pub(super) dir: PathBuf,
}

impl Paths {
    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn record_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("registrations").join(id.to_string())
    }

    pub fn proof_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("proofs").join(id.to_string())
    }

    pub fn log_path(&self, id: RegistrationId, stream: Stream) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{id}.{}", stream.name()))
    }

    /// L1, L2: the time index the guardian keeps beside a stream's artifact.
    pub fn index_path(&self, id: RegistrationId, stream: Stream) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{id}.{}-index", stream.name()))
    }

    pub fn capture_receipt_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.capture"))
    }

    /// Where a stop that is not the launching engine's own records its cause (beside the
    /// capture receipt: evidence about the run, kept by retention).
    pub(crate) fn stop_request_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.stop"))
    }

    /// Where binaries before F3 kept the launching engine's result (now appended to the record).
    pub(crate) fn result_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.result"))
    }

    /// The stall watch's status of a live scope (written by the service, H3).
    /// H6: where a scope with readiness stands (its launcher writes it).
    pub(crate) fn ready_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.ready"))
    }
    /// H7: where a scope with a health check stands (its prober writes it).
    pub(crate) fn health_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.health"))
    }

    pub(crate) fn stall_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.stall"))
    }

    /// The registration's lock: the record itself (see the module docs).
    pub fn lock_path(&self, id: RegistrationId) -> PathBuf {
        self.record_path(id)
    }

    /// Where binaries before F3 kept a separate lock file per registration.
    pub(crate) fn legacy_lock_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("locks").join(format!("{id}.lock"))
    }

    /// Every name the registration's lock (its record's inode) may have.
    pub(super) fn lock_names(&self, id: RegistrationId) -> [PathBuf; 3] {
        [
            self.record_path(id),
            self.open_marker_path(id),
            self.forget_intent_path(id),
        ]
    }

    pub(crate) fn stop_fence_path(&self) -> PathBuf {
        self.dir.join("locks").join("stop.lock")
    }

    /// The stop lease of `id` (issue 38 item 7): present while a stop holding the runtime's
    /// stop fence quiesces the scope; one found by the fence's next holder was left by a stop
    /// that died ([`crate::end::stop::complete_abandoned`]).
    pub(crate) fn stop_lease_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("locks").join(format!("{id}.stopping"))
    }

    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("supervisor.sock")
    }

    /// Every file that belongs to registration `id`, whether it exists or not: the record
    /// first, the lock file last (the order forgetting removes them in, [`crate::history::forget`]).
    pub fn registration_files(&self, id: RegistrationId) -> [PathBuf; 12] {
        [
            self.record_path(id),
            self.proof_path(id),
            self.log_path(id, Stream::Stdout),
            self.log_path(id, Stream::Stderr),
            self.log_path(id, Stream::Stdin),
            self.capture_receipt_path(id),
            self.result_path(id),
            self.stop_request_path(id),
            self.stall_path(id),
            self.ready_path(id),
            self.health_path(id),
            self.legacy_lock_path(id),
        ]
    }

    /// Of [`Paths::registration_files`], those a probe scope (H7) can have besides its record:
    /// its proof, and what another process may add (a stop request, a stall record). It has
    /// no output files, no capture receipt, no readiness or health of its own, and no file of
    /// a binary before F3.
    pub fn probe_files(&self, id: RegistrationId) -> [PathBuf; 3] {
        [
            self.proof_path(id),
            self.stop_request_path(id),
            self.stall_path(id),
        ]
    }

    /// Where forgetting moves a record while it removes the rest of the registration
    /// ([`crate::history::forget`]): not an id, so no listing or lookup finds it.
    pub fn forget_intent_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("registrations").join(format!(".forget-{id}"))
    }

    /// The open index (see the module docs).
    pub fn open_dir(&self) -> PathBuf {
        self.dir.join("open")
    }

    /// The open-index marker of `id`.
    pub fn open_marker_path(&self, id: RegistrationId) -> PathBuf {
        self.open_dir().join(id.to_string())
    }

    /// The lock the port's one service holds while it runs.
    pub fn service_lock_path(&self) -> PathBuf {
        self.dir.join("locks").join("service.lock")
    }

    /// The service's log.
    pub fn service_log_path(&self) -> PathBuf {
        self.dir.join("service.log")
    }
}

//! The application's errors: [`CliError`] for a command, [`ServiceError`] for the service, its
//! client and the launches they make. `main` prints a [`CliError`] on one line.

use std::io;
use std::path::PathBuf;

use refine_protocol::api::ErrorKind;

use refine_supervisor::store::fence::FenceError;
use refine_supervisor::store::registry::RegistryError;
use refine_supervisor::{end::recover, history::forget, history::retention};

/// Everything a command can fail with. `main` prints it on one line.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot derive the home from the executable (pass --home DIR)")]
    NoHome(#[source] io::Error),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(
        "no registration matches {0:?} (give an id, a unique prefix of 4+ hex digits, or a label)"
    )]
    UnknownId(String),
    #[error("{text:?} is ambiguous; it matches:\n{candidates}")]
    AmbiguousId { text: String, candidates: String },
    #[error("timed out after {after}; still live: {live}")]
    WaitTimeout { after: String, live: String },
    #[error("cannot create the home {path}")]
    CreateHome {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no receipt at {path}")]
    ReceiptRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} holds no receipt yet: its guardian has not proven the scope empty")]
    ReceiptUnwritten { path: PathBuf },
    #[error("receipt {path} does not decode")]
    ReceiptCorrupt {
        path: PathBuf,
        #[source]
        source: refine_protocol::DecodeError,
    },
    #[error("cannot read {path}")]
    Artifact {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Retention(#[from] retention::RetentionError),
    #[error(transparent)]
    Forget(#[from] forget::ForgetError),
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error("cannot write output")]
    Output(#[source] io::Error),
    #[error("cannot write the manual page {path}")]
    ManPage {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Holders(#[from] refine_supervisor::hygiene::holders::HoldersError),
    #[error(transparent)]
    Reap(#[from] refine_supervisor::hygiene::reap_checkout::ReapError),
    #[error("invalid stall watch settings")]
    Stall(#[source] refine_supervisor::hygiene::stall::StallConfigError),
    /// A verdict that is not an error of the tool but must exit non-zero (stop not proven,
    /// receipt not verified); the document was already printed.
    #[error("{0}")]
    Verdict(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("a service is already running for port {port} (lock {lock} is held)")]
    AlreadyRunning { port: u16, lock: PathBuf },
    #[error("no service is running for port {port} (no socket at {socket}): start `refine-supervisor serve`")]
    NotRunning {
        port: u16,
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("service request failed: {op}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("service sent a malformed response")]
    Decode(#[source] refine_protocol::DecodeError),
    #[error("service refused: {message}")]
    Refused { kind: ErrorKind, message: String },
    #[error("service sent an unexpected reply: {0}")]
    Unexpected(String),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("invalid launch: {0}")]
    BadSpec(String),
    #[error(transparent)]
    Credentials(#[from] refine_supervisor::launch::credentials::CredentialsError),
    #[error("launch failed")]
    Launch(#[source] refine_supervisor::launch::LaunchError),
    #[error("capacity sampling failed: {0}")]
    Capacity(String),
    #[error("no capacity slot free for an agent ({live} live and {unverified} unverified of {slots} slot{}); retry later or pass --wait-for-slot DUR", if *slots == 1 { "" } else { "s" })]
    NoCapacity {
        slots: usize,
        live: usize,
        unverified: usize,
    },
    #[error("--unique: the label {label:?} is held by {holder}, which is {state}; it is free once that scope is proven exited")]
    LabelHeld {
        label: String,
        holder: refine_protocol::RegistrationId,
        state: &'static str,
    },
    #[error("recovery failed")]
    Recover(#[from] recover::RecoverError),
    #[error("cannot serve metrics on {addr}")]
    MetricsBind {
        addr: std::net::SocketAddr,
        #[source]
        source: io::Error,
    },
}

pub(crate) fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ServiceError {
    move |source| ServiceError::Io { op, source }
}

//! The application's errors: [`CliError`] for a command; [`ServiceError`] for the service and
//! the launches it and `run` make, with [`SpecError`] (a launch asked wrongly) and
//! [`AdmitError`] (admission refused it or could not decide); [`ClientError`] for talking to a
//! service over its socket. `main` prints a [`CliError`] on one line, each cause once.

use std::io;
use std::path::PathBuf;

use refine_protocol::api::{ApiError, Reply};
use refine_protocol::RegistrationId;

use refine_supervisor::host::FenceError;
use refine_supervisor::host::RegistryError;
use refine_supervisor::host::{ForgetError, RecoverError, RetentionError};

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
    #[error(transparent)]
    ReceiptFile(#[from] refine_supervisor::host::ReceiptFileError),
    #[error("cannot read {path}")]
    Artifact {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Retention(#[from] RetentionError),
    #[error("cannot read the events journal")]
    Journal(#[from] refine_supervisor::host::JournalError),
    #[error(transparent)]
    Forget(#[from] ForgetError),
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot write output")]
    Output(#[source] io::Error),
    /// A flag this build cannot answer truly: refused rather than answered with something else.
    #[error("{flag}: {why}")]
    Unanswerable {
        flag: &'static str,
        why: &'static str,
    },
    #[error("cannot write the manual page {path}")]
    ManPage {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Holders(#[from] refine_supervisor::host::HoldersError),
    #[error(transparent)]
    Reap(#[from] refine_supervisor::host::ReapError),
    #[error("invalid stall watch settings")]
    Stall(#[source] refine_supervisor::host::StallConfigError),
    /// A verdict, not an error of the tool, that must exit non-zero: the stop's document (already
    /// printed) does not prove the scope ended, for its `reason`.
    #[error("stop of {id} not proven: {}", reason.as_deref().unwrap_or(NO_RECEIPT))]
    StopNotProven {
        id: RegistrationId,
        reason: Option<String>,
    },
    /// A verdict, not an error of the tool, that must exit non-zero: the receipt's document
    /// (already printed) does not verify it, for its `reason`.
    #[error("receipt does not verify: {}", reason.as_deref().unwrap_or(NO_RECEIPT))]
    ReceiptNotVerified { reason: Option<String> },
    /// `upgrade` could not be done, for this reason (the service, if any, serves on).
    #[error("upgrade: {0}")]
    Upgrade(String),
}

impl From<refine_supervisor::host::OpsError> for CliError {
    fn from(e: refine_supervisor::host::OpsError) -> Self {
        use refine_supervisor::host::OpsError as O;
        match e {
            O::Registry(e) => CliError::Registry(e),
            O::Retention(e) => CliError::Retention(e),
            O::Forget(e) => CliError::Forget(e),
            O::Recover(e) => CliError::Service(ServiceError::Recover(e)),
        }
    }
}

impl From<refine_supervisor::host::OpsError> for ServiceError {
    fn from(e: refine_supervisor::host::OpsError) -> Self {
        use refine_supervisor::host::OpsError as O;
        match e {
            O::Registry(e) => ServiceError::Registry(e),
            O::Recover(e) => ServiceError::Recover(e),
            // Neither retention nor forgetting is a service's pass of its own.
            e @ (O::Retention(_) | O::Forget(_)) => ServiceError::Io {
                op: "collect the history",
                source: std::io::Error::other(e),
            },
        }
    }
}

/// A verdict's reason when its document gives none.
const NO_RECEIPT: &str = "no verified receipt";

/// What the service (and `run`, which launches in process) fails with.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("a service is already running for port {port} (lock {lock} is held)")]
    AlreadyRunning { port: u16, lock: PathBuf },
    #[error("cannot {op}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("invalid launch")]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Admit(#[from] AdmitError),
    #[error(transparent)]
    Credentials(#[from] refine_supervisor::host::CredentialsError),
    #[error("launch failed")]
    Launch(#[source] refine_supervisor::host::LaunchError),
    #[error("cannot start the shared event loop")]
    SharedLoop(#[source] refine_supervisor::host::LaunchError),
    #[error("recovery failed")]
    Recover(#[from] RecoverError),
    #[error("cannot serve metrics on {addr}")]
    MetricsBind {
        addr: std::net::SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// A launch asked for in a way that cannot be carried out: refused before anything is made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("empty command")]
    EmptyCommand,
    #[error("run --detach passes arguments, environment values and the directory as UTF-8 text; run without --detach passes any bytes")]
    DetachNotText,
    #[error("ready: {0}")]
    Ready(String),
    #[error("health: {0}")]
    Health(String),
}

/// Admission (C1-C4, and the one open scope per label of a unique launch) refused a launch, or
pub use refine_supervisor::host::AdmitError;

/// Talking to a port's service over its socket: the connection, the reply's bytes, and the
/// service's own refusal ([`ApiError`]).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
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
    /// The connection reached its end before any byte of a reply (the service died or stopped
    /// with the request unanswered).
    #[error("the service closed the connection without answering")]
    Closed,
    /// The connection reached its end in the middle of the reply.
    #[error("the service closed the connection in the middle of its answer")]
    Truncated,
    #[error("service sent a malformed response")]
    Decode(#[source] refine_protocol::DecodeError),
    #[error("service refused: {}", .0.message)]
    Refused(ApiError),
    #[error("service sent a response with neither a result nor an error")]
    Empty,
    #[error("service sent an unexpected reply: {0:?}")]
    Unexpected(Box<Reply>),
}

pub(crate) fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ServiceError {
    move |source| ServiceError::Io { op, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use refine_protocol::api::ErrorKind;

    fn line(e: CliError) -> String {
        super::super::one_line(&e)
    }

    /// The typed causes print the lines the operator read when they were strings.
    #[test]
    fn typed_causes_print_one_line_each_cause_once() {
        let id: RegistrationId = "0123456789abcdef0123456789abcdef".parse().unwrap();
        assert_eq!(
            line(CliError::StopNotProven { id, reason: None }),
            "stop of 0123456789abcdef0123456789abcdef not proven: no verified receipt"
        );
        assert_eq!(
            line(CliError::ReceiptNotVerified {
                reason: Some("proof replaced".into())
            }),
            "receipt does not verify: proof replaced"
        );
        assert_eq!(
            line(ServiceError::from(SpecError::EmptyCommand).into()),
            "invalid launch: empty command"
        );
        let refused = ApiError {
            kind: ErrorKind::NoCapacity,
            message: "no capacity slot free".into(),
        };
        assert_eq!(
            line(ClientError::Refused(refused).into()),
            "service refused: no capacity slot free"
        );
        let lock = AdmitError::Lock(FenceError::Lock {
            path: PathBuf::from("/run/p/admission.lock"),
            source: io::Error::from_raw_os_error(libc::ENOLCK),
        });
        assert_eq!(
            line(ServiceError::from(lock).into()),
            "cannot take the admission lock: cannot lock /run/p/admission.lock: No locks available (os error 37)"
        );
    }
}

//! The launcher end of the guardian handshake (SPEC G2–G7).
//!
//! [`spawn`] starts `refine-guardian` with one end of a `SOCK_SEQPACKET` socketpair as its
//! stdin (the inherited channel), sends the launch spec with the workload's stdio descriptors
//! (`SCM_RIGHTS`), and returns a [`GuardianLink`] once the guardian's `Hello` arrived: the workload
//! is then forked but gated. The caller makes the registration durable, then calls
//! [`GuardianLink::start`]. Events ([`GuardianEvent`]) follow on the channel.
//!
//! # Caveats
//! The guardian is this process's child, so this process reaps *the guardian* (and only it, by
//! pid). Everything below the guardian is reaped by the guardian. If this process dies, the channel
//! closes: the guardian forwards the parent-death signal, reaps, writes its receipt, and exits.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use refine_protocol::{Hello, Receipt, RegistrationId, Rlimit, RuntimeId, WorkloadStatus};

/// How the workload's stdin/stdout/stderr are provided.
#[derive(Debug)]
pub enum Stdio {
    /// The guardian's own (inherited from this process).
    Inherit,
    /// These three descriptors (stdin, stdout, stderr), sent with `SCM_RIGHTS`.
    Fds([OwnedFd; 3]),
    /// A PTY slave used for all three; the workload gets a new session with it as controlling tty.
    Pty(OwnedFd),
}

/// Everything the guardian needs to launch one workload.
#[derive(Debug)]
pub struct LaunchConfig {
    pub registration: RegistrationId,
    pub runtime: RuntimeId,
    /// Created by the guardian (`O_CREAT|O_EXCL|O_CLOEXEC`); the receipt lands in it.
    pub proof_path: PathBuf,
    pub argv: Vec<OsString>,
    /// The workload's complete environment as `KEY=VALUE` entries.
    pub env: Vec<OsString>,
    /// `None`: inherit this process's working directory.
    pub cwd: Option<PathBuf>,
    pub rlimits: Vec<Rlimit>,
    pub stdio: Stdio,
    /// Put the workload in a new session (always so for PTY); otherwise a new process group.
    pub new_session: bool,
    /// Signal the guardian forwards to the workload if this launcher goes away (default SIGKILL).
    pub pdeath_signal: i32,
    /// How long the guardian waits for *start* before it aborts.
    pub start_timeout: Duration,
    /// The guardian executable; `None`: [`guardian_exe`].
    pub guardian_exe: Option<PathBuf>,
}

/// What the guardian reports after *start*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardianEvent {
    /// `execve` succeeded.
    Started,
    /// `execve` failed with this errno; the guardian still reaps and writes a receipt.
    SpawnFailed { errno: i32 },
    /// The workload itself exited; descendants may still hold the scope.
    WorkloadExited { status: WorkloadStatus, at_ns: u64 },
    /// `waitpid` said `ECHILD`: the receipt is on disk (and here).
    ScopeExited(Receipt),
    /// The guardian reported a fatal error (static code, errno) and exits.
    GuardianFailed { code: u16, errno: i32 },
    /// The channel closed without a `ScopeExited` (the guardian died or was killed).
    ChannelClosed,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("guardian executable not found ({0}): build the workspace binaries first")]
    GuardianMissing(PathBuf),
    #[error("cannot {op}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("cannot encode the launch spec")]
    Encode(#[source] refine_protocol::EncodeError),
    #[error("guardian sent a malformed frame")]
    Decode(#[source] refine_protocol::DecodeError),
    #[error("guardian failed before hello (code {code}, errno {errno})")]
    GuardianFailed { code: u16, errno: i32 },
    #[error("guardian closed the channel before hello")]
    ClosedBeforeHello,
    #[error("no hello from the guardian within {0:?}")]
    HelloTimeout(Duration),
    #[error("unexpected frame from guardian: {0}")]
    Unexpected(&'static str),
}

/// A running guardian and its channel.
#[derive(Debug)]
pub struct GuardianLink {
    _private: (),
}

/// Default path of `refine-guardian`: `$REFINE_GUARDIAN`, else beside the current executable,
/// else one directory up (test binaries live in `target/<profile>/deps`).
pub fn guardian_exe() -> PathBuf {
    todo!()
}

/// Spawns the guardian, sends the launch spec, and waits (bounded) for its `Hello`.
pub fn spawn(_config: LaunchConfig) -> Result<GuardianLink, LaunchError> {
    todo!()
}

impl GuardianLink {
    /// Identities reported by the guardian: register these before [`GuardianLink::start`].
    pub fn hello(&self) -> &Hello {
        todo!()
    }
    /// Tells the guardian the registration is durable: the workload may exec.
    pub fn start(&mut self) -> Result<(), LaunchError> {
        todo!()
    }
    /// Tells the guardian not to start: it kills and reaps the gated workload, writes an
    /// aborted receipt and exits.
    pub fn abort(&mut self) -> Result<(), LaunchError> {
        todo!()
    }
    /// Asks the guardian to forward `signo` to the workload.
    pub fn signal(&mut self, _signo: i32) -> Result<(), LaunchError> {
        todo!()
    }
    /// Waits up to `timeout` (`None`: forever) for the next event; `Ok(None)` on timeout.
    pub fn next_event(
        &mut self,
        _timeout: Option<Duration>,
    ) -> Result<Option<GuardianEvent>, LaunchError> {
        todo!()
    }
    /// The channel, for callers that poll it themselves (readable = an event is pending).
    pub fn channel(&self) -> BorrowedFd<'_> {
        todo!()
    }
    /// Waits for the guardian process itself to exit and reaps it (by pid, never `-1`).
    pub fn wait_guardian(&mut self) -> io::Result<std::process::ExitStatus> {
        todo!()
    }
    /// The guardian's pid.
    pub fn guardian_pid(&self) -> u32 {
        todo!()
    }
}

impl AsFd for GuardianLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.channel()
    }
}

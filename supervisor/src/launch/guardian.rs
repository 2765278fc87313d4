//! The launcher end of the guardian handshake (SPEC G2–G7).
//!
//! [`spawn`] starts `refine-guardian` with one end of a `SOCK_SEQPACKET` socketpair as its
//! stdin (the inherited channel), sends the launch spec with the workload's stdio descriptors
//! (`SCM_RIGHTS`), and returns a [`GuardianLink`] once the guardian's `Hello` arrived: the workload
//! is then forked but gated. The caller makes the registration durable, then calls
//! [`GuardianLink::start`]. Events ([`GuardianEvent`]) follow on the channel. The launch engine's
//! [`crate::launch::launch_registered`] is that whole sequence with the registration written.
//!
//! # Caveats
//! The guardian is this process's child, so this process reaps *the guardian* (and only it, by
//! pid; a link dropped unwaited hands the guardian to a thread that waits for it). Everything below
//! the guardian is reaped by the guardian. If this process dies, the channel closes: the guardian
//! forwards the parent-death signal, reaps, writes its receipt, and exits.

use std::ffi::OsString;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use refine_protocol::frame::{
    encode_launch, launch_len, DEFAULT_START_TIMEOUT_MS, FLAG_ALLOW_SETNS, FLAG_LANDLOCK,
    FLAG_NEW_SESSION, FLAG_NO_NEW_PRIVS, FLAG_OWNER_LOCK, FLAG_PTY, MAX_FRAME,
    MAX_START_TIMEOUT_MS,
};
use refine_protocol::{
    Frame, Hello, LaunchParams, Receipt, RegistrationId, Rlimit, RuntimeId, WorkloadStatus,
};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::{
    sendmsg, socketpair, AddressFamily, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, SocketFlags, SocketType,
};

use crate::store::registry::RegistryError;

/// How long the guardian may take to answer the launch frame with `Hello`.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on the wait for *start* ([`DEFAULT_START_TIMEOUT_MS`]).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_millis(DEFAULT_START_TIMEOUT_MS as u64);
/// The owner marker every managed workload carries (SPEC S8).
pub const OWNER_VAR: &str = "REFINE_OWNER";

/// How the workload's stdin/stdout/stderr are provided.
#[derive(Debug)]
pub enum Stdio {
    /// The guardian's own (inherited from this process; stdin is `/dev/null`).
    Inherit,
    /// These three descriptors (stdin, stdout, stderr), sent with `SCM_RIGHTS`.
    Fds([OwnedFd; 3]),
    /// A PTY slave used for all three; the workload gets a new session with it as controlling tty.
    Pty(OwnedFd),
    /// L1: stdin, and the guardian drains stdout and stderr into these artifacts itself (opened
    /// for writing without `O_APPEND`), appending to these indexes.
    Captured {
        stdin: OwnedFd,
        artifacts: [OwnedFd; 2],
        indexes: [OwnedFd; 2],
        log_cap: Option<u64>,
        /// L3: the registration lock (a descriptor of the launcher's lock), held by the guardian
        /// for the launcher until the channel ends.
        owner_lock: Option<OwnedFd>,
    },
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
    /// Signal the guardian forwards to the workload if this launcher goes away; `None`: none
    /// (the workload outlives its launcher, and recovery finds the scope).
    pub pdeath_signal: Option<crate::kernel::signal::Signal>,
    /// How long the guardian waits for *start* before it aborts.
    pub start_timeout: Duration,
    /// The guardian executable; `None`: [`guardian_exe`].
    pub guardian_exe: Option<PathBuf>,
    /// Who the workload runs as (`None`: this process's credentials).
    pub credentials: Option<crate::launch::credentials::Credentials>,
    /// The signal state the workload starts with (`None`: a clean one, G8; W10: `run` passes
    /// what it inherited itself).
    pub signal_state: Option<refine_protocol::frame::SignalState>,
    /// The cgroup v2 directory the workload is forked into (F4; [`crate::kernel::cgroup::create`]);
    /// `None`: the guardian's own cgroup.
    pub cgroup: Option<PathBuf>,
    /// No filter against `setns` into a PID or user namespace (X7's opt-out, `run
    /// --allow-setns`): the workload may join namespaces made outside its scope.
    pub allow_setns: bool,
    /// H6 (`run --ready fd=N`): the readiness pipe's write end, and the descriptor number the
    /// workload gets it on. Sent last; needs descriptors sent (not [`Stdio::Inherit`]).
    pub ready_fd: Option<(OwnedFd, u32)>,
    /// X11: a Landlock ruleset ([`crate::kernel::landlock::Ruleset::into_fd`]) the gated child
    /// applies to itself after *start*, before the user switch. Sent after every other
    /// descriptor.
    pub ruleset: Option<OwnedFd>,
    /// The gated child sets `no_new_privs` first (needed for Landlock without `CAP_SYS_ADMIN`).
    pub no_new_privs: bool,
}

impl LaunchConfig {
    /// `argv` on `stdio` with everything else at its default: an empty environment, this
    /// process's working directory, no limits, a new process group, SIGKILL on launcher loss,
    /// [`DEFAULT_START_TIMEOUT`], the default guardian, this process's credentials, a clean signal
    /// state, no cgroup. The registration's part (ids, proof path) is zero/empty until
    /// [`crate::launch::launch_registered`] (or the caller of [`spawn`]) sets it.
    pub fn new(argv: Vec<OsString>, stdio: Stdio) -> Self {
        LaunchConfig {
            registration: RegistrationId([0; 16]),
            runtime: RuntimeId([0; 16]),
            proof_path: PathBuf::new(),
            argv,
            env: Vec::new(),
            cwd: None,
            rlimits: Vec::new(),
            stdio,
            new_session: false,
            pdeath_signal: Some(crate::kernel::signal::Signal::KILL),
            start_timeout: DEFAULT_START_TIMEOUT,
            guardian_exe: None,
            credentials: None,
            signal_state: None,
            cgroup: None,
            allow_setns: false,
            ready_fd: None,
            ruleset: None,
            no_new_privs: false,
        }
    }
}

/// What the guardian reports after `Hello`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardianEvent {
    /// `execve` succeeded.
    Started,
    /// A step of the release (W13: the program, the cwd, the user switch) failed with this
    /// errno; the guardian still reaps and writes a receipt.
    SpawnFailed {
        errno: i32,
        step: refine_protocol::frame::SpawnStep,
    },
    /// The workload itself exited; descendants may still hold the scope.
    WorkloadExited { status: WorkloadStatus, at_ns: u64 },
    /// `waitpid` said `ECHILD`: the receipt is on disk (and here).
    ScopeExited(Receipt),
    /// The guardian reported a fatal error (static code, errno) and exits.
    GuardianFailed { code: u16, errno: i32 },
    /// L1: bytes the guardian has read so far from stdout and stderr.
    CaptureProgress { stdout: u64, stderr: u64 },
    /// L1: a stream the guardian drained ended.
    CaptureEnded(refine_protocol::frame::CaptureEnded),
    /// The channel closed (after a `ScopeExited`, or because the guardian died).
    ChannelClosed,
}

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("guardian executable not found: {}: build it with `cargo build --release -p refine-guardian`, put it beside this executable, set REFINE_GUARDIAN, or give it with `Supervisor::with_guardian_exe`", .0.looked())]
    GuardianMissing(GuardianSearch),
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
    #[error("before its hello: {}{}", refine_protocol::frame::guardian_failure(*code), errno_text(*errno))]
    GuardianFailed { code: u16, errno: i32 },
    #[error("guardian closed the channel before hello")]
    ClosedBeforeHello,
    #[error("no hello from the guardian within {0:?}")]
    HelloTimeout(Duration),
    #[error("unexpected frame from guardian: {0}")]
    Unexpected(&'static str),
    #[error("cannot register the launch")]
    Registry(#[source] RegistryError),
    /// X4: another user could replace the guardian executable.
    #[error(transparent)]
    Untrusted(RegistryError),
    /// H8: a resource limit could not be applied (nothing ran).
    #[error(transparent)]
    Resources(crate::kernel::resources::ResourceError),
}

/// `: <strerror> (errno N)`, or nothing for errno 0: the number once (the standard library's
/// text of an OS error carries its own `(os error N)`, left out here).
fn errno_text(errno: i32) -> String {
    if errno == 0 {
        return String::new();
    }
    let text = io::Error::from_raw_os_error(errno).to_string();
    let text = text
        .strip_suffix(&format!(" (os error {errno})"))
        .unwrap_or(&text);
    format!(": {text} (errno {errno})")
}

fn io_op(op: &'static str) -> impl FnOnce(rustix::io::Errno) -> HandshakeError {
    move |e| HandshakeError::Io {
        op,
        source: e.into(),
    }
}

/// A running guardian and its channel.
#[derive(Debug)]
pub struct GuardianLink {
    child: Option<Child>,
    pid: u32,
    channel: OwnedFd,
    hello: Hello,
    closed: bool,
    /// The registration lock that came back with the receipt (L3).
    returned_lock: Option<OwnedFd>,
}

/// One message of the channel without blocking: its full length (`MSG_TRUNC`) and the first
/// descriptor that came with it (any other is closed).
fn recv_with_fd(channel: &OwnedFd, buf: &mut [u8]) -> rustix::io::Result<(usize, Option<OwnedFd>)> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        channel,
        &mut [io::IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::TRUNC | RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut passed = None;
    for m in control.drain() {
        if let rustix::net::RecvAncillaryMessage::ScmRights(fds) = m {
            for fd in fds {
                passed.get_or_insert(fd);
            }
        }
    }
    Ok((msg.bytes, passed))
}

/// Default path of `refine-guardian`: `$REFINE_GUARDIAN`, else beside the current executable,
/// else one directory up (test binaries live in `target/<profile>/deps`).
pub fn guardian_exe() -> PathBuf {
    let search = GuardianSearch::default_places();
    search
        .candidates
        .iter()
        .find(|p| p.is_file())
        .or(search.candidates.first())
        .cloned()
        .unwrap_or_default()
}

/// Where a guardian was looked for, in order: the path given (`with_guardian_exe`), else
/// `$REFINE_GUARDIAN`, else beside the executable and one folder up (`target/debug/deps`
/// test binaries, an installed `bin/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardianSearch {
    pub how: SearchedBy,
    pub candidates: Vec<PathBuf>,
}

/// How a guardian's candidates were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchedBy {
    /// The path the host gave (`with_guardian_exe`).
    Given,
    /// `$REFINE_GUARDIAN`.
    Env,
    /// Beside the executable, then one folder up.
    Beside,
}

impl GuardianSearch {
    fn given(exe: PathBuf) -> GuardianSearch {
        GuardianSearch {
            how: SearchedBy::Given,
            candidates: vec![exe],
        }
    }

    fn default_places() -> GuardianSearch {
        if let Some(p) = std::env::var_os("REFINE_GUARDIAN") {
            return GuardianSearch {
                how: SearchedBy::Env,
                candidates: vec![p.into()],
            };
        }
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe.parent();
        GuardianSearch {
            how: SearchedBy::Beside,
            candidates: [dir, dir.and_then(|d| d.parent())]
                .into_iter()
                .flatten()
                .map(|d| d.join("refine-guardian"))
                .collect(),
        }
    }

    /// The candidates as one clause, for the error's line.
    fn looked(&self) -> String {
        let list = self
            .candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        match self.how {
            SearchedBy::Given => format!("{list} (the path given) does not exist"),
            SearchedBy::Env => format!("REFINE_GUARDIAN={list} does not exist"),
            SearchedBy::Beside => format!("REFINE_GUARDIAN is unset and none is at {list}"),
        }
    }
}

/// Spawns the guardian, sends the launch spec, and waits (bounded) for its `Hello`.
pub fn spawn(config: LaunchConfig) -> Result<GuardianLink, HandshakeError> {
    start(
        config.guardian_exe.clone(),
        matches!(config.stdio, Stdio::Inherit),
    )?
    .launch(config)
}

/// A guardian that runs and waits for its launch frame ([`start`]). Dropped unlaunched, it
/// closes the channel, and the guardian, told nothing, exits at once; it is reaped here.
#[derive(Debug)]
pub struct Starting {
    /// `None` once launched.
    link: Option<GuardianLink>,
    inherit: bool,
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(mut link) = self.link.take() {
            link.close_and_reap();
        }
    }
}

/// Starts the guardian (`exe`, `None`: [`guardian_exe`]) before its launch is known (F3): its
/// exec overlaps the launcher's own preparation (the record, the cgroup), and
/// [`Starting::launch`] sends the launch when it is ready. `inherit`: the guardian keeps this
/// process's stdio, for a launch on [`Stdio::Inherit`]; otherwise it gets `/dev/null`.
pub fn start(exe: Option<PathBuf>, inherit: bool) -> Result<Starting, HandshakeError> {
    let search = exe.map_or_else(GuardianSearch::default_places, GuardianSearch::given);
    let Some(exe) = search.candidates.iter().find(|p| p.is_file()).cloned() else {
        return Err(HandshakeError::GuardianMissing(search));
    };
    crate::store::registry::check_trusted_executable(&exe).map_err(HandshakeError::Untrusted)?;
    let (ours, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(io_op("create the guardian channel"))?;
    // The guardian lives as long as the scope. When the workload gets its own stdio, the
    // guardian keeps none of this process's: an inherited stderr would hold a caller's pipe open
    // (`$(refine-supervisor run ...)`) until the last detached descendant exits. Its failures
    // arrive as GuardianFailed frames instead.
    let own = || {
        if inherit {
            std::process::Stdio::inherit()
        } else {
            std::process::Stdio::null()
        }
    };
    let mut command = Command::new(&exe);
    // G13: a process group of its own from the first instruction (the guardian also calls
    // setpgid itself, for other launchers): a group kill aimed at this launcher spares it.
    // The guardian reads no environment (the workload's comes in the launch frame): an empty
    // one keeps its stack, which holds it, at its few pages (F5).
    command
        .env_clear()
        .process_group(0)
        .stdin(std::process::Stdio::from(theirs))
        .stdout(own())
        .stderr(own());
    let child = command.spawn().map_err(|source| HandshakeError::Io {
        op: "spawn the guardian",
        source,
    })?;
    let pid = child.id();
    Ok(Starting {
        link: Some(GuardianLink {
            child: Some(child),
            pid,
            channel: ours,
            hello: placeholder_hello(),
            closed: false,
            returned_lock: None,
        }),
        inherit,
    })
}

impl Starting {
    /// The guardian's pid.
    pub fn pid(&self) -> u32 {
        self.link.as_ref().map_or(0, |l| l.pid)
    }

    /// Sends the launch spec and waits (bounded) for the guardian's `Hello`. `config.stdio` must
    /// be [`Stdio::Inherit`] exactly when the guardian was started to inherit this process's.
    pub fn launch(mut self, config: LaunchConfig) -> Result<GuardianLink, HandshakeError> {
        if self.inherit != matches!(config.stdio, Stdio::Inherit) {
            return Err(HandshakeError::Unexpected(
                "a launch on other stdio than its guardian was started for",
            ));
        }
        match self.link.take() {
            Some(link) => link.launch(config),
            None => Err(HandshakeError::Unexpected("a guardian launched twice")),
        }
    }
}

impl GuardianLink {
    fn launch(mut self, config: LaunchConfig) -> Result<GuardianLink, HandshakeError> {
        let argv: Vec<&[u8]> = config.argv.iter().map(|a| a.as_bytes()).collect();
        let env: Vec<&[u8]> = config.env.iter().map(|e| e.as_bytes()).collect();
        let cwd = config
            .cwd
            .as_ref()
            .map(|c| c.as_os_str().as_bytes())
            .unwrap_or(b"");
        let (flags, stdio_fds) = match &config.stdio {
            Stdio::Inherit => (
                if config.new_session {
                    FLAG_NEW_SESSION
                } else {
                    0
                },
                0,
            ),
            Stdio::Fds(_) => (
                if config.new_session {
                    FLAG_NEW_SESSION
                } else {
                    0
                },
                3,
            ),
            Stdio::Pty(_) => (FLAG_PTY, 3),
            Stdio::Captured { owner_lock, .. } => (
                if config.new_session {
                    FLAG_NEW_SESSION
                } else {
                    0
                } | if owner_lock.is_some() {
                    FLAG_OWNER_LOCK
                } else {
                    0
                },
                refine_protocol::frame::CAPTURE_FDS + u32::from(owner_lock.is_some()),
            ),
        };
        let flags = if config.allow_setns {
            flags | FLAG_ALLOW_SETNS
        } else {
            flags
        };
        let flags = flags
            | if config.ruleset.is_some() {
                FLAG_LANDLOCK
            } else {
                0
            }
            | if config.no_new_privs {
                FLAG_NO_NEW_PRIVS
            } else {
                0
            };
        let stdio_fds = stdio_fds
            + u32::from(config.ready_fd.is_some() && stdio_fds != 0)
            + u32::from(config.ruleset.is_some());
        // The workload gets the descriptor limit this process started with (T6: it raised its own).
        let rlimits = crate::kernel::limits::with_original_nofile(&config.rlimits);
        let params = LaunchParams {
            flags,
            pdeath_signal: config.pdeath_signal.map(|s| s.as_raw() as u32),
            // Bounded to the frame's range, so the narrowing cannot truncate.
            start_timeout_ms: refine_protocol::time::saturating_ms(config.start_timeout)
                .clamp(1, u64::from(MAX_START_TIMEOUT_MS)) as u32,
            stdio_fds,
            registration: config.registration,
            runtime: config.runtime,
            proof_path: config.proof_path.as_os_str().as_bytes(),
            cwd,
            argv: &argv,
            env: &env,
            rlimits: &rlimits,
            credentials: config
                .credentials
                .as_ref()
                .map(|c| refine_protocol::frame::Credentials {
                    uid: c.uid,
                    gid: c.gid,
                    groups: &c.groups,
                }),
            signal_state: config.signal_state,
            cgroup: config.cgroup.as_ref().map(|c| c.as_os_str().as_bytes()),
            capture: match &config.stdio {
                Stdio::Captured { log_cap, .. } => {
                    Some(refine_protocol::frame::CaptureParams { log_cap: *log_cap })
                }
                _ => None,
            },
            ready_fd: config.ready_fd.as_ref().map(|(_, n)| *n),
        };
        // Sized to this launch (a few hundred bytes, usually), capped at the largest frame: a
        // bigger launch fails to encode exactly as before.
        let need = launch_len(&params);
        if need > MAX_FRAME {
            self.close_and_reap();
            return Err(HandshakeError::Encode(
                refine_protocol::EncodeError::Oversized {
                    len: need,
                    max: MAX_FRAME,
                },
            ));
        }
        let mut frame = vec![0u8; need];
        let len = match encode_launch(&params, &mut frame) {
            Ok(len) => len,
            Err(e) => {
                self.close_and_reap();
                return Err(HandshakeError::Encode(e));
            }
        };
        let mut link = self;

        let sent = {
            let mut fds: Vec<BorrowedFd<'_>> = match &config.stdio {
                Stdio::Inherit => Vec::new(),
                Stdio::Fds(fds) => fds.iter().map(|f| f.as_fd()).collect(),
                Stdio::Pty(slave) => vec![slave.as_fd(); 3],
                Stdio::Captured {
                    stdin,
                    artifacts,
                    indexes,
                    owner_lock,
                    ..
                } => [stdin]
                    .into_iter()
                    .chain(artifacts)
                    .chain(indexes)
                    .chain(owner_lock)
                    .map(|f| f.as_fd())
                    .collect(),
            };
            // H6: the readiness pipe goes last.
            if let Some((fd, _)) = &config.ready_fd {
                fds.push(fd.as_fd());
            }
            // X11: the Landlock ruleset after every other one.
            if let Some(fd) = &config.ruleset {
                fds.push(fd.as_fd());
            }
            let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(8))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !fds.is_empty() {
                control.push(SendAncillaryMessage::ScmRights(&fds));
            }
            sendmsg(
                &link.channel,
                &[IoSlice::new(&frame[..len])],
                &mut control,
                SendFlags::NOSIGNAL,
            )
        };
        // Our copies of the workload's descriptors go now, so readers see EOF when the scope
        // closes them.
        drop(config.stdio);
        if let Err(e) = sent {
            link.close_and_reap();
            return Err(HandshakeError::Io {
                op: "send the launch spec",
                source: e.into(),
            });
        }

        match link.recv_frame(Some(HELLO_TIMEOUT)) {
            Ok(Some(Received::Hello(h))) => {
                link.hello = h;
                Ok(link)
            }
            other => {
                link.close_and_reap();
                Err(match other {
                    Ok(None) => HandshakeError::HelloTimeout(HELLO_TIMEOUT),
                    Ok(Some(Received::Closed)) => HandshakeError::ClosedBeforeHello,
                    Ok(Some(Received::Event(GuardianEvent::GuardianFailed { code, errno }))) => {
                        HandshakeError::GuardianFailed { code, errno }
                    }
                    Ok(Some(_)) => HandshakeError::Unexpected("event before hello"),
                    Err(e) => e,
                })
            }
        }
    }
}

enum Received {
    Hello(Hello),
    Event(GuardianEvent),
    Closed,
}

fn placeholder_hello() -> Hello {
    Hello {
        guardian: Default::default(),
        boot_id: Default::default(),
        workload: Default::default(),
        workload_pgid: 0,
        workload_sid: 0,
        proof: Default::default(),
        cgroup: Default::default(),
        provenance: None,
    }
}

impl GuardianLink {
    /// Identities reported by the guardian: register these before [`GuardianLink::start`].
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Tells the guardian the registration is durable: the workload may exec.
    pub fn start(&mut self) -> Result<(), HandshakeError> {
        self.send(Frame::Start, "send start")
    }

    /// Tells the guardian not to start: it kills and reaps the gated workload, writes an
    /// aborted receipt and exits.
    pub fn abort(&mut self) -> Result<(), HandshakeError> {
        self.send(Frame::Abort, "send abort")
    }

    /// Asks the guardian to forward `signo` to the workload.
    pub fn signal(&mut self, signo: i32) -> Result<(), HandshakeError> {
        self.send(Frame::Signal { signo }, "send a signal request")
    }

    /// Tells the guardian that this launcher leaves the scope to itself on purpose (W16): its
    /// workload has ended and what it left is kept, so this process's end, whenever it comes, is
    /// no loss: the guardian sends no parent-death signal and does not end the scope then.
    /// Without it, a launch that asked for a parent-death signal has its whole scope ended by
    /// its guardian when this process dies.
    pub fn disown(&mut self) -> Result<(), HandshakeError> {
        self.send(Frame::Disown, "send disown")
    }

    fn send(&mut self, frame: Frame<'_>, op: &'static str) -> Result<(), HandshakeError> {
        let mut buf = [0u8; 64];
        let n = frame
            .encode_into(&mut buf)
            .map_err(HandshakeError::Encode)?;
        rustix::net::send(&self.channel, &buf[..n], SendFlags::NOSIGNAL).map_err(io_op(op))?;
        Ok(())
    }

    /// Waits up to `timeout` (`None`: forever) for the next event; `Ok(None)` on timeout.
    pub fn next_event(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<GuardianEvent>, HandshakeError> {
        match self.recv_frame(timeout)? {
            None => Ok(None),
            Some(Received::Event(e)) => Ok(Some(e)),
            Some(Received::Closed) => Ok(Some(GuardianEvent::ChannelClosed)),
            Some(Received::Hello(_)) => Err(HandshakeError::Unexpected("second hello")),
        }
    }

    fn recv_frame(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Received>, HandshakeError> {
        if self.closed {
            return Ok(Some(Received::Closed));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let ts = left.map(|l| rustix::time::Timespec {
                tv_sec: l.as_secs() as i64,
                tv_nsec: l.subsec_nanos() as i64,
            });
            let mut fds = [PollFd::new(&self.channel, PollFlags::IN)];
            match poll(&mut fds, ts.as_ref()) {
                Ok(0) => return Ok(None),
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    return Err(HandshakeError::Io {
                        op: "poll the guardian channel",
                        source: e.into(),
                    })
                }
            }
        }
        let mut buf = [0u8; 512];
        let received = match recv_with_fd(&self.channel, &mut buf) {
            // The guardian exited with a frame of ours unread: the kernel reports the reset
            // before the frames it sent last (its receipt among them), and reading it clears
            // it. Those frames, then the end of file, follow.
            Err(rustix::io::Errno::CONNRESET) => recv_with_fd(&self.channel, &mut buf),
            other => other,
        };
        let (full, passed) = match received {
            Ok(r) => r,
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => return Ok(None),
            Err(rustix::io::Errno::CONNRESET) => (0, None),
            Err(e) => {
                return Err(HandshakeError::Io {
                    op: "read the guardian channel",
                    source: e.into(),
                })
            }
        };
        if full == 0 {
            self.closed = true;
            return Ok(Some(Received::Closed));
        }
        if full > buf.len() {
            return Err(HandshakeError::Decode(
                refine_protocol::DecodeError::Oversized {
                    len: full,
                    max: buf.len(),
                },
            ));
        }
        let frame = Frame::decode(&buf[..full]).map_err(HandshakeError::Decode)?;
        Ok(Some(match frame {
            Frame::Hello(h) => Received::Hello(h),
            Frame::Started => Received::Event(GuardianEvent::Started),
            Frame::SpawnFailed { errno, step } => {
                Received::Event(GuardianEvent::SpawnFailed { errno, step })
            }
            Frame::WorkloadExited { status, at_ns } => {
                Received::Event(GuardianEvent::WorkloadExited { status, at_ns })
            }
            Frame::ScopeExited(r) => {
                // L3: the registration lock the guardian held for us comes back with it.
                if self.returned_lock.is_none() {
                    self.returned_lock = passed;
                }
                Received::Event(GuardianEvent::ScopeExited(r))
            }
            Frame::GuardianFailed { code, errno } => {
                Received::Event(GuardianEvent::GuardianFailed { code, errno })
            }
            Frame::CaptureProgress { stdout, stderr } => {
                Received::Event(GuardianEvent::CaptureProgress { stdout, stderr })
            }
            Frame::CaptureEnded(c) => Received::Event(GuardianEvent::CaptureEnded(c)),
            Frame::Launch(_)
            | Frame::Start
            | Frame::Abort
            | Frame::Signal { .. }
            | Frame::Disown => {
                return Err(HandshakeError::Unexpected(
                    "launcher-side frame from the guardian",
                ))
            }
        }))
    }

    /// The registration lock the guardian held for this launcher (L3), as it came back with the
    /// receipt: a descriptor of the same open file description, so the lock is still held.
    pub(crate) fn take_returned_lock(&mut self) -> Option<OwnedFd> {
        self.returned_lock.take()
    }

    /// The channel, for callers that poll it themselves (readable = an event is pending).
    pub fn channel(&self) -> BorrowedFd<'_> {
        self.channel.as_fd()
    }

    /// The guardian's pid.
    pub fn guardian_pid(&self) -> u32 {
        self.pid
    }

    /// Whether the guardian process has exited (reaped now, by pid, if so): its wait is then
    /// immediate.
    pub fn guardian_exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| c.try_wait().is_ok_and(|s| s.is_some()))
    }

    /// Waits for the guardian process itself to exit and reaps it (by pid, never `-1`).
    pub fn wait_guardian(&mut self) -> io::Result<ExitStatus> {
        match self.child.take() {
            Some(mut c) => c.wait(),
            None => Err(io::Error::other("guardian already reaped")),
        }
    }

    fn close_and_reap(&mut self) {
        // Closing the channel before start makes the guardian abort: it exits promptly.
        let _ = rustix::net::shutdown(&self.channel, rustix::net::Shutdown::Both);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

impl AsFd for GuardianLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.channel()
    }
}

impl Drop for GuardianLink {
    fn drop(&mut self) {
        // The channel closes with us; the guardian finishes its scope on its own. It is our
        // child, so someone must reap it: a small thread waits for it by pid.
        if let Some(mut c) = self.child.take() {
            let _ = std::thread::Builder::new()
                .name("guardian-reaper".into())
                .spawn(move || {
                    let _ = c.wait();
                });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link over one end of a fresh socketpair; the other end plays the guardian.
    fn link_and_peer() -> (GuardianLink, OwnedFd) {
        let (ours, theirs) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let link = GuardianLink {
            child: None,
            pid: 0,
            channel: ours,
            hello: placeholder_hello(),
            closed: false,
            returned_lock: None,
        };
        (link, theirs)
    }

    /// A guardian that exits with a frame of ours still unread makes the kernel report
    /// `ECONNRESET` before the frames it sent last (its receipt among them): the reset is read
    /// and the queued frames still reach us, then the end of file.
    #[test]
    fn frames_sent_before_a_reset_are_still_read() {
        let (mut link, guardian) = link_and_peer();
        let mut buf = [0u8; 64];
        let n = Frame::Started.encode_into(&mut buf).unwrap();
        rustix::net::send(&guardian, &buf[..n], SendFlags::NOSIGNAL).unwrap();
        link.abort().unwrap(); // never read by the "guardian"
        drop(guardian);
        let next = || Some(Duration::from_secs(5));
        assert!(matches!(
            link.next_event(next()).unwrap(),
            Some(GuardianEvent::Started)
        ));
        assert!(matches!(
            link.next_event(next()).unwrap(),
            Some(GuardianEvent::ChannelClosed)
        ));
    }
}

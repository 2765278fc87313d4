//! The guardian handshake: frames exchanged over the one inherited channel (a
//! `SOCK_SEQPACKET` socketpair, one frame per message) between launcher (L) and guardian (G).
//!
//! ```text
//! L -> G  Launch        the launch spec (+ SCM_RIGHTS: the workload's stdin, stdout, stderr)
//! G -> L  Hello         identities: guardian, boot, workload (forked, gated), pgid/sid, proof file
//! L -> G  Start         the registration is durable: the workload may exec
//! L -> G  Abort         do not start: kill and reap the gated workload, write an aborted receipt
//! G -> L  Started       execve succeeded
//! G -> L  SpawnFailed   a step of the release failed with errno: u32 errno, u16 step (W13:
//!                       0 the program, 1 the cwd, 2 the user switch, 3 other setup)
//! G -> L  WorkloadExited  the workload itself exited (descendants may still hold the scope)
//! G -> L  ScopeExited   waitpid said ECHILD; the receipt is on disk (its bytes follow)
//! L -> G  Signal        forward a signal (1..=64) to the workload
//! G -> L  GuardianFailed  the guardian cannot go on (static code + errno); it exits after this
//! L -> G  Disown        the launcher leaves the scope to itself on purpose (its workload ended,
//!                       what it left is kept): the end of the channel that follows is no loss,
//!                       neither the parent-death signal nor the scope's end follows it (W16)
//! ```
//!
//! # Frame layout (little-endian)
//!
//! ```text
//! off size field
//!   0    4 magic b"RFNF"
//!   4    2 version (1)
//!   6    2 kind
//!   8    4 payload length (<= MAX_FRAME - 16)
//!  12    4 CRC-32 of header bytes 0..12 followed by the payload
//!  16    n payload
//! ```
//!
//! # Launch payload
//!
//! ```text
//! u32 flags (bit 0: PTY: the workload gets a new session and the stdin fd as controlling tty;
//!            bit 1: new session without a tty; otherwise a new process group;
//!            bit 2: no parent-death signal: launcher loss is not forwarded to the workload;
//!            bit 6: ALLOW_SETNS: no seccomp filter against `setns` into a PID or user
//!            namespace, X7; bits 3-5 below; any other bit is refused)
//! u32 parent-death signal to forward on launcher loss: 1..=64, or 0 exactly when bit 2 is set
//! u32 start timeout in ms (bounded to MAX_START_TIMEOUT_MS)
//! u32 number of descriptors sent with SCM_RIGHTS (0 or 3: stdin, stdout, stderr)
//! [16] registration id, [16] runtime id
//! str proof path, str cwd (empty: inherit)
//! u32 argc (1..=MAX_ARGS), argc x str
//! u32 envc (0..=MAX_ARGS), envc x str
//! u32 rlimit count (<= MAX_RLIMITS), each: u32 resource, u64 soft, u64 hard (u64::MAX = infinity)
//! only with flag bit 3 (CREDENTIALS): u32 uid, u32 gid, u32 group count (<= MAX_GROUPS),
//!   that many u32 supplementary gids (none of the ids may be u32::MAX, the kernel's "unchanged")
//! only with flag bit 4 (SIGNAL_STATE): u64 ignored set, u64 blocked mask, bit n-1 for signal n
//!   (the launcher's inherited state, W10; SIGKILL and SIGSTOP bits must be 0); without it the
//!   workload starts with every disposition default and an empty mask
//! only with flag bit 5 (CGROUP): str the cgroup v2 directory the workload is forked into
//!   (`clone3` with `CLONE_INTO_CGROUP`, F4): absolute, made by the launcher, empty
//! only with flag bit 7 (CAPTURE): u64 the artifacts' byte cap (u64::MAX: none); the guardian
//!   drains stdout and stderr into the artifacts itself (L1), and the descriptors sent are 5:
//!   stdin, the stdout and stderr artifacts, the stdout and stderr indexes (`capture.rs`)
//! flag bit 8 (OWNER_LOCK, only with CAPTURE): a 6th descriptor follows, the launcher's
//!   registration lock, held by the guardian until the channel ends or sent back with its
//!   `ScopeExited` (L3)
//! only with flag bit 9 (READY_FD, only with descriptors sent): u32 the descriptor number
//!   (3..=1023) the workload gets the last descriptor sent on, the write end of the launcher's
//!   readiness pipe (H6, s6's notification descriptor); one descriptor more than without it
//! flag bit 10 (LANDLOCK): one more descriptor follows every other one, a Landlock ruleset the
//!   launcher built (X11); the gated child applies it with `landlock_restrict_self` after
//!   *start*, before the user switch, and closes it. It is the only descriptor of a launch on
//!   inherited stdio (count 1), else the count is the one without it plus one
//! flag bit 11 (NO_NEW_PRIVS): the gated child sets `no_new_privs` before it applies the ruleset
//!   (a launcher without `CAP_SYS_ADMIN` needs it for Landlock; setuid programs then lose it)
//! ```
//!
//! # Capture frames (guardian to launcher, CAPTURE launches only)
//!
//! ```text
//! CaptureProgress: u64 stdout bytes read so far, u64 stderr bytes read so far (at most every
//!   PROGRESS_EVERY_MS while bytes flow)
//! CaptureEnded: u8 stream (1 stdout, 2 stderr), u32 end kind, i32 errno (as in the index's end
//!   record), u64 artifact bytes, u64 bytes read
//! ```
//!
//! # Hello payload
//!
//! ```text
//! u32 guardian pid, u64 its start time, [16] boot id, u32 workload pid, u64 its start time,
//! u32 workload pgid, u32 workload sid, u64 proof dev, u64 proof ino,
//! u16 placement (0 no cgroup asked, 1 forked into the cgroup, 2 clone3 refused: plain fork),
//! i32 errno (the refusal's with placement 2, else 0)
//! only in a version 2 frame: [112] the guardian's build provenance (V1, layout in
//!   `provenance.rs`)
//! ```
//!
//! # Versions
//! A frame's version is its own layout's: every frame is written as version 1 except a `Hello`
//! that carries the guardian's provenance, which is version 2 (a launcher that predates it
//! refuses it as an unsupported version, P3). The decoder reads both: a version 1 `Hello` is a
//! guardian that carries no provenance (`Hello::provenance` is `None`). So a guardian and a
//! launcher of different builds still agree on every other frame.
//! where `str` is a `u32` length and that many bytes, the last of which is the only NUL, so the
//! guardian can hand pointers into the receive buffer straight to `execve` without allocating.

use core::ffi::CStr;

use crate::capture::CaptureEnd;
use crate::codec::{envelope_open, envelope_seal, envelope_start, Reader, Writer};
use crate::provenance::Provenance;
use crate::receipt::{Receipt, WorkloadStatus, MAX_SIGNAL, RECEIPT_LEN};
use crate::{
    BootId, DecodeError, EncodeError, ProcessWitness, ProofIdentity, RegistrationId, RuntimeId,
};

pub const FRAME_MAGIC: [u8; 4] = *b"RFNF";
/// The newest frame layout this crate reads and writes (see "Versions" above).
pub const FRAME_VERSION: u16 = 2;
/// The layout of every frame but a `Hello` with provenance.
const FRAME_VERSION_1: u16 = 1;
pub const HEADER_LEN: usize = crate::codec::envelope_len(FRAME_MAGIC.len());
/// Largest frame on the wire, header included. A launch spec (argv + environment) must fit.
pub const MAX_FRAME: usize = 192 * 1024;
/// Most argv or environment entries in one launch.
pub const MAX_ARGS: usize = 4096;
/// Most resource limits in one launch.
pub const MAX_RLIMITS: usize = 32;
/// Longest *start* wait a launch may ask for.
pub const MAX_START_TIMEOUT_MS: u32 = 10 * 60 * 1000;
/// The *start* wait a launch asks for unless told otherwise: how long its guardian keeps the
/// gated workload waiting for *start* before it kills it (and what a reader of the open index
/// allows a launch to register in).
pub const DEFAULT_START_TIMEOUT_MS: u32 = 30 * 1000;

pub const FLAG_PTY: u32 = 1 << 0;
pub const FLAG_NEW_SESSION: u32 = 1 << 1;
/// On the wire only: the launch asks for no parent-death signal (`pdeath_signal: None` in
/// [`LaunchParams`] and [`LaunchSpec`]; the encoder sets it, the decoder takes it out of `flags`).
pub const FLAG_NO_PDEATH_SIGNAL: u32 = 1 << 2;
/// The flags a caller passes in [`LaunchParams::flags`].
/// The workload runs under the launch's credentials (X1); set by the encoder from
/// [`LaunchParams::credentials`].
pub const FLAG_CREDENTIALS: u32 = 1 << 3;
/// The workload starts with the launch's [`SignalState`] (W10); set by the encoder from
/// [`LaunchParams::signal_state`].
pub const FLAG_SIGNAL_STATE: u32 = 1 << 4;
/// The workload is forked into a cgroup of its own (F4); set by the encoder from
/// [`LaunchParams::cgroup`].
pub const FLAG_CGROUP: u32 = 1 << 5;
/// The workload may join namespaces made outside its scope (X7's opt-out): the guardian installs
/// no filter against `setns` into a PID or user namespace. A caller passes it in
/// [`LaunchParams::flags`].
pub const FLAG_ALLOW_SETNS: u32 = 1 << 6;
/// The guardian drains stdout and stderr into the artifacts (L1); set by the encoder from
/// [`LaunchParams::capture`].
pub const FLAG_CAPTURE: u32 = 1 << 7;
/// Descriptors sent with a CAPTURE launch: stdin, two artifacts, two indexes.
pub const CAPTURE_FDS: u32 = 5;
/// The guardian holds the launcher's registration lock (L3), sent as one more descriptor after
/// the CAPTURE ones (only with [`FLAG_CAPTURE`]): it lets go when the channel ends, and sends it
/// back with its `ScopeExited`, so that the launcher records the result under the lock. A caller
/// passes it in [`LaunchParams::flags`].
pub const FLAG_OWNER_LOCK: u32 = 1 << 8;
/// H6: the last descriptor sent is the readiness pipe's write end, for the workload on the
/// descriptor number [`LaunchParams::ready_fd`] names; set by the encoder from it.
pub const FLAG_READY_FD: u32 = 1 << 9;
/// X11: the last descriptor sent is a Landlock ruleset the gated child applies to itself before
/// the exec (and closes). A caller passes it in [`LaunchParams::flags`] and sends the descriptor.
pub const FLAG_LANDLOCK: u32 = 1 << 10;
/// X11, the issue's item 4: the gated child sets `no_new_privs` before it applies the ruleset. A
/// caller passes it in [`LaunchParams::flags`].
pub const FLAG_NO_NEW_PRIVS: u32 = 1 << 11;
/// The descriptor numbers a readiness descriptor may take (0-2 are stdio).
pub const READY_FD_RANGE: core::ops::RangeInclusive<u32> = 3..=1023;
/// How often at most the guardian reports its capture's progress.
pub const PROGRESS_EVERY_MS: u64 = 250;
const KNOWN_FLAGS: u32 = FLAG_PTY
    | FLAG_CAPTURE
    | FLAG_OWNER_LOCK
    | FLAG_READY_FD
    | FLAG_LANDLOCK
    | FLAG_NO_NEW_PRIVS
    | FLAG_NEW_SESSION
    | FLAG_CREDENTIALS
    | FLAG_SIGNAL_STATE
    | FLAG_CGROUP
    | FLAG_ALLOW_SETNS;

/// The signal state a workload starts with instead of a clean one (W10: what `run` itself
/// inherited, as the bare command would have it): bit `n - 1` stands for signal `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SignalState {
    /// Signals set to `SIG_IGN`.
    pub ignored: u64,
    /// The blocked mask.
    pub blocked: u64,
}

impl SignalState {
    /// Neither set names `SIGKILL` or `SIGSTOP` (the kernel refuses to ignore or block them).
    pub const fn is_valid(&self) -> bool {
        let unblockable = (1u64 << (9 - 1)) | (1u64 << (19 - 1));
        (self.ignored | self.blocked) & unblockable == 0
    }
}
/// Most supplementary groups a launch may give its workload.
pub const MAX_GROUPS: usize = 256;

mod kind {
    pub const LAUNCH: u16 = 1;
    pub const HELLO: u16 = 2;
    pub const START: u16 = 3;
    pub const ABORT: u16 = 4;
    pub const STARTED: u16 = 5;
    pub const SPAWN_FAILED: u16 = 6;
    pub const WORKLOAD_EXITED: u16 = 7;
    pub const SCOPE_EXITED: u16 = 8;
    pub const SIGNAL: u16 = 9;
    pub const GUARDIAN_FAILED: u16 = 10;
    pub const DISOWN: u16 = 11;
    pub const CAPTURE_PROGRESS: u16 = 12;
    pub const CAPTURE_ENDED: u16 = 13;
}

/// What the code of a [`Frame::GuardianFailed`] means: the guardian's failure classes, by their
/// stable numbers (the errno travels beside the code).
pub const fn guardian_failure(code: u16) -> &'static str {
    match code {
        1 => "stdin must be a SOCK_SEQPACKET socket (the launch channel)",
        2 => "cannot move the channel off stdin",
        3 => "channel i/o failed",
        4 => "no launch frame within the bound",
        5 => "channel closed before the launch frame",
        6 => "launch frame exceeds the maximum frame size",
        7 => "descriptors do not match the launch spec",
        8 => "bad launch frame",
        9 => "first frame is not a launch frame",
        10 => "terminated by a signal before launch",
        11 => "cannot block signals",
        12 => "cannot map the frame buffer",
        13 => "cannot become a child subreaper",
        14 => "cannot create the proof file",
        15 => "cannot read a process identity",
        16 => "cannot create the gate pipes",
        17 => "cannot fork the workload",
        19 => "waitpid failed",
        20 => "cannot write the receipt",
        21 => "cannot read the signalfd",
        22 => "poll failed",
        23 => "cannot tell whether the workload executed",
        24 => "cannot leave the launcher's process group, become undumpable or leave the cwd",
        25 => "cannot reserve the receipt's space in the proof file",
        _ => "unknown guardian failure",
    }
}

/// A resource limit for `setrlimit` in the workload. `u64::MAX` is `RLIM_INFINITY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    pub resource: u32,
    pub soft: u64,
    pub hard: u64,
}

/// Who the workload runs as (X1): the gated child calls `setgroups`, `setgid`, `setuid` with
/// these before `execve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials<'a> {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (at most [`MAX_GROUPS`]).
    pub groups: &'a [u32],
}

/// What the launcher encodes: borrowed parts of a launch spec. Strings are given without their
/// NUL; the encoder appends it and refuses interior NULs.
#[derive(Debug, Clone, Copy)]
pub struct LaunchParams<'a> {
    pub flags: u32,
    /// What the guardian sends the workload when the launcher goes away (1..=64); `None`:
    /// nothing (the workload outlives its launcher; the scope is recovered later).
    pub pdeath_signal: Option<u32>,
    pub start_timeout_ms: u32,
    pub stdio_fds: u32,
    pub registration: RegistrationId,
    pub runtime: RuntimeId,
    pub proof_path: &'a [u8],
    pub cwd: &'a [u8],
    pub argv: &'a [&'a [u8]],
    pub env: &'a [&'a [u8]],
    pub rlimits: &'a [Rlimit],
    /// `None`: the workload keeps the guardian's credentials.
    pub credentials: Option<Credentials<'a>>,
    /// `None`: the workload starts clean (every disposition default, an empty mask).
    pub signal_state: Option<SignalState>,
    /// The cgroup v2 directory to fork the workload into (F4); `None`: the guardian's own.
    pub cgroup: Option<&'a [u8]>,
    /// The guardian drains the output into the artifacts (L1); `None`: the launcher does.
    pub capture: Option<CaptureParams>,
    /// H6: the descriptor number the workload gets the readiness pipe on (the last descriptor
    /// sent); `None`: no readiness descriptor.
    pub ready_fd: Option<u32>,
}

/// A launch whose guardian captures its output (L1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaptureParams {
    /// Per-artifact byte cap (S10); past it the stream is still drained.
    pub log_cap: Option<u64>,
}

/// A decoded launch spec: a validated view into the received bytes.
#[derive(Debug, Clone, Copy)]
pub struct LaunchSpec<'a> {
    pub flags: u32,
    /// 1..=64, or `None`: no parent-death signal.
    pub pdeath_signal: Option<u32>,
    pub start_timeout_ms: u32,
    pub stdio_fds: u32,
    pub registration: RegistrationId,
    pub runtime: RuntimeId,
    pub proof_path: &'a CStr,
    /// `None`: inherit the guardian's working directory.
    pub cwd: Option<&'a CStr>,
    pub argv: CStrList<'a>,
    pub env: CStrList<'a>,
    pub rlimits: RlimitList<'a>,
    /// Set when flag [`FLAG_CREDENTIALS`] is.
    pub credentials: Option<DecodedCredentials<'a>>,
    /// Set when flag [`FLAG_SIGNAL_STATE`] is.
    pub signal_state: Option<SignalState>,
    /// Set when flag [`FLAG_CGROUP`] is: never empty.
    pub cgroup: Option<&'a CStr>,
    /// Set when flag [`FLAG_CAPTURE`] is.
    pub capture: Option<CaptureParams>,
    /// Set when flag [`FLAG_READY_FD`] is: in [`READY_FD_RANGE`].
    pub ready_fd: Option<u32>,
}

/// Decoded [`Credentials`]: the groups are a validated view into the frame.
#[derive(Debug, Clone, Copy)]
pub struct DecodedCredentials<'a> {
    pub uid: u32,
    pub gid: u32,
    pub groups: GroupList<'a>,
}

/// A validated run of little-endian `u32` group ids.
#[derive(Debug, Clone, Copy)]
pub struct GroupList<'a> {
    bytes: &'a [u8],
}

impl<'a> GroupList<'a> {
    pub fn len(&self) -> usize {
        self.bytes.len() / 4
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }
}

/// `u32::MAX` means "leave unchanged" to `setresuid`/`setresgid`: never a real id.
const fn valid_id(id: u32) -> bool {
    id != u32::MAX
}

fn credentials_valid(uid: u32, gid: u32, mut groups: impl Iterator<Item = u32>) -> bool {
    valid_id(uid) && valid_id(gid) && groups.all(valid_id)
}

/// A validated run of `count` length-prefixed NUL-terminated strings.
#[derive(Debug, Clone, Copy)]
pub struct CStrList<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> CStrList<'a> {
    pub fn len(&self) -> usize {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn iter(&self) -> CStrIter<'a> {
        CStrIter {
            reader: Reader::new(self.bytes),
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for CStrList<'a> {
    type Item = &'a CStr;
    type IntoIter = CStrIter<'a>;
    fn into_iter(self) -> CStrIter<'a> {
        self.iter()
    }
}

pub struct CStrIter<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for CStrIter<'a> {
    type Item = &'a CStr;
    fn next(&mut self) -> Option<&'a CStr> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Validated at decode time, so neither step can fail here.
        let raw = self.reader.len_prefixed(MAX_FRAME).ok()?;
        CStr::from_bytes_with_nul(raw).ok()
    }
}

/// A validated run of resource limits.
#[derive(Debug, Clone, Copy)]
pub struct RlimitList<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> RlimitList<'a> {
    pub fn len(&self) -> usize {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = Rlimit> + 'a {
        self.bytes.chunks_exact(20).map(|c| {
            let mut r = Reader::new(c);
            // Each chunk is exactly 20 bytes, checked at decode time.
            Rlimit {
                resource: r.u32().unwrap_or(0),
                soft: r.u64().unwrap_or(0),
                hard: r.u64().unwrap_or(0),
            }
        })
    }
}

/// What the guardian reports once the workload is forked (and gated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub guardian: ProcessWitness,
    pub boot_id: BootId,
    pub workload: ProcessWitness,
    pub workload_pgid: u32,
    pub workload_sid: u32,
    pub proof: ProofIdentity,
    /// Where the workload was forked (F4).
    pub cgroup: Placement,
    /// The guardian's build (V1); `None`: a guardian that carries none (a version 1 `Hello`).
    pub provenance: Option<Provenance>,
}

/// Where the guardian forked the workload (F4): what the registration records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// The launch asked for no cgroup: the workload starts in the guardian's.
    #[default]
    NotAsked,
    /// `clone3(CLONE_INTO_CGROUP)` put it into the launch's cgroup from its first instruction.
    Cgroup,
    /// The kernel refused that clone3 (or the directory could not be opened) with `errno`: the
    /// workload was forked plainly, into the guardian's cgroup, and the stop uses `/proc`.
    Refused { errno: i32 },
}

impl Placement {
    const fn code(self) -> (u16, i32) {
        match self {
            Placement::NotAsked => (0, 0),
            Placement::Cgroup => (1, 0),
            Placement::Refused { errno } => (2, errno),
        }
    }

    fn from_code(code: u16, errno: i32) -> Result<Placement, DecodeError> {
        match (code, errno) {
            (0, 0) => Ok(Placement::NotAsked),
            (1, 0) => Ok(Placement::Cgroup),
            (2, errno) if errno > 0 => Ok(Placement::Refused { errno }),
            _ => Err(DecodeError::InvalidField {
                field: "cgroup placement",
            }),
        }
    }
}

/// Which step of the gated child's release failed (W13): what a spawn failure names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnStep {
    /// `execve` of the program (or its `PATH` search).
    Program,
    /// `chdir` into the launch's working directory, with the workload's credentials.
    Cwd,
    /// The user switch (`run --user`): groups, gid, uid, capabilities, or their check.
    User,
    /// The rest of the preparation: stdio, the controlling terminal, signals, resource limits.
    Setup,
}

impl SpawnStep {
    pub const fn code(self) -> u16 {
        match self {
            SpawnStep::Program => 0,
            SpawnStep::Cwd => 1,
            SpawnStep::User => 2,
            SpawnStep::Setup => 3,
        }
    }

    pub const fn from_code(code: u16) -> Option<SpawnStep> {
        match code {
            0 => Some(SpawnStep::Program),
            1 => Some(SpawnStep::Cwd),
            2 => Some(SpawnStep::User),
            3 => Some(SpawnStep::Setup),
            _ => None,
        }
    }
}

/// One handshake frame.
#[derive(Debug, Clone, Copy)]
pub enum Frame<'a> {
    Launch(LaunchSpec<'a>),
    Hello(Hello),
    Start,
    Abort,
    Started,
    SpawnFailed {
        errno: i32,
        step: SpawnStep,
    },
    WorkloadExited {
        status: WorkloadStatus,
        at_ns: u64,
    },
    ScopeExited(Receipt),
    Signal {
        signo: i32,
    },
    GuardianFailed {
        code: u16,
        errno: i32,
    },
    Disown,
    /// Bytes read so far from stdout and stderr (L1).
    CaptureProgress {
        stdout: u64,
        stderr: u64,
    },
    /// A stream the guardian drained has ended (L1).
    CaptureEnded(CaptureEnded),
}

/// Which stream a [`Frame::CaptureEnded`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapturedStream {
    Stdout,
    Stderr,
}

/// How one stream the guardian drained ended, with its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CaptureEnded {
    pub stream: CapturedStream,
    pub end: CaptureEnd,
    /// Bytes in the artifact.
    pub written: u64,
    /// Bytes read from the stream.
    pub moved: u64,
}

/// A signal the kernel delivers (P4: 1..=64).
const fn signal_valid(signo: i32) -> bool {
    1 <= signo && signo <= MAX_SIGNAL
}

fn finish_frame(w: &mut Writer<'_>) -> Result<usize, EncodeError> {
    let len = envelope_seal(w, FRAME_MAGIC.len())?;
    if len > MAX_FRAME {
        return Err(EncodeError::Oversized {
            len,
            max: MAX_FRAME,
        });
    }
    Ok(len)
}

fn start_frame(w: &mut Writer<'_>, kind: u16) -> Result<(), EncodeError> {
    envelope_start(w, &FRAME_MAGIC, FRAME_VERSION_1, kind)
}

fn put_str(w: &mut Writer<'_>, s: &[u8], field: &'static str) -> Result<(), EncodeError> {
    if s.contains(&0) {
        return Err(EncodeError::InteriorNul { field });
    }
    if s.len() + 1 > MAX_FRAME {
        return Err(EncodeError::Oversized {
            len: s.len() + 1,
            max: MAX_FRAME,
        });
    }
    w.u32(s.len() as u32 + 1)?;
    w.bytes(s)?;
    w.u8(0)
}

/// Encodes a launch frame into `out`; returns the frame length.
/// The exact length [`encode_launch`] writes for `p` (before its limit checks), so a launcher can
/// size its buffer to the launch instead of to [`MAX_FRAME`].
pub fn launch_len(p: &LaunchParams<'_>) -> usize {
    let string = |s: &[u8]| 4 + s.len() + 1;
    HEADER_LEN
        + 4 * 4
        + p.registration.0.len()
        + p.runtime.0.len()
        + string(p.proof_path)
        + string(p.cwd)
        + 4
        + p.argv.iter().map(|a| string(a)).sum::<usize>()
        + 4
        + p.env.iter().map(|e| string(e)).sum::<usize>()
        + 4
        + p.rlimits.len() * (4 + 8 + 8)
        + p.credentials.map_or(0, |c| 3 * 4 + c.groups.len() * 4)
        + p.signal_state.map_or(0, |_| 2 * 8)
        + p.cgroup.map_or(0, string)
        + p.capture.map_or(0, |_| 8)
        + p.ready_fd.map_or(0, |_| 4)
}

pub fn encode_launch(p: &LaunchParams<'_>, out: &mut [u8]) -> Result<usize, EncodeError> {
    if p.argv.len() > MAX_ARGS || p.env.len() > MAX_ARGS {
        return Err(EncodeError::Oversized {
            len: p.argv.len().max(p.env.len()),
            max: MAX_ARGS,
        });
    }
    if p.rlimits.len() > MAX_RLIMITS {
        return Err(EncodeError::Oversized {
            len: p.rlimits.len(),
            max: MAX_RLIMITS,
        });
    }
    // The decoder's domain checks, so that nothing is sent that the guardian would refuse.
    if p.flags & !KNOWN_FLAGS != 0 {
        return Err(EncodeError::InvalidField {
            field: "launch flags",
        });
    }
    let (pdeath_flag, pdeath_signal) = match p.pdeath_signal {
        None => (FLAG_NO_PDEATH_SIGNAL, 0),
        Some(s @ 1..=64) => (0, s),
        Some(_) => {
            return Err(EncodeError::InvalidField {
                field: "parent-death signal",
            })
        }
    };
    if p.start_timeout_ms == 0 || p.start_timeout_ms > MAX_START_TIMEOUT_MS {
        return Err(EncodeError::InvalidField {
            field: "start timeout",
        });
    }
    if p.flags & FLAG_OWNER_LOCK != 0 && p.capture.is_none() {
        return Err(EncodeError::InvalidField {
            field: "launch flags",
        });
    }
    if !fds_valid(
        p.capture.map_or(0, |_| FLAG_CAPTURE) | p.ready_fd.map_or(0, |_| FLAG_READY_FD) | p.flags,
        p.stdio_fds,
    ) {
        return Err(EncodeError::InvalidField {
            field: "descriptor count",
        });
    }
    if p.ready_fd.is_some_and(|n| !READY_FD_RANGE.contains(&n)) {
        return Err(EncodeError::InvalidField {
            field: "ready descriptor",
        });
    }
    if p.proof_path.is_empty() {
        return Err(EncodeError::InvalidField {
            field: "proof path",
        });
    }
    if p.argv.is_empty() {
        return Err(EncodeError::InvalidField { field: "argv" });
    }
    if let Some(c) = p.credentials {
        if c.groups.len() > MAX_GROUPS {
            return Err(EncodeError::Oversized {
                len: c.groups.len(),
                max: MAX_GROUPS,
            });
        }
        if !credentials_valid(c.uid, c.gid, c.groups.iter().copied()) {
            return Err(EncodeError::InvalidField {
                field: "credentials",
            });
        }
    }
    if p.cgroup.is_some_and(|c| c.is_empty()) {
        return Err(EncodeError::InvalidField { field: "cgroup" });
    }
    if p.signal_state.is_some_and(|st| !st.is_valid()) {
        return Err(EncodeError::InvalidField {
            field: "signal state",
        });
    }
    // The flag says whether credentials follow: it mirrors `p.credentials`.
    let flags = match p.credentials {
        Some(_) => p.flags | FLAG_CREDENTIALS,
        None => p.flags & !FLAG_CREDENTIALS,
    };
    // Likewise the signal state.
    let flags = match p.signal_state {
        Some(_) => flags | FLAG_SIGNAL_STATE,
        None => flags & !FLAG_SIGNAL_STATE,
    };
    // And the cgroup.
    let flags = match p.cgroup {
        Some(_) => flags | FLAG_CGROUP,
        None => flags & !FLAG_CGROUP,
    };
    // And the capture.
    let flags = match p.capture {
        Some(_) => flags | FLAG_CAPTURE,
        None => flags & !FLAG_CAPTURE,
    };
    // And the readiness descriptor.
    let flags = match p.ready_fd {
        Some(_) => flags | FLAG_READY_FD,
        None => flags & !FLAG_READY_FD,
    };
    let mut w = Writer::new(out);
    start_frame(&mut w, kind::LAUNCH)?;
    w.u32(flags | pdeath_flag)?;
    w.u32(pdeath_signal)?;
    w.u32(p.start_timeout_ms)?;
    w.u32(p.stdio_fds)?;
    w.bytes(&p.registration.0)?;
    w.bytes(&p.runtime.0)?;
    put_str(&mut w, p.proof_path, "proof path")?;
    put_str(&mut w, p.cwd, "cwd")?;
    w.u32(p.argv.len() as u32)?;
    for a in p.argv {
        put_str(&mut w, a, "argv")?;
    }
    w.u32(p.env.len() as u32)?;
    for e in p.env {
        put_str(&mut w, e, "env")?;
    }
    w.u32(p.rlimits.len() as u32)?;
    for l in p.rlimits {
        w.u32(l.resource)?;
        w.u64(l.soft)?;
        w.u64(l.hard)?;
    }
    if let Some(c) = p.credentials {
        w.u32(c.uid)?;
        w.u32(c.gid)?;
        w.u32(c.groups.len() as u32)?;
        for &g in c.groups {
            w.u32(g)?;
        }
    }
    if let Some(st) = p.signal_state {
        w.u64(st.ignored)?;
        w.u64(st.blocked)?;
    }
    if let Some(c) = p.cgroup {
        put_str(&mut w, c, "cgroup")?;
    }
    if let Some(c) = p.capture {
        w.u64(c.log_cap.unwrap_or(u64::MAX))?;
    }
    if let Some(n) = p.ready_fd {
        w.u32(n)?;
    }
    finish_frame(&mut w)
}

impl Frame<'_> {
    /// Encodes any frame but [`Frame::Launch`] (use [`encode_launch`]) into `out`.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(out);
        let k = match self {
            Frame::Launch(_) => return Err(EncodeError::UseEncodeLaunch),
            Frame::Hello(_) => kind::HELLO,
            Frame::Start => kind::START,
            Frame::Abort => kind::ABORT,
            Frame::Started => kind::STARTED,
            Frame::SpawnFailed { .. } => kind::SPAWN_FAILED,
            Frame::WorkloadExited { .. } => kind::WORKLOAD_EXITED,
            Frame::ScopeExited(_) => kind::SCOPE_EXITED,
            Frame::Signal { .. } => kind::SIGNAL,
            Frame::GuardianFailed { .. } => kind::GUARDIAN_FAILED,
            Frame::Disown => kind::DISOWN,
            Frame::CaptureProgress { .. } => kind::CAPTURE_PROGRESS,
            Frame::CaptureEnded(_) => kind::CAPTURE_ENDED,
        };
        match *self {
            Frame::Hello(Hello {
                provenance: Some(_),
                ..
            }) => envelope_start(&mut w, &FRAME_MAGIC, FRAME_VERSION, k)?,
            _ => start_frame(&mut w, k)?,
        }
        match *self {
            Frame::Launch(_) | Frame::Start | Frame::Abort | Frame::Started | Frame::Disown => {}
            Frame::Hello(h) => {
                w.u32(h.guardian.pid)?;
                w.u64(h.guardian.start_time)?;
                w.bytes(&h.boot_id.0)?;
                w.u32(h.workload.pid)?;
                w.u64(h.workload.start_time)?;
                w.u32(h.workload_pgid)?;
                w.u32(h.workload_sid)?;
                w.u64(h.proof.dev)?;
                w.u64(h.proof.ino)?;
                let (code, errno) = h.cgroup.code();
                w.u16(code)?;
                w.i32(errno)?;
                if let Some(p) = h.provenance {
                    w.bytes(p.as_bytes())?;
                }
            }
            Frame::SpawnFailed { errno, step } => {
                w.i32(errno)?;
                w.u16(step.code())?;
            }
            Frame::WorkloadExited { status, at_ns } => {
                status.encode(&mut w)?;
                w.u64(at_ns)?;
            }
            Frame::ScopeExited(r) => {
                // The receipt's own encoder: it refuses what its decoder would.
                let mut receipt = [0u8; RECEIPT_LEN];
                let n = r.encode_into(&mut receipt)?;
                w.bytes(&receipt[..n])?;
            }
            Frame::Signal { signo } => {
                if !signal_valid(signo) {
                    return Err(EncodeError::InvalidField { field: "signal" });
                }
                w.i32(signo)?
            }
            Frame::GuardianFailed { code, errno } => {
                w.u16(code)?;
                w.i32(errno)?;
            }
            Frame::CaptureProgress { stdout, stderr } => {
                w.u64(stdout)?;
                w.u64(stderr)?;
            }
            Frame::CaptureEnded(c) => {
                if c.written > c.moved {
                    return Err(EncodeError::InvalidField {
                        field: "capture counts",
                    });
                }
                let (kind, errno) = c.end.to_wire();
                w.u8(match c.stream {
                    CapturedStream::Stdout => 1,
                    CapturedStream::Stderr => 2,
                })?;
                w.u32(kind)?;
                w.i32(errno)?;
                w.u64(c.written)?;
                w.u64(c.moved)?;
            }
        }
        finish_frame(&mut w)
    }

    /// Decodes one whole frame (one `SOCK_SEQPACKET` message).
    pub fn decode(buf: &[u8]) -> Result<Frame<'_>, DecodeError> {
        if buf.len() > MAX_FRAME {
            return Err(DecodeError::Oversized {
                len: buf.len(),
                max: MAX_FRAME,
            });
        }
        let (k, payload) = envelope_open(buf, &FRAME_MAGIC, FRAME_VERSION, MAX_FRAME - HEADER_LEN)?;
        // envelope_open checked the version at bytes 4..6 against FRAME_VERSION.
        let version = u16::from_le_bytes([buf[4], buf[5]]);
        if version != FRAME_VERSION_1 && k != kind::HELLO {
            return Err(DecodeError::UnsupportedVersion {
                got: version,
                max: FRAME_VERSION_1,
            });
        }
        let mut r = Reader::new(payload);
        let frame = match k {
            kind::LAUNCH => Frame::Launch(decode_spec(&mut r)?),
            kind::HELLO => Frame::Hello(Hello {
                guardian: ProcessWitness {
                    pid: r.u32()?,
                    start_time: r.u64()?,
                },
                boot_id: BootId(r.array()?),
                workload: ProcessWitness {
                    pid: r.u32()?,
                    start_time: r.u64()?,
                },
                workload_pgid: r.u32()?,
                workload_sid: r.u32()?,
                proof: ProofIdentity {
                    dev: r.u64()?,
                    ino: r.u64()?,
                },
                cgroup: Placement::from_code(r.u16()?, r.i32()?)?,
                provenance: match version {
                    FRAME_VERSION_1 => None,
                    _ => Some(Provenance::read(&mut r)?),
                },
            }),
            kind::START => Frame::Start,
            kind::ABORT => Frame::Abort,
            kind::STARTED => Frame::Started,
            kind::SPAWN_FAILED => Frame::SpawnFailed {
                errno: r.i32()?,
                step: SpawnStep::from_code(r.u16()?).ok_or(DecodeError::InvalidField {
                    field: "spawn step",
                })?,
            },
            kind::WORKLOAD_EXITED => Frame::WorkloadExited {
                status: WorkloadStatus::decode(&mut r)?,
                at_ns: r.u64()?,
            },
            kind::SCOPE_EXITED => Frame::ScopeExited(Receipt::decode(r.bytes(r.remaining())?)?),
            kind::SIGNAL => match r.i32()? {
                signo if signal_valid(signo) => Frame::Signal { signo },
                _ => return Err(DecodeError::InvalidField { field: "signal" }),
            },
            kind::GUARDIAN_FAILED => Frame::GuardianFailed {
                code: r.u16()?,
                errno: r.i32()?,
            },
            kind::DISOWN => Frame::Disown,
            kind::CAPTURE_PROGRESS => Frame::CaptureProgress {
                stdout: r.u64()?,
                stderr: r.u64()?,
            },
            kind::CAPTURE_ENDED => {
                let stream = match r.u8()? {
                    1 => CapturedStream::Stdout,
                    2 => CapturedStream::Stderr,
                    _ => {
                        return Err(DecodeError::InvalidField {
                            field: "captured stream",
                        })
                    }
                };
                let (kind, errno) = (r.u32()?, r.i32()?);
                let end = CaptureEnd::from_wire(kind, errno)?.ok_or(DecodeError::InvalidField {
                    field: "capture end",
                })?;
                let (written, moved) = (r.u64()?, r.u64()?);
                if written > moved {
                    return Err(DecodeError::InvalidField {
                        field: "capture counts",
                    });
                }
                Frame::CaptureEnded(CaptureEnded {
                    stream,
                    end,
                    written,
                    moved,
                })
            }
            _ => {
                return Err(DecodeError::InvalidField {
                    field: "frame kind",
                })
            }
        };
        r.finish()?;
        Ok(frame)
    }
}

fn get_cstr<'a>(r: &mut Reader<'a>, field: &'static str) -> Result<&'a CStr, DecodeError> {
    let raw = r.len_prefixed(MAX_FRAME)?;
    CStr::from_bytes_with_nul(raw).map_err(|_| DecodeError::InvalidField { field })
}

fn get_list<'a>(
    r: &mut Reader<'a>,
    field: &'static str,
    min: usize,
) -> Result<CStrList<'a>, DecodeError> {
    let count = r.u32()? as usize;
    if count > MAX_ARGS {
        return Err(DecodeError::Oversized {
            len: count,
            max: MAX_ARGS,
        });
    }
    if count < min {
        return Err(DecodeError::InvalidField { field });
    }
    let before = r.clone();
    for _ in 0..count {
        get_cstr(r, field)?;
    }
    let used = before.remaining() - r.remaining();
    let mut before = before;
    Ok(CStrList {
        count,
        bytes: before.bytes(used)?,
    })
}

/// The descriptors a launch with these flags sends (when it sends any).
fn want_fds(flags: u32) -> u32 {
    let base = match (flags & FLAG_CAPTURE != 0, flags & FLAG_OWNER_LOCK != 0) {
        (false, _) => 3,
        (true, false) => CAPTURE_FDS,
        (true, true) => CAPTURE_FDS + 1,
    };
    base + u32::from(flags & FLAG_READY_FD != 0)
}

/// Whether `count` descriptors fit a launch with these flags: none (inherited stdio) or the
/// stdio ones ([`want_fds`]), plus the Landlock ruleset last with [`FLAG_LANDLOCK`]. A capture
/// or a readiness descriptor needs the stdio ones.
fn fds_valid(flags: u32, count: u32) -> bool {
    let ruleset = u32::from(flags & FLAG_LANDLOCK != 0);
    let inherited = flags & (FLAG_CAPTURE | FLAG_READY_FD) == 0;
    count == want_fds(flags) + ruleset || inherited && count == ruleset
}

fn decode_spec<'a>(r: &mut Reader<'a>) -> Result<LaunchSpec<'a>, DecodeError> {
    let flags = r.u32()?;
    if flags & !(KNOWN_FLAGS | FLAG_NO_PDEATH_SIGNAL) != 0 {
        return Err(DecodeError::InvalidField {
            field: "launch flags",
        });
    }
    let pdeath_signal = match (flags & FLAG_NO_PDEATH_SIGNAL != 0, r.u32()?) {
        (true, 0) => None,
        (false, s @ 1..=64) => Some(s),
        _ => {
            return Err(DecodeError::InvalidField {
                field: "parent-death signal",
            })
        }
    };
    let flags = flags & KNOWN_FLAGS;
    let start_timeout_ms = r.u32()?;
    if start_timeout_ms == 0 || start_timeout_ms > MAX_START_TIMEOUT_MS {
        return Err(DecodeError::InvalidField {
            field: "start timeout",
        });
    }
    if flags & FLAG_OWNER_LOCK != 0 && flags & FLAG_CAPTURE == 0 {
        return Err(DecodeError::InvalidField {
            field: "launch flags",
        });
    }
    let stdio_fds = r.u32()?;
    if !fds_valid(flags, stdio_fds) {
        return Err(DecodeError::InvalidField {
            field: "descriptor count",
        });
    }
    let registration = RegistrationId(r.array()?);
    let runtime = RuntimeId(r.array()?);
    let proof_path = get_cstr(r, "proof path")?;
    if proof_path.is_empty() {
        return Err(DecodeError::InvalidField {
            field: "proof path",
        });
    }
    let cwd = get_cstr(r, "cwd")?;
    let cwd = (!cwd.is_empty()).then_some(cwd);
    let argv = get_list(r, "argv", 1)?;
    let env = get_list(r, "env", 0)?;
    let n = r.u32()? as usize;
    if n > MAX_RLIMITS {
        return Err(DecodeError::Oversized {
            len: n,
            max: MAX_RLIMITS,
        });
    }
    let rl = r.bytes(n * 20)?;
    let credentials = match flags & FLAG_CREDENTIALS {
        0 => None,
        _ => Some(decode_credentials(r)?),
    };
    let signal_state = match flags & FLAG_SIGNAL_STATE {
        0 => None,
        _ => {
            let st = SignalState {
                ignored: r.u64()?,
                blocked: r.u64()?,
            };
            if !st.is_valid() {
                return Err(DecodeError::InvalidField {
                    field: "signal state",
                });
            }
            Some(st)
        }
    };
    let cgroup = match flags & FLAG_CGROUP {
        0 => None,
        _ => match get_cstr(r, "cgroup")? {
            c if c.is_empty() => return Err(DecodeError::InvalidField { field: "cgroup" }),
            c => Some(c),
        },
    };
    let capture = match flags & FLAG_CAPTURE {
        0 => None,
        _ => Some(CaptureParams {
            log_cap: match r.u64()? {
                u64::MAX => None,
                cap => Some(cap),
            },
        }),
    };
    let ready_fd = match flags & FLAG_READY_FD {
        0 => None,
        _ => match r.u32()? {
            n if READY_FD_RANGE.contains(&n) => Some(n),
            _ => {
                return Err(DecodeError::InvalidField {
                    field: "ready descriptor",
                })
            }
        },
    };
    Ok(LaunchSpec {
        flags,
        pdeath_signal,
        start_timeout_ms,
        stdio_fds,
        registration,
        runtime,
        proof_path,
        cwd,
        argv,
        env,
        rlimits: RlimitList {
            count: n,
            bytes: rl,
        },
        credentials,
        signal_state,
        cgroup,
        capture,
        ready_fd,
    })
}

fn decode_credentials<'a>(r: &mut Reader<'a>) -> Result<DecodedCredentials<'a>, DecodeError> {
    let uid = r.u32()?;
    let gid = r.u32()?;
    let n = r.u32()? as usize;
    if n > MAX_GROUPS {
        return Err(DecodeError::Oversized {
            len: n,
            max: MAX_GROUPS,
        });
    }
    let groups = GroupList {
        bytes: r.bytes(n * 4)?,
    };
    if !credentials_valid(uid, gid, groups.iter()) {
        return Err(DecodeError::InvalidField {
            field: "credentials",
        });
    }
    Ok(DecodedCredentials { uid, gid, groups })
}

//! A raw, test-side launcher for `refine-guardian`: a `SOCK_SEQPACKET` socketpair, the guardian
//! spawned with one end as its stdin, launch frames sent with `SCM_RIGHTS`, and frames read back
//! with a timeout. It is deliberately independent of the supervisor's launcher, so guardian tests
//! exercise the protocol exactly as written (including malformed input).
//!
//! The test process only ever reaps the guardian itself, by pid (`std::process::Child`); the
//! workload tree is the guardian's to reap.

use std::ffi::OsStr;
use std::io::{self, IoSlice, Read};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use refine_protocol::frame::{encode_launch, MAX_FRAME};
use refine_protocol::{
    Frame, Hello, LaunchParams, Receipt, RegistrationId, Rlimit, RuntimeId, WorkloadStatus,
};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::{
    recv, sendmsg, socketpair, AddressFamily, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, SocketFlags, SocketType,
};

/// A generous bound for anything the guardian does by itself on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A frame from the guardian, owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    Hello(Hello),
    Started,
    SpawnFailed {
        errno: i32,
    },
    WorkloadExited {
        status: WorkloadStatus,
        at_ns: u64,
    },
    ScopeExited(Receipt),
    GuardianFailed {
        code: u16,
        errno: i32,
    },
    /// The guardian closed its end.
    Closed,
    /// The guardian exited with a frame of ours unread (the kernel's `ECONNRESET`, read once;
    /// what it sent before still follows).
    Reset,
}

/// The launch spec, owned; encoding borrows it into the frame `encode_launch` writes.
#[derive(Debug, Clone)]
pub struct Launch {
    pub flags: u32,
    pub pdeath_signal: Option<u32>,
    pub start_timeout_ms: u32,
    pub registration: RegistrationId,
    pub runtime: RuntimeId,
    pub proof_path: PathBuf,
    pub cwd: Option<PathBuf>,
    pub argv: Vec<Vec<u8>>,
    pub env: Vec<Vec<u8>>,
    pub rlimits: Vec<Rlimit>,
    /// `(uid, gid, groups)` the workload runs as (`run --user`); `None`: the guardian's.
    pub credentials: Option<(u32, u32, Vec<u32>)>,
    /// The cgroup directory the workload is forked into (F4); `None`: the guardian's.
    pub cgroup: Option<PathBuf>,
}

/// A fresh registration id, unique within this test run.
pub fn fresh_id() -> RegistrationId {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let mut id = [0u8; 16];
    id[..4].copy_from_slice(&std::process::id().to_le_bytes());
    id[4..8].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    id[8..16].copy_from_slice(
        &(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0))
        .to_le_bytes(),
    );
    RegistrationId(id)
}

/// A launch whose workload (`touch DIR/executed`) would leave evidence if it ever executed: the
/// launch (its proof file in `dir`) and the marker's path.
pub fn marker_launch(dir: &Path) -> (Launch, PathBuf) {
    let marker = dir.join("executed");
    let l = Launch::new(
        &dir.join("proof"),
        &[Path::new("touch").as_os_str(), marker.as_os_str()],
    );
    (l, marker)
}

/// A guardian spawned with [`marker_launch`]'s launch sent and its hello read, the gate still
/// closed: the guardian, its hello, the launch and the marker's path.
pub fn gated_marker(dir: &Path) -> (Guardian, Hello, Launch, PathBuf) {
    let (l, marker) = marker_launch(dir);
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
    (g, hello, l, marker)
}

impl Launch {
    /// A launch of `argv` with this process's `PATH`, the proof file at `proof_path`.
    pub fn new<S: AsRef<OsStr>>(proof_path: &Path, argv: &[S]) -> Launch {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        let mut path_var = b"PATH=".to_vec();
        path_var.extend_from_slice(path.as_bytes());
        Launch {
            flags: 0,
            pdeath_signal: Some(libc::SIGKILL as u32),
            start_timeout_ms: 30_000,
            registration: fresh_id(),
            runtime: RuntimeId([0x5a; 16]),
            proof_path: proof_path.to_path_buf(),
            cwd: None,
            argv: argv
                .iter()
                .map(|a| a.as_ref().as_bytes().to_vec())
                .collect(),
            env: vec![path_var],
            rlimits: Vec::new(),
            credentials: None,
            cgroup: None,
        }
    }

    /// Encodes the launch frame (with `stdio_fds` descriptors to follow).
    pub fn encode(&self, stdio_fds: u32) -> Vec<u8> {
        let argv: Vec<&[u8]> = self.argv.iter().map(Vec::as_slice).collect();
        let env: Vec<&[u8]> = self.env.iter().map(Vec::as_slice).collect();
        let cwd = self
            .cwd
            .as_ref()
            .map(|c| c.as_os_str().as_bytes())
            .unwrap_or(b"");
        let params = LaunchParams {
            flags: self.flags,
            pdeath_signal: self.pdeath_signal,
            start_timeout_ms: self.start_timeout_ms,
            stdio_fds,
            registration: self.registration,
            runtime: self.runtime,
            proof_path: self.proof_path.as_os_str().as_bytes(),
            cwd,
            argv: &argv,
            env: &env,
            rlimits: &self.rlimits,
            credentials: self.credentials.as_ref().map(|(uid, gid, groups)| {
                refine_protocol::frame::Credentials {
                    uid: *uid,
                    gid: *gid,
                    groups,
                }
            }),
            signal_state: None,
            cgroup: self.cgroup.as_ref().map(|c| c.as_os_str().as_bytes()),
            capture: None,
            ready_fd: None,
        };
        let mut buf = vec![0u8; MAX_FRAME];
        let len = encode_launch(&params, &mut buf).expect("encode launch");
        buf.truncate(len);
        buf
    }
}

/// A running guardian and the launcher end of its channel.
pub struct Guardian {
    pub child: Child,
    pub chan: OwnedFd,
}

impl Guardian {
    /// Spawns `refine-guardian` (stdout inherited, stderr piped).
    pub fn spawn() -> Guardian {
        Self::spawn_with(|_| {})
    }

    /// Spawns it after `setup` adjusted the command (stdio, env).
    pub fn spawn_with(setup: impl FnOnce(&mut Command)) -> Guardian {
        Self::spawn_exe(&crate::bin("refine-guardian"), setup)
    }

    pub fn spawn_exe(exe: &Path, setup: impl FnOnce(&mut Command)) -> Guardian {
        let (ours, theirs) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .expect("socketpair");
        let mut cmd = Command::new(exe);
        cmd.stdin(Stdio::from(theirs)).stderr(Stdio::piped());
        setup(&mut cmd);
        let child = cmd.spawn().expect("spawn refine-guardian");
        Guardian { child, chan: ours }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends raw bytes as one message.
    pub fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        self.send_with_fds(bytes, &[])
    }

    /// Sends one message with descriptors attached.
    pub fn send_with_fds(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() {
            assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
        }
        sendmsg(
            &self.chan,
            &[IoSlice::new(bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        )?;
        Ok(())
    }

    /// Sends the launch with the workload's stdin, stdout, stderr (or none: inherit).
    pub fn launch(&self, l: &Launch, stdio: Option<[BorrowedFd<'_>; 3]>) -> io::Result<()> {
        match stdio {
            Some(fds) => self.send_with_fds(&l.encode(3), &fds),
            None => self.send_raw(&l.encode(0)),
        }
    }

    pub fn send(&self, frame: Frame<'_>) -> io::Result<()> {
        let mut buf = [0u8; 256];
        let len = frame.encode_into(&mut buf).expect("encode frame");
        self.send_raw(&buf[..len])
    }

    pub fn start(&self) {
        self.send(Frame::Start).expect("send start");
    }

    /// The next frame within `timeout`; `None` on timeout.
    pub fn recv(&self, timeout: Duration) -> Option<Msg> {
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as i64,
        };
        let mut fds = [PollFd::new(&self.chan, PollFlags::IN)];
        let end = Instant::now() + timeout;
        loop {
            match poll(&mut fds, Some(&ts)) {
                Ok(0) => return None,
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) if Instant::now() < end => continue,
                Err(e) => panic!("poll channel: {e}"),
            }
        }
        let mut buf = vec![0u8; MAX_FRAME];
        let n = match recv(&self.chan, &mut buf[..], RecvFlags::empty()) {
            Ok((n, _)) => n,
            // The socket was reset: the guardian exited with a frame of ours unread. The kernel
            // reports the reset before the frames the guardian sent last; they follow.
            Err(rustix::io::Errno::CONNRESET) => return Some(Msg::Reset),
            Err(e) => panic!("recv: {e}"),
        };
        if n == 0 {
            return Some(Msg::Closed);
        }
        Some(
            match Frame::decode(&buf[..n]).expect("guardian sent a malformed frame") {
                Frame::Hello(h) => Msg::Hello(h),
                Frame::Started => Msg::Started,
                Frame::SpawnFailed { errno, .. } => Msg::SpawnFailed { errno },
                Frame::WorkloadExited { status, at_ns } => Msg::WorkloadExited { status, at_ns },
                Frame::ScopeExited(r) => Msg::ScopeExited(r),
                Frame::GuardianFailed { code, errno } => Msg::GuardianFailed { code, errno },
                other => panic!("unexpected frame from the guardian: {other:?}"),
            },
        )
    }

    /// The next frame, which must arrive within [`PATIENCE`].
    pub fn expect(&self) -> Msg {
        self.recv(PATIENCE)
            .unwrap_or_else(|| panic!("no frame from guardian {} within {PATIENCE:?}", self.pid()))
    }

    /// The hello, which must come first.
    pub fn expect_hello(&self) -> Hello {
        match self.expect() {
            Msg::Hello(h) => h,
            other => panic!("expected hello, got {other:?}"),
        }
    }

    /// Reads frames until `ScopeExited`, returning every frame in order.
    pub fn until_scope_exited(&self) -> (Vec<Msg>, Receipt) {
        let mut seen = Vec::new();
        loop {
            match self.expect() {
                Msg::ScopeExited(r) => return (seen, r),
                Msg::Closed => panic!("channel closed before ScopeExited; frames: {seen:?}"),
                m => seen.push(m),
            }
        }
    }

    /// Waits (bounded) for the guardian to exit and reaps it by pid; returns status and stderr.
    pub fn finish(self) -> (ExitStatus, String) {
        reap(self.hang_up())
    }

    /// Closes the launcher's end of the channel (as a dying launcher would); the guardian is
    /// still to be reaped with [`reap`].
    pub fn hang_up(self) -> Child {
        drop(self.chan);
        self.child
    }

    pub fn chan_fd(&self) -> BorrowedFd<'_> {
        self.chan.as_fd()
    }
}

/// Waits (bounded) for a guardian to exit and reaps it by pid; returns its status and stderr.
pub fn reap(mut child: Child) -> (ExitStatus, String) {
    let mut status = None;
    let exited = crate::wait_until(PATIENCE, || {
        status = child.try_wait().expect("try_wait guardian");
        status.is_some()
    });
    if !exited {
        let _ = child.kill(); // our own unreaped child: its pid cannot have been reused
        let _ = child.wait();
        panic!("guardian {} did not exit within {PATIENCE:?}", child.id());
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.expect("status"), err)
}

//! The guardian's one error type: a small `Copy` value with a process exit code, a static
//! message, and (where the kernel said why) the errno. Nothing here allocates or formats with
//! `core::fmt`, so an error can be reported from any point, including after a failed `fork`.
//!
//! Exit codes: 2 the channel is unusable (stdin is not a `SOCK_SEQPACKET` socket), 3 the
//! handshake was bad or never came (the workload was never forked), 1 a system call failed.

use refine_protocol_core::DecodeError;

use crate::sys::Errno;

#[derive(Debug, Clone, Copy)]
pub enum Error {
    /// fd 0 is not a `SOCK_SEQPACKET` socket.
    NotSeqpacket,
    /// Moving the channel off fd 0 or reopening fd 0 on `/dev/null` failed.
    ChannelSetup(Errno),
    /// Receiving from or polling the channel failed.
    ChannelIo(Errno),
    /// No launch frame within the bound.
    LaunchTimeout,
    /// The launcher closed the channel before sending a launch frame.
    ClosedBeforeLaunch,
    /// A message larger than `MAX_FRAME` (`MSG_TRUNC`).
    FrameTooLarge,
    /// Descriptors did not match the launch spec's count, or were cut (`MSG_CTRUNC`).
    BadDescriptors,
    /// The launch frame did not decode.
    Decode(DecodeError),
    /// The first frame was not a launch frame.
    UnexpectedFrame,
    /// A termination signal arrived before anything was forked.
    Terminated,
    /// Blocking signals or creating the signalfd failed.
    Signals(Errno),
    /// Mapping the frame buffer failed.
    Memory(Errno),
    Subreaper(Errno),
    /// The proof file could not be created (`O_EXCL`: it must not exist yet).
    ProofCreate(Errno),
    /// `/proc/.../stat` or the boot id could not be read or parsed.
    Identity(Errno),
    Pipe(Errno),
    Fork(Errno),
    Wait(Errno),
    /// The receipt's space could not be allocated in the new proof file (a full disk).
    ProofReserve(Errno),
    /// Reading the signalfd failed (after the fork: the scope is still reaped).
    SignalRead(Errno),
    /// `poll` failed (after the fork: the scope is still reaped).
    Poll(Errno),
    /// The report pipe closed, but whether the child had exec'd could not be read from
    /// `/proc/PID/stat`.
    ExecUnknown(Errno),
    /// Leaving the launcher's process group, `PR_SET_DUMPABLE` or `chdir("/")` failed.
    Isolate(Errno),
}

impl Error {
    /// The guardian's exit status for this error.
    pub const fn exit_code(self) -> i32 {
        match self {
            Error::NotSeqpacket | Error::ChannelSetup(_) => 2,
            Error::LaunchTimeout
            | Error::ClosedBeforeLaunch
            | Error::FrameTooLarge
            | Error::BadDescriptors
            | Error::Decode(_)
            | Error::UnexpectedFrame => 3,
            _ => 1,
        }
    }

    /// A stable numeric code for the `GuardianFailed` frame.
    pub const fn code(self) -> u16 {
        match self {
            Error::NotSeqpacket => 1,
            Error::ChannelSetup(_) => 2,
            Error::ChannelIo(_) => 3,
            Error::LaunchTimeout => 4,
            Error::ClosedBeforeLaunch => 5,
            Error::FrameTooLarge => 6,
            Error::BadDescriptors => 7,
            Error::Decode(_) => 8,
            Error::UnexpectedFrame => 9,
            Error::Terminated => 10,
            Error::Signals(_) => 11,
            Error::Memory(_) => 12,
            Error::Subreaper(_) => 13,
            Error::ProofCreate(_) => 14,
            Error::Identity(_) => 15,
            Error::Pipe(_) => 16,
            Error::Fork(_) => 17,
            Error::Wait(_) => 19,
            Error::ProofReserve(_) => 25,
            Error::SignalRead(_) => 21,
            Error::Poll(_) => 22,
            Error::ExecUnknown(_) => 23,
            Error::Isolate(_) => 24,
        }
    }

    /// The static message; the table lives in the protocol, so the launcher reads the same text
    /// from a `GuardianFailed` frame's code.
    pub const fn message(self) -> &'static str {
        refine_protocol_core::frame::guardian_failure(self.code())
    }

    /// The errno behind the error, 0 if none.
    pub const fn errno(self) -> i32 {
        match self {
            Error::ChannelSetup(e)
            | Error::ChannelIo(e)
            | Error::Signals(e)
            | Error::Memory(e)
            | Error::Subreaper(e)
            | Error::ProofCreate(e)
            | Error::Identity(e)
            | Error::Pipe(e)
            | Error::Fork(e)
            | Error::Wait(e)
            | Error::ProofReserve(e)
            | Error::SignalRead(e)
            | Error::Poll(e)
            | Error::ExecUnknown(e)
            | Error::Isolate(e) => e.0,
            _ => 0,
        }
    }

    /// Writes the one-line report to stderr:
    /// `refine-guardian: <message>[: <decode error>][ (errno N)]`.
    pub fn report(self) {
        let mut line = Line::new();
        line.push(b"refine-guardian: ");
        line.push(self.message().as_bytes());
        if let Error::Decode(d) = self {
            line.push(b": ");
            line.push(d.as_str().as_bytes());
        }
        let errno = self.errno();
        if errno != 0 {
            line.push(b" (errno ");
            line.push_u64(errno as u64);
            line.push(b")");
        }
        line.push(b"\n");
        crate::sys::write_stderr(line.as_bytes());
    }
}

/// A fixed stack buffer for one line of text (no allocator in the guardian).
pub struct Line {
    buf: [u8; 192],
    len: usize,
}

impl Line {
    pub const fn new() -> Self {
        Line {
            buf: [0; 192],
            len: 0,
        }
    }
    pub fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }
    pub fn push_u64(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

//! The launch channel: one `SOCK_SEQPACKET` socket inherited as fd 0, one protocol frame per
//! message (`refine_protocol_core::frame`).
//!
//! At startup the socket is verified, every other inherited descriptor from 3 up is closed, the
//! socket is moved to a close-on-exec descriptor >= 3 (so the workload can never inherit it) and
//! fd 0 is reopened on `/dev/null`. Every read is bounded in size (the
//! buffer is `MAX_FRAME`; `MSG_TRUNC`/`MSG_CTRUNC` are errors, never partial frames) and in time
//! (`poll` with a deadline). Sends use `MSG_NOSIGNAL | MSG_DONTWAIT`: a vanished or stalled
//! launcher can neither kill the guardian with `SIGPIPE` nor block its reaping.
//!
//! # Caveats
//! A lost send (launcher gone, or its queue full) is dropped silently: the receipt in the proof
//! file, not the channel, is the evidence. An empty message reads like end of file.
//! A send that finds the launcher gone (`EPIPE`) does not close the channel: only the reading
//! side does, when it reads the end of file, and that read is where the loss is acted on (G7:
//! the parent-death signal). Closing it on a failed send lost that signal when the launcher
//! died between the workload's exec and the `Started` frame (the reap loop then never looked
//! at the channel again, and the workload outlived its SIGKILLed launcher).

use refine_protocol_core::frame::MAX_FRAME;
use refine_protocol_core::{DecodeError, Frame, LaunchSpec};

use crate::error::Error;
use crate::signals::Signals;
use crate::sys::{self, OwnedFd};

/// How long the launcher has to send its launch frame.
pub const LAUNCH_TIMEOUT_MS: u64 = 10_000;

/// How many unread frames [`Channel::drain_unread`] reads at most.
const DRAIN_LIMIT: usize = 64;

pub struct Channel {
    fd: OwnedFd,
    open: bool,
    /// The launcher's registration lock (L3), held for it until the channel ends: a launcher
    /// that dies lets go of its scope as if it had held the lock itself.
    owner_lock: Option<OwnedFd>,
    /// A send found the launcher gone (`EPIPE`, `ECONNRESET`); the reading side still decides
    /// when to act on it (Caveats).
    peer_gone: bool,
}

/// A decoded launch frame with the descriptors that came with it: stdin, stdout, stderr, and
/// for a capturing launch (L1) the stdout and stderr indexes (its stdout and stderr are then the
/// artifacts, not the workload's own).
pub struct Launch {
    pub spec: LaunchSpec<'static>,
    pub fds: [Option<OwnedFd>; sys::MAX_RECEIVED_FDS],
}

/// What the launcher said after the launch frame.
pub enum Control {
    Start,
    Abort,
    Signal(i32),
    /// The launcher closed its end.
    Closed,
    /// The launcher leaves the scope to itself: its end of the channel that follows is no loss
    /// (W16; acted on by the reap loop only, ignored before the workload runs).
    Disown,
    /// Anything else (unknown or malformed frames are ignored after the launch).
    Ignored,
}

impl Channel {
    /// Verifies fd 0 is a `SOCK_SEQPACKET` socket, moves it above the stdio numbers
    /// (close-on-exec) and puts `/dev/null` on fd 0.
    pub fn adopt_stdin() -> Result<Channel, Error> {
        match sys::socket_type(0) {
            Ok(ty) if ty == libc::SOCK_SEQPACKET => {}
            _ => return Err(Error::NotSeqpacket),
        }
        // Close everything else the launcher let us inherit: a stray pipe end held here would
        // keep a workload's stdin (or a reader's EOF) open for the life of the scope.
        sys::close_from(3);
        let fd = sys::dup_cloexec(0, 3).map_err(Error::ChannelSetup)?;
        sys::reopen_dev_null(0).map_err(Error::ChannelSetup)?;
        Ok(Channel {
            fd,
            open: true,
            owner_lock: None,
            peer_gone: false,
        })
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Whether the launcher is known to be gone: its end read as closed, or a send failed.
    pub fn launcher_gone(&self) -> bool {
        !self.open || self.peer_gone
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Holds the launcher's registration lock until the channel ends (L3).
    pub fn hold_lock(&mut self, lock: Option<OwnedFd>) {
        self.owner_lock = lock;
    }

    /// The launcher's end was read as closed: its lock goes with it.
    fn closed(&mut self) {
        self.open = false;
        self.owner_lock = None;
    }

    /// Waits (bounded) for the launch frame and decodes it in place in `buf`. A termination
    /// signal while waiting ends the guardian (nothing has been forked yet).
    ///
    /// `region` holds at least `MAX_FRAME` bytes; the frame is received at its start and the
    /// rest, from the next 8-byte boundary, is returned for the exec pointer arrays (so a small
    /// launch keeps frame and arrays on the same pages).
    pub fn recv_launch(
        &mut self,
        region: &'static mut [u8],
        signals: &Signals,
    ) -> Result<(Launch, &'static mut [u8]), Error> {
        let deadline = sys::monotonic_ms() + LAUNCH_TIMEOUT_MS;
        loop {
            let now = sys::monotonic_ms();
            if now >= deadline {
                return Err(Error::LaunchTimeout);
            }
            let mut fds = [sys::poll_in(&self.fd), sys::poll_in(signals.fd())];
            sys::poll(&mut fds, (deadline - now) as i32).map_err(Error::ChannelIo)?;
            if sys::ready(&fds[1]) {
                while let Some(sig) = signals.take()? {
                    if Signals::is_termination(sig) {
                        return Err(Error::Terminated);
                    }
                }
            }
            if sys::ready(&fds[0]) {
                break;
            }
        }
        let limit = MAX_FRAME.min(region.len());
        let got = match sys::recv_msg(&self.fd, &mut region[..limit]) {
            Ok(got) => got,
            Err(sys::Errno::AGAIN) => return Err(Error::ClosedBeforeLaunch),
            Err(e) => return Err(Error::ChannelIo(e)),
        };
        if got.truncated {
            return Err(Error::FrameTooLarge);
        }
        if got.len == 0 {
            self.closed();
            return Err(Error::ClosedBeforeLaunch);
        }
        let (frame, tail) = region.split_at_mut(got.len.next_multiple_of(8).min(limit));
        let frame: &'static [u8] = frame;
        let spec = match Frame::decode(&frame[..got.len]) {
            Ok(Frame::Launch(spec)) => spec,
            Ok(_) => return Err(Error::UnexpectedFrame),
            Err(e) => return Err(Error::Decode(e)),
        };
        let count = got.fds.iter().filter(|f| f.is_some()).count();
        if got.fds_cut || count != spec.stdio_fds as usize {
            return Err(Error::BadDescriptors);
        }
        Ok((Launch { spec, fds: got.fds }, tail))
    }

    /// Reads one control frame (the caller polled the channel readable).
    pub fn recv_control(&mut self) -> Control {
        // Control frames are a header plus at most a few bytes; anything longer is not one.
        let mut buf = [0u8; 64];
        let got = match sys::recv_msg(&self.fd, &mut buf) {
            Ok(got) => got,
            Err(sys::Errno::AGAIN) => return Control::Ignored,
            Err(_) => {
                self.closed();
                return Control::Closed;
            }
        };
        if got.len == 0 && !got.truncated {
            self.closed();
            return Control::Closed;
        }
        if got.truncated {
            return Control::Ignored;
        }
        match Frame::decode(&buf[..got.len]) {
            Ok(Frame::Start) => Control::Start,
            Ok(Frame::Abort) => Control::Abort,
            Ok(Frame::Signal { signo }) => Control::Signal(signo),
            Ok(Frame::Disown) => Control::Disown,
            Ok(_) | Err(DecodeError::BadMagic) | Err(_) => Control::Ignored,
        }
    }

    /// Reads and drops what the launcher sent and nobody read, right before the guardian exits.
    /// A socket closed with unread frames is reset, and its peer reads the reset before the
    /// frames sent last (the receipt among them). Bounded: a launcher that keeps sending gets
    /// its reset.
    pub fn drain_unread(&mut self) {
        let mut buf = [0u8; 64];
        for _ in 0..DRAIN_LIMIT {
            match sys::recv_msg(&self.fd, &mut buf) {
                Ok(got) if got.len > 0 || got.truncated => {}
                _ => return,
            }
        }
    }

    /// Sends a frame if the channel is still open; failures are dropped (see Caveats).
    pub fn send(&mut self, frame: &Frame<'_>) {
        self.send_with(frame, None);
    }

    /// Sends the scope's last frame (its receipt) with the launcher's lock, if this guardian
    /// holds it (L3): the message holds the lock until the launcher reads it, so the launcher
    /// records the result under its lock, and one that died lets go with its socket. Dropped
    /// like any send (the lock then goes when the guardian exits).
    pub fn send_last(&mut self, frame: &Frame<'_>) {
        let lock = self.owner_lock.take();
        self.send_with(frame, lock.as_ref());
    }

    fn send_with(&mut self, frame: &Frame<'_>, lock: Option<&OwnedFd>) {
        if !self.open {
            return;
        }
        let mut buf = [0u8; 256];
        if let Ok(len) = frame.encode_into(&mut buf) {
            let sent = match lock {
                Some(lock) => sys::send_msg_with_fd(&self.fd, &buf[..len], lock),
                None => sys::send_msg(&self.fd, &buf[..len]),
            };
            // A gone launcher (EPIPE, ECONNRESET) is left for the reading side to act on
            // (Caveats); it is only noted.
            if let Err(sys::Errno(libc::EPIPE | libc::ECONNRESET)) = sent {
                self.peer_gone = true;
            }
        }
    }
}

//! Standard capture (SPEC S3–S5, S10): nonblocking reads of a workload's stdout/stderr pipes (or
//! its PTY master) in bounded batches, driven by `poll(2)`.
//!
//! Every byte read goes, in order, to the stream's artifact file under `run/P/logs/` and to an
//! optional callback; at most [`CaptureConfig::keep_max`] bytes per stream (16 MiB by default) are
//! also kept in memory for the result. A stream ends as exactly one [`StreamState`]: EOF (every
//! byte in the result and the artifact), a capture failure, or incomplete (with the reason).
//!
//! The final drain is fixed: [`Capture::begin_drain`] (called at the first validated workload exit)
//! sets a deadline [`FINAL_DRAIN`] later, and nothing read afterwards moves it. When the drain ends
//! with streams still open (a detached descendant holds the pipe), those streams are incomplete
//! and are handed to a background *tail* that keeps appending to the artifacts until EOF, so the
//! writers never block and never get `SIGPIPE`: capture never kills anyone to get EOF.
//!
//! Consumers that parse output go through [`CaptureResult::complete_output`], which refuses
//! incomplete capture.
//!
//! A stream may also be *forwarded* ([`Forward`]: `run`'s own stdout and stderr) as it is read,
//! with the reader's pace: while forwarded bytes wait for the reader, the stream is not read
//! (the workload's pipe fills and its writes block: back-pressure, at most one read chunk
//! held here), and `poll` watches the forward for room instead, so the engine never blocks on
//! it. When the forward's reader goes away (`EPIPE`), the stream's read end is closed: the
//! workload's next write breaks exactly as it would have without the wrapper (`SIGPIPE`).
//!
//! # Caveats
//! - A PTY master reports the closed slave as `EIO`, which is the PTY's end of file.
//! - The artifact cap counts artifact bytes; past it the pipe is still read (and the callback
//!   still called), the artifact just stops growing.
//! - A forward to a pipe or terminal writes through a private, nonblocking open of
//!   `/proc/self/fd/N` (the shared description keeps its flags); a socket is written with
//!   `MSG_DONTWAIT`; anything else (a file, `/dev/null`) is written blocking, which never waits
//!   on a reader. Without `/proc` a pipe falls back to blocking writes.
//! - The tail thread holds the read ends until the last writer closes them; if a kept scope
//!   never closes its inherited pipes, the tail lives as long as it does, and without an
//!   artifact cap a writer that never stops grows its artifact until the scope is stopped.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use refine_protocol::record::{CaptureReceipt, StreamEnd, StreamReceipt, CAPTURE_PREFIX_MAX};
use refine_protocol::{RegistrationId, RuntimeId, WorkloadStatus};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use crate::store::registry::Stream;

mod forward;
mod result;
mod sink;
mod stand_in;
mod tail;
mod utf8;
pub use forward::Forward;
pub use result::{
    CaptureError, CaptureFailure, CaptureResult, Incomplete, IncompleteCapture, StreamCapture,
    StreamSource, StreamState,
};
use sink::{read_prefix, Sink};
pub use stand_in::STAND_IN_HOLD;
pub use tail::Tail;
pub use utf8::Utf8Chunks;

/// Bytes kept in memory per stream by default (S3).
pub const DEFAULT_KEEP: usize = 16 * 1024 * 1024;
/// The fixed final drain after the first validated workload exit (S4).
pub const FINAL_DRAIN: Duration = Duration::from_millis(200);
/// Size of one read.
pub(crate) const READ_CHUNK: usize = 256 * 1024;
/// Reads [`Capture::close_held_outside`] makes of a stream before it closes it: a full pipe
/// ([`PIPE_SIZE`]) and as much again.
const HELD_OUTSIDE_READS: usize = 2 * PIPE_SIZE / READ_CHUNK;
/// Bytes one `splice` moves at most (the pipe holds [`PIPE_SIZE`]).
const SPLICE_CHUNK: usize = 1024 * 1024;
/// Reads per stream per wake-up: a busy stream cannot starve the others or the control fds.
const READS_PER_WAKE: usize = 8;
/// Streams one capture handles (stdout, stderr, and room to spare).
pub(crate) const MAX_STREAMS: usize = 8;
/// Pipe buffer asked for on capture pipes (fewer wake-ups); failure to grow it is harmless.
const PIPE_SIZE: usize = 1024 * 1024;

/// Called with every chunk read, in order, per stream. Raw bytes: a UTF-8 character split across
/// two writes arrives split; use [`Utf8Chunks`] for text.
pub type OutputCallback = Box<dyn FnMut(Stream, &[u8]) + Send>;

/// Capture limits.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// Bytes kept in memory per stream; past it the stream is incomplete.
    pub keep_max: usize,
    /// Per-artifact byte cap (S10).
    pub log_cap: Option<u64>,
    /// The final drain (fixed at [`FINAL_DRAIN`] in production; tests may not change semantics).
    pub drain: Duration,
    /// Whether the streams have artifacts (`true` by default). `false` (H7's probes): only
    /// the first `keep_max` bytes of each stream are kept, in memory; no file is written and
    /// no capture receipt either.
    pub artifacts: bool,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            keep_max: DEFAULT_KEEP,
            log_cap: None,
            drain: FINAL_DRAIN,
            artifacts: true,
        }
    }
}

/// One stream to capture: a read end (pipe or PTY master) and its artifact.
#[derive(Debug)]
struct Reader {
    stream: Stream,
    /// `None` once the stream reached EOF or failed to read.
    fd: Option<OwnedFd>,
    pty: bool,
    artifact: PathBuf,
    sink: Sink,
    kept: Vec<u8>,
    read: u64,
    over_memory: bool,
    read_failed: Option<i32>,
    forward: Option<Forward>,
    /// Read bytes the forward has not taken yet; while any wait, the stream is not read.
    pending: Vec<u8>,
    reader_gone: bool,
    /// Closed by [`Capture::close_held_outside`].
    held_outside: bool,
    /// L1: the guardian drains this stream into its artifact; this capture only learns the
    /// counts and the end (`fd` is always `None`).
    guarded: bool,
    /// A guarded stream whose end the guardian has not reported yet.
    awaiting: bool,
}

enum ReadOutcome {
    /// Nothing more to read right now.
    Drained,
    /// Batch budget used up; more may be pending.
    More,
    Closed,
}

impl Reader {
    /// Reads up to [`READS_PER_WAKE`] chunks; closes the artifact when the stream has nothing
    /// more for now.
    fn read_batch(
        &mut self,
        buf: &mut [u8],
        keep_max: usize,
        splice: bool,
        on: impl FnMut(Stream, &[u8]),
    ) -> ReadOutcome {
        let outcome = self.read_chunks(buf, keep_max, splice, on);
        if !matches!(outcome, ReadOutcome::More) {
            self.sink.idle();
        }
        outcome
    }

    /// `splice`: nobody but the artifact wants the bytes (no callback); with no forward either
    /// and the in-memory prefix full, they move pipe to file inside the kernel (F5).
    fn read_chunks(
        &mut self,
        buf: &mut [u8],
        keep_max: usize,
        splice: bool,
        mut on: impl FnMut(Stream, &[u8]),
    ) -> ReadOutcome {
        for _ in 0..READS_PER_WAKE {
            let Some(fd) = self.fd.as_ref() else {
                return ReadOutcome::Closed;
            };
            if splice && self.forward.is_none() && !self.pty && self.kept.len() >= keep_max {
                match self.sink.splice_from(fd.as_fd(), SPLICE_CHUNK) {
                    Some(Ok(0)) => {
                        self.fd = None;
                        return ReadOutcome::Closed;
                    }
                    Some(Ok(n)) => {
                        self.read += n as u64;
                        // Past the kept prefix: the result is incomplete, as with a read.
                        self.over_memory = true;
                        if n < SPLICE_CHUNK {
                            // The pipe is empty: back to poll without an EAGAIN splice.
                            return ReadOutcome::Drained;
                        }
                        continue;
                    }
                    Some(Err(Errno::AGAIN)) => return ReadOutcome::Drained,
                    Some(Err(_)) => continue,
                    None => {}
                }
            }
            match rustix::io::read(fd, &mut *buf) {
                Ok(0) => {
                    self.fd = None;
                    return ReadOutcome::Closed;
                }
                Ok(n) => {
                    let chunk = &buf[..n];
                    self.absorb(chunk, keep_max, &mut on);
                    if self.forward.is_some() {
                        self.pending.extend_from_slice(chunk);
                        self.flush();
                        if self.throttled() || self.fd.is_none() {
                            return ReadOutcome::Drained;
                        }
                    }
                    if n < buf.len() {
                        // A short read emptied the pipe: back to poll without an EAGAIN read.
                        return ReadOutcome::Drained;
                    }
                }
                Err(Errno::AGAIN) => return ReadOutcome::Drained,
                Err(Errno::INTR) => {}
                Err(Errno::IO) if self.pty => {
                    self.fd = None;
                    return ReadOutcome::Closed;
                }
                Err(e) => {
                    self.read_failed = Some(e.raw_os_error());
                    self.fd = None;
                    return ReadOutcome::Closed;
                }
            }
        }
        ReadOutcome::More
    }

    /// Bytes read from the stream: counted, into the artifact and the kept prefix, and to the
    /// callback (not to the forward: the caller decides).
    fn absorb(&mut self, chunk: &[u8], keep_max: usize, on: &mut impl FnMut(Stream, &[u8])) {
        let n = chunk.len();
        self.read += n as u64;
        self.sink.write(chunk);
        let room = keep_max.saturating_sub(self.kept.len());
        if n > room {
            self.over_memory = true;
        }
        self.kept.extend_from_slice(&chunk[..n.min(room)]);
        on(self.stream, chunk);
    }

    /// After `poll` said this reader's interest is ready: forward what waits, or read a batch.
    fn service(
        &mut self,
        buf: &mut [u8],
        keep_max: usize,
        splice: bool,
        on: impl FnMut(Stream, &[u8]),
    ) {
        if self.throttled() {
            self.flush();
        } else {
            self.read_batch(buf, keep_max, splice, on);
        }
    }

    /// Forwarded bytes wait for the reader: poll the forward for room, not the stream.
    fn throttled(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Nothing more to read or forward (or, guarded, the guardian reported the end).
    fn done(&self) -> bool {
        self.fd.is_none() && self.pending.is_empty() && !self.awaiting
    }

    /// X10: takes what the pipe holds now (the scope's last writes, a forward's back-pressure
    /// notwithstanding: at most [`HELD_OUTSIDE_READS`] chunks), then closes the read end.
    fn close_outside(
        &mut self,
        buf: &mut [u8],
        keep_max: usize,
        on: &mut impl FnMut(Stream, &[u8]),
    ) {
        for _ in 0..HELD_OUTSIDE_READS {
            let Some(fd) = self.fd.as_ref() else {
                return;
            };
            match rustix::io::read(fd, &mut *buf) {
                Ok(0) => {
                    self.fd = None;
                    return;
                }
                Ok(n) => {
                    let chunk = &buf[..n];
                    self.absorb(chunk, keep_max, on);
                    if self.forward.is_some() {
                        self.pending.extend_from_slice(chunk);
                    }
                }
                Err(Errno::INTR) => {}
                Err(Errno::IO) if self.pty => {
                    self.fd = None;
                    return;
                }
                Err(_) => break,
            }
        }
        if self.fd.take().is_some() {
            self.held_outside = true;
        }
        self.sink.idle();
        self.flush();
    }

    /// Forwards what the destination takes now. A reader that went away breaks the stream: its
    /// read end is closed, so the workload's next write fails as it would have unwrapped.
    fn flush(&mut self) {
        let Some(f) = self.forward.as_ref() else {
            return;
        };
        while !self.pending.is_empty() {
            match f.write(&self.pending) {
                Ok(0) => return,
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(Errno::INTR) => {}
                Err(_) => {
                    self.forward = None;
                    self.pending = Vec::new();
                    self.fd = None;
                    self.reader_gone = true;
                    return;
                }
            }
        }
    }

    /// What to poll for this reader, if anything: the forward for room, or the stream.
    fn interest(&self) -> Option<(BorrowedFd<'_>, PollFlags)> {
        if self.throttled() {
            self.forward
                .as_ref()
                .map(|f| (f.fd.as_fd(), PollFlags::OUT))
        } else {
            self.fd.as_ref().map(|fd| (fd.as_fd(), PollFlags::IN))
        }
    }

    fn state(&self, keep_max: usize, drain: Duration) -> StreamState {
        if let Some(errno) = self.read_failed {
            return StreamState::Failed(CaptureFailure::Read { errno });
        }
        if let Some(errno) = self.sink.failed {
            return StreamState::Failed(CaptureFailure::ArtifactWrite { errno });
        }
        if self.reader_gone {
            return StreamState::Incomplete(Incomplete::ReaderGone);
        }
        if self.held_outside {
            return StreamState::Incomplete(Incomplete::HeldOutside);
        }
        if let Some(cap) = self.sink.cap.filter(|_| self.sink.capped) {
            return StreamState::Incomplete(Incomplete::ArtifactCap { cap });
        }
        if self.over_memory {
            return StreamState::Incomplete(Incomplete::MemoryLimit { kept: keep_max });
        }
        if self.fd.is_some() || self.awaiting {
            return StreamState::Incomplete(Incomplete::DrainEnded { drain });
        }
        StreamState::Eof
    }
}

/// Which of the caller's extra descriptors are readable after [`Capture::pump`] (bit i = extra i).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready(u32);

impl Ready {
    pub fn is_set(self, i: usize) -> bool {
        i < 32 && self.0 & (1 << i) != 0
    }
    pub fn any(self) -> bool {
        self.0 != 0
    }
}

/// A running capture; the caller drives it with [`Capture::pump`].
pub struct Capture {
    readers: Vec<Reader>,
    config: CaptureConfig,
    callback: Option<OutputCallback>,
    buf: Vec<u8>,
    drain_deadline: Option<Instant>,
    last_output: Option<Instant>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("readers", &self.readers)
            .field("config", &self.config)
            .field("drain_deadline", &self.drain_deadline)
            .finish_non_exhaustive()
    }
}

/// Opens an artifact for writing (created or truncated, mode 0600).
pub(crate) fn open_artifact(path: &Path) -> Result<File, CaptureError> {
    crate::store::durable::open_private(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_CLOEXEC),
        path,
    )
    .map_err(|source| CaptureError::Artifact {
        path: path.to_owned(),
        source,
    })
}

fn fd_err(op: &'static str) -> impl FnOnce(Errno) -> CaptureError {
    move |e| CaptureError::Fd {
        op,
        source: e.into(),
    }
}

impl Capture {
    /// Creates the artifacts and makes every source nonblocking.
    pub fn new(
        sources: Vec<StreamSource>,
        config: CaptureConfig,
        callback: Option<OutputCallback>,
    ) -> Result<Self, CaptureError> {
        if sources.len() > MAX_STREAMS {
            return Err(CaptureError::TooManyStreams {
                got: sources.len(),
                max: MAX_STREAMS,
            });
        }
        let mut readers = Vec::with_capacity(sources.len());
        for src in sources {
            rustix::io::ioctl_fionbio(&src.fd, true).map_err(fd_err("make nonblocking"))?;
            if !src.pty {
                // Fewer wake-ups per byte; the system limit may refuse, which is harmless.
                let _ = rustix::pipe::fcntl_setpipe_size(&src.fd, PIPE_SIZE);
            }
            // Created by the first byte (F3): a silent stream leaves no file.
            readers.push(Reader {
                stream: src.stream,
                fd: Some(src.fd),
                pty: src.pty,
                forward: src.forward,
                pending: Vec::new(),
                reader_gone: false,
                held_outside: false,
                guarded: false,
                awaiting: false,
                artifact: src.artifact.clone(),
                sink: Sink {
                    file: None,
                    path: src.artifact,
                    created: false,
                    splice_file: None,
                    splice_broken: false,
                    relay: None,
                    written: 0,
                    cap: config.log_cap,
                    capped: false,
                    failed: None,
                    off: !config.artifacts,
                },
                kept: Vec::new(),
                read: 0,
                over_memory: false,
                read_failed: None,
            });
        }
        Ok(Capture {
            readers,
            config,
            callback,
            // Allocated on the first read of a capture that reads with its own buffer.
            buf: Vec::new(),
            drain_deadline: None,
            last_output: None,
        })
    }

    /// L1: a capture of `streams` (with their artifacts) that the guardian drains itself: this
    /// side holds no descriptor, learns the counts from [`Capture::guardian_progress`] and each
    /// stream's end from [`Capture::guardian_ended`], and reads the kept bytes back from the
    /// artifacts when it finishes.
    pub(crate) fn guarded(streams: Vec<(Stream, PathBuf)>, config: CaptureConfig) -> Self {
        let readers = streams
            .into_iter()
            .map(|(stream, artifact)| Reader {
                stream,
                fd: None,
                pty: false,
                forward: None,
                pending: Vec::new(),
                reader_gone: false,
                held_outside: false,
                guarded: true,
                awaiting: true,
                artifact: artifact.clone(),
                sink: Sink {
                    file: None,
                    path: artifact,
                    created: true,
                    splice_file: None,
                    splice_broken: false,
                    relay: None,
                    written: 0,
                    cap: config.log_cap,
                    capped: false,
                    failed: None,
                    off: !config.artifacts,
                },
                kept: Vec::new(),
                read: 0,
                over_memory: false,
                read_failed: None,
            })
            .collect();
        Capture {
            readers,
            config,
            callback: None,
            buf: Vec::new(),
            drain_deadline: None,
            last_output: None,
        }
    }

    /// L1: the guardian has read this much from each guarded stream so far.
    pub(crate) fn guardian_progress(&mut self, stdout: u64, stderr: u64, now: Instant) {
        let mut got = false;
        for r in self.readers.iter_mut().filter(|r| r.guarded && r.awaiting) {
            let n = match r.stream {
                Stream::Stdout => stdout,
                Stream::Stderr => stderr,
                Stream::Stdin => continue,
            };
            got |= n > r.read;
            r.read = r.read.max(n);
        }
        if got {
            self.last_output = Some(now);
        }
    }

    /// L1: the guardian says how a guarded stream ended, with its counts.
    pub(crate) fn guardian_ended(&mut self, c: refine_protocol::frame::CaptureEnded) {
        use refine_protocol::capture::CaptureEnd;
        use refine_protocol::frame::CapturedStream;
        let stream = match c.stream {
            CapturedStream::Stdout => Stream::Stdout,
            CapturedStream::Stderr => Stream::Stderr,
        };
        let keep_max = self.config.keep_max as u64;
        let Some(r) = self
            .readers
            .iter_mut()
            .find(|r| r.guarded && r.stream == stream)
        else {
            return;
        };
        if c.moved > r.read {
            self.last_output = Some(Instant::now());
        }
        r.awaiting = false;
        r.read = c.moved;
        r.sink.written = c.written;
        r.sink.capped = c.written < c.moved && r.sink.cap.is_some();
        r.over_memory = c.written > keep_max;
        match c.end {
            CaptureEnd::Eof => {}
            CaptureEnd::Failed { errno } => r.sink.failed = Some(errno),
            CaptureEnd::HeldOutside => r.held_outside = true,
        }
    }

    /// Starts the final drain at `at` (the first validated workload exit). Later calls change
    /// nothing: output cannot extend the drain.
    pub fn begin_drain(&mut self, at: Instant) {
        if self.drain_deadline.is_none() {
            self.drain_deadline = Some(at + self.config.drain);
        }
    }

    pub(crate) fn drain_deadline(&self) -> Option<Instant> {
        self.drain_deadline
    }

    /// When output was last read (idle deadlines), `None` before the first byte.
    pub(crate) fn last_output(&self) -> Option<Instant> {
        self.last_output
    }

    /// Bytes read over all streams.
    pub(crate) fn total_read(&self) -> u64 {
        self.readers.iter().map(|r| r.read).sum()
    }

    /// A read or artifact write failed on some stream.
    pub fn failure(&self) -> Option<CaptureFailure> {
        self.readers.iter().find_map(|r| {
            r.read_failed
                .map(|errno| CaptureFailure::Read { errno })
                .or(r
                    .sink
                    .failed
                    .map(|errno| CaptureFailure::ArtifactWrite { errno }))
        })
    }

    /// This stream reached EOF (or failed to read); `true` for a stream not captured.
    pub fn is_closed(&self, stream: Stream) -> bool {
        self.readers
            .iter()
            .filter(|r| r.stream == stream)
            .all(Reader::done)
    }

    /// Every stream reached EOF (or failed).
    pub(crate) fn all_closed(&self) -> bool {
        self.readers.iter().all(Reader::done)
    }

    /// The final drain has ended (it started and its deadline passed).
    pub(crate) fn drain_over(&self, now: Instant) -> bool {
        self.drain_deadline.is_some_and(|d| now >= d)
    }

    /// X10: the scope has ended with proof, so a stream still open is held by a process
    /// outside it: what the pipe holds now is read, then the read end is closed and the stream
    /// is incomplete ([`Incomplete::HeldOutside`]). Bytes already read still reach a forward.
    pub fn close_held_outside(&mut self) {
        // Every stream ended already (the usual case): nothing to read, no buffer to make.
        if self.readers.iter().all(|r| r.fd.is_none()) {
            return;
        }
        if self.buf.is_empty() {
            self.buf = vec![0; READ_CHUNK];
        }
        let keep_max = self.config.keep_max;
        let cb = &mut self.callback;
        let mut on = |s: Stream, b: &[u8]| {
            if let Some(cb) = cb.as_mut() {
                cb(s, b)
            }
        };
        for r in &mut self.readers {
            r.close_outside(&mut self.buf, keep_max, &mut on);
        }
    }

    /// The scope's receipt came: the drain lasts at least [`CaptureConfig::drain`] from now
    /// (X10: a stream the scope's last process wrote to gets the same time as the first drain).
    pub fn extend_drain(&mut self, now: Instant) {
        let at = now + self.config.drain;
        if let Some(d) = self.drain_deadline.as_mut() {
            *d = (*d).max(at);
        }
    }

    /// Capture is over: every stream closed, or the final drain has ended.
    pub fn is_done(&self, now: Instant) -> bool {
        self.all_closed() || self.drain_over(now)
    }

    /// The streams to wait on now, by reader index, with what to wait for (none once the final
    /// drain has ended): what [`Capture::pump`] polls, and what a shared loop registers.
    pub(crate) fn interest(&self, now: Instant) -> Vec<(usize, BorrowedFd<'_>, PollFlags)> {
        if self.drain_over(now) {
            return Vec::new();
        }
        self.readers
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.interest().map(|(fd, flags)| (i, fd, flags)))
            .collect()
    }

    /// Services the readers whose interest is ready (bit i = reader i): forwards what waits,
    /// or reads a bounded batch into `buf` (the caller's: a shared loop lends one buffer to all
    /// its captures; `None`, this capture's own, allocated on its first read).
    pub(crate) fn read_ready(&mut self, ready: u32, buf: Option<&mut [u8]>) {
        if ready == 0 {
            return;
        }
        let buf = match buf {
            Some(b) => b,
            None => {
                if self.buf.is_empty() {
                    self.buf = vec![0; READ_CHUNK];
                }
                &mut self.buf[..]
            }
        };
        let keep_max = self.config.keep_max;
        // Without a callback the artifact is the bytes' only reader: they may be spliced.
        let splice = self.callback.is_none();
        let mut got = false;
        for (i, r) in self.readers.iter_mut().enumerate() {
            if i >= 32 || ready & (1 << i) == 0 {
                continue;
            }
            let before = r.read;
            let cb = &mut self.callback;
            r.service(buf, keep_max, splice, |s, b| {
                if let Some(cb) = cb.as_mut() {
                    cb(s, b)
                }
            });
            got |= r.read != before;
        }
        if got {
            self.last_output = Some(Instant::now());
        }
    }

    /// Waits until a stream or one of `extra` is readable (or `deadline`, or the drain's end),
    /// and reads what the streams hold, a bounded batch per stream. Returns which `extra`
    /// descriptors are readable (or hung up). `extra` holds at most 16 descriptors.
    pub fn pump(
        &mut self,
        extra: &[BorrowedFd<'_>],
        deadline: Option<Instant>,
    ) -> Result<Ready, CaptureError> {
        let now = Instant::now();
        if self.drain_over(now) {
            // The drain is over: report the control descriptors without waiting.
            return poll_extra(extra, Some(now));
        }
        let until = match (deadline, self.drain_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let streams = self.interest(now);
        let which: Vec<usize> = streams.iter().map(|s| s.0).collect();
        let mut fds: Vec<PollFd<'_>> = streams
            .into_iter()
            .map(|(_, fd, flags)| PollFd::from_borrowed_fd(fd, flags))
            .collect();
        let nstreams = fds.len();
        for fd in extra {
            fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
        }
        poll_until(&mut fds, until)?;
        let mut ready_streams = 0u32;
        for (slot, pfd) in fds[..nstreams].iter().enumerate() {
            if !pfd.revents().is_empty() && which[slot] < 32 {
                ready_streams |= 1 << which[slot];
            }
        }
        let ready = ready_bits(&fds[nstreams..]);
        drop(fds);
        self.read_ready(ready_streams, None);
        Ok(ready)
    }

    /// Ends the capture: the result as of now. Streams still open are handed to a background
    /// tail that keeps the artifacts growing (and the writers unblocked) until EOF.
    pub fn finish(self) -> CaptureResult {
        self.finish_with(|tail| {
            // If the thread cannot start, dropping the tail closes the pipes: the writers then
            // see EPIPE, which is the only other way to never block them.
            let _ = std::thread::Builder::new()
                .name("refine-capture-tail".into())
                .spawn(move || tail.run());
        })
    }

    /// Ends the capture like [`Capture::finish`], handing the [`Tail`] of the streams still
    /// open, if any, to `start` (a thread of its own, or a shared loop).
    pub(crate) fn finish_with(mut self, start: impl FnOnce(Tail)) -> CaptureResult {
        let keep_max = self.config.keep_max;
        let drain = self.config.drain;
        let mut streams = Vec::with_capacity(self.readers.len());
        for r in &mut self.readers {
            if r.guarded {
                // The kept bytes are the artifact's first ones (the guardian wrote them there).
                r.kept = read_prefix(&r.artifact, r.sink.written.min(keep_max as u64));
            }
            streams.push(StreamCapture {
                stream: r.stream,
                state: r.state(keep_max, drain),
                artifact: r.artifact.clone(),
                artifact_bytes: r.sink.written,
                read_bytes: r.read,
                kept: std::mem::take(&mut r.kept),
            });
        }
        let mut tail_done = None;
        if self.readers.iter().any(|r| !r.done() && !r.guarded) {
            let mut readers = std::mem::take(&mut self.readers);
            // A guarded stream needs no tail: its guardian keeps draining it.
            readers.retain(|r| !r.done() && !r.guarded);
            for r in &mut readers {
                r.kept = Vec::new();
            }
            let (tx, rx) = mpsc::channel::<()>();
            start(Tail {
                readers,
                buf: std::mem::take(&mut self.buf),
                _done: tx,
            });
            tail_done = Some(rx);
        }
        CaptureResult {
            streams,
            tail_done,
            memory_only: !self.config.artifacts,
        }
    }
}

fn ready_bits(fds: &[PollFd<'_>]) -> Ready {
    let mut bits = 0u32;
    for (i, p) in fds.iter().enumerate().take(32) {
        if !p.revents().is_empty() {
            bits |= 1 << i;
        }
    }
    Ready(bits)
}

/// Polls only `extra` until `deadline`.
pub(crate) fn poll_extra(
    extra: &[BorrowedFd<'_>],
    deadline: Option<Instant>,
) -> Result<Ready, CaptureError> {
    let mut fds: Vec<PollFd<'_>> = extra
        .iter()
        .map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::IN))
        .collect();
    poll_until(&mut fds, deadline)?;
    Ok(ready_bits(&fds))
}

/// `poll` until an event or `deadline` (`None`: no deadline); `EINTR` retried.
pub fn poll_until(fds: &mut [PollFd<'_>], deadline: Option<Instant>) -> Result<(), CaptureError> {
    loop {
        let timeout = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: left.subsec_nanos() as i64,
            }
        });
        match rustix::event::poll(fds, timeout.as_ref()) {
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(CaptureError::Poll(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// X10's last look at streams held outside the scope costs nothing once every stream has
    /// ended: no read buffer of its own (256 KiB, zeroed) is made for a capture the shared loop
    /// lent its buffer to.
    #[test]
    fn closing_held_streams_after_every_end_allocates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (read, write) = rustix::pipe::pipe().unwrap();
        drop(write);
        let source = StreamSource {
            stream: Stream::Stdout,
            fd: read,
            artifact: dir.path().join("out"),
            pty: false,
            forward: None,
        };
        let mut cap = Capture::new(vec![source], CaptureConfig::default(), None).unwrap();
        let mut lent = vec![0u8; 4096];
        cap.read_ready(1, Some(&mut lent));
        assert!(cap.all_closed(), "the stream reached its end");
        cap.close_held_outside();
        assert!(cap.buf.is_empty(), "a read buffer was made for no stream");
    }
}

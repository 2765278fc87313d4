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

/// Bytes kept in memory per stream by default (S3).
mod forward;
mod tail;
pub use forward::Forward;
pub use tail::Tail;

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
/// Bytes per stream a stand-in holds for the artifact while its process is stopped
/// ([`Capture::flowing_while_stopped`]).
pub const STAND_IN_HOLD: usize = 8 * 1024 * 1024;
/// A stand-in's report record: stream index, end flags, read errno (4), pending bytes it
/// forwarded (8), held bytes it forwarded (8), held bytes (8); then the held bytes.
const STAND_IN_HEADER: usize = 30;
const STAND_IN_EOF: u8 = 1;
const STAND_IN_GONE: u8 = 2;
const STAND_IN_FAILED: u8 = 4;
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
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            keep_max: DEFAULT_KEEP,
            log_cap: None,
            drain: FINAL_DRAIN,
        }
    }
}

/// One stream to capture: a read end (pipe or PTY master) and its artifact.
#[derive(Debug)]
pub struct StreamSource {
    pub stream: Stream,
    pub fd: OwnedFd,
    pub artifact: PathBuf,
    /// A PTY master: `EIO` means the slave side is closed (end of file).
    pub pty: bool,
    /// Also write every byte read here, at the reader's pace.
    pub forward: Option<Forward>,
}

/// Why a stream's result does not hold every byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incomplete {
    /// More than `kept` bytes were produced; the artifact holds them all.
    MemoryLimit { kept: usize },
    /// The artifact reached its cap and stopped growing; the pipe was still drained.
    ArtifactCap { cap: u64 },
    /// The final drain ended before the stream reached EOF (a descendant still holds it).
    DrainEnded { drain: Duration },
    /// The reader of the forwarded stream went away: its read end was closed, as a broken
    /// pipe would have been without the wrapper. The artifact holds what was read until then.
    ReaderGone,
    /// X10: the scope had ended (its receipt verified) and a process outside it still held
    /// the stream open: the read end was closed after the final drain, so nothing written
    /// after the scope's end lands in its artifact.
    HeldOutside,
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Incomplete::MemoryLimit { kept } => {
                write!(
                    f,
                    "output past the {kept}-byte memory limit (artifact complete)"
                )
            }
            Incomplete::ArtifactCap { cap } => {
                write!(
                    f,
                    "log cap of {cap} bytes reached (the pipe is still drained)"
                )
            }
            Incomplete::ReaderGone => write!(f, "the reader of the forwarded stream went away"),
            Incomplete::HeldOutside => write!(f, "held open outside the scope"),
            Incomplete::DrainEnded { drain } => {
                write!(f, "final drain of {drain:?} ended before end of file")
            }
        }
    }
}

/// A read or artifact write that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CaptureFailure {
    #[error("reading the stream failed (errno {errno})")]
    Read { errno: i32 },
    #[error("writing the artifact failed (errno {errno})")]
    ArtifactWrite { errno: i32 },
}

/// How a stream ended (S5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    Eof,
    Failed(CaptureFailure),
    Incomplete(Incomplete),
}

impl StreamState {
    pub(crate) fn to_record(self) -> StreamEnd {
        match self {
            StreamState::Eof => StreamEnd::Eof,
            StreamState::Failed(f) => StreamEnd::CaptureFailure(f.to_string()),
            StreamState::Incomplete(i) => StreamEnd::Incomplete(i.to_string()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot create artifact {path}")]
    Artifact {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot {op} a capture descriptor")]
    Fd {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("poll failed")]
    Poll(#[source] io::Error),
    #[error("{got} streams given, at most {max} are captured")]
    TooManyStreams { got: usize, max: usize },
}

/// Refusal of [`CaptureResult::complete_output`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IncompleteCapture {
    #[error("{stream} was not captured")]
    NotCaptured { stream: &'static str },
    #[error("{stream} capture is incomplete: {reason}")]
    Incomplete {
        stream: &'static str,
        reason: Incomplete,
    },
    #[error("{stream} capture failed: {failure}")]
    Failed {
        stream: &'static str,
        failure: CaptureFailure,
    },
}

/// One stream of a finished capture.
#[derive(Debug)]
pub struct StreamCapture {
    pub stream: Stream,
    pub state: StreamState,
    pub artifact: PathBuf,
    /// Bytes in the artifact when the result was taken (a tail may add more later).
    pub artifact_bytes: u64,
    /// Bytes read from the stream when the result was taken.
    pub read_bytes: u64,
    kept: Vec<u8>,
}

impl StreamCapture {
    /// The bytes kept in memory (all of them only if `state` is [`StreamState::Eof`]).
    /// Parsers use [`CaptureResult::complete_output`] instead.
    pub fn kept(&self) -> &[u8] {
        &self.kept
    }
}

/// The streams of a finished capture.
#[derive(Debug, Default)]
pub struct CaptureResult {
    pub streams: Vec<StreamCapture>,
    /// Disconnected once the background tail (streams still open or forwards still waiting for
    /// their reader at the result) has ended.
    tail_done: Option<mpsc::Receiver<()>>,
}

impl CaptureResult {
    /// Waits until every stream has been read to its end and every forwarded byte delivered
    /// (or its reader is gone). Only worth calling when no process holds the streams any
    /// more (the scope has exited): otherwise it waits as long as the scope writes.
    pub fn wait_delivered(&self) {
        if let Some(rx) = &self.tail_done {
            let _ = rx.recv();
        }
    }

    /// [`CaptureResult::wait_delivered`] for at most `bound`: true once everything is
    /// delivered, false if the bound passed first.
    pub fn wait_delivered_for(&self, bound: Duration) -> bool {
        match &self.tail_done {
            Some(rx) => !matches!(rx.recv_timeout(bound), Err(mpsc::RecvTimeoutError::Timeout)),
            None => true,
        }
    }

    pub fn stream(&self, stream: Stream) -> Option<&StreamCapture> {
        self.streams.iter().find(|s| s.stream == stream)
    }

    /// Every stream reached EOF with every byte in memory and in its artifact.
    pub fn is_complete(&self) -> bool {
        self.streams.iter().all(|s| s.state == StreamState::Eof)
    }

    /// The one accessor for consumers that parse output: the stream's complete bytes, or a
    /// refusal if any byte is missing from the result.
    pub fn complete_output(&self, stream: Stream) -> Result<&[u8], IncompleteCapture> {
        let s = self.stream(stream).ok_or(IncompleteCapture::NotCaptured {
            stream: stream.name(),
        })?;
        match s.state {
            StreamState::Eof => Ok(&s.kept),
            StreamState::Incomplete(reason) => Err(IncompleteCapture::Incomplete {
                stream: stream.name(),
                reason,
            }),
            StreamState::Failed(failure) => Err(IncompleteCapture::Failed {
                stream: stream.name(),
                failure,
            }),
        }
    }

    /// The capture receipt kept beside an incomplete result (S5).
    pub fn receipt(
        &self,
        id: RegistrationId,
        runtime: RuntimeId,
        workload_status: Option<WorkloadStatus>,
    ) -> CaptureReceipt {
        CaptureReceipt {
            id,
            runtime,
            workload_status,
            streams: self
                .streams
                .iter()
                .map(|s| StreamReceipt {
                    name: s.stream.name().to_owned(),
                    end: s.state.to_record(),
                    artifact_path: s.artifact.display().to_string(),
                    artifact_bytes: s.artifact_bytes,
                    prefix: s.kept[..s.kept.len().min(CAPTURE_PREFIX_MAX)].to_vec(),
                })
                .collect(),
            written_at_unix_ms: crate::kernel::clock::unix_ms(),
        }
    }
}

/// Writes the artifact, honouring the cap. The artifact is open only while its stream has
/// bytes to write: a quiet stream (a detached `sleep`) holds no descriptor for it, which is
/// what lets one service hold thousands of scopes under its descriptor limit.
#[derive(Debug)]
struct Sink {
    /// Open while bytes are flowing; reopened (append) for the next ones.
    file: Option<File>,
    path: PathBuf,
    /// Whether the artifact exists: it is created by the first byte (F3: an empty stream
    /// leaves no file), and appended to after that.
    created: bool,
    /// The artifact opened without `O_APPEND` (which `splice` refuses), written at `written`.
    splice_file: Option<File>,
    /// `splice` failed in a way that says it never will here: read and write from now on.
    splice_broken: bool,
    /// A pipe of the capture's own between the workload's pipe and the artifact (read end,
    /// write end), open while bytes are flowing; see [`Sink::splice_from`].
    relay: Option<(OwnedFd, OwnedFd)>,
    written: u64,
    cap: Option<u64>,
    capped: bool,
    failed: Option<i32>,
}

impl Sink {
    fn write(&mut self, bytes: &[u8]) {
        if self.capped || self.failed.is_some() {
            return;
        }
        let take = match self.cap {
            Some(cap) => {
                let room = cap.saturating_sub(self.written);
                if (bytes.len() as u64) > room {
                    self.capped = true;
                }
                bytes.len().min(room as usize)
            }
            None => bytes.len(),
        };
        if take == 0 {
            return;
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => match self.open() {
                Ok(f) => self.file.insert(f),
                Err(e) => {
                    self.failed = Some(e.raw_os_error().unwrap_or(libc::EIO));
                    return;
                }
            },
        };
        match file.write_all(&bytes[..take]) {
            Ok(()) => self.written += take as u64,
            Err(e) => self.failed = Some(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    /// The artifact: created (truncated) for the first bytes, appended to after that.
    fn open(&mut self) -> io::Result<File> {
        if self.created {
            return reopen_artifact(&self.path);
        }
        let f = open_artifact(&self.path).map_err(|e| match e {
            CaptureError::Artifact { source, .. } => source,
            other => io::Error::other(other.to_string()),
        })?;
        self.created = true;
        Ok(f)
    }

    /// Moves up to `max` bytes from `pipe` into the artifact inside the kernel (`splice`, F5).
    /// `None` when it does not apply here (the artifact not created yet, capped, failed, or a
    /// file system or source that cannot splice): the caller reads and writes instead, which
    /// also applies the cap and records a failure.
    ///
    /// The bytes go through a pipe of the capture's own: pipe to pipe moves page references
    /// under both pipes' locks for an instant, and the copy into the file then holds only the
    /// relay's. Spliced straight from the workload's pipe, the file write would hold that
    /// pipe's lock throughout, and the workload's next write would wait for it: no overlap
    /// left between producing and storing, slower than `cat`'s read and write.
    fn splice_from(&mut self, pipe: BorrowedFd<'_>, max: usize) -> Option<Result<usize, Errno>> {
        use rustix::pipe::{splice, SpliceFlags};
        if self.capped || self.failed.is_some() || self.splice_broken || !self.created {
            return None;
        }
        let take = match self.cap {
            Some(cap) => match cap.saturating_sub(self.written) {
                0 => return None,
                room => max.min(usize::try_from(room).unwrap_or(usize::MAX)),
            },
            None => max,
        };
        if self.splice_file.is_none() {
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&self.path)
            {
                Ok(f) => self.splice_file = Some(f),
                Err(_) => {
                    self.splice_broken = true;
                    return None;
                }
            }
        }
        if self.relay.is_none() {
            match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
                Ok((r, w)) => {
                    // Failure to grow it is harmless: smaller moves.
                    let _ = rustix::pipe::fcntl_setpipe_size(&w, PIPE_SIZE);
                    self.relay = Some((r, w));
                }
                Err(_) => {
                    self.splice_broken = true;
                    return None;
                }
            }
        }
        let (relay_r, relay_w) = self.relay.as_ref()?;
        let n = match splice(pipe, None, relay_w, None, take, SpliceFlags::NONBLOCK) {
            Ok(n) => n,
            Err(e @ (Errno::AGAIN | Errno::INTR)) => return Some(Err(e)),
            // EINVAL, ENOSYS...: the read/write path decides.
            Err(_) => {
                self.splice_broken = true;
                self.splice_file = None;
                self.relay = None;
                return None;
            }
        };
        // Everything in the relay into the file: it holds exactly these `n` bytes.
        let file = self.splice_file.as_ref()?;
        let mut left = n;
        while left > 0 {
            let mut at = self.written;
            match splice(relay_r, None, file, Some(&mut at), left, SpliceFlags::MOVE) {
                Ok(0) => break,
                Ok(k) => {
                    self.written += k as u64;
                    left -= k;
                }
                Err(Errno::INTR) => {}
                Err(_) => break,
            }
        }
        if left > 0 {
            // A full disk, an I/O error: the bytes still in the relay take the read/write
            // path, which records the failure; splice is not tried again.
            self.splice_broken = true;
            self.splice_file = None;
            if let Some((relay_r, _)) = self.relay.take() {
                let mut buf = vec![0u8; left.min(READ_CHUNK)];
                while left > 0 {
                    let want = left.min(buf.len());
                    match rustix::io::read(&relay_r, &mut buf[..want]) {
                        Ok(0) => break,
                        Ok(k) => {
                            self.write(&buf[..k]);
                            left -= k;
                        }
                        Err(Errno::INTR) => {}
                        Err(_) => break,
                    }
                }
            }
        }
        Some(Ok(n))
    }

    /// The stream has nothing more for now: close the artifact until it has.
    fn idle(&mut self) {
        self.file = None;
        self.splice_file = None;
        self.relay = None;
    }
}

/// Writes all of `bytes` to a blocking descriptor; false on an error.
fn write_all_fd(fd: &OwnedFd, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return false,
            Ok(k) => bytes = &bytes[k..],
            Err(Errno::INTR) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Up to `max` leading bytes of an artifact (fewer if it is shorter or unreadable).
fn read_prefix(path: &Path, max: u64) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    if let Ok(f) = File::open(path) {
        let _ = f.take(max).read_to_end(&mut out);
    }
    out
}

/// The artifact [`open_artifact`] created, opened again to append the next bytes.
fn reopen_artifact(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

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

    /// Job control (W2): runs `stop`, which returns once this process is continued, while a
    /// stand-in ([`crate::kernel::stand_in`]) keeps the streams flowing meanwhile. The stand-in
    /// forwards what each forward's reader takes, as the workload's writes would reach it
    /// without the wrapper (a stopped `run` would leave them in full pipes), and holds what it
    /// read, up to [`STAND_IN_HOLD`] per stream (past it the stream waits, as for a slow
    /// reader). Back here the held bytes go through this capture as if read now (artifact,
    /// kept prefix, counters, callback; the forwarded ones not to the forward again), in order,
    /// before anything read later. Without a stand-in (no pipe, no fork) `stop` runs alone.
    pub fn flowing_while_stopped(&mut self, stop: impl FnOnce()) {
        use crate::kernel::stand_in::{self, Forked};
        use rustix::pipe::{pipe_with, PipeFlags};
        let (Ok((go_r, go_w)), Ok((report_r, report_w))) =
            (pipe_with(PipeFlags::CLOEXEC), pipe_with(PipeFlags::CLOEXEC))
        else {
            stop();
            return;
        };
        let held: Vec<Vec<u8>> = self
            .readers
            .iter()
            .map(|r| match r.fd {
                // Zeroed pages: nothing is touched until the stand-in writes into them.
                Some(_) => vec![0; STAND_IN_HOLD],
                None => Vec::new(),
            })
            .collect();
        match stand_in::fork() {
            Err(e) => {
                tracing::warn!(error = %e, "no stand-in for the streams while stopped");
                stop();
            }
            Ok(Forked::Child) => {
                drop(go_w);
                drop(report_r);
                stand_in::block_all_signals();
                self.stand_in(go_r, report_w, held)
            }
            Ok(Forked::Parent(pid)) => {
                drop((go_r, report_w, held));
                stop();
                // The stand-in's cue: the end of `go`.
                drop(go_w);
                let mut report = Vec::new();
                let mut chunk = vec![0u8; READ_CHUNK];
                loop {
                    match rustix::io::read(&report_r, &mut chunk) {
                        Ok(0) => break,
                        Ok(n) => report.extend_from_slice(&chunk[..n]),
                        Err(Errno::INTR) => {}
                        Err(_) => break,
                    }
                }
                stand_in::reap(pid);
                if !self.take_report(&report) {
                    tracing::warn!(
                        "the stand-in's report was cut short: what it read is not in the artifacts"
                    );
                }
            }
        }
    }

    /// The stand-in's side of [`Capture::flowing_while_stopped`]: forwards and holds until
    /// `go` ends, then writes its report and exits. No lock, no log (see
    /// [`crate::kernel::stand_in`]).
    fn stand_in(&mut self, go: OwnedFd, report: OwnedFd, mut held: Vec<Vec<u8>>) -> ! {
        let n = self.readers.len();
        // Per stream: bytes held, of them forwarded, of the parent's pending forwarded, the
        // end flags and the read error.
        let mut len = vec![0usize; n];
        let mut sent = vec![0usize; n];
        let mut flushed = vec![0usize; n];
        let mut end = vec![0u8; n];
        let mut errno = vec![0i32; n];
        let unsent = |r: &Reader, i: usize, len: &[usize], sent: &[usize], flushed: &[usize]| {
            r.forward.is_some() && (flushed[i] < r.pending.len() || sent[i] < len[i])
        };
        loop {
            let mut fds = Vec::with_capacity(n + 1);
            let mut which = Vec::with_capacity(n);
            fds.push(PollFd::new(&go, PollFlags::IN));
            for (i, r) in self.readers.iter().enumerate() {
                if end[i] & STAND_IN_GONE != 0 {
                    continue;
                }
                if unsent(r, i, &len, &sent, &flushed) {
                    if let Some(f) = &r.forward {
                        fds.push(PollFd::from_borrowed_fd(f.fd.as_fd(), PollFlags::OUT));
                        which.push(i);
                    }
                } else if len[i] < held[i].len() && end[i] & (STAND_IN_EOF | STAND_IN_FAILED) == 0 {
                    if let Some(fd) = &r.fd {
                        fds.push(PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN));
                        which.push(i);
                    }
                }
            }
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => break,
            }
            if !fds[0].revents().is_empty() {
                break;
            }
            let ready: Vec<usize> = fds[1..]
                .iter()
                .zip(&which)
                .filter(|(p, _)| !p.revents().is_empty())
                .map(|(_, &i)| i)
                .collect();
            drop(fds);
            for i in ready {
                let r = &self.readers[i];
                if !unsent(r, i, &len, &sent, &flushed) && len[i] < held[i].len() {
                    if let Some(fd) = &r.fd {
                        match rustix::io::read(fd, &mut held[i][len[i]..]) {
                            Ok(0) => end[i] |= STAND_IN_EOF,
                            Ok(k) => len[i] += k,
                            Err(Errno::AGAIN | Errno::INTR) => {}
                            Err(Errno::IO) if r.pty => end[i] |= STAND_IN_EOF,
                            Err(e) => {
                                end[i] |= STAND_IN_FAILED;
                                errno[i] = e.raw_os_error();
                            }
                        }
                    }
                }
                let Some(f) = &r.forward else {
                    sent[i] = len[i];
                    continue;
                };
                let write = |bytes: &[u8], done: &mut usize| {
                    while *done < bytes.len() {
                        match f.write(&bytes[*done..]) {
                            Ok(0) => return true,
                            Ok(k) => *done += k,
                            Err(Errno::INTR) => {}
                            Err(_) => return false,
                        }
                    }
                    true
                };
                let ok = write(&r.pending, &mut flushed[i])
                    && (flushed[i] < r.pending.len() || write(&held[i][..len[i]], &mut sent[i]));
                if !ok {
                    end[i] |= STAND_IN_GONE;
                }
            }
        }
        for i in 0..n {
            let mut head = [0u8; STAND_IN_HEADER];
            head[0] = i as u8;
            head[1] = end[i];
            head[2..6].copy_from_slice(&errno[i].to_le_bytes());
            head[6..14].copy_from_slice(&(flushed[i] as u64).to_le_bytes());
            head[14..22].copy_from_slice(&(sent[i] as u64).to_le_bytes());
            head[22..30].copy_from_slice(&(len[i] as u64).to_le_bytes());
            if !write_all_fd(&report, &head) || !write_all_fd(&report, &held[i][..len[i]]) {
                break;
            }
        }
        crate::kernel::stand_in::exit_now(0)
    }

    /// Takes a stand-in's report into the readers; false if it was cut short (the stand-in
    /// died), after taking every whole record.
    fn take_report(&mut self, mut report: &[u8]) -> bool {
        let keep_max = self.config.keep_max;
        let mut records = 0;
        while report.len() >= STAND_IN_HEADER {
            let word =
                |a: usize| u64::from_le_bytes(report[a..a + 8].try_into().unwrap_or_default());
            let (i, flags) = (usize::from(report[0]), report[1]);
            let errno = i32::from_le_bytes(report[2..6].try_into().unwrap_or_default());
            let (flushed, sent, len) = (word(6), word(14), word(22));
            let Some(body) = usize::try_from(len)
                .ok()
                .and_then(|len| report.get(STAND_IN_HEADER..STAND_IN_HEADER + len))
            else {
                break;
            };
            let Some(r) = self.readers.get_mut(i) else {
                break;
            };
            let flushed = usize::try_from(flushed)
                .unwrap_or(usize::MAX)
                .min(r.pending.len());
            r.pending.drain(..flushed);
            if !body.is_empty() {
                let cb = &mut self.callback;
                r.absorb(body, keep_max, &mut |s, b| {
                    if let Some(cb) = cb.as_mut() {
                        cb(s, b)
                    }
                });
                self.last_output = Some(Instant::now());
                if r.forward.is_some() {
                    let sent = usize::try_from(sent).unwrap_or(usize::MAX).min(body.len());
                    r.pending.extend_from_slice(&body[sent..]);
                }
            }
            if flags & STAND_IN_GONE != 0 {
                r.forward = None;
                r.pending = Vec::new();
                r.fd = None;
                r.reader_gone = true;
            }
            if flags & STAND_IN_EOF != 0 {
                r.fd = None;
            }
            if flags & STAND_IN_FAILED != 0 {
                r.read_failed = Some(errno);
                r.fd = None;
            }
            r.sink.idle();
            records += 1;
            report = &report[STAND_IN_HEADER + body.len()..];
        }
        records == self.readers.len() && report.is_empty()
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
        CaptureResult { streams, tail_done }
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

/// Incremental UTF-8 decoding for callbacks that want text: a character split across chunks is
/// held back until it is complete, so a replacement character appears only for bytes that are
/// really invalid.
#[derive(Debug, Default)]
pub struct Utf8Chunks {
    pending: [u8; 4],
    len: usize,
    scratch: Vec<u8>,
}

impl Utf8Chunks {
    /// Feeds `bytes`; `out` receives the text that is complete so far.
    pub fn push(&mut self, bytes: &[u8], mut out: impl FnMut(&str)) {
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.pending[..self.len]);
        self.scratch.extend_from_slice(bytes);
        self.len = 0;
        let mut rest: &[u8] = &self.scratch;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    if !s.is_empty() {
                        out(s);
                    }
                    return;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    if !good.is_empty() {
                        // `valid_up_to` guarantees this prefix is UTF-8.
                        out(std::str::from_utf8(good).unwrap_or_default());
                    }
                    match e.error_len() {
                        Some(n) => {
                            out("\u{fffd}");
                            rest = &bad[n..];
                        }
                        None => {
                            // An incomplete character at the end: keep it for the next chunk.
                            self.pending[..bad.len()].copy_from_slice(bad);
                            self.len = bad.len();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: a character still incomplete is invalid.
    pub fn finish(&mut self, mut out: impl FnMut(&str)) {
        if self.len > 0 {
            self.len = 0;
            out("\u{fffd}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_chunks_is_held_back() {
        let text = "héllo → wörld 🎉";
        let bytes = text.as_bytes();
        for split in 0..bytes.len() {
            let mut d = Utf8Chunks::default();
            let mut out = String::new();
            d.push(&bytes[..split], |s| out.push_str(s));
            d.push(&bytes[split..], |s| out.push_str(s));
            d.finish(|s| out.push_str(s));
            assert_eq!(out, text, "split at {split}");
        }
    }

    #[test]
    fn utf8_invalid_bytes_are_replaced() {
        let mut d = Utf8Chunks::default();
        let mut out = String::new();
        d.push(b"a\xffb\xe2\x82", |s| out.push_str(s));
        d.finish(|s| out.push_str(s));
        assert_eq!(out, "a\u{fffd}b\u{fffd}");
    }
}

//! L1: the scope owns its output. A launch that asks for it (frame flag `CAPTURE`) has the
//! guardian drain the workload's stdout and stderr into their artifacts itself, so that no
//! writer depends on the launcher: a killed, stopped or upgraded launcher breaks no pipe and
//! loses no byte.
//!
//! The launcher sends the two artifacts and their indexes as descriptors (it names and creates
//! them, and reads them); the guardian makes the workload's pipes itself, keeps their read
//! ends, and moves each readable batch with `splice` into the artifact, at the file's position
//! (the launcher opened it without `O_APPEND`, which `splice` refuses). After a batch it appends
//! one index record (time, artifact bytes, bytes read: `refine_protocol_core::capture`).
//!
//! - **The cap** (S10): past it, bytes go to `/dev/null`; the stream is still drained, so the
//!   writer neither blocks nor breaks. The artifact holds exactly the first `cap` bytes.
//! - **A failed write** (`ENOSPC`, `EIO`): the stream is drained into `/dev/null` from then on
//!   and ends as a failure with that errno. A file system that cannot `splice` (`EINVAL`) is
//!   written with `read` and `write` through a small buffer instead.
//! - **The end.** End of file on the pipe ends the stream. Once no process of the scope is left
//!   (`ECHILD`, the cgroup empty) a pipe still open is held by a process outside the scope (a
//!   passed descriptor, X10): what it holds is moved, then the read end is closed, and the
//!   stream ends *held outside*. Each stream's last index record says how it ended, and the
//!   launcher gets a `CaptureEnded` frame, both before the receipt: a receipt on disk means the
//!   capture's end is recorded too.
//! - **Progress**: the bytes read so far go to the launcher at most every
//!   `PROGRESS_EVERY_MS` while bytes flow (its idle deadline and output limit read them); the
//!   last count is sent when that time comes, even if nothing flows by then.
//!
//! Nothing here allocates; the copy buffer of the fallback is on the stack.

use refine_protocol_core::capture::{CaptureEnd, IndexRecord};
use refine_protocol_core::frame::{CaptureEnded, CapturedStream, PROGRESS_EVERY_MS};
use refine_protocol_core::Frame;

use crate::channel::Channel;
use crate::error::Error;
use crate::sys::{self, Errno, OwnedFd};

/// Bytes one `splice` moves at most.
const CHUNK: usize = 1024 * 1024;
/// Pipe buffer asked for (fewer wake-ups, and a writer that rarely waits for the guardian).
const PIPE_SIZE: usize = 1024 * 1024;
/// Moves per stream per wake: a busy stream cannot starve the other or the reaping.
const MOVES_PER_WAKE: usize = 8;
/// Moves of the final drain per stream: two full pipes (what is in it, and what a writer outside
/// the scope adds meanwhile), then the read end is closed.
const FINAL_MOVES: usize = 2 * PIPE_SIZE / CHUNK + 2;
/// The fallback copy's buffer (on the stack).
const COPY_BUF: usize = 4096;

/// One stream drained into its artifact.
struct Stream {
    which: CapturedStream,
    /// The read end; `None` once the stream ended.
    pipe: Option<OwnedFd>,
    file: OwnedFd,
    index: OwnedFd,
    written: u64,
    moved: u64,
    /// The artifact write failed with this errno: drained into `/dev/null` since.
    failed: Option<i32>,
    /// `splice` into the artifact is refused here: read and write instead.
    copy: bool,
    end: Option<CaptureEnd>,
}

/// The workload's stdout and stderr, drained by the guardian.
pub struct Drain {
    streams: [Stream; 2],
    null: OwnedFd,
    cap: Option<u64>,
    /// Bytes read as last reported to the launcher, and when.
    reported: [u64; 2],
    reported_at_ms: u64,
}

/// The workload's side of the pipes, for its stdout and stderr.
pub struct WorkloadEnds {
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Drain {
    /// Makes the pipes for `files` (the stdout and stderr artifacts) and `indexes`.
    pub fn new(
        files: [OwnedFd; 2],
        indexes: [OwnedFd; 2],
        cap: Option<u64>,
    ) -> Result<(Drain, WorkloadEnds), Error> {
        let null = sys::open_dev_null().map_err(Error::Pipe)?;
        let (out_r, out_w) = sys::pipe().map_err(Error::Pipe)?;
        let (err_r, err_w) = sys::pipe().map_err(Error::Pipe)?;
        for fd in [&out_r, &err_r] {
            sys::set_pipe_size(fd, PIPE_SIZE);
            // Only the guardian has the read end's description: nonblocking for the copy path.
            sys::set_nonblocking(fd).map_err(Error::Pipe)?;
        }
        let [out_file, err_file] = files;
        let [out_index, err_index] = indexes;
        let stream = |which, pipe, file, index| Stream {
            which,
            pipe: Some(pipe),
            file,
            index,
            written: 0,
            moved: 0,
            failed: None,
            copy: false,
            end: None,
        };
        Ok((
            Drain {
                streams: [
                    stream(CapturedStream::Stdout, out_r, out_file, out_index),
                    stream(CapturedStream::Stderr, err_r, err_file, err_index),
                ],
                null,
                cap,
                reported: [0; 2],
                reported_at_ms: 0,
            },
            WorkloadEnds {
                stdout: out_w,
                stderr: err_w,
            },
        ))
    }

    /// The poll entries of the streams still open (a skipped entry for an ended one).
    pub fn poll_entries(&self) -> [libc::pollfd; 2] {
        let entry = |s: &Stream| s.pipe.as_ref().map_or(sys::poll_none(), sys::poll_in);
        [entry(&self.streams[0]), entry(&self.streams[1])]
    }

    /// Moves a bounded batch from each stream whose entry is ready.
    pub fn service(&mut self, ready: [bool; 2]) {
        for (s, ready) in self.streams.iter_mut().zip(ready) {
            if ready {
                s.move_batch(MOVES_PER_WAKE, self.cap, &self.null);
            }
        }
    }

    /// The poll timeout (ms) until a progress report is due, if one waits.
    pub fn progress_tick(&self) -> Option<i32> {
        if self.counts() == self.reported {
            return None;
        }
        let due = self.reported_at_ms.saturating_add(PROGRESS_EVERY_MS);
        Some(due.saturating_sub(sys::monotonic_ms()).min(i32::MAX as u64) as i32)
    }

    /// Reports the bytes read so far, if they changed and the last report is old enough.
    pub fn report_progress(&mut self, chan: &mut Channel) {
        let counts = self.counts();
        let now = sys::monotonic_ms();
        if counts == self.reported || now < self.reported_at_ms.saturating_add(PROGRESS_EVERY_MS) {
            return;
        }
        chan.send(&Frame::CaptureProgress {
            stdout: counts[0],
            stderr: counts[1],
        });
        self.reported = counts;
        self.reported_at_ms = now;
    }

    fn counts(&self) -> [u64; 2] {
        [self.streams[0].moved, self.streams[1].moved]
    }

    /// No process of the scope is left: the final drain, then each stream's end, recorded in
    /// its index and sent to the launcher.
    pub fn finish(mut self, chan: &mut Channel) {
        for s in &mut self.streams {
            if s.pipe.is_some() {
                s.move_batch(FINAL_MOVES, self.cap, &self.null);
            }
            if s.pipe.take().is_some() {
                // Still open with every process of the scope gone: a holder outside it.
                s.end = Some(CaptureEnd::HeldOutside);
            }
            let end = s.end.unwrap_or(CaptureEnd::HeldOutside);
            s.record(Some(end));
            chan.send(&Frame::CaptureEnded(CaptureEnded {
                stream: s.which,
                end,
                written: s.written,
                moved: s.moved,
            }));
        }
    }
}

impl Stream {
    /// Up to `moves` moves from the pipe; one index record if anything moved.
    fn move_batch(&mut self, moves: usize, cap: Option<u64>, null: &OwnedFd) {
        let before = self.moved;
        for _ in 0..moves {
            let Some(pipe) = self.pipe.as_ref() else {
                break;
            };
            let room = match (self.failed, cap) {
                (Some(_), _) => 0,
                (None, Some(cap)) => cap.saturating_sub(self.written),
                (None, None) => u64::MAX,
            };
            let moved = if room == 0 {
                // Past the cap or after a failure: drained into nothing.
                sys::splice_out(pipe, null.as_raw(), CHUNK).map(|n| (n, false))
            } else {
                let len = CHUNK.min(usize::try_from(room).unwrap_or(CHUNK));
                let r = if self.copy {
                    copy(pipe, &self.file, len)
                } else {
                    sys::splice_out(pipe, self.file.as_raw(), len)
                };
                match r {
                    Err(Errno(libc::EINVAL)) if !self.copy => {
                        self.copy = true;
                        continue;
                    }
                    r => r.map(|n| (n, true)),
                }
            };
            match moved {
                Ok((0, _)) => {
                    self.pipe = None;
                    self.end = Some(match self.failed {
                        Some(errno) => CaptureEnd::Failed { errno },
                        None => CaptureEnd::Eof,
                    });
                }
                Ok((n, to_file)) => {
                    self.moved += n as u64;
                    if to_file {
                        self.written += n as u64;
                    }
                }
                Err(Errno::AGAIN) => break,
                Err(Errno(errno)) if room > 0 => self.failed = Some(errno),
                // `/dev/null` refused: nothing drains this pipe any more. Closing it is the
                // last resort (its writers then see EPIPE); it never happens on a sane system.
                Err(Errno(errno)) => {
                    self.pipe = None;
                    self.end = Some(CaptureEnd::Failed { errno });
                }
            }
        }
        if self.moved != before {
            self.record(None);
        }
    }

    /// Appends one index record (best effort: the artifact's bytes do not depend on it).
    fn record(&self, end: Option<CaptureEnd>) {
        let rec = IndexRecord {
            at_ns: sys::realtime_ns(),
            offset: self.written,
            moved: self.moved,
            end,
        };
        let _ = sys::write_all(self.index.as_raw(), &rec.encode());
    }
}

/// The fallback for a file system that cannot `splice`: one read into a stack buffer, written
/// whole to the artifact. A failed write loses that buffer's bytes (the stream is failed from
/// then on, as a failed `splice` would have left it).
fn copy(pipe: &OwnedFd, file: &OwnedFd, len: usize) -> Result<usize, Errno> {
    let mut buf = [0u8; COPY_BUF];
    let want = len.min(COPY_BUF);
    let n = sys::read(pipe, &mut buf[..want])?;
    sys::write_all(file.as_raw(), &buf[..n])?;
    Ok(n)
}

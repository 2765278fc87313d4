//! What a capture hands back: how each stream ended ([`StreamState`]), the result
//! ([`CaptureResult`]) and the capture receipt kept beside an incomplete one (S5).

use super::*;
use refine_protocol::record::{StreamFailure, StreamIncomplete};

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

impl Incomplete {
    /// The reason as the capture receipt records it.
    pub(crate) fn to_record(self) -> StreamIncomplete {
        match self {
            Incomplete::MemoryLimit { kept } => StreamIncomplete::MemoryLimit { kept: kept as u64 },
            Incomplete::ArtifactCap { cap } => StreamIncomplete::ArtifactCap { cap },
            Incomplete::DrainEnded { drain } => StreamIncomplete::DrainEnded {
                drain_ms: u64::try_from(drain.as_millis()).unwrap_or(u64::MAX),
            },
            Incomplete::ReaderGone => StreamIncomplete::ReaderGone,
            Incomplete::HeldOutside => StreamIncomplete::HeldOutside,
        }
    }
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

impl CaptureFailure {
    /// The failure as the capture receipt records it.
    pub(crate) fn to_record(self) -> StreamFailure {
        match self {
            CaptureFailure::Read { errno } => StreamFailure::Read { errno },
            CaptureFailure::ArtifactWrite { errno } => StreamFailure::ArtifactWrite { errno },
        }
    }
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
            StreamState::Failed(f) => StreamEnd::CaptureFailure(f.to_record()),
            StreamState::Incomplete(i) => StreamEnd::Incomplete(i.to_record()),
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
    pub(super) kept: Vec<u8>,
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
    pub(super) tail_done: Option<mpsc::Receiver<()>>,
    /// The streams had no artifacts ([`CaptureConfig::artifacts`] off): what was kept is all
    /// there is, and no capture receipt describes them.
    pub memory_only: bool,
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

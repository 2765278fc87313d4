//! The artifact side of a stream: [`Sink`] writes (or splices) what was read into the
//! stream's artifact under its cap, open only while bytes flow.

use super::*;

/// Writes the artifact, honouring the cap. The artifact is open only while its stream has
/// bytes to write: a quiet stream (a detached `sleep`) holds no descriptor for it, which is
/// what lets one service hold thousands of scopes under its descriptor limit.
#[derive(Debug)]
pub(super) struct Sink {
    /// Open while bytes are flowing; reopened (append) for the next ones.
    pub(super) file: Option<File>,
    pub(super) path: PathBuf,
    /// Whether the artifact exists: it is created by the first byte (F3: an empty stream
    /// leaves no file), and appended to after that.
    pub(super) created: bool,
    /// The artifact opened without `O_APPEND` (which `splice` refuses), written at `written`.
    pub(super) splice_file: Option<File>,
    /// `splice` failed in a way that says it never will here: read and write from now on.
    pub(super) splice_broken: bool,
    /// A pipe of the capture's own between the workload's pipe and the artifact (read end,
    /// write end), open while bytes are flowing; see [`Sink::splice_from`].
    pub(super) relay: Option<(OwnedFd, OwnedFd)>,
    pub(super) written: u64,
    pub(super) cap: Option<u64>,
    pub(super) capped: bool,
    pub(super) failed: Option<i32>,
    /// No artifact at all ([`CaptureConfig::artifacts`] off): every write is dropped.
    pub(super) off: bool,
}

impl Sink {
    pub(super) fn write(&mut self, bytes: &[u8]) {
        if self.off || self.capped || self.failed.is_some() {
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
    pub(super) fn open(&mut self) -> io::Result<File> {
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
    pub(super) fn splice_from(
        &mut self,
        pipe: BorrowedFd<'_>,
        max: usize,
    ) -> Option<Result<usize, Errno>> {
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
    pub(super) fn idle(&mut self) {
        self.file = None;
        self.splice_file = None;
        self.relay = None;
    }
}

/// Writes all of `bytes` to a blocking descriptor; false on an error.
pub(super) fn write_all_fd(fd: &OwnedFd, mut bytes: &[u8]) -> bool {
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
pub(super) fn read_prefix(path: &Path, max: u64) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    if let Ok(f) = File::open(path) {
        let _ = f.take(max).read_to_end(&mut out);
    }
    out
}

/// The artifact [`open_artifact`] created, opened again to append the next bytes.
pub(super) fn reopen_artifact(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

//! Bounded `flock(2)` fences: the per-registration lock (the registration record itself, see
//! [`crate::store::registry`]) and the runtime stop fence (`locks/stop.lock`).
//!
//! A lock's file is created once and never deleted or replaced while its registration exists,
//! so every waiter and every new consumer locks the same inode (R2). Acquisition is bounded: it polls
//! `LOCK_NB` until the deadline, then fails with [`FenceError::Timeout`].
//!
//! # Caveats
//! `flock` locks belong to the open file description: a lock taken here is released when the
//! [`Fence`] is dropped, or when the process dies (so a SIGKILLed holder never wedges a fence).
//! Two `Fence`s in one process on the same file exclude each other, as they open separately.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{flock, FlockOperation};

/// A held lock; released on drop.
#[derive(Debug)]
pub struct Fence {
    _file: File,
    path: PathBuf,
}

impl Fence {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A second descriptor of this lock (the same open file description, close-on-exec): the
    /// lock is held while either is open, so another process may hold it on this one's behalf
    /// (a guardian for its launcher, L3).
    pub fn share(&self) -> io::Result<std::os::fd::OwnedFd> {
        self._file.try_clone().map(Into::into)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error("timed out after {waited:?} waiting for lock {path}")]
    Timeout { path: PathBuf, waited: Duration },
    #[error("cannot open lock {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot lock {path}")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Takes an exclusive lock on `path` (created if missing, never truncated), waiting at most `wait`.
pub fn acquire(path: &Path, wait: Duration) -> Result<Fence, FenceError> {
    let file = crate::store::durable::open_private(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
        path,
    )
    .map_err(|source| FenceError::Open {
        path: path.to_owned(),
        source,
    })?;
    lock_bounded(file, path, wait)
}

/// [`acquire`] on a file already open (a folder, opened read-only): the lock is `flock`'s on
/// that open file.
pub fn acquire_open(file: File, path: &Path, wait: Duration) -> Result<Fence, FenceError> {
    lock_bounded(file, path, wait)
}

/// Polls `LOCK_NB` on `file` until it is ours or `wait` has passed.
fn lock_bounded(file: File, path: &Path, wait: Duration) -> Result<Fence, FenceError> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                return Ok(Fence {
                    _file: file,
                    path: path.to_owned(),
                })
            }
            Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                return Err(FenceError::Lock {
                    path: path.to_owned(),
                    source: e.into(),
                })
            }
        }
        let waited = start.elapsed();
        if waited >= wait {
            return Err(FenceError::Timeout {
                path: path.to_owned(),
                waited,
            });
        }
        std::thread::sleep(pause.min(wait - waited));
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// A lock this process just took on `file` (a fresh registration record, locked before it has a
/// name: nobody else can contend for it yet).
pub(crate) fn adopt(file: File, path: &Path) -> Result<Fence, FenceError> {
    flock(&file, FlockOperation::NonBlockingLockExclusive).map_err(|e| FenceError::Lock {
        path: path.to_owned(),
        source: e.into(),
    })?;
    Ok(Fence {
        _file: file,
        path: path.to_owned(),
    })
}

/// Takes an exclusive lock on the first of `names` that exists (names of one file: nothing is
/// created), waiting at most `wait`; [`FenceError::Open`] with `NotFound` when none exists.
pub(crate) fn acquire_existing(names: &[PathBuf], wait: Duration) -> Result<Fence, FenceError> {
    let mut last = None;
    for path in names {
        match File::open(path) {
            Ok(file) => return lock_bounded(file, path, wait),
            Err(e) if e.kind() == io::ErrorKind::NotFound => last = Some((path, e)),
            Err(source) => {
                return Err(FenceError::Open {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    }
    let (path, source) = last.map_or_else(
        || (PathBuf::new(), io::Error::from(io::ErrorKind::NotFound)),
        |(p, e)| (p.to_owned(), e),
    );
    Err(FenceError::Open { path, source })
}

/// Takes the lock only if it is free now.
pub fn try_acquire(path: &Path) -> Result<Option<Fence>, FenceError> {
    match acquire(path, Duration::ZERO) {
        Ok(f) => Ok(Some(f)),
        Err(FenceError::Timeout { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_and_releases() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let held = acquire(&p, Duration::from_secs(1)).unwrap();
        assert!(try_acquire(&p).unwrap().is_none());
        assert!(matches!(
            acquire(&p, Duration::from_millis(20)),
            Err(FenceError::Timeout { .. })
        ));
        drop(held);
        assert!(try_acquire(&p).unwrap().is_some());
    }

    #[test]
    fn a_shared_descriptor_holds_the_lock_after_the_fence_goes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let held = acquire(&p, Duration::from_secs(1)).unwrap();
        let shared = held.share().unwrap();
        drop(held);
        assert!(try_acquire(&p).unwrap().is_none());
        drop(shared);
        assert!(try_acquire(&p).unwrap().is_some());
    }
}

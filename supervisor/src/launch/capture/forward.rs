//! [`Forward`]: a stream copied to `run`'s own stdout or stderr as it is read, at the reader's
//! pace, without ever blocking the engine (see the parent module's caveats for how each kind of
//! destination is written).

use super::*;

/// How a [`Forward`] writes without ever blocking the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ForwardMode {
    /// A private nonblocking description of a pipe or terminal: `EAGAIN` means "full".
    NonBlocking,
    /// A socket, written with `MSG_DONTWAIT`.
    Socket,
    /// A file or device that never waits on a reader: written blocking.
    Blocking,
    /// The reader was already gone when the forward was made.
    Broken,
}

/// A destination a stream is copied to as it is read (`run`'s own stdout or stderr).
#[derive(Debug)]
pub struct Forward {
    pub(super) fd: OwnedFd,
    mode: ForwardMode,
}

impl Forward {
    /// A forward to `target`, which keeps its own file status flags: a pipe or terminal is
    /// reopened through `/proc/self/fd` as a private nonblocking description.
    pub fn new(target: BorrowedFd<'_>) -> Result<Self, CaptureError> {
        use rustix::fs::{FileType, Mode, OFlags};
        let stat = rustix::fs::fstat(target).map_err(fd_err("stat a forward"))?;
        let dup =
            || rustix::io::fcntl_dupfd_cloexec(target, 3).map_err(fd_err("duplicate a forward"));
        let kind = FileType::from_raw_mode(stat.st_mode);
        let reopen = kind == FileType::Fifo
            || (kind == FileType::CharacterDevice && rustix::termios::isatty(target));
        if kind == FileType::Socket {
            return Ok(Forward {
                fd: dup()?,
                mode: ForwardMode::Socket,
            });
        }
        if reopen {
            let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&target));
            let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
            match rustix::fs::open(path.as_str(), flags, Mode::empty()) {
                Ok(fd) => {
                    return Ok(Forward {
                        fd,
                        mode: ForwardMode::NonBlocking,
                    })
                }
                // A FIFO without readers: the reader is already gone.
                Err(Errno::NXIO) => {
                    return Ok(Forward {
                        fd: dup()?,
                        mode: ForwardMode::Broken,
                    })
                }
                Err(_) => {}
            }
        }
        Ok(Forward {
            fd: dup()?,
            mode: ForwardMode::Blocking,
        })
    }

    /// Writes what the destination takes now: `Ok(0)` when it is full.
    pub(super) fn write(&self, bytes: &[u8]) -> Result<usize, Errno> {
        let r = match self.mode {
            ForwardMode::Broken => Err(Errno::PIPE),
            ForwardMode::Socket => rustix::net::send(
                &self.fd,
                bytes,
                rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
            ),
            ForwardMode::NonBlocking | ForwardMode::Blocking => rustix::io::write(&self.fd, bytes),
        };
        match r {
            Err(Errno::AGAIN) => Ok(0),
            r => r,
        }
    }
}

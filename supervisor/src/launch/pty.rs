//! Pseudo-terminals for `terminal` launches: `posix_openpt` + `grantpt` + `unlockpt` + open the
//! slave by its `ptsname` (what `openpty(3)` does), the window size (`TIOCSWINSZ`) at launch and on
//! resize, and writing input to the master.
//!
//! The slave goes to the guardian (which makes it the workload's controlling terminal in a new
//! session); this process keeps only the master. Capture reads the master like a pipe, except that
//! a closed slave reads as `EIO` (see [`crate::launch::capture`]).
//!
//! # Caveats
//! - The master is shared with capture, which makes it nonblocking; [`write_input`] therefore
//!   waits for writability itself, bounded by a timeout, instead of blocking forever when the
//!   workload does not read its terminal.
//! - The slave must not stay open in this process after the launch, or the master never sees
//!   the slave close.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;

/// A terminal window size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    pub rows: u16,
    pub cols: u16,
}

impl Default for WindowSize {
    fn default() -> Self {
        WindowSize { rows: 24, cols: 80 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    #[error("cannot {op} the pseudo-terminal")]
    Sys {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("terminal input not accepted within {0:?}")]
    InputTimeout(Duration),
}

fn sys(op: &'static str) -> impl FnOnce(Errno) -> PtyError {
    move |e| PtyError::Sys {
        op,
        source: e.into(),
    }
}

/// Both ends of a new pseudo-terminal.
#[derive(Debug)]
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Opens a pseudo-terminal pair (both ends close-on-exec, no controlling-terminal side effects on
/// this process) with the given window size.
#[doc(alias = "openpty")]
pub fn open(size: WindowSize) -> Result<Pty, PtyError> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
            .map_err(sys("open"))?;
    rustix::pty::grantpt(&master).map_err(sys("grant"))?;
    rustix::pty::unlockpt(&master).map_err(sys("unlock"))?;
    let name = rustix::pty::ptsname(&master, Vec::new()).map_err(sys("name"))?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(sys("open the slave of"))?;
    resize(master.as_fd(), size)?;
    Ok(Pty { master, slave })
}

/// Gives the terminal (its slave) to the user a workload runs as (X1), as `login` and `sshd`
/// do: it may then reopen it by name (prompts and pagers do).
pub(crate) fn give_to(slave: &OwnedFd, uid: u32, gid: u32) -> Result<(), PtyError> {
    rustix::fs::fchown(
        slave,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    )
    .map_err(sys("give the workload's user"))
}

/// Sets the window size; the kernel sends `SIGWINCH` to the terminal's foreground group.
#[doc(alias = "TIOCSWINSZ")]
pub fn resize(master: BorrowedFd<'_>, size: WindowSize) -> Result<(), PtyError> {
    rustix::termios::tcsetwinsize(
        master,
        Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )
    .map_err(sys("resize"))
}

/// The current window size.
#[doc(alias = "TIOCGWINSZ")]
pub fn window_size(master: BorrowedFd<'_>) -> Result<WindowSize, PtyError> {
    let w = rustix::termios::tcgetwinsize(master).map_err(sys("read the size of"))?;
    Ok(WindowSize {
        rows: w.ws_row,
        cols: w.ws_col,
    })
}

/// Writes all of `bytes` to the master (the workload reads them as terminal input), or to a
/// nonblocking stdin pipe, waiting at most `timeout` (`None`: as long as it takes) for the
/// workload to accept them.
pub fn write_input(
    master: BorrowedFd<'_>,
    mut bytes: &[u8],
    timeout: Option<Duration>,
) -> Result<(), PtyError> {
    let end = timeout.map(|t| Instant::now() + t);
    while !bytes.is_empty() {
        match rustix::io::write(master, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => {
                let left = end.map(|end| end.saturating_duration_since(Instant::now()));
                if let (Some(left), Some(timeout)) = (left, timeout) {
                    if left.is_zero() {
                        return Err(PtyError::InputTimeout(timeout));
                    }
                }
                let mut fds = [PollFd::from_borrowed_fd(master, PollFlags::OUT)];
                let ts = left.map(|left| Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: left.subsec_nanos() as i64,
                });
                match rustix::event::poll(&mut fds, ts.as_ref()) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return Err(sys("wait to write to")(e)),
                }
            }
            Err(e) => return Err(sys("write to")(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_resize_and_echo() {
        let pty = open(WindowSize {
            rows: 30,
            cols: 100,
        })
        .unwrap();
        assert_eq!(
            window_size(pty.slave.as_fd()).unwrap(),
            WindowSize {
                rows: 30,
                cols: 100
            }
        );
        resize(
            pty.master.as_fd(),
            WindowSize {
                rows: 40,
                cols: 120,
            },
        )
        .unwrap();
        assert_eq!(
            window_size(pty.slave.as_fd()).unwrap(),
            WindowSize {
                rows: 40,
                cols: 120
            }
        );
        write_input(pty.master.as_fd(), b"hi\n", Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&pty.slave, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hi\n");
    }
}

/// The operator's own terminal in raw mode while an interactive `terminal` launch runs: every key
/// (Ctrl-C included) reaches the workload's terminal as typed, and the workload's terminal does
/// the echoing and line editing. The saved settings come back on drop, on every return path.
#[derive(Debug)]
pub struct RawMode {
    fd: OwnedFd,
    saved: rustix::termios::Termios,
}

impl RawMode {
    /// Switches the terminal on `fd` to raw mode.
    pub fn enter(fd: BorrowedFd<'_>) -> Result<Self, PtyError> {
        let fd = rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(sys("duplicate"))?;
        let saved = rustix::termios::tcgetattr(&fd).map_err(sys("read the settings of"))?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(&fd, rustix::termios::OptionalActions::Now, &raw)
            .map_err(sys("set raw mode on"))?;
        Ok(RawMode { fd, saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            &self.fd,
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

//! The [`Reader`]: `/proc` reads for scans that read many `stat` and `children` files, with no
//! allocation per read and, given room, descriptors kept open across scans (see the parent
//! module's caveats for why a kept descriptor is as identity-safe as a fresh open).

use super::*;

/// Reads per-process files for a scan: opened with `openat` relative to one `/proc` descriptor,
/// the relative path formatted on the stack, read into one reused buffer, so that a read costs
/// `openat`, `read` and `close` and no allocation. Answers exactly as [`stat`] and [`children`].
///
/// With room ([`Reader::set_room`]) it keeps, per pid, the `stat` descriptor it opened and (for a
/// single-threaded process) the `task/<pid>/children` one, and re-reads them with `pread` from
/// offset 0 on the next call for that pid: one scan after another of the same tree then costs a
/// `pread` per file. See the module's caveats for why that is as identity-safe as a fresh open.
/// Dropping the reader closes them.
pub struct Reader {
    proc: OwnedFd,
    buf: Vec<u8>,
    /// Descriptors kept open, by pid.
    kept: HashMap<i32, Kept>,
    /// Descriptors that may still be opened and kept: by this reader, or by its caller through
    /// [`Reader::take_room`], which has priority.
    room: usize,
}

/// A process's kept descriptors: its `stat`, and its main thread's `children` once read.
struct Kept {
    stat: OwnedFd,
    children: Option<OwnedFd>,
}

impl Kept {
    fn fds(&self) -> usize {
        1 + usize::from(self.children.is_some())
    }
}

/// A read of a `stat` or `children` file that returns fewer bytes than asked, and fewer than
/// this, returned the whole rest of the file: both are seq_files, whose read hands out at most
/// one kernel buffer (a page, or more for a record that needs it) per call and stops short of
/// that only at the end of the records or where the next record would not fit. A stat is one
/// record; a children record is one pid and a space (at most 11 bytes). So the read that would
/// return 0 is skipped: one syscall instead of two per file and scan.
const SEQ_COMPLETE_BELOW: usize = 4096 - 64;

/// Reads a whole `/proc` file (`stat`, `children`) from offset 0 into `buf` (which only grows);
/// returns its length.
fn pread_all(fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() + 4096, 0);
        }
        let asked = buf.len() - len;
        let n = rustix::io::pread(fd, &mut buf[len..], len as u64)?;
        len += n;
        if n == 0 || (n < asked && n < SEQ_COMPLETE_BELOW) {
            return Ok(len);
        }
    }
}

/// What a read through a [`Reader`] went to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Stat,
    /// `task/<pid>/children` (the main thread's).
    Children,
}

impl Reader {
    pub fn new() -> Result<Reader, ProcfsError> {
        use rustix::fs::{Mode, OFlags};
        let proc = rustix::fs::open(
            "/proc",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| ProcfsError::Io {
            op: "open",
            path: PathBuf::from("/proc"),
            source: e.into(),
        })?;
        Ok(Reader {
            proc,
            buf: Vec::with_capacity(4096),
            kept: HashMap::new(),
            room: 0,
        })
    }

    /// Sets how many more descriptors may be opened and kept, beside those kept already
    /// ([`Reader::kept`]); 0 (the default) keeps nothing more.
    pub fn set_room(&mut self, room: usize) {
        self.room = room;
    }

    /// Descriptors kept open now.
    pub fn kept(&self) -> usize {
        self.kept.values().map(Kept::fds).sum()
    }

    /// Takes one descriptor of the room for the caller (a pidfd), closing kept descriptors when
    /// there is no room otherwise: the caller's descriptors come first. `false`: none left.
    pub fn take_room(&mut self) -> bool {
        if self.room == 0 {
            if let Some(&pid) = self.kept.keys().next() {
                self.forget(pid);
            }
        }
        if self.room == 0 {
            return false;
        }
        self.room -= 1;
        true
    }

    /// Closes the descriptors kept for `pid`, returning them to the room.
    fn forget(&mut self, pid: i32) {
        if let Some(k) = self.kept.remove(&pid) {
            self.room += k.fds();
        }
    }

    /// Reads `/proc/<pid>/stat` or `/proc/<pid>/task/<pid>/children` into the buffer: through
    /// the descriptor kept for it, else opened now (and kept while there is room).
    fn read(&mut self, pid: Pid, leaf: Leaf) -> io::Result<&[u8]> {
        use rustix::fs::{Mode, OFlags};
        use std::io::Write;
        let key = pid.as_raw_nonzero().get();
        if let Some(k) = self.kept.get(&key) {
            let fd = match leaf {
                Leaf::Stat => Some(k.stat.as_fd()),
                Leaf::Children => k.children.as_ref().map(|c| c.as_fd()),
            };
            if let Some(fd) = fd {
                match pread_all(fd, &mut self.buf) {
                    Ok(len) => return Ok(&self.buf[..len]),
                    // The process it was opened for is gone: the pid may name another by now.
                    // Both of its files go (the children one is only used beside a live stat).
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => self.forget(key),
                    Err(e) => return Err(e),
                }
            }
        }
        let mut path = [0u8; 64];
        let mut w = &mut path[..];
        match leaf {
            Leaf::Stat => write!(w, "{}/stat", pid.as_raw_nonzero())?,
            Leaf::Children => write!(
                w,
                "{}/task/{}/children",
                pid.as_raw_nonzero(),
                pid.as_raw_nonzero()
            )?,
        }
        let len = 64 - w.len();
        let path = std::str::from_utf8(&path[..len]).map_err(io::Error::other)?;
        let fd = rustix::fs::openat(
            &self.proc,
            path,
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let len = pread_all(fd.as_fd(), &mut self.buf)?;
        // Kept: a stat always (it is what later reads check the process against); a children
        // file only beside the stat kept for the same pid (read before it in this scan).
        if self.room > 0 {
            match (leaf, self.kept.get_mut(&key)) {
                (Leaf::Stat, None) => {
                    self.room -= 1;
                    self.kept.insert(
                        key,
                        Kept {
                            stat: fd,
                            children: None,
                        },
                    );
                }
                (Leaf::Children, Some(k)) if k.children.is_none() => {
                    self.room -= 1;
                    k.children = Some(fd);
                }
                _ => {}
            }
        }
        Ok(&self.buf[..len])
    }

    /// [`stat`], read through this reader.
    pub fn stat(&mut self, pid: Pid) -> Result<Stat, ProcfsError> {
        let text = match self.read(pid, Leaf::Stat) {
            Ok(text) => text,
            Err(e) => return Err(classify(pid, "read", &proc_path(pid, "stat"), e)),
        };
        let mut s = parse_stat_bytes(pid, text).ok_or_else(|| ProcfsError::Malformed {
            path: proc_path(pid, "stat"),
            field: "stat",
        })?;
        zombie_leader(&mut s);
        Ok(s)
    }

    /// [`stat_of`], read through this reader.
    pub fn stat_of(&mut self, w: &ProcessWitness) -> Result<Option<Stat>, ProcfsError> {
        let Some(pid) = pid_of(w) else {
            return Ok(None);
        };
        match self.stat(pid) {
            Ok(s) if s.matches(w) => Ok(Some(s)),
            Ok(_) => Ok(None),
            Err(e) if e.is_vanished() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`children`], read through this reader, appended to `out`. `threads` is the process's
    /// thread count from a stat read before (through this reader): a single-threaded process's
    /// children are read from `task/<pid>/children` directly, without listing its tasks. (A
    /// thread started after that stat was read can only have forked after it too: the caller's
    /// next scan sees that child, exactly as it sees a child forked after this read.)
    pub fn children(
        &mut self,
        pid: Pid,
        threads: u32,
        out: &mut Vec<Pid>,
    ) -> Result<Option<()>, ProcfsError> {
        if threads != 1 {
            return Ok(children(pid)?.map(|kids| out.extend(kids)));
        }
        let text = match self.read(pid, Leaf::Children) {
            Ok(text) => text,
            // Gone, or no CONFIG_PROC_CHILDREN: the general path tells them apart.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(children(pid)?.map(|kids| out.extend(kids)))
            }
            Err(e) => return Err(classify(pid, "read", &proc_path(pid, "task"), e)),
        };
        let start = out.len();
        for word in text
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
        {
            let child = std::str::from_utf8(word)
                .ok()
                .and_then(|w| w.parse::<i32>().ok())
                .and_then(Pid::from_raw);
            match child {
                Some(c) => out.push(c),
                None => {
                    out.truncate(start);
                    return Err(ProcfsError::Malformed {
                        path: proc_path(pid, "task"),
                        field: "children",
                    });
                }
            }
        }
        Ok(Some(()))
    }
}

//! Nested guardians (SPEC T5, D4): a managed command that itself launches through a guardian
//! leaves a guardian inside the outer scope. The outer stop must not kill it: it reaps its own
//! (already killed) scope, writes its receipt and exits, and only then is the nested
//! registration `exited` instead of `unverified`.
//!
//! A nested guardian is recognised by what its executable is: the identity every
//! `refine-guardian` build carries in its `.refine.guardian` section (`refine_protocol::mark`),
//! read from `/proc/PID/exe` through its ELF section headers with bounded reads (a few KiB,
//! whatever the file's size). Another copy, version or path of the guardian carries it too; a
//! process that only takes the guardian's name (`comm`) does not.
//!
//! A guardian's gated child (its own, or a nested guardian's) runs the guardian's executable
//! until it execs the workload: it is told apart by `PF_FORKNOEXEC` (set by `fork`, cleared by
//! `execve`) and killed like any member. Spared and resumed, it would execute the workload it was
//! stopped before, in the middle of the stop.
//!
//! # Caveats
//! The mark is a claim, not a proof: any file can contain the bytes. Recognition therefore buys
//! no exemption: the stop kills every other member first, resumes a recognised guardian and
//! gives it a bounded time (half the remaining budget) to exit by itself, then kills it like any
//! member. A fake gains at most that wait; a real one ends with its receipt.
//!
//! A guardian is not dumpable (G13), so only a stopper with `CAP_SYS_PTRACE` (root) can open its
//! `/proc/PID/exe`. Without it the rule falls back to the outer guardian's command name (a
//! workload can take that name, and gains the same bounded wait, nothing more).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use refine_protocol::mark;
use refine_protocol::ProcessWitness;
use rustix::fs::{AtFlags, StatxFlags};
use rustix::process::Pid;

use crate::kernel::procfs;

/// The longest a stop spends recognising nested guardians (within its own budget): members not
/// recognised by then are taken for ordinary members.
pub const RECOGNITION_BOUND: Duration = Duration::from_millis(250);
/// A reader that has not answered for this long is taken for stuck (its file is served by a
/// stopped process): the next member goes to another reader.
const STUCK_AFTER: Duration = Duration::from_millis(10);
/// At most this many readers per stop (each one stuck holds one executable).
const MAX_READERS: usize = 8;

/// Recognises nested guardians among the members of one scope (one stop attempt).
pub struct NestedGuardians {
    /// The outer guardian (alive throughout a stop: it is never signalled).
    outer: ProcessWitness,
    /// Its command name, read when first needed: the fallback when an executable cannot be
    /// opened (a stop that can open every member's executable never reads it).
    outer_comm: Option<Option<String>>,
    /// Whether an executable, by `(st_dev, st_ino)`, carries the mark (`None`: a reader is on
    /// it): a scope of a thousand `sleep`s costs one section read. Shared with the readers.
    seen: Arc<Mutex<Seen>>,
}

#[derive(Default)]
struct Seen {
    marks: HashMap<(u64, u64), Option<bool>>,
    /// Members waiting for a reader that is on their executable: (index, executable).
    waiting: Vec<(usize, (u64, u64))>,
}

/// What a reader found for member `index`.
enum Found {
    /// Its executable carries the mark, or not.
    Marked(usize, bool),
    /// Its executable cannot be opened (not dumpable, gone): the command-name rule decides.
    Unknown(usize),
}

fn seen(m: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl NestedGuardians {
    /// For the scope of the guardian `outer`.
    pub fn like(outer: ProcessWitness) -> NestedGuardians {
        NestedGuardians {
            outer,
            outer_comm: None,
            seen: Arc::default(),
        }
    }

    /// Which of `pids` (stopped or frozen members) are nested guardians: each has exec'd since
    /// its fork, and its executable carries the guardian's mark (or, when the executable cannot
    /// be opened, it has the outer guardian's name). Returned as their indices in `pids`.
    ///
    /// X9: no file is touched on the calling thread. An executable may be served by a process
    /// of the very scope being stopped (FUSE, NFS), which is frozen or stopped now: `stat` or
    /// `open` of it would wait for ever. Readers on threads of their own do it, each on one
    /// member at a time; a reader silent for [`STUCK_AFTER`] is left behind and another takes the
    /// next member, and whatever has no answer by `until` is not a guardian (it is killed like
    /// any member). A reader left behind ends when its file answers or fails (the serving
    /// process is killed by this stop); its answer then goes nowhere.
    pub(crate) fn recognise(&mut self, pids: &[Pid], until: Instant) -> Vec<usize> {
        if pids.is_empty() {
            return Vec::new();
        }
        let queue: Arc<Mutex<VecDeque<(usize, Pid)>>> =
            Arc::new(Mutex::new(pids.iter().copied().enumerate().collect()));
        let (tx, rx) = mpsc::channel();
        let spawn = |readers: &mut usize| {
            let (queue, seen, tx) = (queue.clone(), self.seen.clone(), tx.clone());
            let spawned = std::thread::Builder::new()
                .name("refine-exe-reader".into())
                .spawn(move || read_marks(&queue, &seen, &tx));
            if spawned.is_ok() {
                *readers += 1;
            }
        };
        let mut readers = 0;
        spawn(&mut readers);
        let mut answered: Vec<Option<Found>> = (0..pids.len()).map(|_| None).collect();
        let mut left = pids.len();
        while left > 0 {
            let now = Instant::now();
            if now >= until {
                break;
            }
            match rx.recv_timeout(STUCK_AFTER.min(until - now)) {
                Ok(found) => {
                    let i = match found {
                        Found::Marked(i, _) | Found::Unknown(i) => i,
                    };
                    if answered[i].is_none() {
                        left -= 1;
                    }
                    answered[i] = Some(found);
                }
                // Silent: a reader may be stuck on a served file; another takes the next member.
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let pending = !queue.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
                    if (pending || readers == 0) && readers < MAX_READERS {
                        spawn(&mut readers);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // Nothing more is read: members still queued are not guardians.
        queue.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let mut out = Vec::new();
        for (i, found) in answered.into_iter().enumerate() {
            let marked = match found {
                None | Some(Found::Marked(_, false)) => continue,
                Some(Found::Marked(_, true)) => true,
                Some(Found::Unknown(_)) => self.has_outer_name(pids[i]),
            };
            if marked && exec_d(pids[i]) {
                out.push(i);
            }
        }
        out
    }

    /// Whether `pid` has the outer guardian's command name (both read from `/proc`).
    fn has_outer_name(&mut self, pid: Pid) -> bool {
        let outer = self.outer;
        let outer = self.outer_comm.get_or_insert_with(|| {
            procfs::pid_of(&outer).and_then(|p| procfs::comm(p).ok().flatten())
        });
        let Some(outer) = outer.as_deref() else {
            return false;
        };
        procfs::comm(pid).ok().flatten().is_some_and(|c| c == outer)
    }
}

/// One reader: takes members off `queue` until it is empty; for each, the identity of its
/// executable (`statx` that asks the file system nothing, `AT_STATX_DONT_SYNC`), then, once per
/// executable, whether it carries the mark. No lock is held while a file is read.
fn read_marks(
    queue: &Mutex<VecDeque<(usize, Pid)>>,
    seen_by: &Mutex<Seen>,
    tx: &mpsc::Sender<Found>,
) {
    loop {
        let Some((i, pid)) = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front() else {
            return;
        };
        let exe = format!("/proc/{}/exe", pid.as_raw_nonzero());
        let key = match rustix::fs::statx(
            rustix::fs::CWD,
            exe.as_str(),
            AtFlags::STATX_DONT_SYNC,
            StatxFlags::INO,
        ) {
            Ok(st) => (
                rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
                st.stx_ino,
            ),
            Err(_) => {
                let _ = tx.send(Found::Unknown(i));
                continue;
            }
        };
        {
            let mut s = seen(seen_by);
            match s.marks.get(&key) {
                Some(Some(marked)) => {
                    let _ = tx.send(Found::Marked(i, *marked));
                    continue;
                }
                Some(None) => {
                    s.waiting.push((i, key));
                    continue;
                }
                None => {
                    s.marks.insert(key, None);
                }
            }
        }
        let marked = File::open(&exe).map(|f| carries_mark(&f));
        let mut s = seen(seen_by);
        let answer = |j| match marked {
            Ok(m) => Found::Marked(j, m),
            Err(_) => Found::Unknown(j),
        };
        match marked {
            Ok(m) => {
                s.marks.insert(key, Some(m));
            }
            // Not opened (not dumpable): each member is decided by its name; the next one
            // with this executable tries again.
            Err(_) => {
                s.marks.remove(&key);
            }
        }
        let _ = tx.send(answer(i));
        let mut waiting = std::mem::take(&mut s.waiting);
        waiting.retain(|&(j, k)| {
            if k == key {
                let _ = tx.send(answer(j));
                false
            } else {
                true
            }
        });
        s.waiting = waiting;
    }
}

/// Whether the process has called `execve` since it was forked: `PF_FORKNOEXEC` (0x40) is clear
/// in the flags of `/proc/PID/stat` (field 9). `false` when it cannot be read (gone).
fn exec_d(pid: Pid) -> bool {
    const PF_FORKNOEXEC: u64 = 0x40;
    let Ok(text) = crate::kernel::procfs::read_pseudo_string(
        format!("/proc/{}/stat", pid.as_raw_nonzero()).as_ref(),
    ) else {
        return false;
    };
    // Field 9 is the 7th after the `)` that closes the command name (fields 3..).
    text.rfind(')')
        .and_then(|close| text[close + 1..].split_ascii_whitespace().nth(6))
        .and_then(|flags| flags.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_FORKNOEXEC == 0)
}

/// At most this many section headers are read (a guardian has about twenty).
const MAX_SECTIONS: usize = 128;
/// At most this many bytes of section names are read.
const MAX_NAMES: u64 = 4096;
/// The size of an ELF64 header and of one ELF64 section header.
const EHDR_LEN: usize = 64;
const SHDR_LEN: usize = 64;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read_at(file: &File, offset: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// Whether the ELF64 little-endian executable `file` has a `.refine.guardian` section holding
/// the mark. Every read is bounded: the header, at most [`MAX_SECTIONS`] section headers, at most
/// [`MAX_NAMES`] bytes of names and the mark itself; anything malformed is "no".
pub(crate) fn carries_mark(file: &File) -> bool {
    section(file, mark::SECTION, mark::MARK_LEN).is_some_and(|m| mark::is_mark(&m))
}

/// The contents of the ELF64 little-endian executable `file`'s section `name`, when it is
/// exactly `len` bytes long. Every read is bounded: the header, at most [`MAX_SECTIONS`]
/// section headers, at most [`MAX_NAMES`] bytes of names and the section itself; anything
/// malformed is `None`. (The guardian's provenance, V1, is read the same way.)
pub(crate) fn section(file: &File, name: &str, len: usize) -> Option<Vec<u8>> {
    let eh = read_at(file, 0, EHDR_LEN)?;
    // Magic, ELFCLASS64, ELFDATA2LSB.
    if eh[..4] != *b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let shoff = u64_at(&eh, 0x28)?;
    let shentsize = usize::from(u16_at(&eh, 0x3a)?);
    let shnum = usize::from(u16_at(&eh, 0x3c)?);
    let shstrndx = usize::from(u16_at(&eh, 0x3e)?);
    if shentsize != SHDR_LEN || shnum == 0 || shnum > MAX_SECTIONS || shstrndx >= shnum {
        return None;
    }
    let sh = read_at(file, shoff, shnum * SHDR_LEN)?;
    let header = |i: usize| sh.get(i * SHDR_LEN..(i + 1) * SHDR_LEN);
    // sh_name at 0, sh_offset at 0x18, sh_size at 0x20.
    let names = header(shstrndx)?;
    let names_size = u64_at(names, 0x20)?;
    if names_size > MAX_NAMES {
        return None;
    }
    let names = read_at(
        file,
        u64_at(names, 0x18)?,
        usize::try_from(names_size).ok()?,
    )?;
    let wanted = name.as_bytes();
    (0..shnum).find_map(|i| {
        let h = header(i)?;
        let at = usize::try_from(u32_at(h, 0)?).ok()?;
        let name = names.get(at..)?;
        let end = name.iter().position(|&b| b == 0)?;
        if &name[..end] != wanted {
            return None;
        }
        let size = u64_at(h, 0x20)?;
        if size != len as u64 {
            return None;
        }
        read_at(file, u64_at(h, 0x18)?, len)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executable_without_the_section_carries_no_mark() {
        let file = File::open("/proc/self/exe").expect("own executable");
        assert!(!carries_mark(&file));
        let file = File::open("/dev/null").expect("/dev/null");
        assert!(!carries_mark(&file));
    }
}

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

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};

use refine_protocol::mark;
use refine_protocol::ProcessWitness;
use rustix::process::Pid;

use crate::kernel::procfs::{self, Comm};

/// Recognises nested guardians among the members of one scope (one stop attempt).
pub struct NestedGuardians {
    /// The outer guardian (alive throughout a stop: it is never signalled).
    outer: ProcessWitness,
    /// Its command name, read when first needed: the fallback when an executable cannot be
    /// opened (a stop that can open every member's executable never reads it).
    outer_comm: Option<Option<String>>,
    /// Whether an executable, by `(st_dev, st_ino)`, carries the mark: a scope of a thousand
    /// `sleep`s costs one section read.
    seen: HashMap<(u64, u64), bool>,
}

impl NestedGuardians {
    /// For the scope of the guardian `outer`.
    pub fn like(outer: ProcessWitness) -> NestedGuardians {
        NestedGuardians {
            outer,
            outer_comm: None,
            seen: HashMap::new(),
        }
    }

    /// Whether `pid` can be a nested guardian at all: `false` when its executable can be
    /// stat'ed and does not carry the mark. A member for which this is `false` needs no
    /// `/proc/PID/stat` read: [`NestedGuardians::is_one`] would say `false` too.
    pub(crate) fn may_be_one(&mut self, pid: Pid) -> bool {
        self.marked_exe(pid).unwrap_or(true)
    }

    /// Whether the (stopped) member `witness`, whose command name the last scan read as
    /// `comm`, is a nested guardian: it has exec'd since its fork, and its executable carries
    /// the guardian's mark (or, when the executable cannot be opened, it has the outer
    /// guardian's name).
    pub(crate) fn is_one(&mut self, witness: &ProcessWitness, comm: &Comm) -> bool {
        let Some(pid) = procfs::pid_of(witness) else {
            return false;
        };
        let marked = match self.marked_exe(pid) {
            Some(marked) => marked,
            None => {
                let outer = self.outer;
                self.outer_comm
                    .get_or_insert_with(|| {
                        procfs::pid_of(&outer).and_then(|p| procfs::comm(p).ok().flatten())
                    })
                    .as_ref()
                    .is_some_and(|c| c.as_bytes() == comm.as_bytes())
            }
        };
        marked && exec_d(pid)
    }

    /// Whether `pid`'s executable carries the mark; `None` when it cannot be stat'ed. One
    /// `stat` per member (a stopped process cannot exec, so its executable stays the file
    /// stat'ed); the section is read once per executable.
    fn marked_exe(&mut self, pid: Pid) -> Option<bool> {
        let exe = format!("/proc/{}/exe", pid.as_raw_nonzero());
        let meta = std::fs::metadata(&exe).ok()?;
        Some(
            *self
                .seen
                .entry((meta.dev(), meta.ino()))
                .or_insert_with(|| File::open(&exe).is_ok_and(|f| carries_mark(&f))),
        )
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
    find_mark(file).is_some_and(|m| mark::is_mark(&m))
}

fn find_mark(file: &File) -> Option<Vec<u8>> {
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
    let wanted = mark::SECTION.as_bytes();
    (0..shnum).find_map(|i| {
        let h = header(i)?;
        let at = usize::try_from(u32_at(h, 0)?).ok()?;
        let name = names.get(at..)?;
        let end = name.iter().position(|&b| b == 0)?;
        if &name[..end] != wanted {
            return None;
        }
        let size = u64_at(h, 0x20)?;
        if size != mark::MARK_LEN as u64 {
            return None;
        }
        read_at(file, u64_at(h, 0x18)?, mark::MARK_LEN)
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

//! Process and boot identity (G4): a witness is `(pid, start time)`, the start time being field
//! 22 of `/proc/PID/stat` (clock ticks after boot), bound to one kernel lifetime by the boot id
//! (`/proc/sys/kernel/random/boot_id`).
//!
//! # Caveats
//! Field 2 (`comm`) may hold spaces and parentheses, so fields are counted after the *last* `)`.
//! The workload's start time is read while it is gated and unreaped, so its pid cannot have been
//! reused.

use core::ffi::CStr;

use refine_protocol_core::{BootId, ProcessWitness};

use crate::error::{Error, Line};
use crate::sys::{self, Errno, Pid};

fn bad() -> Error {
    Error::Identity(Errno(libc::EINVAL))
}

/// Field `n` (1-based, as in proc(5); `n >= 3`) of a `/proc/PID/stat` text, as a number.
fn parse_field(stat: &[u8], n: usize) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    // After ") " comes field 3 (state).
    let rest = stat.get(close + 2..)?;
    parse_decimal(rest.split(|&b| b == b' ').nth(n.checked_sub(3)?)?)
}

/// A decimal number of ASCII digits only (none: `None`).
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// The start time (field 22) from the text of a `/proc/PID/stat` file.
fn parse_start_time(stat: &[u8]) -> Option<u64> {
    parse_field(stat, 22)
}

fn start_time_at(path: &CStr) -> Result<u64, Error> {
    let mut buf = [0u8; 1024];
    let n = sys::read_file(path, &mut buf).map_err(Error::Identity)?;
    parse_start_time(&buf[..n])
        .map(initial_start_time)
        .ok_or_else(bad)
}

/// `/proc` start times are in `USER_HZ` ticks, 100 on every architecture this runs on.
const USER_HZ: i64 = 100;

/// A start time read here, in the initial time namespace's terms: a time namespace whose boot
/// time runs ahead (`/proc/self/timens_offsets`, `boottime SECS NSECS`) shows every start time
/// that much later, and a witness must read the same from every namespace (the supervisor's
/// views take theirs back the same way).
fn initial_start_time(read: u64) -> u64 {
    let mut buf = [0u8; 256];
    let Ok(n) = sys::read_file(c"/proc/self/timens_offsets", &mut buf) else {
        return read;
    };
    let offset = buf[..n]
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(b"boottime"))
        .and_then(|rest| {
            let mut f = rest.split(|&b| b == b' ').filter(|f| !f.is_empty());
            let secs = parse_signed(f.next()?)?;
            let nsecs = parse_signed(f.next()?)?;
            secs.checked_mul(USER_HZ)?
                .checked_add(nsecs * USER_HZ / 1_000_000_000)
        })
        .unwrap_or(0);
    u64::try_from(i128::from(read) - i128::from(offset)).unwrap_or(0)
}

/// A decimal number with an optional `-`.
fn parse_signed(text: &[u8]) -> Option<i64> {
    match text.strip_prefix(b"-") {
        Some(digits) => i64::try_from(parse_decimal(digits)?).ok().map(|v| -v),
        None => i64::try_from(parse_decimal(text)?).ok(),
    }
}

/// Reads `/proc/PID/stat` of `pid` into `buf`; returns the length.
fn read_stat(pid: Pid, buf: &mut [u8]) -> Result<usize, Error> {
    let mut path = Line::new();
    path.push(b"/proc/");
    path.push_u64(pid.as_u32() as u64);
    path.push(b"/stat\0");
    let path = CStr::from_bytes_with_nul(path.as_bytes()).map_err(|_| bad())?;
    sys::read_file(path, buf).map_err(Error::Identity)
}

/// The start time of `pid` (which must be our unreaped child, or ourselves).
pub fn start_time(pid: Pid) -> Result<u64, Error> {
    let mut buf = [0u8; 1024];
    let n = read_stat(pid, &mut buf)?;
    parse_start_time(&buf[..n])
        .map(initial_start_time)
        .ok_or_else(bad)
}

/// `PF_FORKNOEXEC` in `task->flags`: set by `fork`, cleared by a successful `execve`.
const PF_FORKNOEXEC: u64 = 0x40;

/// Whether our unreaped child `pid` has never exec'd: `PF_FORKNOEXEC` in field 9 (flags) of
/// its `/proc/PID/stat`. The kernel clears the flag in `execve` *before* it closes the
/// close-on-exec descriptors, and a zombie keeps its flags until it is reaped, so once the
/// report pipe reads end of file this tells an exec from a death before exec.
pub fn never_exec_d(pid: Pid) -> Result<bool, Errno> {
    let mut buf = [0u8; 1024];
    let n = read_stat(pid, &mut buf).map_err(|e| Errno(e.errno()))?;
    let flags = parse_field(&buf[..n], 9).ok_or(Errno(libc::EINVAL))?;
    Ok(flags & PF_FORKNOEXEC != 0)
}

/// Whether the command name (field 2, between the first `(` and the last `)`) of our unreaped
/// child `pid` is `comm` (NUL-padded, as `PR_GET_NAME` gives it). `false` when it cannot be read.
pub fn comm_is(pid: Pid, comm: &[u8; 16]) -> bool {
    let mut buf = [0u8; 1024];
    let Ok(n) = read_stat(pid, &mut buf) else {
        return false;
    };
    let stat = &buf[..n];
    let (Some(open), Some(close)) = (
        stat.iter().position(|&b| b == b'('),
        stat.iter().rposition(|&b| b == b')'),
    ) else {
        return false;
    };
    let want = &comm[..comm.iter().position(|&b| b == 0).unwrap_or(comm.len())];
    open < close && &stat[open + 1..close] == want
}

/// The guardian's own witness.
pub fn own() -> Result<ProcessWitness, Error> {
    Ok(ProcessWitness {
        pid: sys::getpid().as_u32(),
        start_time: start_time_at(c"/proc/self/stat")?,
    })
}

pub fn boot_id() -> Result<BootId, Error> {
    let mut buf = [0u8; 64];
    let n =
        sys::read_file(c"/proc/sys/kernel/random/boot_id", &mut buf).map_err(Error::Identity)?;
    let text = core::str::from_utf8(&buf[..n]).map_err(|_| bad())?;
    BootId::parse(text).ok_or_else(bad)
}

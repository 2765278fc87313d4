//! Process and boot identity (G4): a witness is `(pid, start time)`, the start time being field
//! 22 of `/proc/PID/stat` (clock ticks after boot), bound to one kernel lifetime by the boot id
//! (`/proc/sys/kernel/random/boot_id`).
//!
//! # Caveats
//! Field 2 (`comm`) may hold spaces and parentheses, so fields are counted after the *last* `)`.
//! The workload's start time is read while it is gated and unreaped, so its pid cannot have been
//! reused.

use core::ffi::CStr;

use refine_protocol::{BootId, ProcessWitness};

use crate::error::{Error, Line};
use crate::sys::{self, Errno, Pid};

fn bad() -> Error {
    Error::Identity(Errno(libc::EINVAL))
}

/// The start time from the text of a `/proc/PID/stat` file.
fn parse_start_time(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    // After ") " comes field 3 (state); field 22 is the 20th from there.
    let rest = stat.get(close + 2..)?;
    let field = rest.split(|&b| b == b' ').nth(19)?;
    let mut v: u64 = 0;
    if field.is_empty() {
        return None;
    }
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

fn start_time_at(path: &CStr) -> Result<u64, Error> {
    let mut buf = [0u8; 1024];
    let n = sys::read_file(path, &mut buf).map_err(Error::Identity)?;
    parse_start_time(&buf[..n]).ok_or_else(bad)
}

/// The start time of `pid` (which must be our unreaped child, or ourselves).
pub fn start_time(pid: Pid) -> Result<u64, Error> {
    let mut path = Line::new();
    path.push(b"/proc/");
    path.push_u64(pid.as_u32() as u64);
    path.push(b"/stat\0");
    let path = CStr::from_bytes_with_nul(path.as_bytes()).map_err(|_| bad())?;
    start_time_at(path)
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

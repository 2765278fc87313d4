//! `/proc` reading: a process's stat line, its children, its owner marker, and the boot id.
//!
//! - [`stat`] parses `/proc/PID/stat`. The command name (field 2) may contain spaces and `)`, so
//!   the fields are parsed after the *last* `)`: state (3), ppid (4), pgrp (5), session (6) and the
//!   start time (22, clock ticks since boot), which together with the pid and the [`BootId`] is a
//!   process witness.
//! - [`children`] reads `/proc/PID/task/*/children` (`CONFIG_PROC_CHILDREN`); `Ok(None)` when the
//!   kernel does not provide it, so callers fall back to a full ppid scan over [`all_pids`].
//! - [`owner_marker`] looks up `REFINE_OWNER=<registration id>` in `/proc/PID/environ`.
//! - [`boot_id`] reads `/proc/sys/kernel/random/boot_id`.
//! - [`Reader`] reads stat and children lists for scans that read many of them: paths are opened
//!   relative to one `/proc` descriptor and read into one reused buffer (no allocation per read),
//!   and the children of a single-threaded process are read without listing its tasks. Given
//!   room ([`Reader::set_room`]), it keeps a process's `stat` and `children` descriptors open and
//!   re-reads them with `pread` at offset 0 (the seq_file regenerates the text), so that a later
//!   scan of the same tree costs one `pread` per file instead of `openat`, `read`s and `close`.
//! - [`stat_cpu`] adds the CPU times (fields 14–17, [`CpuTicks`]); [`uptime`] and
//!   [`ticks_per_second`] turn start times and ticks into durations.
//!
//! A pid that disappears while it is being read is a normal outcome ([`ProcfsError::Vanished`]),
//! never a panic.
//!
//! # Caveats
//! Everything read here is a snapshot: the process may exit (and its pid be reused) right after.
//! Only a pidfd opened *before* re-reading the start time pins an identity (see `signal`).
//! A kept descriptor is bound to the process it was opened for (its `struct pid`), not to the
//! number: once that process is reaped, reading it fails with `ESRCH`, and the reader then drops
//! both of that pid's kept descriptors and opens the path afresh, so a new process on a reused pid
//! is read as itself (a kept `children` file of a reaped process would read as empty, which is
//! why it is only used while the kept `stat` of the same pid still reads).
//! `environ` shows the initial environment block, which a process may overwrite; the marker is an
//! extra witness, not proof. Children lists only show children of a task that are still alive or
//! zombies, not those already reaped.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use refine_protocol::{BootId, ProcessWitness, RegistrationId};
use rustix::process::Pid;

mod accounting;
mod reader;
#[cfg(test)]
use accounting::parse_cpu_ticks;
pub use accounting::{
    block_io, stat_cpu, ticks_per_second, uptime, usage, BlockIo, CpuTicks, Usage,
};
pub use reader::Reader;

/// The environment variable every managed descendant carries (SPEC S8).
pub const OWNER_VAR: &str = "REFINE_OWNER";

const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";
/// `environ` is read at most this far (the marker is looked for in this prefix).
const ENVIRON_MAX: usize = 256 * 1024;

/// Reads a kernel pseudo-file (`/proc`, cgroupfs) whole: `open`, a `read` into a page-sized
/// buffer, the `read` that says the end, `close`. `fs::read` (and `File::read_to_end`) would
/// first ask the file its size (`statx`, `lseek`), which such a file gives as 0, and then grow
/// the buffer from 32 bytes, one `read` per doubling: nine system calls for a stat line instead
/// of four, on every member of a scan. It reads to the end-of-file read, unlike the scans'
/// [`Reader`], which stops at a short read: that holds for a stat line or a children list, not
/// for a file of larger records (`smaps` returns a short first page).
pub(crate) fn read_pseudo(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(2 * len, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// [`read_pseudo`] as text (invalid UTF-8 is an [`io::ErrorKind::InvalidData`] error, as with
/// `fs::read_to_string`).
pub(crate) fn read_pseudo_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read_pseudo(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[derive(Debug, thiserror::Error)]
pub enum ProcfsError {
    /// The process exited (or was reaped) while it was being read.
    #[error("process {pid} is gone")]
    Vanished { pid: i32 },
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("malformed {path}: bad {field}")]
    Malformed { path: PathBuf, field: &'static str },
}

impl ProcfsError {
    pub(crate) fn is_vanished(&self) -> bool {
        matches!(self, ProcfsError::Vanished { .. })
    }
}

/// Process state letter (field 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Running,
    Sleeping,
    DiskSleep,
    /// `T`: stopped by a signal.
    Stopped,
    /// `t`: stopped by a tracer.
    TracingStop,
    Zombie,
    Dead,
    Idle,
    Other(char),
}

impl State {
    fn from_char(c: char) -> State {
        match c {
            'R' => State::Running,
            'S' => State::Sleeping,
            'D' => State::DiskSleep,
            'T' => State::Stopped,
            't' => State::TracingStop,
            'Z' => State::Zombie,
            'X' | 'x' => State::Dead,
            'I' => State::Idle,
            other => State::Other(other),
        }
    }

    /// The process has exited (zombie or dead): it can no longer run or fork.
    pub fn is_exited(self) -> bool {
        matches!(self, State::Zombie | State::Dead)
    }

    /// Stopped by a signal or a tracer: it cannot fork until continued.
    pub fn is_stopped(self) -> bool {
        matches!(self, State::Stopped | State::TracingStop)
    }
}

/// The fields of `/proc/PID/stat` this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: Pid,
    pub state: State,
    /// 0 for the namespace's init and for processes whose parent is outside the pid namespace.
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    /// Field 22: clock ticks after boot at which the process started.
    pub start_time: u64,
    /// Field 20: live threads; 0 for a leader that exited before its other threads (its
    /// children are listed under those: see [`Reader::children`]).
    pub threads: u32,
    /// Field 2: the command name (`comm`), as the kernel shows it in `/proc/PID/comm`.
    pub comm: Comm,
}

/// A command name (`comm`: at most 15 bytes for a process; a kernel worker's longer name is cut
/// at 32), held inline so that a [`Stat`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Comm {
    bytes: [u8; 32],
    len: u8,
}

impl Comm {
    fn new(name: &[u8]) -> Comm {
        let mut c = Comm::default();
        let n = name.len().min(c.bytes.len());
        c.bytes[..n].copy_from_slice(&name[..n]);
        c.len = n as u8;
        c
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl Stat {
    pub fn witness(&self) -> ProcessWitness {
        ProcessWitness {
            pid: self.pid.as_raw_nonzero().get() as u32,
            start_time: self.start_time,
        }
    }

    /// Whether this is the process `w` names (same pid, same start time).
    pub fn matches(&self, w: &ProcessWitness) -> bool {
        self.witness() == *w
    }
}

pub(crate) fn proc_path(pid: Pid, leaf: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{}/{leaf}", pid.as_raw_nonzero()))
}

/// Maps a read error of a per-process file: `ENOENT`/`ESRCH` mean the process is gone.
fn classify(pid: Pid, op: &'static str, path: &Path, e: io::Error) -> ProcfsError {
    let gone = e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH);
    if gone {
        ProcfsError::Vanished {
            pid: pid.as_raw_nonzero().get(),
        }
    } else {
        ProcfsError::Io {
            op,
            path: path.to_owned(),
            source: e,
        }
    }
}

/// Reads and parses `/proc/PID/stat`.
///
/// The state is the process's, not only its main thread's (SPEC T5): a thread-group leader that
/// called `pthread_exit` reads `Z` while its other threads still run. Such a leader gets the
/// state of its live threads ([`State::Stopped`] once all of them are stopped, else the state of
/// the first one that is not), so it stays a member that can be stopped and killed; it is
/// [`State::Zombie`] only once no thread is left.
pub fn stat(pid: Pid) -> Result<Stat, ProcfsError> {
    let path = proc_path(pid, "stat");
    // Bytes: a command name need not be UTF-8.
    let text = read_pseudo(&path).map_err(|e| classify(pid, "read", &path, e))?;
    let mut s = parse_stat_bytes(pid, &text).ok_or(ProcfsError::Malformed {
        path,
        field: "stat",
    })?;
    zombie_leader(&mut s);
    Ok(s)
}

/// A zombie thread-group leader whose threads still run takes their state (see [`stat`]); its
/// children hang off those threads now, so it never counts as single-threaded.
fn zombie_leader(s: &mut Stat) {
    if s.state == State::Zombie {
        if let Some(live) = live_thread_state(s.pid) {
            s.state = live;
            s.threads = 0;
        }
    }
}

/// The state of the live threads of a zombie thread-group leader, `None` if it has none (or they
/// cannot be read: the leader then counts as exited, as before).
fn live_thread_state(pid: Pid) -> Option<State> {
    let leader = pid.as_raw_nonzero().get();
    let mut stopped = None;
    for task in fs::read_dir(proc_path(pid, "task")).ok()?.flatten() {
        let tid: i32 = task.file_name().to_str()?.parse().ok()?;
        if tid == leader {
            continue;
        }
        let Ok(text) = read_pseudo(&task.path().join("stat")) else {
            continue;
        };
        let Some(t) = Pid::from_raw(tid).and_then(|p| parse_stat_bytes(p, &text)) else {
            continue;
        };
        if t.state.is_exited() {
            continue;
        }
        if !t.state.is_stopped() {
            return Some(t.state);
        }
        stopped = Some(t.state);
    }
    stopped
}

/// Reads the stat of a witness's pid; `None` if the pid is gone or now names another process.
pub fn stat_of(w: &ProcessWitness) -> Result<Option<Stat>, ProcfsError> {
    let Some(pid) = pid_of(w) else {
        return Ok(None);
    };
    match stat(pid) {
        Ok(s) if s.matches(w) => Ok(Some(s)),
        Ok(_) => Ok(None),
        Err(e) if e.is_vanished() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A witness's pid as a typed [`Pid`]; `None` for 0 or a value that is not a valid pid.
pub fn pid_of(w: &ProcessWitness) -> Option<Pid> {
    i32::try_from(w.pid).ok().and_then(Pid::from_raw)
}

/// Parses a stat line. The fields are read after the last `)`, so any command name works.
pub(crate) fn parse_stat(pid: Pid, text: &str) -> Option<Stat> {
    parse_stat_bytes(pid, text.as_bytes())
}

/// The clock ticks by which this process's time namespace runs its boot time ahead of the
/// initial namespace's (`/proc/self/timens_offsets`; 0 where there is none): `/proc/PID/stat`
/// start times read here are that much later than the same process's read from outside. Every
/// start time is taken back to the initial namespace's terms, so a witness recorded in one
/// namespace is recognised from any other (the guardian does the same).
fn boottime_offset_ticks() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        let hz = rustix::param::clock_ticks_per_second();
        std::fs::read_to_string("/proc/self/timens_offsets")
            .ok()
            .and_then(|t| parse_boottime_offset(&t, hz))
            .unwrap_or(0)
    })
}

/// The `boottime` line of a `timens_offsets` text, in ticks of `hz` (`None`: malformed).
fn parse_boottime_offset(text: &str, hz: u64) -> Option<i64> {
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        if f.next() != Some("boottime") {
            continue;
        }
        let secs: i64 = f.next()?.parse().ok()?;
        let nsecs: i64 = f.next()?.parse().ok()?;
        let hz = i64::try_from(hz).ok()?;
        return secs
            .checked_mul(hz)?
            .checked_add(nsecs * hz / 1_000_000_000);
    }
    Some(0)
}

/// A start time read here, in the initial time namespace's terms.
fn initial_start_time(read: u64) -> u64 {
    let offset = boottime_offset_ticks();
    u64::try_from(i128::from(read) - i128::from(offset)).unwrap_or(0)
}

/// [`parse_stat`] of the raw bytes: a command name need not be UTF-8.
fn parse_stat_bytes(pid: Pid, text: &[u8]) -> Option<Stat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    let comm = Comm::new(text.get(open + 1..close)?);
    let mut fields = std::str::from_utf8(text.get(close + 1..)?)
        .ok()?
        .split_ascii_whitespace();
    // Fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    //              utime stime cutime cstime priority nice num_threads itrealvalue starttime
    let mut state_chars = fields.next()?.chars();
    let state = State::from_char(state_chars.next()?);
    if state_chars.next().is_some() {
        return None;
    }
    let ppid: i32 = fields.next()?.parse().ok()?;
    let pgid: i32 = fields.next()?.parse().ok()?;
    let sid: i32 = fields.next()?.parse().ok()?;
    // Skip fields 7..=19 (13 fields) to reach field 20, then field 21 to reach field 22.
    let threads: u32 = fields.nth(13)?.parse().ok()?;
    let start_time: u64 = initial_start_time(fields.nth(1)?.parse().ok()?);
    Some(Stat {
        pid,
        state,
        ppid,
        pgid,
        sid,
        start_time,
        threads,
        comm,
    })
}

/// `/proc/PID/comm` without its newline; `None` once the process is gone.
pub fn comm(pid: Pid) -> Result<Option<String>, ProcfsError> {
    let path = proc_path(pid, "comm");
    match read_pseudo_string(&path) {
        Ok(text) => Ok(Some(text.trim_end_matches('\n').to_owned())),
        Err(e) => match classify(pid, "read", &path, e) {
            e if e.is_vanished() => Ok(None),
            e => Err(e),
        },
    }
}

/// The children of every thread of `pid`, from `/proc/PID/task/*/children`. `Ok(None)` when the
/// kernel has no children files (the caller then scans every process's ppid).
pub fn children(pid: Pid) -> Result<Option<Vec<Pid>>, ProcfsError> {
    let task_dir = proc_path(pid, "task");
    let tasks = fs::read_dir(&task_dir).map_err(|e| classify(pid, "list", &task_dir, e))?;
    let mut out = Vec::new();
    for task in tasks {
        let task = task.map_err(|e| classify(pid, "list", &task_dir, e))?;
        let path = task.path().join("children");
        let text = match read_pseudo_string(&path) {
            Ok(t) => t,
            // The thread exited meanwhile: its children moved to another thread or reparented.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if task.path().exists() {
                    // The thread is there but the file is not: no CONFIG_PROC_CHILDREN.
                    return Ok(None);
                }
                continue;
            }
            Err(e) => return Err(classify(pid, "read", &path, e)),
        };
        for word in text.split_ascii_whitespace() {
            let child = word
                .parse::<i32>()
                .ok()
                .and_then(Pid::from_raw)
                .ok_or_else(|| ProcfsError::Malformed {
                    path: path.clone(),
                    field: "children",
                })?;
            if !out.contains(&child) {
                out.push(child);
            }
        }
    }
    Ok(Some(out))
}

/// Every process id in this pid namespace's `/proc`.
pub fn all_pids() -> Result<Vec<Pid>, ProcfsError> {
    let proc = Path::new("/proc");
    let entries = fs::read_dir(proc).map_err(|source| ProcfsError::Io {
        op: "list",
        path: proc.to_owned(),
        source,
    })?;
    Ok(entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
                .and_then(Pid::from_raw)
        })
        .collect())
}

/// The registration id in `pid`'s `REFINE_OWNER` environment entry, if any. A process whose
/// environ cannot be read (kernel thread, permission, exited) has no marker.
pub fn owner_marker(pid: Pid) -> Result<Option<RegistrationId>, ProcfsError> {
    let path = proc_path(pid, "environ");
    let mut buf = Vec::new();
    let read = fs::File::open(&path).and_then(|f| f.take(ENVIRON_MAX as u64).read_to_end(&mut buf));
    match read {
        Ok(_) => {}
        Err(e) => {
            return match classify(pid, "read", &path, e) {
                ProcfsError::Vanished { .. } => Ok(None),
                ProcfsError::Io { source, .. }
                    if source.kind() == io::ErrorKind::PermissionDenied =>
                {
                    Ok(None)
                }
                other => Err(other),
            }
        }
    }
    Ok(find_marker(&buf))
}

/// Finds `REFINE_OWNER=<id>` in a NUL-separated environment block.
pub fn find_marker(environ: &[u8]) -> Option<RegistrationId> {
    let key = OWNER_VAR.as_bytes();
    environ
        .split(|&b| b == 0)
        .filter_map(|entry| entry.strip_prefix(key)?.strip_prefix(b"="))
        .find_map(|value| {
            std::str::from_utf8(value)
                .ok()
                .and_then(RegistrationId::parse)
        })
}

/// The kernel function `pid` sleeps in (`/proc/PID/wchan`); `None` when running or hidden.
pub(crate) fn wchan(pid: Pid) -> Result<Option<String>, ProcfsError> {
    let path = proc_path(pid, "wchan");
    match read_pseudo_string(&path) {
        Ok(t) if t.is_empty() || t == "0" => Ok(None),
        Ok(t) => Ok(Some(t)),
        Err(e) => match classify(pid, "read", &path, e) {
            ProcfsError::Vanished { .. } => Ok(None),
            other => Err(other),
        },
    }
}

/// This kernel lifetime's id, read once per process: no process outlives the boot it runs in.
pub fn boot_id() -> Result<BootId, ProcfsError> {
    static ONCE: std::sync::OnceLock<BootId> = std::sync::OnceLock::new();
    if let Some(id) = ONCE.get() {
        return Ok(*id);
    }
    let path = Path::new(BOOT_ID_PATH);
    let text = read_pseudo_string(path).map_err(|source| ProcfsError::Io {
        op: "read",
        path: path.to_owned(),
        source,
    })?;
    let id = BootId::parse(text.trim()).ok_or(ProcfsError::Malformed {
        path: path.to_owned(),
        field: "boot id",
    })?;
    Ok(*ONCE.get_or_init(|| id))
}

/// The file name of `/proc/PID/exe` (without the kernel's " (deleted)"), not `comm`, which a
/// program sets for itself; `[comm]` when the process has no executable (a kernel thread) or it
/// cannot be read.
pub fn program(pid: Pid) -> String {
    use std::os::unix::ffi::OsStrExt;
    match fs::read_link(proc_path(pid, "exe")) {
        Ok(p) => {
            let bytes = p.as_os_str().as_bytes();
            let bytes = bytes.strip_suffix(b" (deleted)").unwrap_or(bytes);
            let name = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
            String::from_utf8_lossy(name).into_owned()
        }
        Err(_) => {
            let comm = read_pseudo_string(&proc_path(pid, "comm")).unwrap_or_default();
            format!("[{}]", comm.trim_end())
        }
    }
}

/// The program ([`program`]) and arguments (the NUL-separated `cmdline`) of a process; no
/// arguments for a kernel thread or a zombie.
pub fn program_and_args(pid: Pid) -> (String, Vec<String>) {
    let args = read_pseudo(&proc_path(pid, "cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    (program(pid), args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(n: i32) -> Pid {
        Pid::from_raw(n).unwrap()
    }

    #[test]
    fn parses_after_the_last_paren() {
        let line =
            "4242 (a) b) (c d) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let s = parse_stat(pid(4242), line).unwrap();
        assert_eq!(s.state, State::Sleeping);
        assert_eq!((s.ppid, s.pgid, s.sid), (1, 4242, 4242));
        assert_eq!(s.start_time, 987654);
        assert!(parse_stat(pid(1), "1 (x) S 0 1").is_none());
        assert!(parse_stat(pid(1), "garbage").is_none());
        assert!(parse_stat(pid(1), "").is_none());
        let cpu = parse_cpu_ticks(line).unwrap();
        assert_eq!(
            (cpu.user, cpu.system, cpu.children_user, cpu.children_system),
            (1, 2, 0, 0)
        );
        assert_eq!(cpu.with_children(), 3);
        assert!(parse_cpu_ticks("1 (x) S 0 1").is_none());
    }

    #[test]
    fn own_stat_and_children_and_boot_id() {
        let me = rustix::process::getpid();
        let s = stat(me).unwrap();
        assert_eq!(s.pid, me);
        assert!(s.start_time > 0);
        assert!(stat_of(&s.witness()).unwrap().is_some());
        let stale = ProcessWitness {
            start_time: s.start_time + 1,
            ..s.witness()
        };
        assert!(stat_of(&stale).unwrap().is_none());
        assert!(children(me).unwrap().is_some());
        assert_ne!(boot_id().unwrap(), BootId::default());
    }

    #[test]
    fn a_pseudo_file_reads_whole_past_its_first_page() {
        // /proc/self/smaps of a test binary runs to many pages; a read stops at no page.
        let maps = read_pseudo(Path::new("/proc/self/smaps")).unwrap();
        assert!(maps.len() > 4096, "{} bytes", maps.len());
        assert!(maps.ends_with(b"\n"));
        let environ = read_pseudo(Path::new("/proc/self/environ")).unwrap();
        assert_eq!(environ, fs::read("/proc/self/environ").unwrap());
        assert_eq!(
            read_pseudo_string(Path::new("/proc/sys/kernel/random/boot_id")).unwrap(),
            fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap()
        );
        assert_eq!(boot_id().unwrap(), boot_id().unwrap());
        let gone = read_pseudo(Path::new("/proc/self/no-such-file")).unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn reader_answers_as_the_plain_reads() {
        let me = rustix::process::getpid();
        let mut r = Reader::new().unwrap();
        let fast = r.stat(me).unwrap();
        let plain = stat(me).unwrap();
        assert_eq!(
            (fast.witness(), fast.ppid, fast.pgid),
            (plain.witness(), plain.ppid, plain.pgid)
        );
        assert_eq!(fast.comm.as_bytes(), comm(me).unwrap().unwrap().as_bytes());
        assert!(fast.threads >= 1);
        // A single-threaded parent (the test harness is not): `sh` with one `sleep` child.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let sleeper: i32 = line.trim().parse().unwrap();
        let parent = Pid::from_raw(sh.id() as i32).unwrap();
        assert_eq!(r.stat(parent).unwrap().threads, 1);
        // Both paths: the single-task shortcut and the task listing.
        let mut kids = Vec::new();
        for threads in [1, 0] {
            kids.clear();
            r.children(parent, threads, &mut kids).unwrap().unwrap();
            assert_eq!(kids, [Pid::from_raw(sleeper).unwrap()]);
        }
        let _ = rustix::process::kill_process(
            Pid::from_raw(sleeper).unwrap(),
            rustix::process::Signal::KILL,
        );
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(r.stat(parent).is_err_and(|e| e.is_vanished()));
    }

    /// A children list longer than a page comes back whole, read fresh and through the kept
    /// descriptor: the short-read rule ([`SEQ_COMPLETE_BELOW`]) only ends a read that stopped
    /// short of the kernel's page, never one the page cut.
    #[test]
    fn a_children_list_longer_than_a_page_is_read_whole() {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        const KIDS: usize = 1000; // at least 5 bytes a pid: well over 4,096 bytes of text
        let mut sh = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("i=0; while [ $i -lt {KIDS} ]; do sleep 300 & i=$((i+1)); done; echo up; wait; echo reaped"),
            ])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(sh.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "up");
        let parent = Pid::from_raw(sh.id() as i32).unwrap();
        let mut r = Reader::new().unwrap();
        r.set_room(2);
        let threads = r.stat(parent).unwrap().threads;
        let mut fresh = Vec::new();
        r.children(parent, threads, &mut fresh).unwrap().unwrap();
        let mut kept = Vec::new();
        r.children(parent, threads, &mut kept).unwrap().unwrap();
        assert_eq!(
            r.kept(),
            2,
            "the second read went through the kept descriptor"
        );
        let mut sorted: Vec<i32> = fresh.iter().map(|p| p.as_raw_nonzero().get()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        for kid in &fresh {
            let _ = rustix::process::kill_process(*kid, rustix::process::Signal::KILL);
        }
        if fresh.len() == KIDS {
            line.clear();
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "reaped");
        } else {
            // Some were not listed: end them all (the group is the shell's own, never 1).
            let _ = rustix::process::kill_process_group(parent, rustix::process::Signal::KILL);
        }
        let _ = sh.wait();
        assert_eq!(fresh.len(), KIDS, "every child listed");
        assert_eq!(sorted.len(), KIDS, "no pid twice");
        assert_eq!(fresh, kept);
    }

    /// `sh` with one `sleep` child: (sh, the sleep's pid).
    fn sh_with_child() -> (std::process::Child, Pid) {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        (sh, Pid::from_raw(line.trim().parse().unwrap()).unwrap())
    }

    #[test]
    fn kept_descriptors_are_reread_and_dropped_once_the_process_is_gone() {
        use rustix::process::{kill_process, Signal};
        let (mut sh, sleeper) = sh_with_child();
        let parent = Pid::from_raw(sh.id() as i32).unwrap();
        let mut r = Reader::new().unwrap();
        r.set_room(3);
        let first = r.stat(parent).unwrap();
        assert_eq!(first.threads, 1);
        let mut kids = Vec::new();
        r.children(parent, 1, &mut kids).unwrap().unwrap();
        assert_eq!(kids, [sleeper]);
        assert_eq!(r.kept(), 2, "stat and children kept");
        // Re-read, not remembered: the kept stat shows the state the process is in now.
        kill_process(parent, Signal::STOP).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !r.stat(parent).unwrap().state.is_stopped() {
            assert!(std::time::Instant::now() < deadline, "never seen stopped");
            std::thread::yield_now();
        }
        assert_eq!(r.kept(), 2, "read through the kept descriptors");
        // The caller's descriptors come first: with no room left, kept files give way.
        r.set_room(0);
        assert!(r.take_room());
        assert_eq!(r.kept(), 0);
        assert!(r.take_room(), "both of the pid's files were released");
        assert!(!r.take_room());
        // Kept again, then the process is reaped: its kept stat reads ESRCH, the reader drops
        // both files and opens the path afresh (nothing there now).
        r.set_room(2);
        r.stat(parent).unwrap();
        kids.clear();
        r.children(parent, 1, &mut kids).unwrap().unwrap();
        assert_eq!(r.kept(), 2);
        let _ = kill_process(sleeper, Signal::KILL);
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(r.stat(parent).is_err_and(|e| e.is_vanished()));
        assert_eq!(r.kept(), 0, "the gone process's files were dropped");
    }

    #[test]
    fn a_command_name_need_not_be_utf8() {
        let line = b"77 (a\xff) b) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 3 0 4242 0 0\n";
        let s = parse_stat_bytes(pid(77), line).unwrap();
        assert_eq!(
            (s.state, s.threads, s.start_time),
            (State::Running, 3, 4242)
        );
        assert_eq!(s.comm.as_bytes(), b"a\xff) b");
    }

    #[test]
    fn boottime_offsets_read_in_ticks() {
        let text = "monotonic           0         0\nboottime        86400         0\n";
        assert_eq!(parse_boottime_offset(text, 100), Some(8_640_000));
        assert_eq!(
            parse_boottime_offset("boottime -2 500000000\n", 100),
            Some(-150)
        );
        assert_eq!(parse_boottime_offset("monotonic 5 0\n", 100), Some(0));
        assert_eq!(parse_boottime_offset("boottime x 0\n", 100), None);
    }

    #[test]
    fn marker_lookup() {
        let id = RegistrationId([0x5a; 16]);
        let env = format!("A=1\0{OWNER_VAR}X=2\0{OWNER_VAR}={id}\0B=3\0");
        assert_eq!(find_marker(env.as_bytes()), Some(id));
        assert_eq!(find_marker(b"REFINE_OWNER=zz\0"), None);
        assert_eq!(find_marker(b""), None);
    }
}

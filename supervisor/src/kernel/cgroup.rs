//! Kernel-assisted scopes (SPEC F4): a cgroup v2 directory of its own for each scope, where the
//! supervisor can make one.
//!
//! ```text
//! detect   once per process: REFINE_CGROUP=off (or --no-cgroup) -> none; REFINE_CGROUP_ROOT /
//!          --cgroup-root PATH -> PATH; else the cgroup2 mount (statfs of the usual places, else
//!          /proc/self/mountinfo) joined with this process's own cgroup (/proc/self/cgroup
//!          "0::"). `<root>/refine` must exist or be makeable and offer cgroup.kill (Linux 5.14)
//!          and cgroup.freeze (5.2): root on a unified or hybrid hierarchy, or a delegated
//!          subtree (systemd `Delegate=yes`) this user owns
//! launch   mkdir <root>/refine/<runtime>/<id>; the guardian forks the workload into it with
//!          clone3(CLONE_INTO_CGROUP) and stays outside itself; the registration records it
//! stop     cgroup.freeze, wait for "frozen 1" in cgroup.events (re-read between yields for
//!          500 µs, then poll; bounded), membership from cgroup.procs, cgroup.kill (see
//!          `stop::stop_cgroup`)
//! end      after the receipt: the accounting (cpu.stat, memory.peak, memory.events) is read,
//!          kept in the launch's result record, and the empty directory removed by the
//!          launcher; the guardian removes it when its launcher is gone (nobody is left to read
//!          the accounting); whoever settles the exited scope later (recovery, the service's
//!          maintenance, gc) removes what a launcher that died between the receipt and its
//!          removal left (see `finish`)
//! sweep    gc removes every empty cgroup below <root>/refine/<runtime> that no record of
//!          that runtime names and that is older than a launch takes to register (a launcher
//!          killed between the mkdir and its record left it); and, once, what binaries that
//!          made <root>/refine/<id> left there (`history::strays`)
//! ```
//!
//! Why the launcher removes it and not always the guardian: the accounting is read from the
//! empty cgroup after the end and before the removal, and only the launcher needs it; the
//! guardian stays small and does no text parsing.
//!
//! # Caveats
//! The cgroup adds speed, exact membership and accounting; it proves nothing: only the
//! guardian's receipt proves that a scope ended. A nested supervisor runs inside the outer
//! scope's cgroup, and detection makes its scopes' cgroups below its own, so an outer scope's
//! cgroup holds every nested scope too. `memory.peak` and OOM kills exist only where the memory
//! controller is enabled for the subtree (not on a hybrid host whose memory controller is on v1).

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use refine_protocol::{RegistrationId, RuntimeId};
use rustix::event::{PollFd, PollFlags, Timespec};

/// `REFINE_CGROUP=off` turns the cgroup path off.
pub const ENV_SWITCH: &str = "REFINE_CGROUP";
/// `REFINE_CGROUP_ROOT=PATH`: the cgroup v2 directory below which scopes get theirs.
pub const ENV_ROOT: &str = "REFINE_CGROUP_ROOT";

/// How this process chooses (the CLI's `--no-cgroup` / `--cgroup-root`, else the environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    Off,
    Auto,
    Root(PathBuf),
}

impl Setting {
    /// From [`ENV_SWITCH`] and [`ENV_ROOT`].
    pub fn from_env() -> Setting {
        if std::env::var_os(ENV_SWITCH).is_some_and(|v| v == "off" || v == "0") {
            return Setting::Off;
        }
        match std::env::var_os(ENV_ROOT) {
            Some(root) if !root.is_empty() => Setting::Root(root.into()),
            _ => Setting::Auto,
        }
    }
}

static SETTING: OnceLock<Setting> = OnceLock::new();
static BASE: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Sets this process's choice before the first launch (the CLI's flags); later calls, and calls
/// after detection ran, change nothing. Returns whether it took effect.
pub fn configure(setting: Setting) -> bool {
    SETTING.set(setting).is_ok() && BASE.get().is_none()
}

/// Where this process makes scopes' cgroups (`<root>/refine`), or why it makes none. Detected
/// once.
pub fn base() -> Result<&'static Path, &'static str> {
    match BASE.get_or_init(|| detect(SETTING.get_or_init(Setting::from_env))) {
        Ok(p) => Ok(p),
        Err(why) => Err(why),
    }
}

fn detect(setting: &Setting) -> Result<PathBuf, String> {
    let root = match setting {
        Setting::Off => return Err(format!("turned off ({ENV_SWITCH}=off or --no-cgroup)")),
        Setting::Root(root) => root.clone(),
        Setting::Auto => own_cgroup()?,
    };
    let base = root.join("refine");
    // Every launch of the CLI detects: where `<root>/refine` exists and offers both files, two
    // `stat`s settle it.
    let offers = |needed: &str| base.join(needed).exists();
    if offers("cgroup.kill") && offers("cgroup.freeze") {
        return Ok(base);
    }
    if !root.join("cgroup.procs").is_file() {
        return Err(format!("{} is not a cgroup v2 directory", root.display()));
    }
    match std::fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", base.display())),
    }
    for needed in ["cgroup.kill", "cgroup.freeze"] {
        if !offers(needed) {
            return Err(format!("the kernel offers no {needed}"));
        }
    }
    Ok(base)
}

/// `statfs`'s `f_type` of a cgroup v2 mount.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Where the cgroup2 hierarchy is mounted: the two usual places (unified, hybrid) by `statfs`,
/// else the first cgroup2 line of `/proc/self/mountinfo` (the kernel formats that file for
/// every mount, which costs more than the rest of detection together).
fn cgroup2_mount() -> Result<PathBuf, String> {
    // `f_type`'s width differs between targets (i64 on x86-64).
    #[allow(clippy::unnecessary_cast)]
    let is_cgroup2 = |f: rustix::fs::StatFs| f.f_type as i64 == CGROUP2_SUPER_MAGIC;
    for usual in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if rustix::fs::statfs(usual).is_ok_and(is_cgroup2) {
            return Ok(PathBuf::from(usual));
        }
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            (post.split_whitespace().next() == Some("cgroup2"))
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))
                .flatten()
        })
        .ok_or_else(|| "no cgroup2 hierarchy is mounted".to_owned())
}

/// The cgroup2 mount point joined with this process's own cgroup.
fn own_cgroup() -> Result<PathBuf, String> {
    let mount = cgroup2_mount()?;
    let own = crate::kernel::procfs::read_pseudo_string("/proc/self/cgroup".as_ref())
        .map_err(|e| e.to_string())?;
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process has no cgroup v2 membership")?;
    Ok(mount.join(path.trim_start_matches('/')))
}

/// The parent of one runtime's scope cgroups, `<base>/<runtime>`: `gc` sweeps only its own
/// (X10 item 4: a cgroup no record names is removed by the runtime it belongs to). `None` on
/// the `/proc` path.
pub fn runtime_parent(runtime: RuntimeId) -> Option<PathBuf> {
    Some(base().ok()?.join(runtime.to_string()))
}

/// Makes the scope's cgroup, `<base>/<runtime>/<id>` (the runtime's parent first, when it is
/// not there yet); `None` (the `/proc` path) when there is no base or a directory cannot be
/// made.
pub fn create(runtime: RuntimeId, id: RegistrationId) -> Option<PathBuf> {
    let parent = runtime_parent(runtime)?;
    let dir = parent.join(id.to_string());
    let made = match std::fs::create_dir(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::create_dir(&parent) {
            Ok(()) => std::fs::create_dir(&dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => std::fs::create_dir(&dir),
            Err(e) => Err(e),
        },
        other => other,
    };
    match made {
        Ok(()) => Some(dir),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot make the scope's cgroup; using /proc");
            None
        }
    }
}

/// Removes an empty cgroup directory and the empty cgroups below it (a nested supervisor's
/// `refine` directory); one that is gone already is fine. A cgroup with members stays (EBUSY).
pub fn remove(dir: &Path) -> io::Result<()> {
    // Nearly always empty of cgroups below it: one rmdir, and a walk only when it is refused.
    match std::fs::remove_dir(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&entry.path())?;
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// What the kernel accounted to a scope's cgroup (kept in the launch's result record).
pub use refine_protocol::CgroupUsage;

fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Reads the cgroup's accounting; `None` when its `cpu.stat` cannot be read (gone).
pub fn usage(dir: &Path) -> Option<CgroupUsage> {
    let cpu = crate::kernel::procfs::read_pseudo_string(&dir.join("cpu.stat")).ok()?;
    let peak = crate::kernel::procfs::read_pseudo_string(&dir.join("memory.peak"))
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let oom = crate::kernel::procfs::read_pseudo_string(&dir.join("memory.events"))
        .ok()
        .and_then(|t| keyed(&t, "oom_kill"));
    Some(CgroupUsage {
        cpu_us: keyed(&cpu, "usage_usec").unwrap_or(0),
        user_us: keyed(&cpu, "user_usec").unwrap_or(0),
        system_us: keyed(&cpu, "system_usec").unwrap_or(0),
        memory_peak_bytes: peak,
        oom_kills: oom,
    })
}

/// Every process in the cgroup and in the cgroups below it (`cgroup.procs` of each), with the
/// directory each was found in.
pub fn members(dir: &Path) -> io::Result<Vec<(u32, PathBuf)>> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let procs = match crate::kernel::procfs::read_pseudo_string(&d.join("cgroup.procs")) {
            Ok(p) => p,
            // A child cgroup removed meanwhile (a nested scope ended).
            Err(e) if e.kind() == io::ErrorKind::NotFound && d != dir => continue,
            Err(e) => return Err(e),
        };
        out.extend(
            procs
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .map(|p| (p, d.clone())),
        );
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    Ok(out)
}

/// Whether the cgroup at `dir` has a member (`populated 1` in its `cgroup.events`: a process in
/// it or in a cgroup below it). A directory that is gone holds nothing: `Ok(false)`.
pub fn populated(dir: &Path) -> io::Result<bool> {
    populated_in(crate::kernel::procfs::read_pseudo_string(
        &dir.join("cgroup.events"),
    ))
}

/// [`populated`] of a read of `cgroup.events`. A cgroup whose directory is gone (`ENOENT`), or
/// is being removed while it is read (`ENODEV`: kernfs refuses the files of a node it is
/// deactivating), is empty: the kernel removes only a cgroup without members (`rmdir` of a
/// populated one fails with `EBUSY`). Read as "cannot tell", the second caused a stop racing
/// the cgroup's removal to call a scope whose guardian had exited with a verified receipt live.
fn populated_in(read: io::Result<String>) -> io::Result<bool> {
    match read {
        Ok(text) => Ok(keyed(&text, "populated") == Some(1)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `value` to the cgroup's `file` (`cgroup.freeze`, `cgroup.kill`).
pub fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// Whether the cgroup's `cgroup.freeze` asks for a freeze already (someone else froze it: a
/// stop leaves it as it found it).
pub fn freeze_requested(dir: &Path) -> bool {
    crate::kernel::procfs::read_pseudo_string(&dir.join("cgroup.freeze"))
        .is_ok_and(|v| v.trim() == "1")
}

/// The cgroup's `cgroup.events`, opened once for a stop: the freeze and the end are both read
/// from it.
pub fn events(dir: &Path) -> io::Result<std::fs::File> {
    std::fs::File::open(dir.join("cgroup.events"))
}

/// `cgroup.freeze` 1, then waits until `events` (its [`events`]) says `frozen 1` (the kernel
/// notifies a change of the file with `POLLPRI`), until `until`. `Ok(false)`: not frozen in
/// time (the caller thaws it).
pub fn freeze(dir: &Path, events: &std::fs::File, until: Instant) -> io::Result<bool> {
    write(dir, "cgroup.freeze", "1")?;
    wait_event(events, "frozen", until)
}

/// How long a wait on `cgroup.events` re-reads it between yields of the core before it sleeps.
const SPIN: Duration = Duration::from_micros(500);
/// Then the first pause between two re-reads, and the longest.
const REREAD_FIRST: Duration = Duration::from_micros(25);
const REREAD_LAST: Duration = Duration::from_millis(1);

/// Waits until `cgroup.events` says `key 1`.
pub(crate) fn wait_event(events: &std::fs::File, key: &str, until: Instant) -> io::Result<bool> {
    wait_value(events, key, 1, until)
}

/// Waits until `cgroup.events` says `key 0` (`populated 0`: the cgroup is empty).
pub(crate) fn wait_event_zero(
    events: &std::fs::File,
    key: &str,
    until: Instant,
) -> io::Result<bool> {
    wait_value(events, key, 0, until)
}

/// The kernel sends `cgroup.events` notifications at most every 10 ms (its rate limit: a scope
/// whose tree changed just before lands in it), so the file cannot only be waited on. A small
/// tree freezes in tens of microseconds, less than a poll's own timer slack (50 µs), so for
/// the first [`SPIN`] the file is re-read between yields of the core (the members to be frozen
/// get it when they need it: measured with 10 idle members, 59 µs to `frozen 1` against 141 µs
/// with the pauses below). Then it sleeps in `poll` (`POLLPRI`) with growing pauses, from
/// [`REREAD_FIRST`] to [`REREAD_LAST`]: a change between the read and the poll is not lost,
/// kernfs reports it on the next poll.
fn wait_value(events: &std::fs::File, key: &str, want: u64, until: Instant) -> io::Result<bool> {
    let mut buf = [0u8; 256];
    let spin_until = Instant::now() + SPIN;
    let mut step = REREAD_FIRST;
    loop {
        let n = match events.read_at(&mut buf, 0) {
            Ok(n) => n,
            // Being removed: empty (see `populated_in`).
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) && key == "populated" => {
                return Ok(want == 0);
            }
            Err(e) => return Err(e),
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        if keyed(&text, key) == Some(want) {
            return Ok(true);
        }
        let now = Instant::now();
        let left = until.saturating_duration_since(now);
        if left.is_zero() {
            return Ok(false);
        }
        if now < spin_until {
            std::thread::yield_now();
            continue;
        }
        let left = left.min(step);
        step = (step * 2).min(REREAD_LAST);
        let mut fds = [PollFd::new(events, PollFlags::PRI)];
        let ts = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: left.subsec_nanos() as i64,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// After the receipt (the scope is empty): the cgroup's accounting, then its directory goes.
/// `None` when the scope had no cgroup of its own, or it is gone already.
pub fn finish(reg: &refine_protocol::Registration) -> Option<CgroupUsage> {
    let cg = reg.cgroup.as_ref().filter(|c| c.holds_scope())?;
    let dir = Path::new(&cg.path);
    let usage = usage(dir);
    if let Err(e) = remove(dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the scope's cgroup");
    }
    usage
}

/// The tree's usage with its CPU times from the cgroup where there is one (the kernel's count
/// of every member's time, waited for or not); the peak resident set stays the receipt's.
pub(crate) fn with_usage(
    receipt: Option<refine_protocol::TreeUsage>,
    cgroup: Option<CgroupUsage>,
) -> Option<refine_protocol::TreeUsage> {
    match (receipt, cgroup) {
        (r, Some(c)) => Some(refine_protocol::TreeUsage {
            user_us: c.user_us,
            system_us: c.system_us,
            max_rss_kib: r.map_or(0, |r| r.max_rss_kib),
        }),
        (r, None) => r,
    }
}

#[cfg(test)]
mod removal_tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_cgroup_being_removed_is_empty_and_an_unreadable_one_is_unknown() {
        let gone = io::Error::from_raw_os_error(libc::ENOENT);
        let removing = io::Error::from_raw_os_error(libc::ENODEV);
        let denied = io::Error::from_raw_os_error(libc::EACCES);
        assert!(!populated_in(Err(gone)).unwrap());
        assert!(!populated_in(Err(removing)).unwrap());
        assert!(populated_in(Err(denied)).is_err());
        assert!(populated_in(Ok("populated 1\nfrozen 0\n".into())).unwrap());
        assert!(!populated_in(Ok("populated 0\nfrozen 0\n".into())).unwrap());
    }

    /// The kernel's side of it: `cgroup.events` opened before the cgroup's removal reads
    /// `ENODEV` after it.
    #[test]
    fn the_events_of_a_removed_cgroup_read_enodev() {
        let Ok(base) = base() else {
            eprintln!("skipped: no writable cgroup v2 hierarchy");
            return;
        };
        let dir = base.join(format!("refine-removal-test-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            eprintln!(
                "skipped: cannot make a cgroup under {}: {e}",
                base.display()
            );
            return;
        }
        let events = events(&dir).expect("cgroup.events");
        std::fs::remove_dir(&dir).expect("remove the empty cgroup");
        let mut buf = [0u8; 64];
        let e = events
            .read_at(&mut buf, 0)
            .expect_err("a removed cgroup's events");
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
    }
}

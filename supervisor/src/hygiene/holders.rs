//! Who holds a path (SPEC H1): every process on the node whose working directory, root, open
//! files or mapped files lie under a path — managed or not — and who owns it.
//!
//! One pass over `/proc`: for each process, its `cwd` and `root`, every entry of `fd/`, and the
//! files of `maps`, cheapest first, stopping at the first hit ([`Via`] says which).
//!
//! Path text is compared only for a process in the caller's own mount namespace: there the
//! kernel reports paths as the caller would write them. A directory or file that was removed is
//! reported as `"/path (deleted)"`: that suffix is stripped before comparing, so a removed
//! checkout is still matched (the path need not exist). A process in another mount namespace
//! (a container, `unshare -m`) reports paths of *its* tree, which may read like ours and be
//! something else entirely: it is matched by file identity only (H5). Its directory (or the
//! directory of its open or mapped file, found through `/proc/PID/root` and checked to be that
//! very file by device and inode) is walked up through `..`; it holds the target when one of
//! those folders is the target's (device, inode). A target that does not exist here has no
//! identity, and no process of another mount namespace holds it.
//!
//! The owner of a holder is found from kernel evidence first: the nearest ancestor that is the
//! guardian of a registration (any port under the home; the guardian is a subreaper, so its
//! whole tree stays below it). Without one, the `REFINE_OWNER` marker in its environment names
//! the registration (a witness only, S8/A7). Each owning registration is assessed once per call
//! by the one assessment ([`crate::end::assess`]).
//!
//! A holder is *orphaned* ([`Adopter`]) when its parent is not a process that started it on
//! purpose: pid 1, a well-known subreaper (systemd, tini, ...), or the guardian of a registration
//! that is no longer live. A process of another pid namespace (a container's, whose init adopts
//! its orphans), a child of a container shim, or one whose parent is outside our pid namespace
//! (ppid 0: `docker exec`, `nsenter`) is never an orphan of ours (H5). `reap --checkout` ends only
//! orphans and residue ([`crate::hygiene::reap_checkout`]).
//!
//! # Caveats
//! A snapshot: processes start, exit and change directory while it is taken; a pid is reported
//! with its start time and every later action re-verifies it. Without privilege, the files of
//! other users' processes cannot be read: they are counted in [`Holders::unreadable`], never
//! guessed. Which parent is a subreaper cannot be read from `/proc`; besides pid 1 and namespace
//! inits the list of adopters is by program name ([`SUBREAPERS`]).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use refine_protocol::record::Registration;
use refine_protocol::{ProcessWitness, RegistrationId};
use rustix::process::Pid;

use crate::end::assess::{self, Assessment, BootSource};
use crate::kernel::procfs::{self, ProcfsError, Stat};
use crate::store::registry::Runtime;

mod inspect;

use inspect::{inspect, ns_ident, proc_file, Inspected, Namespaces};
#[cfg(test)]
use inspect::{maps_entry, open_dir, walk_finds};

/// The suffix the kernel appends to the path of a removed file or directory.
pub(crate) const DELETED: &[u8] = b" (deleted)";

/// Programs whose children are adopted orphans, not processes they started on purpose: init
/// systems and inits that act as child subreapers on this host. Container shims (`conmon`,
/// `containerd-shim-*`) are not among them: their children are containers, not our orphans.
pub const SUBREAPERS: &[&str] = &[
    "systemd",
    "init",
    "tini",
    "tini-static",
    "dumb-init",
    "catatonit",
    "s6-svscan",
    "runit",
];

/// A file's identity: (device, inode).
pub type Ident = (u64, u64);

/// An ancestry walk gives up after this many parents (a loop in a moving table).
const MAX_DEPTH: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum HoldersError {
    #[error("cannot resolve {}", .path.display())]
    Resolve {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the process table")]
    Procfs(#[from] ProcfsError),
}

/// The path asked about, absolute, with its existing part resolved (symlinks), so it compares
/// with what the kernel reports.
#[derive(Debug, Clone)]
pub struct Target {
    path: PathBuf,
    exists: bool,
    /// (device, inode) of the target, when it exists.
    ident: Option<Ident>,
}

impl Target {
    /// Resolves `path` (relative to the current directory). The deepest existing ancestor is
    /// canonicalized and the rest appended as written, so a removed checkout still resolves.
    pub fn resolve(path: &Path) -> Result<Target, HoldersError> {
        let err = |source| HoldersError::Resolve {
            path: path.to_owned(),
            source,
        };
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir().map_err(err)?.join(path)
        };
        let lexical = normalize(&absolute);
        let exists = fs::symlink_metadata(&lexical).is_ok();
        let mut base = lexical.clone();
        let mut rest = Vec::new();
        let resolved = loop {
            match fs::canonicalize(&base) {
                Ok(real) => break real,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let Some(name) = base.file_name() else {
                        return Err(err(e));
                    };
                    rest.push(name.to_owned());
                    if !base.pop() {
                        return Err(err(e));
                    }
                }
                Err(e) => return Err(err(e)),
            }
        };
        let path = rest.iter().rev().fold(resolved, |p, n| p.join(n));
        let ident = fs::metadata(&path).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        Ok(Target {
            path,
            exists,
            ident,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Whether a path the kernel reports (readlink of cwd/root/fd, a maps path) lies under the
    /// target; `"X (deleted)"` is compared as `X`.
    pub fn contains(&self, reported: &[u8]) -> bool {
        let stripped = reported.strip_suffix(DELETED).unwrap_or(reported);
        under(self.path.as_os_str().as_bytes(), stripped)
            || under(self.path.as_os_str().as_bytes(), reported)
    }
}

/// `/a/./b/../c` -> `/a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

fn under(dir: &[u8], path: &[u8]) -> bool {
    if dir == b"/" {
        return path.first() == Some(&b'/');
    }
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

/// How a process holds the path; how the owner was found (its guardian is an ancestor, or
/// `REFINE_OWNER` marks it); the owning registration's state (the assessment's answer, or
/// `unknown` for a marker that names no registration under this home). The contract's names.
pub use refine_protocol::docs::{OwnerLink, OwnerState, Via};

/// The owner's state, as the assessment answers.
fn owner_state(a: &Assessment) -> OwnerState {
    match a {
        Assessment::Live => OwnerState::Live,
        Assessment::Exited { .. } => OwnerState::Exited,
        Assessment::Unverified { .. } => OwnerState::Unverified,
    }
}

/// The registration a holder belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub id: RegistrationId,
    /// The port whose `run/P` holds the record (`None` when unknown).
    pub port: Option<u16>,
    pub state: OwnerState,
    pub found: OwnerLink,
    /// Whether the registration's workload process itself is still running.
    pub workload_alive: bool,
}

/// Why a holder counts as orphaned (adopted rather than started by its parent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopter {
    /// Parent pid 1.
    Init,
    /// The parent is a known subreaper ([`SUBREAPERS`]) outside any scope.
    Subreaper { pid: i32, program: String },
    /// The parent is the guardian of a registration that is no longer live.
    EndedGuardian { id: RegistrationId },
}

/// One process that holds the path.
#[derive(Debug, Clone)]
pub struct Holder {
    pub witness: ProcessWitness,
    pub ppid: i32,
    /// The file name of `/proc/PID/exe` (not `comm`, which a program sets for itself);
    /// `[comm]` for a kernel thread.
    pub program: String,
    /// User + system CPU time, milliseconds.
    pub cpu_ms: u64,
    /// Time since the process started, milliseconds.
    pub age_ms: u64,
    /// How it holds the path: the first of cwd, root, an open file, a mapped file that does.
    pub via: Via,
    /// The first reported path under the target (lossy UTF-8, as the kernel shows it).
    pub path: String,
    pub owner: Option<Owner>,
    pub orphaned: Option<Adopter>,
}

/// The answer for one path.
#[derive(Debug, Clone)]
pub struct Holders {
    pub path: PathBuf,
    pub exists: bool,
    pub holders: Vec<Holder>,
    /// Processes looked at.
    pub scanned: usize,
    /// Processes whose files could not be read (permission): they may hold the path too.
    pub unreadable: usize,
    pub elapsed_ms: u64,
}

/// Every registration under a home, indexed by guardian and by id; each is assessed at most
/// once per index (the assessment is recomputed by a new index).
pub struct Registrations<'b> {
    entries: Vec<Entry>,
    by_guardian: HashMap<(u32, u64), usize>,
    by_id: HashMap<RegistrationId, usize>,
    boot: &'b dyn BootSource,
}

struct Entry {
    runtime: Runtime,
    reg: Registration,
    assessment: std::cell::OnceCell<Assessment>,
}

impl<'b> Registrations<'b> {
    /// Reads every record of every `run/P` under `home`. Unreadable or corrupt records are
    /// skipped: they own nothing here (and `reap` never treats their processes as theirs).
    pub fn load(home: &Path, boot: &'b dyn BootSource) -> Registrations<'b> {
        let mut r = Registrations {
            entries: Vec::new(),
            by_guardian: HashMap::new(),
            by_id: HashMap::new(),
            boot,
        };
        let Ok(ports) = fs::read_dir(home.join("run")) else {
            return r;
        };
        for port in ports.filter_map(|e| e.ok()) {
            let Some(port) = port
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u16>().ok())
            else {
                continue;
            };
            let Ok(runtime) = Runtime::open_existing(home, port) else {
                continue;
            };
            for id in runtime.list_ids().unwrap_or_default() {
                let Ok(reg) = runtime.read_registration(id) else {
                    continue;
                };
                let i = r.entries.len();
                let g = reg.hello.guardian;
                r.by_guardian.insert((g.pid, g.start_time), i);
                r.by_id.insert(reg.id, i);
                r.entries.push(Entry {
                    runtime: runtime.clone(),
                    reg,
                    assessment: std::cell::OnceCell::new(),
                });
            }
        }
        r
    }

    /// The runtime and record of `id`, if it is registered under this home.
    pub fn get(&self, id: RegistrationId) -> Option<(&Runtime, &Registration)> {
        self.by_id
            .get(&id)
            .map(|&i| (&self.entries[i].runtime, &self.entries[i].reg))
    }

    /// The registration whose guardian is `w`.
    pub(crate) fn guarded_by(&self, w: &ProcessWitness) -> Option<RegistrationId> {
        self.by_guardian
            .get(&(w.pid, w.start_time))
            .map(|&i| self.entries[i].reg.id)
    }

    /// Every registered guardian witness.
    pub fn guardians(&self) -> impl Iterator<Item = ProcessWitness> + '_ {
        self.entries.iter().map(|e| e.reg.hello.guardian)
    }

    /// The assessment of `id` (computed on first use).
    pub fn assessment(&self, id: RegistrationId) -> Option<&Assessment> {
        let e = &self.entries[*self.by_id.get(&id)?];
        Some(
            e.assessment
                .get_or_init(|| assess::assess(&e.runtime, &e.reg, self.boot)),
        )
    }

    fn owner(&self, id: RegistrationId, found: OwnerLink) -> Owner {
        let Some(&i) = self.by_id.get(&id) else {
            return Owner {
                id,
                port: None,
                state: OwnerState::Unknown,
                found,
                workload_alive: false,
            };
        };
        let e = &self.entries[i];
        let state = self.assessment(id).map_or(OwnerState::Unknown, owner_state);
        let workload_alive = state == OwnerState::Live
            && procfs::stat_of(&e.reg.hello.workload)
                .ok()
                .flatten()
                .is_some_and(|s| !s.state.is_exited());
        Owner {
            id,
            port: Some(e.runtime.port()),
            state,
            found,
            workload_alive,
        }
    }
}

/// Threads that share the `/proc` pass. The scan is CPU-bound in the kernel (formatting `maps`,
/// resolving links) and splits evenly; a few more threads than the two cores of a small node
/// keep it fast when other work competes for them (measured: `scripts/bench-holders`).
const SCAN_THREADS: usize = 4;

/// Lists every process under `target`, with owners from `regs`.
pub fn holders(target: &Target, regs: &Registrations<'_>) -> Result<Holders, HoldersError> {
    let start = Instant::now();
    let me = rustix::process::getpid();
    let hz = procfs::ticks_per_second();
    let uptime = procfs::uptime()?;
    let pids: Vec<Pid> = procfs::all_pids()?
        .into_iter()
        .filter(|&p| p != me)
        .collect();
    let chunk = pids.len().div_ceil(SCAN_THREADS).max(1);
    let ours = Namespaces::of_self();
    let found: Vec<(Pid, Inspected)> = std::thread::scope(|s| {
        let workers: Vec<_> = pids
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut maps = Vec::with_capacity(16 * 1024);
                    part.iter()
                        .map(|&pid| (pid, inspect(pid, target, ours, &mut maps)))
                        .filter(|(_, i)| !matches!(i, Inspected::Clear | Inspected::Gone))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let mut out = Holders {
        path: target.path.clone(),
        exists: target.exists,
        holders: Vec::new(),
        scanned: pids.len(),
        unreadable: 0,
        elapsed_ms: 0,
    };
    let mut ancestry = Ancestry {
        ours,
        ..Ancestry::default()
    };
    for (pid, inspected) in found {
        let (via, path) = match inspected {
            Inspected::Holds { via, path } => (via, path),
            Inspected::Clear | Inspected::Gone => continue,
            Inspected::Unreadable => {
                out.unreadable += 1;
                continue;
            }
        };
        let (stat, cpu) = match procfs::stat_cpu(pid) {
            Ok(s) => s,
            Err(e) if e.is_vanished() => continue,
            Err(e) => return Err(e.into()),
        };
        let started = Duration::from_millis(stat.start_time.saturating_mul(1000) / hz);
        let owner = ancestry.owner(&stat, regs).or_else(|| {
            procfs::owner_marker(pid)
                .ok()
                .flatten()
                .map(|id| regs.owner(id, OwnerLink::Marker))
        });
        let orphaned = ancestry.adopter(&stat, regs);
        out.holders.push(Holder {
            witness: stat.witness(),
            ppid: stat.ppid,
            program: program(pid),
            cpu_ms: cpu.own().saturating_mul(1000) / hz,
            age_ms: refine_protocol::time::saturating_ms(uptime.saturating_sub(started)),
            via,
            path: String::from_utf8_lossy(&path).into_owned(),
            owner,
            orphaned,
        });
    }
    out.holders.sort_by_key(|h| h.witness.pid);
    out.elapsed_ms = refine_protocol::time::saturating_ms(start.elapsed());
    Ok(out)
}

/// The file name of `/proc/PID/exe` ([`procfs::program`]).
pub fn program(pid: Pid) -> String {
    procfs::program(pid)
}

/// Ancestry walks with memos (many holders share parents and owners).
#[derive(Default)]
struct Ancestry {
    /// The caller's namespaces (a process of another pid namespace is not our orphan).
    ours: Namespaces,
    /// pid -> (start time, the registration whose guardian is this process or an ancestor).
    memo: HashMap<i32, (u64, Option<RegistrationId>)>,
    /// ppid -> why its children count as orphaned.
    adopters: HashMap<i32, Option<Adopter>>,
    owners: HashMap<RegistrationId, Owner>,
}

impl Ancestry {
    /// The registration whose guardian is `s` or its nearest guardian ancestor.
    fn owner(&mut self, s: &Stat, regs: &Registrations<'_>) -> Option<Owner> {
        let id = self.guardian_of(s, regs)?;
        Some(
            *self
                .owners
                .entry(id)
                .or_insert_with(|| regs.owner(id, OwnerLink::Guardian)),
        )
    }

    fn adopter(&mut self, s: &Stat, regs: &Registrations<'_>) -> Option<Adopter> {
        // A process of another pid namespace: its namespace's init adopts its orphans (H5).
        let pid_ns = ns_ident(&proc_file(s.pid, "ns/pid")).ok();
        if pid_ns.is_some() && pid_ns != self.ours.pid {
            return None;
        }
        self.adopters
            .entry(s.ppid)
            .or_insert_with(|| adopter(s, regs))
            .clone()
    }

    fn guardian_of(&mut self, s: &Stat, regs: &Registrations<'_>) -> Option<RegistrationId> {
        let mut chain: Vec<(i32, u64)> = Vec::new();
        let mut cur = *s;
        let found = loop {
            let pid = cur.pid.as_raw_nonzero().get();
            if let Some(&(start, found)) = self.memo.get(&pid) {
                if start == cur.start_time {
                    break found;
                }
            }
            chain.push((pid, cur.start_time));
            if let Some(id) = regs.guarded_by(&cur.witness()) {
                break Some(id);
            }
            if cur.ppid <= 1 || chain.len() > MAX_DEPTH {
                break None;
            }
            match Pid::from_raw(cur.ppid).map(procfs::stat) {
                Some(Ok(p)) => cur = p,
                _ => break None,
            }
        };
        for (pid, start) in chain {
            self.memo.insert(pid, (start, found));
        }
        found
    }
}

/// Why `s` counts as orphaned, if it does. A parent outside our pid namespace (ppid 0) did not
/// adopt it from us: it entered from there (`nsenter`, `docker exec`).
fn adopter(s: &Stat, regs: &Registrations<'_>) -> Option<Adopter> {
    match s.ppid {
        0 => return None,
        1 => return Some(Adopter::Init),
        _ => {}
    }
    let ppid = Pid::from_raw(s.ppid)?;
    let parent = procfs::stat(ppid).ok()?;
    if let Some(id) = regs.guarded_by(&parent.witness()) {
        let live = regs.assessment(id).is_some_and(Assessment::is_live);
        return (!live).then_some(Adopter::EndedGuardian { id });
    }
    let name = program(ppid);
    SUBREAPERS
        .contains(&name.as_str())
        .then_some(Adopter::Subreaper {
            pid: s.ppid,
            program: name,
        })
}

/// The registration a guardian process belongs to, in any home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardianOf {
    pub home: PathBuf,
    pub port: u16,
    pub id: RegistrationId,
}

/// Whether `w` is the guardian of a registration of any home: it holds open a proof file
/// `HOME/run/P/proofs/ID` (the very file that path names, by device and inode) and that
/// registration's record names `w` as its guardian. A process that only holds such a file is
/// not one.
pub fn guardian_of(w: &ProcessWitness) -> Option<GuardianOf> {
    use std::os::unix::fs::MetadataExt;
    let pid = Pid::from_raw(i32::try_from(w.pid).ok()?)?;
    for entry in fs::read_dir(proc_file(pid, "fd")).ok()?.flatten() {
        let Ok(text) = fs::read_link(entry.path()) else {
            continue;
        };
        let Some((home, port, id)) = proof_path_parts(&text) else {
            continue;
        };
        let held = fs::metadata(entry.path()).ok().map(|m| (m.dev(), m.ino()));
        let named = fs::metadata(&text).ok().map(|m| (m.dev(), m.ino()));
        if held.is_none() || held != named {
            continue;
        }
        let record = home
            .join("run")
            .join(port.to_string())
            .join("registrations")
            .join(id.to_string());
        let Ok(bytes) =
            crate::store::registry::read_bounded(&record, refine_protocol::record::MAX_RECORD)
        else {
            continue;
        };
        let Ok(reg) = Registration::decode(&bytes) else {
            continue;
        };
        let g = reg.hello.guardian;
        if reg.id == id && (g.pid, g.start_time) == (w.pid, w.start_time) {
            return Some(GuardianOf { home, port, id });
        }
    }
    None
}

/// `HOME/run/P/proofs/ID` -> (HOME, P, ID).
fn proof_path_parts(path: &Path) -> Option<(PathBuf, u16, RegistrationId)> {
    let id = RegistrationId::parse(path.file_name()?.to_str()?)?;
    let proofs = path.parent()?;
    if proofs.file_name()? != "proofs" {
        return None;
    }
    let port_dir = proofs.parent()?;
    let port: u16 = port_dir.file_name()?.to_str()?.parse().ok()?;
    let run = port_dir.parent()?;
    if run.file_name()? != "run" {
        return None;
    }
    Some((run.parent()?.to_owned(), port, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(p: &str) -> Target {
        Target {
            path: PathBuf::from(p),
            exists: false,
            ident: None,
        }
    }

    #[test]
    fn under_the_target_and_deleted_paths() {
        let t = target("/w/ck");
        assert!(t.contains(b"/w/ck"));
        assert!(t.contains(b"/w/ck/src/a.rs"));
        assert!(t.contains(b"/w/ck (deleted)"));
        assert!(t.contains(b"/w/ck/sub (deleted)"));
        assert!(!t.contains(b"/w/ck2"));
        assert!(!t.contains(b"/w/ck2 (deleted)"));
        assert!(!t.contains(b"/w"));
        assert!(!t.contains(b"socket:[1234]"));
        assert!(target("/").contains(b"/anything"));
    }

    #[test]
    fn maps_lines_and_proof_paths_are_read_exactly() {
        let line = b"7f00-7f01 r-xp 00000000 fd:01 123456   /usr/lib/x (deleted)";
        let (ident, path) = maps_entry(line).unwrap();
        assert_eq!(ident, (libc::makedev(0xfd, 0x01), 123456));
        assert_eq!(path, b"/usr/lib/x (deleted)");
        assert!(maps_entry(b"7f00-7f01 rw-p 00000000 00:00 0   [heap]").is_none());
        assert!(maps_entry(b"7f00-7f01 rw-p 00000000 00:05 0   /dev/zero").is_none());
        let id = "0123456789abcdef0123456789abcdef";
        let (home, port, got) =
            proof_path_parts(Path::new(&format!("/w/h/run/7411/proofs/{id}"))).unwrap();
        assert_eq!(
            (home.as_path(), port, got.to_string()),
            (Path::new("/w/h"), 7411, id.to_owned())
        );
        for not in [
            format!("/w/h/run/7411/logs/{id}"),
            format!("/w/h/run/x/proofs/{id}"),
            format!("/w/h/other/7411/proofs/{id}"),
            "/w/h/run/7411/proofs/short".to_owned(),
        ] {
            assert!(proof_path_parts(Path::new(&not)).is_none(), "{not}");
        }
    }

    #[test]
    fn a_folder_is_found_by_identity_from_below_and_not_from_beside() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        let side = tempfile::tempdir().unwrap();
        let m = fs::metadata(dir.path()).unwrap();
        let ident = (m.dev(), m.ino());
        assert!(walk_finds(open_dir(&deep).unwrap(), ident));
        assert!(walk_finds(open_dir(dir.path()).unwrap(), ident));
        assert!(!walk_finds(open_dir(side.path()).unwrap(), ident));
    }

    #[test]
    fn a_removed_path_resolves_through_its_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(dir.path()).unwrap();
        let gone = dir.path().join("a/./b/../c");
        let t = Target::resolve(&gone).unwrap();
        assert!(!t.exists());
        assert_eq!(t.path(), real.join("a/c"));
        let here = Target::resolve(dir.path()).unwrap();
        assert!(here.exists());
        assert_eq!(here.path(), real);
    }

    #[test]
    fn this_process_holds_its_own_executable_but_is_left_out() {
        let regs = Registrations::load(Path::new("/nonexistent"), &assess::KERNEL_BOOT);
        let exe = std::env::current_exe().unwrap();
        let t = Target::resolve(&exe).unwrap();
        let found = holders(&t, &regs).unwrap();
        let me = std::process::id();
        assert!(found.holders.iter().all(|h| h.witness.pid != me));
        assert!(found.scanned > 0);
    }
}

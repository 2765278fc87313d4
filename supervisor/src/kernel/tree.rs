//! Discovery of a scope: every descendant of a guardian, each with its witness (pid, start time,
//! pgid, sid, boot id), plus processes that carry the registration's `REFINE_OWNER` marker.
//!
//! The guardian is a subreaper (`PR_SET_CHILD_SUBREAPER`), so every process its workload starts —
//! double-forked, `setsid`, orphaned — stays below it. Discovery walks down from the guardian with
//! `/proc/PID/task/*/children`; on a kernel without children lists it falls back to one full scan
//! of every process's ppid. A child is accepted only if its stat still names the parent we came
//! from (a pid that exited and was reused elsewhere meanwhile is not a descendant).
//!
//! Marker processes (found by a scan of `/proc/*/environ`) and their descendants cover a scope
//! whose guardian is gone: its orphans were reparented elsewhere.
//!
//! Each process is read once per scan: its stat, then its children list (through one
//! [`procfs::Reader`], which the stop keeps from one scan to the next: with room, its later scans
//! re-read kept descriptors). [`discover_pinning`] lets the stop pin each process it has not seen
//! yet (open its pidfd) before that stat is read, so the scan's stat is also its verification.
//!
//! # Caveats
//! A scan is a snapshot of a moving tree: processes fork and exit while it runs. The stop
//! quiesces (SIGSTOP) and re-scans until two scans agree; this module only reports what it saw.
//! The guardian itself is never a member (it is never signalled), nor is the calling process.

use std::collections::{BTreeMap, BTreeSet};

use refine_protocol::{BootId, ProcessWitness, RegistrationId};
use rustix::process::Pid;

use crate::kernel::procfs::{self, Comm, ProcfsError, Stat, State};

#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("cannot read the process tree")]
    Procfs(#[from] ProcfsError),
}

/// How a member was found (below the guardian, a given root, the owner marker): the
/// contract's closed enum.
pub use refine_protocol::docs::Found;

/// One process of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    pub witness: ProcessWitness,
    pub boot_id: BootId,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    pub state: State,
    pub found: Found,
    /// The command name at the scan (the stop recognises nested guardians by it).
    pub comm: Comm,
}

impl Member {
    fn new(s: &Stat, boot_id: BootId, found: Found) -> Member {
        Member {
            witness: s.witness(),
            boot_id,
            ppid: s.ppid,
            pgid: s.pgid,
            sid: s.sid,
            state: s.state,
            found,
            comm: s.comm,
        }
    }
}

/// What to discover.
#[derive(Debug, Clone, Default)]
pub struct Roots {
    /// The guardian: its descendants are the scope (it is not a member itself).
    pub guardian: Option<ProcessWitness>,
    /// Further roots that are members themselves, with their descendants (e.g. the workload of
    /// a scope whose guardian is gone). Only processes whose start time matches are used.
    pub members: Vec<ProcessWitness>,
    /// Also scan every process's environment for this owner marker.
    pub owner: Option<RegistrationId>,
}

/// One snapshot of a scope.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Whether the guardian (if one was given) was alive at the start of the scan.
    pub guardian_alive: bool,
    /// The guardian's process group (the workload's group must differ from it).
    pub guardian_pgid: Option<i32>,
    pub members: Vec<Member>,
    /// False when the kernel had no children lists and a full ppid scan was used.
    pub used_children_lists: bool,
}

impl Scope {
    /// Witnesses of members that have not exited.
    pub fn live(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| !m.state.is_exited())
    }

    pub fn live_witnesses(&self) -> BTreeSet<(u32, u64)> {
        self.live()
            .map(|m| (m.witness.pid, m.witness.start_time))
            .collect()
    }
}

/// How descendants are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// `/proc/PID/task/*/children`, falling back to [`Walk::PpidScan`] where the kernel has none.
    ChildrenLists,
    /// One scan of every process's ppid.
    PpidScan,
}

/// Discovers the scope described by `roots`; `boot_id` is the current boot (every witness found
/// belongs to it).
pub fn discover(roots: &Roots, boot_id: BootId) -> Result<Scope, TreeError> {
    discover_with(roots, boot_id, Walk::ChildrenLists)
}

/// [`discover`] with an explicit walk (tests compare both).
pub fn discover_with(roots: &Roots, boot_id: BootId, walk: Walk) -> Result<Scope, TreeError> {
    let mut files = procfs::Reader::new()?;
    discover_pinning(roots, boot_id, walk, &mut NoPin, &mut files).map(|(scope, _)| scope)
}

/// Pins a process found in a children list *before* its stat is read (the stop opens its pidfd
/// there, so the start time that stat shows is the pinned process's: see `signal::Pinned`).
pub trait Pin {
    type Pinned;
    /// `None`: not pinned (already held, or no descriptor left). `files` is the scan's reader:
    /// a pin that needs a descriptor takes it from its room ([`procfs::Reader::take_room`]).
    fn pin(&mut self, pid: Pid, files: &mut procfs::Reader) -> Option<Self::Pinned>;
}

/// What a scan pinned: (index into its members, the pin), in member order.
pub type Pinnings<P> = Vec<(usize, <P as Pin>::Pinned)>;

/// Pins nothing.
pub struct NoPin;

impl Pin for NoPin {
    type Pinned = std::convert::Infallible;
    fn pin(&mut self, _: Pid, _: &mut procfs::Reader) -> Option<Self::Pinned> {
        None
    }
}

/// [`discover_with`] that calls `pin` for each process found below the guardian (or a root),
/// before its stat is read, and reads stats and children lists through `files` (a reader kept
/// across the scans of one quiesce re-reads the descriptors it kept). Returns the scope and what
/// was pinned, by index into its members (processes that turned out not to be members are
/// dropped: exited meanwhile, or now another parent's child).
pub fn discover_pinning<P: Pin>(
    roots: &Roots,
    boot_id: BootId,
    walk: Walk,
    pin: &mut P,
    files: &mut procfs::Reader,
) -> Result<(Scope, Pinnings<P>), TreeError> {
    let me = rustix::process::getpid();
    let mut w = Walker {
        reader: files,
        kids: Vec::new(),
        pin,
        pinned: Vec::new(),
        boot_id,
        walk,
        seen: BTreeSet::from([me.as_raw_nonzero().get()]),
        members: Vec::new(),
        ppid_map: None,
        used_children_lists: true,
    };
    let mut guardian_alive = false;
    let mut guardian_pgid = None;

    // 1. Below the guardian and the given roots.
    let mut stack: Vec<(Pid, u32)> = Vec::new();
    if let Some(g) = roots.guardian {
        if let Some(s) = w.reader.stat_of(&g)? {
            w.seen.insert(s.pid.as_raw_nonzero().get());
            guardian_pgid = Some(s.pgid);
            guardian_alive = !s.state.is_exited();
            // Even a zombie guardian may have children listed until it is reaped: walk it.
            stack.push((s.pid, s.threads));
        }
    }
    for root in &roots.members {
        if let Some(s) = w.reader.stat_of(root)? {
            if w.seen.insert(s.pid.as_raw_nonzero().get()) {
                w.members.push(Member::new(&s, boot_id, Found::Root));
                stack.push((s.pid, s.threads));
            }
        }
    }
    w.descend(stack, Found::Descendant)?;

    // 2. Marked processes not found so far (escaped, or orphaned by a gone guardian), and
    //    their descendants.
    if let Some(owner) = roots.owner {
        let mut stack = Vec::new();
        for pid in procfs::all_pids()? {
            if w.seen.contains(&pid.as_raw_nonzero().get())
                || procfs::owner_marker(pid)? != Some(owner)
            {
                continue;
            }
            match procfs::stat(pid) {
                Ok(s) => {
                    w.seen.insert(pid.as_raw_nonzero().get());
                    w.members.push(Member::new(&s, boot_id, Found::OwnerMarker));
                    stack.push((pid, s.threads));
                }
                Err(e) if e.is_vanished() => {}
                Err(e) => return Err(e.into()),
            }
        }
        w.descend(stack, Found::OwnerMarker)?;
    }
    let scope = Scope {
        guardian_alive,
        guardian_pgid,
        members: w.members,
        used_children_lists: w.used_children_lists,
    };
    Ok((scope, w.pinned))
}

struct Walker<'p, P: Pin> {
    reader: &'p mut procfs::Reader,
    /// The children list being read (reused).
    kids: Vec<Pid>,
    pin: &'p mut P,
    pinned: Pinnings<P>,
    boot_id: BootId,
    walk: Walk,
    seen: BTreeSet<i32>,
    members: Vec<Member>,
    ppid_map: Option<BTreeMap<i32, Vec<Stat>>>,
    used_children_lists: bool,
}

impl<P: Pin> Walker<'_, P> {
    /// Adds every not yet seen descendant of the processes on `stack` (pid, thread count).
    fn descend(&mut self, mut stack: Vec<(Pid, u32)>, found: Found) -> Result<(), TreeError> {
        while let Some((parent, threads)) = stack.pop() {
            self.kids.clear();
            let listed = match self.walk {
                Walk::ChildrenLists => self.reader.children(parent, threads, &mut self.kids),
                Walk::PpidScan => Ok(None),
            };
            match listed {
                Ok(Some(())) => {
                    for i in 0..self.kids.len() {
                        let pid = self.kids[i];
                        if self.seen.contains(&pid.as_raw_nonzero().get()) {
                            continue;
                        }
                        // Pinned before the stat is read (see [`Pin`]).
                        let pinned = self.pin.pin(pid, self.reader);
                        let s = match self.reader.stat(pid) {
                            Ok(s) => s,
                            Err(e) if e.is_vanished() => continue,
                            Err(e) => return Err(e.into()),
                        };
                        // Still the parent's child now? (A pid reused elsewhere since the list
                        // was read is not.)
                        if s.ppid != parent.as_raw_nonzero().get() {
                            continue;
                        }
                        self.seen.insert(s.pid.as_raw_nonzero().get());
                        if let Some(p) = pinned {
                            self.pinned.push((self.members.len(), p));
                        }
                        self.members.push(Member::new(&s, self.boot_id, found));
                        stack.push((s.pid, s.threads));
                    }
                    continue;
                }
                Ok(None) => {
                    self.used_children_lists = false;
                    if self.ppid_map.is_none() {
                        self.ppid_map = Some(scan_ppids()?);
                    }
                }
                Err(e) if e.is_vanished() => continue,
                Err(e) => return Err(e.into()),
            };
            // The full ppid scan (read as one snapshot): every stat there names its parent.
            let children = self
                .ppid_map
                .as_ref()
                .and_then(|m| m.get(&parent.as_raw_nonzero().get()));
            for s in children.into_iter().flatten() {
                if self.seen.insert(s.pid.as_raw_nonzero().get()) {
                    self.members.push(Member::new(s, self.boot_id, found));
                    stack.push((s.pid, s.threads));
                }
            }
        }
        Ok(())
    }
}

/// Every process's stat, grouped by ppid (fallback when there are no children lists).
fn scan_ppids() -> Result<BTreeMap<i32, Vec<Stat>>, TreeError> {
    let mut map: BTreeMap<i32, Vec<Stat>> = BTreeMap::new();
    for pid in procfs::all_pids()? {
        match procfs::stat(pid) {
            Ok(s) => map.entry(s.ppid).or_default().push(s),
            Err(e) if e.is_vanished() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(map)
}

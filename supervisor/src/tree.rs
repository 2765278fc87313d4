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
//! # Caveats
//! A scan is a snapshot of a moving tree: processes fork and exit while it runs. The stop
//! quiesces (SIGSTOP) and re-scans until two scans agree; this module only reports what it saw.
//! The guardian itself is never a member (it is never signalled), nor is the calling process.

use std::collections::{BTreeMap, BTreeSet};

use refine_protocol::{BootId, ProcessWitness, RegistrationId};
use rustix::process::Pid;

use crate::procfs::{self, ProcfsError, Stat, State};

#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("cannot read the process tree")]
    Procfs(#[from] ProcfsError),
}

/// How a member was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// Below the guardian (or below a given root).
    Descendant,
    /// A given root itself (the workload, when the guardian is gone).
    Root,
    /// Carries `REFINE_OWNER=<registration id>` (or descends from such a process).
    OwnerMarker,
}

/// One process of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Member {
    pub witness: ProcessWitness,
    pub boot_id: BootId,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    pub state: State,
    pub found: Found,
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
#[derive(Debug, Clone, serde::Serialize)]
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
    let me = rustix::process::getpid();
    let mut w = Walker {
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
    let mut stack: Vec<Pid> = Vec::new();
    if let Some(g) = roots.guardian {
        if let Some(s) = procfs::stat_of(&g)? {
            w.seen.insert(s.pid.as_raw_nonzero().get());
            guardian_pgid = Some(s.pgid);
            guardian_alive = !s.state.is_exited();
            // Even a zombie guardian may have children listed until it is reaped: walk it.
            stack.push(s.pid);
        }
    }
    for root in &roots.members {
        if let Some(s) = procfs::stat_of(root)? {
            if w.seen.insert(s.pid.as_raw_nonzero().get()) {
                w.members.push(Member::new(&s, boot_id, Found::Root));
                stack.push(s.pid);
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
                    stack.push(pid);
                }
                Err(e) if e.is_vanished() => {}
                Err(e) => return Err(e.into()),
            }
        }
        w.descend(stack, Found::OwnerMarker)?;
    }
    Ok(Scope {
        guardian_alive,
        guardian_pgid,
        members: w.members,
        used_children_lists: w.used_children_lists,
    })
}

struct Walker {
    boot_id: BootId,
    walk: Walk,
    seen: BTreeSet<i32>,
    members: Vec<Member>,
    ppid_map: Option<BTreeMap<i32, Vec<Stat>>>,
    used_children_lists: bool,
}

impl Walker {
    /// Adds every not yet seen descendant of the processes on `stack`.
    fn descend(&mut self, mut stack: Vec<Pid>, found: Found) -> Result<(), TreeError> {
        while let Some(parent) = stack.pop() {
            let listed = match self.walk {
                Walk::ChildrenLists => procfs::children(parent),
                Walk::PpidScan => Ok(None),
            };
            let children: Vec<Stat> = match listed {
                Ok(Some(pids)) => {
                    let mut out = Vec::with_capacity(pids.len());
                    for pid in pids {
                        match procfs::stat(pid) {
                            Ok(s) => out.push(s),
                            Err(e) if e.is_vanished() => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    out
                }
                Ok(None) => {
                    self.used_children_lists = false;
                    if self.ppid_map.is_none() {
                        self.ppid_map = Some(scan_ppids()?);
                    }
                    self.ppid_map
                        .as_ref()
                        .and_then(|m| m.get(&parent.as_raw_nonzero().get()))
                        .cloned()
                        .unwrap_or_default()
                }
                Err(e) if e.is_vanished() => continue,
                Err(e) => return Err(e.into()),
            };
            for s in children {
                // Still the parent's child now? (A pid reused elsewhere since the list was read
                // is not.)
                if s.ppid != parent.as_raw_nonzero().get() {
                    continue;
                }
                if self.seen.insert(s.pid.as_raw_nonzero().get()) {
                    self.members.push(Member::new(&s, self.boot_id, found));
                    stack.push(s.pid);
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

//! F4: the stop on the scope's own cgroup (freeze, read, kill or spare the nested guardians),
//! in place of the `/proc` quiesce and the member-by-member kill; see [`stop_cgroup`].

use std::collections::BTreeSet;
use std::time::Instant;

use refine_protocol::ProcessWitness;
use rustix::process::Pid;

use super::{is_refused, kill_member, Held, Sent, StopError, StopTimings, Target};
use crate::kernel::procfs;
use crate::kernel::signal::{self, Signal, SignalError, Verified};
use refine_protocol::record::Registration;

/// The cgroup a stop acts on: its directory, its `cgroup.events`, and whether a dead stop this
/// one completes froze it (then its freeze counts as this stop's own).
#[derive(Clone, Copy)]
pub(super) struct CgroupTarget<'a> {
    pub(super) dir: &'a std::path::Path,
    pub(super) events: &'a std::fs::File,
    pub(super) inherited_freeze: bool,
}

/// The scope's own cgroup, when the workload was forked into it and it still exists, with its
/// `cgroup.events` open.
pub(super) fn scope_cgroup(reg: &Registration) -> Option<(std::path::PathBuf, std::fs::File)> {
    let cg = reg.cgroup.as_ref().filter(|c| c.holds_scope())?;
    let dir = std::path::PathBuf::from(&cg.path);
    let events = crate::kernel::cgroup::events(&dir).ok()?;
    Some((dir, events))
}

/// F4, the stop on the cgroup path, in place of the `/proc` quiesce and the member-by-member
/// kill:
///
/// ```text
/// freeze   cgroup.freeze 1 (unless someone else froze it already: then it is never thawed by
///          this stop), then wait (within the first half of the time given) for "frozen 1" in
///          cgroup.events: no member runs or forks any more
/// read     the exact membership: cgroup.procs of the cgroup and the cgroups below it
/// spare    frozen, with a guardian: T5, nested guardians recognised off this thread, bounded
///          (`NestedGuardians::recognise`, X9)
/// kill     none spared (or not frozen in time, X9: a member in an unanswered FUSE or NFS
///          request never freezes): cgroup.kill, the kernel kills every member and anything
///          forked meanwhile; else SIGKILL each other member through a pinned pidfd, thaw, and
///          let each nested guardian reap, write its receipt and exit
/// proof    as on every path: the guardian's exit and its receipt (the caller)
/// ```
///
/// X8: `cgroup.procs` is a list of bare pids. A pid is signalled only through a pidfd opened
/// for it and kept only when, *after* the open, `cgroup.procs` lists that pid again (see
/// [`pin_members`]). `None`: the cgroup could not be frozen at all (gone, not writable):
/// nothing was done, the `/proc` path follows. Returns how many members were killed and when.
pub(super) fn stop_cgroup(
    target: &CgroupTarget<'_>,
    guardian: Option<&Verified>,
    deadline: Instant,
    signalled: &mut Vec<Sent>,
    timings: &mut StopTimings,
    refused: &mut Vec<ProcessWitness>,
) -> Result<Option<(usize, Instant)>, StopError> {
    use crate::kernel::cgroup;
    let CgroupTarget {
        dir,
        events,
        inherited_freeze,
    } = *target;
    let t = Instant::now();
    // Every exit path thaws what this stop froze (or the dead stop it completes), and nothing
    // else.
    let ours = inherited_freeze || !cgroup::freeze_requested(dir);
    if ours {
        if let Err(e) = cgroup::write(dir, "cgroup.freeze", "1") {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot freeze the scope's cgroup; using /proc");
            return Ok(None);
        }
    }
    let thaw = || {
        if !ours {
            return;
        }
        if let Err(e) = cgroup::write(dir, "cgroup.freeze", "0") {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot thaw the scope's cgroup");
        }
    };
    let freeze_until = t + deadline.saturating_duration_since(t) / 2;
    let frozen = cgroup::wait_event(events, "frozen", freeze_until).unwrap_or(false);
    if !frozen {
        tracing::warn!(dir = %dir.display(), "the scope's cgroup did not freeze in time; killing it through cgroup.kill");
    }
    let members = match cgroup::members(dir) {
        Ok(m) => m,
        Err(source) => {
            thaw();
            return Err(StopError::Cgroup {
                op: "cgroup.procs",
                source,
            });
        }
    };
    timings.quiesce = t.elapsed();
    timings.rounds = 1;
    // T5, D4: nested guardians are spared only in a frozen cgroup of a scope with a guardian.
    let pids: Vec<Pid> = members
        .iter()
        .filter_map(|&(pid, _)| Pid::from_raw(pid as i32))
        .collect();
    let spared: BTreeSet<u32> = match guardian {
        Some(g) if frozen => super::nested_guardians(g, &pids, deadline),
        _ => BTreeSet::new(),
    };
    let kill_at = Instant::now();
    if spared.is_empty() {
        cgroup::write(dir, "cgroup.kill", "1").map_err(|source| {
            thaw();
            StopError::Cgroup {
                op: "cgroup.kill",
                source,
            }
        })?;
        signalled.push(Sent {
            target: Target::Cgroup {
                members: members.len(),
            },
            signal: Signal::KILL.as_raw(),
        });
        // The killed members die frozen or not; thawed, the cgroup is ordinary again.
        thaw();
        // cgroup.kill passes over a process whose leader thread exited before its other threads
        // (`pthread_exit` in main, T5): whatever is still a member once the cgroup should have
        // emptied is killed through a pinned pidfd (a signal to the process reaches its
        // threads). The guardian's exit (its pidfd) is the usual end: it reaps the killed tree
        // at once; without one, the cgroup's own `populated 0`.
        let quarter = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 4;
        let empty = match guardian {
            Some(g) => {
                g.wait_exit(Some(quarter.saturating_duration_since(Instant::now())))
                    .unwrap_or(false)
                    || cgroup::wait_event_zero(events, "populated", Instant::now()).unwrap_or(false)
            }
            None => cgroup::wait_event_zero(events, "populated", quarter).unwrap_or(false),
        };
        if !empty {
            let left: Vec<u32> = cgroup::members(dir)
                .unwrap_or_default()
                .into_iter()
                .map(|(pid, _)| pid)
                .collect();
            for h in pin_members(dir, &left) {
                kill_member(&h, signalled, refused)?;
            }
        }
        return Ok(Some((members.len(), kill_at)));
    }
    // T5 on the cgroup path: every member but the nested guardians, by pinned pidfd.
    let all: Vec<u32> = members.iter().map(|&(pid, _)| pid).collect();
    let (nested, others): (Vec<Held>, Vec<Held>) = pin_members(dir, &all)
        .into_iter()
        .partition(|h| spared.contains(&h.witness.pid));
    let mut killed = 0;
    for h in others.iter().rev() {
        if kill_member(h, signalled, refused)? {
            killed += 1;
        }
    }
    thaw();
    let nested: Vec<&Held> = nested.iter().collect();
    killed += let_nested_guardians_finish(&nested, deadline, signalled, refused)?;
    Ok(Some((killed, kill_at)))
}

/// X8: the members `pids` (read from `cgroup.procs` earlier) pinned by pidfd, each kept only
/// when `cgroup.procs` lists its pid again after every pidfd was opened.
///
/// A pid read earlier may have been freed and taken by a bystander before its `pidfd_open`.
/// The re-read settles it: a process held by a pidfd that was still alive when its pid was
/// listed is that member; one that has died since only makes its pidfd signal nobody (`ESRCH`,
/// or a zombie), whoever takes the number afterwards. A bystander outside the cgroup is never
/// listed, so its pidfd is dropped unsignalled.
fn pin_members(dir: &std::path::Path, pids: &[u32]) -> Vec<Held> {
    let held: Vec<Held> = pids.iter().filter_map(|&pid| held_member(pid)).collect();
    if held.is_empty() {
        return held;
    }
    let listed: BTreeSet<u32> = match crate::kernel::cgroup::members(dir) {
        Ok(m) => m.into_iter().map(|(pid, _)| pid).collect(),
        Err(_) => return Vec::new(),
    };
    held.into_iter()
        .filter(|h| listed.contains(&h.witness.pid))
        .collect()
}

/// A cgroup member, pinned by a pidfd opened before its stat is read (so the witness is that
/// process's own); `None` when it is gone. Not yet proven a member: see [`pin_members`].
fn held_member(pid: u32) -> Option<Held> {
    let p = Pid::from_raw(pid as i32)?;
    let pinned = signal::Pinned::open(p).ok()??;
    let stat = procfs::stat(p).ok()?;
    Some(Held {
        witness: stat.witness(),
        pidfd: Some(pinned.verified(stat.witness())),
        comm: stat.comm,
    })
}

/// T5: every other member is killed; each nested guardian is resumed, reaps its (now killed)
/// scope, writes its receipt and exits. One that has not exited within half the remaining budget
/// is killed (its scope then stays `unverified`, as before). Returns how many were killed.
pub(super) fn let_nested_guardians_finish(
    nested: &[&Held],
    deadline: Instant,
    signalled: &mut Vec<Sent>,
    refused: &mut Vec<ProcessWitness>,
) -> Result<usize, StopError> {
    for h in nested {
        match h.signal(Signal::CONT) {
            Ok(()) => signalled.push(Sent {
                target: Target::Process(h.witness),
                signal: Signal::CONT.as_raw(),
            }),
            Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => {}
            Err(e) if is_refused(&e) => refused.push(h.witness),
            Err(e) => return Err(StopError::Signal(e)),
        }
    }
    let until = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2;
    let mut killed = 0;
    for h in nested {
        let left = until.saturating_duration_since(Instant::now());
        let exited = match h.with(|v| v.wait_exit(Some(left))) {
            Ok(exited) => exited,
            Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => true,
            Err(e) => return Err(StopError::Signal(e)),
        };
        if exited {
            continue;
        }
        if kill_member(h, signalled, refused)? {
            killed += 1;
        }
    }
    Ok(killed)
}

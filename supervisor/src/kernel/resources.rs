//! H8: a scope's resource limits (`--memory-max`, `--cpus`, `--pids-max`) through cgroups.
//!
//! ```text
//! check    before anything runs: each controller asked for is found on the unified hierarchy
//!          (in the F4 base's `cgroup.controllers`) or on a v1 hierarchy of its own (a
//!          `cgroup` line of /proc/self/mountinfo naming it, joined with this process's v1
//!          cgroup from /proc/self/cgroup); one that is on neither refuses the launch in one line
//! prepare  per controller: on v2, `+controller` in the subtree_control of the F4 base and of the
//!          runtime's folder, and the limit written into the scope's own F4 directory (the
//!          guardian forks the workload into it); on v1, mkdir <v1 cgroup>/refine/<runtime>/<id>
//!          and the limit written there (memory.limit_in_bytes and, where swap is accounted,
//!          memory.memsw.limit_in_bytes; cpu.cfs_quota_us over cpu.cfs_period_us; pids.max)
//! join     v1 only: the workload's pid written to each directory's cgroup.procs while it waits
//!          at the guardian's gate, before its execve: whatever it runs or forks is inside
//! finish   after the receipt: the peaks, OOM kills, refused forks and throttled time, then the
//!          v1 directories go (the v2 one is F4's)
//! ```
//!
//! # Caveats
//! - A v1 directory is made below this process's own v1 cgroup, so a nested supervisor's limits
//!   nest inside its scope's. Making it needs write access there (root, or a delegated tree).
//! - A launcher killed between the receipt and `finish` leaves an empty v1 directory behind.
//! - `cpus` is CFS bandwidth over a 100 ms period: a busy tree reads about that many cores.

use std::io;
use std::path::{Path, PathBuf};

use refine_protocol::record::{LimitController, LimitPlacement, LimitUsage, ScopeResources};
use refine_protocol::{RegistrationId, RuntimeId};

/// The CFS period every CPU limit uses, microseconds.
const CPU_PERIOD_US: u64 = 100_000;

/// What a launch asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceAsk {
    pub memory_max_bytes: Option<u64>,
    /// Thousandths of a core.
    pub cpu_millis: Option<u32>,
    pub pids_max: Option<u64>,
}

impl ResourceAsk {
    pub fn is_empty(&self) -> bool {
        *self == ResourceAsk::default()
    }

    fn controllers(&self) -> Vec<LimitController> {
        let mut c = Vec::new();
        if self.memory_max_bytes.is_some() {
            c.push(LimitController::Memory);
        }
        if self.cpu_millis.is_some() {
            c.push(LimitController::Cpu);
        }
        if self.pids_max.is_some() {
            c.push(LimitController::Pids);
        }
        c
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("--{flag} cannot be applied on this host: {why}")]
    Unavailable { flag: &'static str, why: String },
    #[error("cannot apply --{flag} in {dir}")]
    Apply {
        flag: &'static str,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn flag(c: LimitController) -> &'static str {
    match c {
        LimitController::Memory => "memory-max",
        LimitController::Cpu => "cpus",
        LimitController::Pids => "pids-max",
    }
}

/// Where a controller is: the unified hierarchy (through the F4 base) or a v1 cgroup of this
/// process.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Home {
    Unified,
    V1(PathBuf),
}

/// The F4 base offers `controller` on the unified hierarchy (it is in `cgroup.controllers`
/// there, so it can be enabled for the scopes below).
fn unified_offers(controller: LimitController) -> bool {
    let Ok(base) = crate::kernel::cgroup::base() else {
        return false;
    };
    std::fs::read_to_string(base.join("cgroup.controllers"))
        .is_ok_and(|t| t.split_whitespace().any(|c| c == controller.name()))
}

/// This process's cgroup on the v1 hierarchy of `controller`: its mount point joined with the
/// path `/proc/self/cgroup` gives for it.
fn v1_cgroup(controller: LimitController) -> Result<PathBuf, String> {
    let name = controller.name();
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mount = info
        .lines()
        .find_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let mut fields = post.split_whitespace();
            (fields.next() == Some("cgroup")).then_some(())?;
            let options = fields.nth(1)?;
            options
                .split(',')
                .any(|o| o == name)
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))
                .flatten()
        })
        .ok_or_else(|| {
            format!("no {name} controller on the unified hierarchy, nor a v1 hierarchy of it")
        })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let path = own
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            list.split(',').any(|c| c == name).then_some(path)
        })
        .ok_or_else(|| format!("this process is in no {name} v1 cgroup"))?;
    Ok(mount.join(path.trim_start_matches('/')))
}

fn home_of(controller: LimitController) -> Result<Home, ResourceError> {
    if unified_offers(controller) {
        return Ok(Home::Unified);
    }
    v1_cgroup(controller)
        .map(Home::V1)
        .map_err(|why| ResourceError::Unavailable {
            flag: flag(controller),
            why,
        })
}

/// Refuses, before anything runs, a limit this host cannot apply.
pub fn check(ask: &ResourceAsk) -> Result<(), ResourceError> {
    for c in ask.controllers() {
        home_of(c)?;
    }
    Ok(())
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// Writes the limit of `controller` into `dir` (`unified`: the v2 files).
fn set_limit(
    dir: &Path,
    controller: LimitController,
    ask: &ResourceAsk,
    unified: bool,
) -> io::Result<()> {
    match controller {
        LimitController::Memory => {
            let bytes = ask.memory_max_bytes.unwrap_or(u64::MAX).to_string();
            if unified {
                write(dir, "memory.max", &bytes)?;
                // No swap beyond the limit, so that the limit is the memory the tree gets.
                let _ = write(dir, "memory.swap.max", "0");
            } else {
                write(dir, "memory.limit_in_bytes", &bytes)?;
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(dir, "memory.memsw.limit_in_bytes", &bytes)?;
                }
            }
        }
        LimitController::Cpu => {
            let quota = u64::from(ask.cpu_millis.unwrap_or(0)) * CPU_PERIOD_US / 1000;
            if unified {
                write(dir, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"))?;
            } else {
                write(dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                write(dir, "cpu.cfs_quota_us", &quota.to_string())?;
            }
        }
        LimitController::Pids => {
            write(dir, "pids.max", &ask.pids_max.unwrap_or(0).to_string())?;
        }
    }
    Ok(())
}

/// Enables `controller` for the scopes below the F4 base (the base's and the runtime folder's
/// `cgroup.subtree_control`); already enabled is fine.
fn enable_unified(runtime: RuntimeId, controller: LimitController) -> io::Result<()> {
    let base = crate::kernel::cgroup::base().map_err(io::Error::other)?;
    let parent = base.join(runtime.to_string());
    let line = format!("+{}", controller.name());
    for dir in [base, parent.as_path()] {
        write(dir, "cgroup.subtree_control", &line)?;
    }
    Ok(())
}

/// Makes the directories of `ask` and writes its limits; `scope_cgroup` is the scope's F4
/// directory (made and not yet joined). A failure removes what it made.
pub fn prepare(
    runtime: RuntimeId,
    id: RegistrationId,
    ask: &ResourceAsk,
    scope_cgroup: Option<&Path>,
) -> Result<ScopeResources, ResourceError> {
    let mut placements: Vec<LimitPlacement> = Vec::new();
    let made = |placements: &[LimitPlacement]| remove_v1(placements);
    for c in ask.controllers() {
        let home = home_of(c)?;
        let (dir, unified) = match home {
            Home::Unified => {
                let Some(dir) = scope_cgroup else {
                    made(&placements);
                    return Err(ResourceError::Unavailable {
                        flag: flag(c),
                        why:
                            "the scope got no cgroup v2 directory of its own (F4 is off or refused)"
                                .to_owned(),
                    });
                };
                if let Err(source) = enable_unified(runtime, c) {
                    made(&placements);
                    return Err(ResourceError::Apply {
                        flag: flag(c),
                        dir: dir.to_owned(),
                        source,
                    });
                }
                (dir.to_owned(), true)
            }
            Home::V1(own) => {
                let dir = own
                    .join("refine")
                    .join(runtime.to_string())
                    .join(id.to_string());
                // Twice: the last scope of the runtime removing the runtime's folder may win
                // the race with this mkdir once.
                let created =
                    std::fs::create_dir_all(&dir).or_else(|_| std::fs::create_dir_all(&dir));
                if let Err(source) = created {
                    made(&placements);
                    return Err(ResourceError::Apply {
                        flag: flag(c),
                        dir,
                        source,
                    });
                }
                (dir, false)
            }
        };
        placements.push(LimitPlacement {
            controller: c,
            dir: dir.to_string_lossy().into_owned(),
            unified,
        });
        if let Err(source) = set_limit(&dir, c, ask, unified) {
            made(&placements);
            return Err(ResourceError::Apply {
                flag: flag(c),
                dir,
                source,
            });
        }
    }
    Ok(ScopeResources {
        memory_max_bytes: ask.memory_max_bytes,
        cpu_millis: ask.cpu_millis,
        pids_max: ask.pids_max,
        placements,
    })
}

/// Moves `pid` (the gated workload, before its `execve`) into each v1 directory.
pub fn join(resources: &ScopeResources, pid: u32) -> Result<(), ResourceError> {
    for p in resources.placements.iter().filter(|p| !p.unified) {
        let dir = Path::new(&p.dir);
        write(dir, "cgroup.procs", &pid.to_string()).map_err(|source| ResourceError::Apply {
            flag: flag(p.controller),
            dir: dir.to_owned(),
            source,
        })?;
    }
    Ok(())
}

/// Removes the v1 directories (empty once the scope has ended; the v2 one is F4's), and the
/// runtime's folder above each when no other scope is left in it (the kernel refuses to remove
/// a cgroup that has children: that refusal is the check).
pub fn remove_v1(placements: &[LimitPlacement]) {
    for p in placements.iter().filter(|p| !p.unified) {
        if let Err(e) = std::fs::remove_dir(&p.dir) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(dir = %p.dir, error = %e, "cannot remove a limit's cgroup");
            }
            continue;
        }
        if let Some(runtime) = Path::new(&p.dir).parent() {
            let _ = std::fs::remove_dir(runtime);
        }
    }
}

fn read_u64(dir: &Path, file: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The value of `key` in a flat-keyed file (`key value` lines).
fn keyed(dir: &Path, file: &str, key: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(file))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// What the controllers accounted (read before the directories go).
pub fn usage(resources: &ScopeResources) -> LimitUsage {
    let mut u = LimitUsage::default();
    for p in &resources.placements {
        let dir = Path::new(&p.dir);
        match (p.controller, p.unified) {
            (LimitController::Memory, true) => {
                u.memory_peak_bytes = read_u64(dir, "memory.peak");
                u.oom_kills = keyed(dir, "memory.events", "oom_kill");
            }
            (LimitController::Memory, false) => {
                u.memory_peak_bytes = read_u64(dir, "memory.max_usage_in_bytes");
                u.oom_kills = keyed(dir, "memory.oom_control", "oom_kill");
            }
            (LimitController::Cpu, true) => {
                u.throttled_us = keyed(dir, "cpu.stat", "throttled_usec")
            }
            (LimitController::Cpu, false) => {
                u.throttled_us = keyed(dir, "cpu.stat", "throttled_time").map(|ns| ns / 1000)
            }
            (LimitController::Pids, _) => {
                u.pids_peak = read_u64(dir, "pids.peak");
                u.pids_refused = keyed(dir, "pids.events", "max");
            }
        }
    }
    u
}

/// After the receipt: the accounting, then the v1 directories go. `None` without limits.
pub fn finish(reg: &refine_protocol::Registration) -> Option<LimitUsage> {
    let resources = reg.resources.as_ref()?;
    let u = usage(resources);
    remove_v1(&resources.placements);
    Some(u)
}

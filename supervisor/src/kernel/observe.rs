//! H8 observation: what a live scope uses now (CPU time, memory, tasks, block I/O), read
//! from its own cgroup where it has one, from its limits' v1 directories, and otherwise summed
//! over its processes in `/proc`. `top` takes two [`Sample`]s and divides the CPU time between
//! them by the time between them.
//!
//! ```text
//! members  the scope's cgroup v2 directory (F4, when the scope's tree is its membership):
//!          cgroup.procs of it and of the cgroups below it; else the tree below the guardian
//!          (`tree::discover`)
//! cpu      cgroup: cpu.stat usage_usec (every member's time, ended members included)
//!          proc:   utime + stime of each member, by witness (pid, start time)
//! memory   v2 memory.current (where the memory controller is on for the scope) > the v1
//!          memory limit's memory.usage_in_bytes > the sum of the members' resident sets
//! tasks    v2 pids.current > the v1 pids limit's pids.current > the members' threads
//! io       v2 io.stat rbytes + wbytes over its devices > the members' /proc/PID/io
//!          read_bytes + write_bytes
//! ```
//!
//! Each figure says where it was read ([`Source`]). A v1 CPU limit's directory is on the `cpu`
//! hierarchy, whose usage counter (`cpuacct`) is a hierarchy of its own here: it is not read.
//!
//! # Caveats
//! - On the `/proc` path the CPU time of a member that ended between the two samples is lost
//!   (its parent's `cutime` gets it, and the guardian, which reaps the orphans, is no member),
//!   and the I/O of a process that already ended counts only where its parent reaped it inside
//!   the scope. The cgroup's counters keep both.
//! - `memory.current` includes the page cache the scope caused; a resident-set sum counts a
//!   shared page once per process that maps it. They are different measures of one thing.
//! - A sample is a snapshot of a moving tree, never an identity: nothing here signals anything.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use refine_protocol::record::{LimitController, LimitPlacement};
use refine_protocol::BootId;

use crate::kernel::procfs::{self, BlockIo};
use crate::kernel::tree;

/// Where a figure was read.
pub use refine_protocol::docs::TopSource as Source;

/// Where a scope's figures are.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The scope's own cgroup v2 directory, when its tree is that cgroup's membership.
    pub cgroup: Option<&'a Path>,
    /// Its H8 limits' directories.
    pub placements: &'a [LimitPlacement],
    /// How its processes are found without a cgroup.
    pub roots: &'a tree::Roots,
}

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The scope's cgroup is gone (the scope ended) or cannot be read.
    #[error("cannot read the scope's cgroup {dir}")]
    Cgroup {
        dir: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Tree(#[from] tree::TreeError),
}

/// The CPU time a sample holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cpu {
    /// The cgroup's total, ended members included.
    Total(Duration),
    /// Each member's own time, by (pid, start time).
    PerProcess(BTreeMap<(u32, u64), Duration>),
}

/// A figure and where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figure<T> {
    pub value: T,
    pub source: Source,
}

/// One look at a scope.
#[derive(Debug, Clone)]
pub struct Sample {
    /// When it was taken (the monotonic clock).
    pub at: Instant,
    /// Where its members were found and its CPU time read.
    pub source: Source,
    cpu: Cpu,
    pub memory_bytes: Figure<u64>,
    pub tasks: Figure<u64>,
    pub block_io: Figure<BlockIo>,
}

impl Sample {
    /// The CPU time the scope spent since `earlier` (a sample of the same scope). On the
    /// `/proc` path a member seen in both counts its difference, one that started since counts
    /// all of its time, and one that ended since counts nothing (see the caveats).
    pub fn cpu_since(&self, earlier: &Sample) -> Duration {
        match (&self.cpu, &earlier.cpu) {
            (Cpu::Total(now), Cpu::Total(then)) => now.saturating_sub(*then),
            (Cpu::PerProcess(now), Cpu::PerProcess(then)) => now
                .iter()
                .map(|(w, t)| t.saturating_sub(then.get(w).copied().unwrap_or_default()))
                .sum(),
            // The scope's source changed between the two (its cgroup went): no figure.
            _ => Duration::ZERO,
        }
    }
}

/// What the members' `/proc` files add up to.
#[derive(Debug, Default)]
struct Sums {
    cpu: BTreeMap<(u32, u64), Duration>,
    rss_bytes: u64,
    threads: u64,
    io: BlockIo,
}

/// Reads each pid's stat and io once; a process that ended meanwhile is left out.
fn sum_over(pids: impl IntoIterator<Item = (u32, Option<u64>)>) -> Sums {
    let mut s = Sums::default();
    for (raw, start) in pids {
        let Some(pid) = rustix::process::Pid::from_raw(raw as i32) else {
            continue;
        };
        // The start time first: a reused pid is not the member.
        let Ok(stat) = procfs::stat(pid) else {
            continue;
        };
        if start.is_some_and(|st| st != stat.start_time) || stat.state.is_exited() {
            continue;
        }
        let Ok(usage) = procfs::usage(pid) else {
            continue;
        };
        s.cpu.insert((raw, stat.start_time), usage.cpu);
        s.rss_bytes += usage.rss_bytes;
        s.threads += u64::from(stat.threads);
        if let Ok(Some(io)) = procfs::block_io(pid) {
            s.io.read_bytes += io.read_bytes;
            s.io.write_bytes += io.write_bytes;
        }
    }
    s
}

fn read_u64(dir: &Path, file: &str) -> Option<u64> {
    procfs::read_pseudo_string(&dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `io.stat`'s `rbytes` and `wbytes`, summed over its devices (`MAJ:MIN rbytes=N wbytes=N ...`);
/// `None` where the io controller is off for the cgroup (no file).
fn io_stat(dir: &Path) -> Option<BlockIo> {
    let text = procfs::read_pseudo_string(&dir.join("io.stat")).ok()?;
    let mut io = BlockIo::default();
    for word in text.split_ascii_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        let n: u64 = value.parse().unwrap_or(0);
        match key {
            "rbytes" => io.read_bytes += n,
            "wbytes" => io.write_bytes += n,
            _ => {}
        }
    }
    Some(io)
}

/// A v1 limit directory's counter (`memory.usage_in_bytes`, `pids.current`).
fn placement_counter(place: &Place<'_>, controller: LimitController, file: &str) -> Option<u64> {
    place
        .placements
        .iter()
        .filter(|p| p.controller == controller && !p.unified)
        .find_map(|p| read_u64(Path::new(&p.dir), file))
}

fn figure<T>(cgroup: Option<T>, or: impl FnOnce() -> T) -> Figure<T> {
    match cgroup {
        Some(value) => Figure {
            value,
            source: Source::Cgroup,
        },
        None => Figure {
            value: or(),
            source: Source::Proc,
        },
    }
}

/// Takes one sample of the scope at `place`; `boot_id` is the current boot (the tree's
/// witnesses belong to it).
pub fn sample(place: &Place<'_>, boot_id: BootId) -> Result<Sample, ObserveError> {
    let at = Instant::now();
    let v2 = place.cgroup;
    let (source, cpu, sums) = match v2 {
        Some(dir) => {
            let failed = |source| ObserveError::Cgroup {
                dir: dir.to_owned(),
                source,
            };
            let stat = procfs::read_pseudo_string(&dir.join("cpu.stat")).map_err(failed)?;
            let usec = stat
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())
                .unwrap_or(0);
            let members = crate::kernel::cgroup::members(dir).map_err(failed)?;
            let sums = sum_over(members.into_iter().map(|(pid, _)| (pid, None)));
            (
                Source::Cgroup,
                Cpu::Total(Duration::from_micros(usec)),
                sums,
            )
        }
        None => {
            let scope = tree::discover(place.roots, boot_id)?;
            let sums = sum_over(
                scope
                    .live()
                    .map(|m| (m.witness.pid, Some(m.witness.start_time))),
            );
            let cpu = Cpu::PerProcess(sums.cpu.clone());
            (Source::Proc, cpu, sums)
        }
    };
    let memory = v2
        .and_then(|d| read_u64(d, "memory.current"))
        .or_else(|| placement_counter(place, LimitController::Memory, "memory.usage_in_bytes"));
    let tasks = v2
        .and_then(|d| read_u64(d, "pids.current"))
        .or_else(|| placement_counter(place, LimitController::Pids, "pids.current"));
    Ok(Sample {
        at,
        source,
        cpu,
        memory_bytes: figure(memory, || sums.rss_bytes),
        tasks: figure(tasks, || sums.threads),
        block_io: figure(v2.and_then(io_stat), || sums.io),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_stat_sums_every_device() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("io.stat"),
            "8:0 rbytes=4096 wbytes=512 rios=1 wios=1 dbytes=0 dios=0\n\
             8:16 rbytes=1024 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
        )
        .unwrap();
        assert_eq!(
            io_stat(dir.path()),
            Some(BlockIo {
                read_bytes: 5120,
                write_bytes: 512
            })
        );
        assert_eq!(io_stat(&dir.path().join("absent")), None);
    }

    #[test]
    fn cpu_since_counts_new_members_whole_and_ended_ones_not() {
        let ms = Duration::from_millis;
        let at = Instant::now();
        let io = Figure {
            value: BlockIo::default(),
            source: Source::Proc,
        };
        let zero = Figure {
            value: 0,
            source: Source::Proc,
        };
        let of = |cpu: Cpu| Sample {
            at,
            source: Source::Proc,
            cpu,
            memory_bytes: zero,
            tasks: zero,
            block_io: io,
        };
        let then = of(Cpu::PerProcess(
            [((10, 1), ms(100)), ((11, 1), ms(50))].into(),
        ));
        // 10 went on, 11 ended, 12 started (and 10's pid was not reused: same start time).
        let now = of(Cpu::PerProcess(
            [((10, 1), ms(300)), ((12, 7), ms(40))].into(),
        ));
        assert_eq!(now.cpu_since(&then), ms(240));
        let (a, b) = (of(Cpu::Total(ms(5))), of(Cpu::Total(ms(905))));
        assert_eq!(b.cpu_since(&a), ms(900));
        assert_eq!(a.cpu_since(&b), Duration::ZERO);
    }
}

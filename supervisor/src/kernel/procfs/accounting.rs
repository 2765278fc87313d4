//! What a process has used, from `/proc/PID/stat` (CPU times, memory, faults),
//! `/proc/PID/io` (block I/O) and `/proc/uptime`.

use super::*;

/// CPU time of a process from `/proc/PID/stat` fields 14–17, in clock ticks
/// ([`ticks_per_second`]): its own user and system time, and that of the children it has
/// waited for (a reaped descendant's time is folded into the parent that reaped it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub system: u64,
    pub children_user: u64,
    pub children_system: u64,
}

impl CpuTicks {
    /// The process's own user + system time.
    pub fn own(&self) -> u64 {
        self.user.saturating_add(self.system)
    }
    /// Own time plus that of the children it reaped.
    pub(crate) fn with_children(&self) -> u64 {
        self.own()
            .saturating_add(self.children_user)
            .saturating_add(self.children_system)
    }
}

/// Reads `/proc/PID/stat` once: the stat fields and the CPU times.
pub fn stat_cpu(pid: Pid) -> Result<(Stat, CpuTicks), ProcfsError> {
    let path = proc_path(pid, "stat");
    let text = read_pseudo_string(&path).map_err(|e| classify(pid, "read", &path, e))?;
    match (parse_stat(pid, &text), parse_cpu_ticks(&text)) {
        (Some(s), Some(c)) => Ok((s, c)),
        _ => Err(ProcfsError::Malformed {
            path,
            field: "stat",
        }),
    }
}

/// Parses fields 14–17 (utime, stime, cutime, cstime) of a stat line.
pub(super) fn parse_cpu_ticks(text: &str) -> Option<CpuTicks> {
    let close = text.rfind(')')?;
    // After the last `)`: field 3 is the first; utime (14) is the twelfth.
    let mut fields = text.get(close + 1..)?.split_ascii_whitespace().skip(11);
    let mut next = || fields.next()?.parse::<i64>().ok().map(|v| v.max(0) as u64);
    Some(CpuTicks {
        user: next()?,
        system: next()?,
        children_user: next()?,
        children_system: next()?,
    })
}

/// The kernel's clock tick rate (`sysconf(_SC_CLK_TCK)`): the unit of stat's times.
pub fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

/// Time since boot (`/proc/uptime`), comparable with a stat start time.
pub fn uptime() -> Result<std::time::Duration, ProcfsError> {
    let path = Path::new("/proc/uptime");
    let text = read_pseudo_string(path).map_err(|source| ProcfsError::Io {
        op: "read",
        path: path.to_owned(),
        source,
    })?;
    text.split_ascii_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(std::time::Duration::from_secs_f64)
        .ok_or(ProcfsError::Malformed {
            path: path.to_owned(),
            field: "uptime",
        })
}

/// What a process costs now (`/proc/PID/stat` fields 14, 15 and 24): CPU time spent in user and
/// kernel mode, and resident memory. For operator views; never an identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub cpu: std::time::Duration,
    pub rss_bytes: u64,
}

/// Reads a process's [`Usage`] (one read of `/proc/PID/stat`).
pub fn usage(pid: Pid) -> Result<Usage, ProcfsError> {
    let path = proc_path(pid, "stat");
    let text = read_pseudo_string(&path).map_err(|e| classify(pid, "read", &path, e))?;
    let malformed = || ProcfsError::Malformed {
        path: path.clone(),
        field: "stat",
    };
    let cpu = parse_cpu_ticks(&text).ok_or_else(malformed)?;
    // After the last `)` the first field is field 3 (state): rss (pages) is field 24.
    let close = text.rfind(')').ok_or_else(malformed)?;
    let rss_pages: u64 = text[close + 1..]
        .split_ascii_whitespace()
        .nth(21)
        .and_then(|f| f.parse().ok())
        .ok_or_else(malformed)?;
    Ok(Usage {
        cpu: std::time::Duration::from_millis(cpu.own().saturating_mul(1000) / ticks_per_second()),
        rss_bytes: rss_pages.saturating_mul(rustix::param::page_size() as u64),
    })
}

/// A process's storage I/O so far (`/proc/PID/io` `read_bytes`, `write_bytes`: what it caused
/// to be fetched from or sent to block devices, its reaped children included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockIo {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Reads a process's [`BlockIo`]; `Ok(None)` when the kernel keeps no I/O accounting
/// (`CONFIG_TASK_IO_ACCOUNTING` off) or this process may not read it (another user's process:
/// the file asks for ptrace access).
pub fn block_io(pid: Pid) -> Result<Option<BlockIo>, ProcfsError> {
    let path = proc_path(pid, "io");
    let text = match read_pseudo_string(&path) {
        Ok(t) => t,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound
            ) =>
        {
            // NotFound for a live pid: a kernel without the file. A gone process is told apart
            // by its stat.
            return match fs::metadata(proc_path(pid, "stat")) {
                Ok(_) => Ok(None),
                Err(e) => Err(classify(pid, "read", &path, e)),
            };
        }
        Err(e) => return Err(classify(pid, "read", &path, e)),
    };
    let keyed = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().parse().ok())
    };
    Ok(Some(BlockIo {
        read_bytes: keyed("read_bytes").unwrap_or(0),
        write_bytes: keyed("write_bytes").unwrap_or(0),
    }))
}

//! The supervisor's own descriptor limit (SPEC T6): every command raises its soft
//! `RLIMIT_NOFILE` to the hard limit before it works (a stop holds descriptors per member, the
//! service per launch), and every workload gets the limit the supervisor started with back.
//!
//! # Caveats
//! The stop does not rely on the raise: where the hard limit is low it holds only as many pidfds
//! as the limit leaves room for (see [`crate::end::stop`]).

use std::sync::OnceLock;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The `RLIMIT_NOFILE` this process started with (before the first raise).
static ORIGINAL: OnceLock<Rlimit> = OnceLock::new();

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, remembering the original for workloads
/// ([`with_original_nofile`]). Idempotent; a failure is logged and changes nothing.
pub fn raise_nofile_limit() {
    let now = getrlimit(Resource::Nofile);
    let _ = ORIGINAL.set(now);
    if now.current != now.maximum {
        let raised = Rlimit {
            current: now.maximum,
            maximum: now.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, "cannot raise the descriptor limit");
        }
    }
}

/// The most descriptors the service asks for (the kernel's default `fs.nr_open`).
const MAX_NOFILE: u64 = 1 << 20;

/// For the service, which holds a few descriptors per live launch: like
/// [`raise_nofile_limit`], and where this process may (`CAP_SYS_RESOURCE`), both limits up to the
/// kernel's ceiling (`fs.nr_open`, at most 2^20). Workloads still get the original.
pub fn raise_nofile_ceiling() {
    raise_nofile_limit();
    let now = getrlimit(Resource::Nofile);
    let ceiling = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|c| c.min(MAX_NOFILE));
    if let (Some(hard), Some(c)) = (now.maximum, ceiling) {
        if c > hard {
            let both = Rlimit {
                current: Some(c),
                maximum: Some(c),
            };
            // Without CAP_SYS_RESOURCE this fails: soft = hard is what remains.
            let _ = setrlimit(Resource::Nofile, both);
        }
    }
    let now = getrlimit(Resource::Nofile);
    let show = |l: Option<u64>| l.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    tracing::info!(
        soft = %show(now.current),
        hard = %show(now.maximum),
        "descriptor limit"
    );
}

/// `rlimits` for a workload: unchanged when it sets `RLIMIT_NOFILE` itself or this process
/// never raised its limit; else with the original limit appended, so the workload sees the
/// limit the supervisor was started with, not the raised one.
pub fn with_original_nofile(rlimits: &[refine_protocol::Rlimit]) -> Vec<refine_protocol::Rlimit> {
    let mut out = rlimits.to_vec();
    let Some(orig) = ORIGINAL.get() else {
        return out;
    };
    let now = getrlimit(Resource::Nofile);
    let explicit = rlimits.iter().any(|r| r.resource == libc::RLIMIT_NOFILE);
    if !explicit && now.current != orig.current {
        out.push(refine_protocol::Rlimit {
            resource: libc::RLIMIT_NOFILE,
            soft: orig.current.unwrap_or(u64::MAX),
            hard: orig.maximum.unwrap_or(u64::MAX),
        });
    }
    out
}

/// How many more descriptors this process may open now: the soft limit less those open, less
/// `reserve` (left for `/proc` reads, pipes and other threads). `usize::MAX` without a limit.
pub fn descriptors_left(reserve: usize) -> usize {
    let Some(soft) = getrlimit(Resource::Nofile).current else {
        return usize::MAX;
    };
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(open)
        .saturating_sub(reserve)
}

//! The stop lease (issue 38 item 7): a stop that quiesces a scope is never left half done.
//!
//! The lease itself is the runtime's stop fence (`locks/stop.lock`), a `flock` the kernel
//! releases with the last descriptor of the process holding it: a stop killed with SIGKILL
//! holds nothing. While it holds the fence, the fenced phase of a stop keeps a file,
//! `locks/ID.stopping`, from before its first freeze or SIGSTOP until everything it stopped is
//! killed or resumed; `froze=1` in it says the cgroup's freeze is the stop's own. Whoever takes
//! the fence next and finds such a file knows its stop died: nobody else can be running it.
//!
//! The next holder completes the stop (the request it carried is kept: `stop` was asked for),
//! with the freeze the dead stop made treated as its own, so a completion that fails thaws it
//! and resumes what the dead stop had SIGSTOPped. The next `stop` (of any scope), `recover`,
//! each maintenance pass of the service and the readers (`ps`, `show`) look; the readers only
//! when the fence is free at once.
//!
//! The file is written without `fsync`: it matters within one boot only (a reboot ends every
//! scope, frozen or not).

use std::io::Write;
use std::time::{Duration, Instant};

use refine_protocol::record::StopCause;
use refine_protocol::{ProcessWitness, RegistrationId};

use super::{run, Prelude, StopError, StopOptions, StopReport};
use crate::end::assess::BootSource;
use crate::kernel::signal::{Signal, Verified};
use crate::store::fence::{self, Fence};
use crate::store::registry::{RegistryError, Runtime};

/// What a dead stop left: whether the scope's cgroup freeze was its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Left {
    pub(super) froze: bool,
}

/// The lease file of one fenced phase; removed when the phase ends, whichever way.
pub(super) struct Lease {
    path: std::path::PathBuf,
}

impl Lease {
    /// Writes `locks/ID.stopping`. A failure to write it never prevents the stop (it only
    /// loses the completion should this process die).
    pub(super) fn take(runtime: &Runtime, id: RegistrationId, froze: bool) -> Lease {
        let path = runtime.stop_lease_path(id);
        let text = format!("froze={} pid={}\n", u8::from(froze), std::process::id());
        let written = std::fs::File::create(&path).and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(%id, path = %path.display(), error = %e, "cannot write the stop lease");
        }
        Lease { path }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The lease a dead stop left for `id`, read by the fence's holder (so any lease found is
/// abandoned). Text that does not say `froze=1` (torn, edited) claims no freeze: a freeze
/// nobody can be shown to have made is never thawed.
pub(super) fn left(runtime: &Runtime, id: RegistrationId) -> Option<Left> {
    let text = std::fs::read(runtime.stop_lease_path(id)).ok()?;
    let froze = text
        .split(|b| b.is_ascii_whitespace())
        .any(|word| word == b"froze=1");
    Some(Left { froze })
}

/// Ends a dead stop's lease on a scope that is over: thaws a freeze it made, removes the file.
pub(super) fn clear(runtime: &Runtime, reg: &refine_protocol::record::Registration, left: Left) {
    if left.froze {
        if let Some(cg) = reg.cgroup.as_ref().filter(|c| c.holds_scope()) {
            let _ =
                crate::kernel::cgroup::write(std::path::Path::new(&cg.path), "cgroup.freeze", "0");
        }
    }
    let _ = std::fs::remove_file(runtime.stop_lease_path(reg.id));
}

/// On a failed completion, resumes the members the dead stop had SIGSTOPped (those this
/// attempt found stopped), each through a verified pidfd.
pub(super) fn resume_found_stopped(found: &[ProcessWitness]) {
    for w in found {
        if let Ok(v) = Verified::open(*w) {
            let _ = v.signal(Signal::CONT);
        }
    }
}

/// What one completion did.
#[derive(Debug)]
pub struct Completed {
    pub id: RegistrationId,
    pub result: Result<StopReport, StopError>,
}

/// Completes every stop whose lease was abandoned, but `skip`'s (the caller's own scope, which
/// its stop completes), for a caller that holds the runtime's stop fence.
pub(crate) fn complete_abandoned(
    runtime: &Runtime,
    boot: &dyn BootSource,
    skip: Option<RegistrationId>,
    _fence: &Fence,
) -> Vec<Completed> {
    let mut done = Vec::new();
    for id in runtime.stop_leases() {
        if Some(id) == skip {
            continue;
        }
        let reg = match runtime.read_registration(id) {
            Ok(reg) => reg,
            // Forgotten, or never registered: nothing left to stop.
            Err(RegistryError::NotFound(_)) => {
                let _ = std::fs::remove_file(runtime.stop_lease_path(id));
                continue;
            }
            Err(e) => {
                tracing::warn!(%id, error = %crate::error::error_chain(&e), "a stop lease names an unreadable record; left");
                continue;
            }
        };
        let cause = runtime
            .read_stop_request(id)
            .ok()
            .flatten()
            .map_or(StopCause::Operator, |r| r.cause);
        let opts = StopOptions {
            boot,
            cause: Some(cause),
            ..StopOptions::default()
        };
        let now = Instant::now();
        let pre = Prelude {
            recorded: true,
            ..Prelude::default()
        };
        let result = run(runtime, &reg, &opts, now, now, pre);
        match &result {
            Ok(r) => {
                tracing::info!(%id, outcome = ?r.outcome, killed = r.killed, "completed a stop its stopper abandoned")
            }
            Err(e) => {
                tracing::warn!(%id, error = %crate::error::error_chain(e), "could not complete an abandoned stop")
            }
        }
        done.push(Completed { id, result });
    }
    done
}

/// [`complete_abandoned`] for a caller that does not hold the fence: nothing to do (one
/// `readdir`) when no lease exists; otherwise the fence is taken within `wait` (zero: only if
/// it is free now, as for a reader) and the leases are completed.
pub fn complete_if_abandoned(
    runtime: &Runtime,
    boot: &dyn BootSource,
    wait: Duration,
) -> Vec<Completed> {
    if runtime.stop_leases().is_empty() {
        return Vec::new();
    }
    let fence = match fence::acquire(&runtime.stop_fence_path(), wait) {
        Ok(f) => f,
        Err(_) => return Vec::new(),
    };
    complete_abandoned(runtime, boot, None, &fence)
}

//! `refine-guardian`: the per-launch subreaper between a launcher and its workload (SPEC G1–G14).
//!
//! The launcher starts it with one end of a `SOCK_SEQPACKET` socketpair as stdin and sends the
//! launch spec over it (see `refine_protocol_core::frame`). The guardian becomes a child subreaper,
//! creates the proof file, forks the workload behind a gate, reports identities, execs the
//! workload on *start*, reaps every descendant, and writes an fsynced receipt once the kernel
//! says no child is left. It is `no_std` and links no C library (raw system calls and its own
//! `_start`, see `sys::raw`): no allocator, no runtime, nothing allocates in the wait loop, and the
//! binary and its resident footprint stay small.
//!
//! The steps read top to bottom in [`supervise`]; each kernel mechanism lives in its own module.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

mod capture;
mod channel;
mod ending;
mod error;
mod gate;
mod identity;
mod isolate;
mod reap;
mod receipt;
mod seccomp;
mod signals;
mod subreaper;
mod sys;

use refine_protocol_core::frame::{CAPTURE_FDS, FLAG_LANDLOCK, MAX_ARGS, MAX_FRAME};
use refine_protocol_core::{Frame, Hello, Receipt, ScopeEnd};

use channel::Channel;
use error::Error;
use gate::{Decision, Release};
use reap::Exec;
use signals::Signals;

/// The launch frame plus, after 8-byte alignment, the argv and envp pointer arrays.
const REGION_LEN: usize = MAX_FRAME + 8 + 2 * (MAX_ARGS + 1) * core::mem::size_of::<usize>();

/// Runs the guardian; the return value is the process exit status.
pub fn run() -> i32 {
    let mut chan = match Channel::adopt_stdin() {
        Ok(chan) => chan,
        Err(e) => {
            e.report();
            return e.exit_code();
        }
    };
    let code = match supervise(&mut chan) {
        Ok(()) => 0,
        Err(e) => {
            e.report();
            chan.send(&Frame::GuardianFailed {
                code: e.code(),
                errno: e.errno(),
            });
            e.exit_code()
        }
    };
    chan.drain_unread();
    code
}

fn supervise(chan: &mut Channel) -> Result<(), Error> {
    // G13: out of the launcher's process group, not dumpable.
    isolate::leave_launcher()?;
    // G11, G12: every inherited disposition reset; signals are only ever read from the signalfd.
    let signals = Signals::block_all()?;
    let mut held = launch(chan, &signals)?;
    // F5: the handshake, the fork and the gate reached deeper into the stack than the reaping
    // loop ever does (their buffers are in `launch`'s frame and below): those pages go back to
    // the kernel too, so a held workload costs the stack the loop itself uses.
    sys::discard_stack_below();

    // G5-G9: reap until ECHILD; X7: and, with a cgroup, until it is empty too.
    let out = reap::until_empty(
        &mut held.workload,
        chan,
        &signals,
        reap::Watched {
            proof: &held.proof,
            pdeath_signal: held.pdeath_signal,
            exec: held.exec,
            cgroup: held.cgroup.as_ref(),
            drain: held.drain.as_mut(),
        },
    )?;
    // L1: no process of the scope is left: the capture ends, recorded before the receipt.
    if let Some(drain) = held.drain.take() {
        drain.finish(chan);
    }

    // G5: the receipt, only now; G14: an error on the way is named in it.
    let (end, spawn_errno) = match held.failure.or(out.failure) {
        Some(e) => (ScopeEnd::GuardianError { code: e.code() }, e.errno()),
        None => (held.end, held.spawn_errno),
    };
    let receipt = Receipt {
        registration: held.registration,
        runtime: held.runtime,
        boot_id: held.boot_id,
        guardian: held.guardian,
        workload: refine_protocol_core::ProcessWitness {
            pid: held.workload.pid.as_u32(),
            start_time: held.workload.start_time,
        },
        proof: held.proof.identity,
        status: out.status,
        end,
        spawn_errno,
        reaped: out.reaped,
        workload_exited_at_ns: out.exited_at_ns,
        written_at_ns: sys::realtime_ns(),
        // H4: ECHILD said every process of the tree was waited for: their cost is all here.
        usage: Some(sys::children_usage()),
    };
    // X5: retried until it lands (the scope stays live meanwhile).
    held.proof.write(&receipt);
    // L3: the launcher's lock, if held here, goes back with the receipt.
    chan.send_last(&Frame::ScopeExited(receipt));
    // F4: the launcher reads the empty cgroup's accounting and removes it; without a launcher
    // (G7) nobody would, so the guardian does. Best effort: a cgroup that is not empty stays.
    if let (Some(leaf), true) = (held.cgroup, chan.launcher_gone()) {
        let _ = leaf.remove();
    }
    Ok(())
}

/// What the launch leaves for the reaping loop and the receipt: the spec's scalars only (the
/// frame's pages are gone).
struct Launched {
    workload: gate::Workload,
    proof: receipt::ProofFile,
    guardian: refine_protocol_core::ProcessWitness,
    boot_id: refine_protocol_core::BootId,
    end: ScopeEnd,
    spawn_errno: i32,
    exec: Exec,
    failure: Option<Error>,
    pdeath_signal: Option<u32>,
    registration: refine_protocol_core::RegistrationId,
    runtime: refine_protocol_core::RuntimeId,
    cgroup: Option<sys::Leaf>,
    drain: Option<capture::Drain>,
}

/// The workload's stdio from the received descriptors; for a capturing launch (L1), its stdout
/// and stderr are the guardian's pipes and the artifacts and indexes go to the [`capture::Drain`].
fn capture_plan(
    fds: [Option<sys::OwnedFd>; sys::MAX_RECEIVED_FDS],
    capture: Option<refine_protocol_core::frame::CaptureParams>,
) -> Result<([Option<sys::OwnedFd>; 3], Option<capture::Drain>), Error> {
    let [stdin, out, err, out_index, err_index, _, _, _] = fds;
    let Some(params) = capture else {
        return Ok(([stdin, out, err], None));
    };
    let (Some(out), Some(err), Some(out_index), Some(err_index)) = (out, err, out_index, err_index)
    else {
        return Err(Error::BadDescriptors);
    };
    let (drain, ends) = capture::Drain::new([out, err], [out_index, err_index], params.log_cap)?;
    Ok(([stdin, Some(ends.stdout), Some(ends.stderr)], Some(drain)))
}

/// From the handshake to the workload's exec (or the end of a launch that never ran). Not
/// inlined: its frame (the identities' read buffers, the gate's) is below the reaping loop's and
/// is given back before that loop runs.
#[inline(never)]
fn launch(chan: &mut Channel, signals: &Signals) -> Result<Launched, Error> {
    let region = sys::map_region(REGION_LEN).map_err(Error::Memory)?;
    let region_at = region.as_ptr() as usize;

    // G2: the bounded handshake.
    let (launch, tail) = chan.recv_launch(region, signals)?;
    let spec = launch.spec;
    // Right after the frame, sized to this launch: a small launch dirties one page.
    let (argv, envp) = sys::pointer_slots(tail, spec.argv.len() + 1, spec.env.len() + 1)
        .ok_or(Error::Memory(sys::Errno(libc::EINVAL)))?;

    // G1, G4, G5: subreaper, proof file (X5: its receipt's space allocated), identities, all
    // before the fork.
    subreaper::become_subreaper()?;
    let proof = receipt::ProofFile::create(spec.proof_path)?;
    let guardian = identity::own()?;
    let boot_id = identity::boot_id()?;
    let plan = gate::ExecPlan::build(&spec, argv, envp);
    // L1: a capturing launch's stdout and stderr are pipes of the guardian's, drained into the
    // artifacts it was sent.
    let mut fds = launch.fds;
    // X11: the Landlock ruleset, the last descriptor sent, for the gated child to apply.
    let landlock = spec.flags & FLAG_LANDLOCK != 0;
    let ruleset = match landlock {
        true => fds[spec.stdio_fds as usize - 1].take(),
        false => None,
    };
    // H6: the readiness pipe, the last descriptor before it, goes to the workload on its number.
    let ready = match spec.ready_fd {
        Some(_) => fds[spec.stdio_fds as usize - 1 - usize::from(landlock)].take(),
        None => None,
    };
    // L3: the launcher's registration lock, held until the channel ends.
    chan.hold_lock(fds[CAPTURE_FDS as usize].take());
    let (stdio, drain) = capture_plan(fds, spec.capture)?;

    // G3: fork behind the gate, report, and wait for *start*. From the fork on, every path
    // ends in a receipt (G14): errors are recorded, not returned.
    let mut workload = gate::fork_gated(&spec, &plan, stdio, ready, ruleset, chan, signals)?;
    isolate::release_cwd();
    let decision = if workload.ready {
        chan.send(&Frame::Hello(Hello {
            guardian,
            boot_id,
            workload: refine_protocol_core::ProcessWitness {
                pid: workload.pid.as_u32(),
                start_time: workload.start_time,
            },
            workload_pgid: workload.pgid,
            workload_sid: workload.sid,
            proof: proof.identity,
            cgroup: workload.placement,
            // V1: the build the registration records for this guardian.
            provenance: Some(sys::PROVENANCE),
        }));
        proof.start_writeback();
        workload.await_start(chan, signals, spec.start_timeout_ms)
    } else {
        match workload.failure {
            Some(e) => Decision::Failed(e),
            None => Decision::Abort,
        }
    };
    let mut failure = None;
    let (end, spawn_errno, exec) = match decision {
        Decision::Start => match release(&mut workload, chan, signals, &spec) {
            Release::Started => {
                chan.send(&Frame::Started);
                (ScopeEnd::Completed, 0, Exec::Yes)
            }
            Release::SpawnFailed(errno, step) => {
                chan.send(&Frame::SpawnFailed {
                    errno: errno.0,
                    step,
                });
                (ScopeEnd::SpawnFailed, errno.0, Exec::No)
            }
            Release::NeverExecuted => (ScopeEnd::Aborted, 0, Exec::No),
            Release::Failed(e) => {
                failure = Some(e);
                (ScopeEnd::Aborted, 0, Exec::Unknown)
            }
        },
        Decision::Abort => {
            workload.kill_gated();
            (ScopeEnd::Aborted, 0, Exec::No)
        }
        Decision::Failed(e) => {
            workload.kill_gated();
            failure = Some(e);
            (ScopeEnd::Aborted, 0, Exec::No)
        }
    };

    // F5: the frame and the exec arrays served their purpose (the child execs from its own
    // copy): their pages go back to the kernel, so a held workload costs the guardian its stack
    // and data page only. Nothing in the region is read from here on: only the spec's scalars.
    let (pdeath_signal, registration, runtime) =
        (spec.pdeath_signal, spec.registration, spec.runtime);
    // The cgroup's path is in the region too: held as a directory and a name instead.
    let cgroup = spec.cgroup.and_then(sys::Leaf::of);
    sys::discard(region_at, REGION_LEN);

    Ok(Launched {
        workload,
        proof,
        guardian,
        boot_id,
        end,
        spawn_errno,
        exec,
        failure,
        pdeath_signal,
        registration,
        runtime,
        cgroup,
        drain,
    })
}

/// Opens the gate, then learns (bounded, see `gate`) how the exec went.
fn release(
    workload: &mut gate::Workload,
    chan: &mut Channel,
    signals: &Signals,
    spec: &refine_protocol_core::LaunchSpec<'static>,
) -> Release {
    if !workload.open_gate() {
        return Release::NeverExecuted;
    }
    workload.exec_result(chan, signals, spec.pdeath_signal, spec.start_timeout_ms)
}

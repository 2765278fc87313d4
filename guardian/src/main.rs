//! `refine-guardian`: the per-launch subreaper between a launcher and its workload (SPEC G1–G10).
//!
//! The launcher starts it with one end of a `SOCK_SEQPACKET` socketpair as stdin and sends the
//! launch spec over it (see `refine_protocol::frame`). The guardian becomes a child subreaper,
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

mod channel;
mod error;
mod gate;
mod identity;
mod reap;
mod receipt;
mod signals;
mod subreaper;
mod sys;

use refine_protocol::frame::{MAX_ARGS, MAX_FRAME};
use refine_protocol::{Frame, Hello, Receipt, ScopeEnd, WorkloadStatus};

use channel::Channel;
use error::Error;
use gate::{Decision, Release};
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
    match supervise(&mut chan) {
        Ok(()) => 0,
        Err(e) => {
            e.report();
            chan.send(&Frame::GuardianFailed {
                code: e.code(),
                errno: e.errno(),
            });
            e.exit_code()
        }
    }
}

fn supervise(chan: &mut Channel) -> Result<(), Error> {
    // Before anything can be forked: signals are only ever read from the signalfd.
    let signals = Signals::block_all()?;
    let region = sys::map_region(REGION_LEN).map_err(Error::Memory)?;

    // G2: the bounded handshake.
    let (launch, tail) = chan.recv_launch(region, &signals)?;
    let spec = launch.spec;
    // Right after the frame, sized to this launch: a small launch dirties one page.
    let (argv, envp) = sys::pointer_slots(tail, spec.argv.len() + 1, spec.env.len() + 1)
        .ok_or(Error::Memory(sys::Errno(libc::EINVAL)))?;

    // G1, G4, G5: subreaper, proof file, identities, all before the fork.
    subreaper::become_subreaper()?;
    let proof = receipt::ProofFile::create(spec.proof_path)?;
    let guardian = identity::own()?;
    let boot_id = identity::boot_id()?;
    let plan = gate::ExecPlan::build(&spec, argv, envp);

    // G3: fork behind the gate, report, and wait for *start*.
    let mut workload = gate::fork_gated(&spec, &plan, launch.stdio)?;
    let decision = if workload.ready {
        chan.send(&Frame::Hello(Hello {
            guardian,
            boot_id,
            workload: refine_protocol::ProcessWitness {
                pid: workload.pid.as_u32(),
                start_time: workload.start_time,
            },
            workload_pgid: workload.pgid,
            workload_sid: workload.sid,
            proof: proof.identity,
        }));
        gate::await_start(chan, &signals, spec.start_timeout_ms)?
    } else {
        Decision::Abort
    };
    let (end, spawn_errno) = match decision {
        Decision::Start => match release(&mut workload, &proof) {
            Release::Started => {
                chan.send(&Frame::Started);
                (ScopeEnd::Completed, 0)
            }
            Release::SpawnFailed(errno) => {
                chan.send(&Frame::SpawnFailed { errno: errno.0 });
                (ScopeEnd::SpawnFailed, errno.0)
            }
            Release::Vanished => (ScopeEnd::Aborted, 0),
        },
        Decision::Abort => {
            workload.kill_gated();
            (ScopeEnd::Aborted, 0)
        }
    };

    // G5-G9: reap until ECHILD.
    let started = end == ScopeEnd::Completed;
    let out = reap::until_empty(&mut workload, chan, &signals, spec.pdeath_signal, started)?;

    // G5: the receipt, only now.
    let receipt = Receipt {
        registration: spec.registration,
        runtime: spec.runtime,
        boot_id,
        guardian,
        workload: refine_protocol::ProcessWitness {
            pid: workload.pid.as_u32(),
            start_time: workload.start_time,
        },
        proof: proof.identity,
        status: if started {
            out.status
        } else {
            WorkloadStatus::NeverStarted
        },
        end,
        spawn_errno,
        reaped: out.reaped,
        workload_exited_at_ns: out.exited_at_ns,
        written_at_ns: sys::realtime_ns(),
    };
    proof.write(&receipt)?;
    chan.send(&Frame::ScopeExited(receipt));
    Ok(())
}

/// Opens the gate and, while the child execs, reserves the receipt's block (so the receipt is an
/// in-place write); then learns how the exec went.
fn release(workload: &mut gate::Workload, proof: &receipt::ProofFile) -> Release {
    if !workload.open_gate() {
        return Release::Vanished;
    }
    proof.reserve();
    workload.exec_result()
}

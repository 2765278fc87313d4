//! What the CLI and the service share: the one assessment as both show it, the `ps` rows, the
//! `show`/`stop`/`recover` documents, retention with the assessment as evidence, the capacity
//! report and the launch request an API spec becomes.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::api::{LaunchAsk, ScopeView};
use refine_protocol::docs::ScopeReason;
use refine_protocol::record::StallRecord;
use refine_protocol::{Kind, Receipt, Registration, RegistrationId, StopCause};

use super::docs::{
    artifact_doc, forget_doc, record_doc, retention_doc, stray_doc, utc, watch_doc, ArtifactDoc,
    ArtifactsDoc, AssessmentDoc, GcDoc, KindUnreadable, ProcessDoc, ReceiptDoc, RecoverAction,
    RecoverDoc, RecoverEntryDoc, ResidueStopDoc, ResultDoc, ScopeKind, ShowDoc, State,
    StatusFields, StopDetail, StopDoc, StopFailed, StopOutcomeDoc, StopTimingsDoc, UsageDoc,
};
use super::error::{CliError, ServiceError, SpecError};
use refine_supervisor::error_chain;
use refine_supervisor::launch::pty::WindowSize;
use refine_supervisor::store::registry::{RegistryError, Runtime, Stream};
use refine_supervisor::Command;
use refine_supervisor::{
    end::assess, end::open_index, end::recover, end::stop, history::forget, history::retention,
    kernel::procfs, kernel::tree,
};

/// Standard output, locked.
pub(crate) fn out() -> io::StdoutLock<'static> {
    io::stdout().lock()
}

/// Prints one JSON document, buffered (standard output is line-buffered: unbuffered, a
/// `ps --all --json` of a long history would make one `write` per line).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let mut o = io::BufWriter::with_capacity(64 * 1024, out());
    serde_json::to_writer_pretty(&mut o, value)
        .map_err(|e| CliError::Output(io::Error::other(e)))?;
    writeln!(o).map_err(CliError::Output)?;
    o.flush().map_err(CliError::Output)
}

// ---------------------------------------------------------------------------------------------
// Assessment, as the CLI shows it.

/// The shared assessment's verdict, flattened for display.
#[derive(Debug, Clone)]
pub struct Assessed {
    pub state: State,
    pub reason: Option<ScopeReason>,
    pub receipt: Option<Receipt>,
}

/// Runs the one shared assessment (A1) for `reg`.
pub fn assess(rt: &Runtime, reg: &Registration) -> Assessed {
    assess_one(rt, reg)
}

/// One registration as `ps` shows it.
fn view(rt: &Runtime, reg: &Registration, a: Assessed) -> ScopeView {
    let watch = stall_record(rt, reg, a.state);
    // Display only; an unreadable result record shows as none.
    let result = rt.read_result(reg.id).ok().flatten();
    let reported = result.as_ref().map(|r| r.workload_status);
    // A failed residue stop explains a scope that is still live (W7).
    let stop_failure = result.as_ref().and_then(|r| r.stop_failure.clone());
    let status = StatusFields::of(a.receipt.map(|r| r.status).or(reported));
    // W16: the kernel's word on the main process, not the launcher's: a live scope whose
    // launcher died before it could report the status still shows its main process ended.
    let workload_running = a.state == State::Live && workload_runs(&reg.hello.workload);
    ScopeView {
        id: reg.id.to_string(),
        kind: ScopeKind::Known(reg.kind),
        label: reg.label.clone(),
        state: a.state,
        reason: a
            .reason
            .or(stop_failure.map(|error| ScopeReason::StopFailed { error })),
        status: status.status,
        exit_code: status.exit_code,
        signal: status.signal,
        workload_running: Some(workload_running),
        outcome: result.map(|r| r.outcome),
        started_at_unix_ms: reg.started_at_unix_ms,
        age_secs: refine_supervisor::kernel::clock::unix_ms()
            .saturating_sub(reg.started_at_unix_ms)
            / 1000,
        pid: reg.hello.workload.pid,
        guardian_pid: reg.hello.guardian.pid,
        cwd: reg.cwd.clone(),
        argv: reg.argv.clone(),
        stdout: reg.stdout_path.clone(),
        stderr: reg.stderr_path.clone(),
        stalled: watch.as_ref().and_then(|w| w.stalled),
        silent: watch.and_then(|w| w.silent),
        usage: a.receipt.and_then(|r| r.usage).map(UsageDoc::from),
        ready: reg.readiness.as_ref().map(|_| {
            rt.read_ready(reg.id)
                .ok()
                .flatten()
                .map_or(refine_protocol::docs::ReadyState::Starting, |r| r.state)
        }),
    }
}

/// Whether the workload's witness names a running process (not a zombie). A `/proc` that cannot
/// be read says nothing: the process is taken for running, as `ps` showed it before it knew.
fn workload_runs(w: &refine_protocol::ProcessWitness) -> bool {
    match procfs::stat_of(w) {
        Ok(Some(stat)) => !stat.state.is_exited(),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// A row for a record that does not decode: shown, never guessed at, never deleted.
fn corrupt_view(rt: &Runtime, id: RegistrationId, err: &RegistryError) -> ScopeView {
    ScopeView {
        id: id.to_string(),
        kind: ScopeKind::Unreadable(KindUnreadable::Unknown),
        label: String::new(),
        state: State::Corrupt,
        reason: Some(ScopeReason::Error {
            error: error_chain(err),
        }),
        status: None,
        exit_code: None,
        signal: None,
        workload_running: Some(false),
        outcome: None,
        started_at_unix_ms: 0,
        age_secs: 0,
        pid: 0,
        guardian_pid: 0,
        cwd: String::new(),
        argv: Vec::new(),
        stdout: rt.log_path(id, Stream::Stdout).display().to_string(),
        stderr: rt.log_path(id, Stream::Stderr).display().to_string(),
        stalled: None,
        silent: None,
        usage: None,
        ready: None,
    }
}

/// The `ps` rows: with `all`, every registration of the history; without, only those in the
/// open index (not yet proven exited: O(open), F1), and of those the ones not `exited` now.
pub fn list_views(rt: &Runtime, all: bool) -> Result<Vec<ScopeView>, RegistryError> {
    finish_abandoned_stops(rt);
    let ids = if all { rt.list_ids()? } else { rt.open_ids()? };
    let mut rows = Vec::new();
    for id in ids {
        let row = match rt.read_registration(id) {
            Ok(reg) => {
                let a = assess(rt, &reg);
                if !all && a.state == State::Exited {
                    continue;
                }
                // Forgotten while it was read (forget moves the record aside before the proof
                // goes): not a row, never a momentary `unverified`.
                if a.state == State::Unverified && !rt.record_path(id).exists() {
                    continue;
                }
                view(rt, &reg, a)
            }
            // Forgotten meanwhile, or an open marker whose record is not written yet.
            Err(RegistryError::NotFound(_)) => continue,
            Err(e) => corrupt_view(rt, id, &e),
        };
        rows.push(row);
    }
    // Newest first, as `podman ps` lists.
    rows.sort_by(|a, b| (b.started_at_unix_ms, &b.id).cmp(&(a.started_at_unix_ms, &a.id)));
    Ok(rows)
}

/// The stall watch's status of a live scope (display only; an unreadable one shows as none).
fn stall_record(rt: &Runtime, reg: &Registration, state: State) -> Option<StallRecord> {
    if state != State::Live {
        return None;
    }
    rt.read_stall(reg.id).ok().flatten()
}

/// The `show --json` document: record, receipt, assessment.
/// Issue 38 item 7: a reader that finds a scope quiesced by a stop nobody runs any more (its
/// lease left, the runtime's stop fence free) completes that stop before it reports; nothing
/// (one `readdir`) when there is none, and never a wait on a running stop.
fn finish_abandoned_stops(rt: &Runtime) {
    refine_supervisor::end::stop::complete_if_abandoned(
        rt,
        &refine_supervisor::end::assess::KERNEL_BOOT,
        std::time::Duration::ZERO,
    );
}

pub fn show_doc(rt: &Runtime, id: RegistrationId) -> Result<ShowDoc, CliError> {
    finish_abandoned_stops(rt);
    let reg = rt.read_registration(id)?;
    let a = assess(rt, &reg);
    let result = match rt.read_result(id) {
        Ok(Some(r)) => Some(ResultDoc::Written {
            reason: super::docs::result_reason(&r),
            outcome: r.outcome,
            status: StatusFields::of(Some(r.workload_status)),
            written_at: utc(r.written_at_unix_ms),
            // Until whoever proves the end completes the record, the receipt's own figures.
            usage: r
                .usage
                .or(a.receipt.and_then(|rc| rc.usage))
                .map(UsageDoc::from),
            residue_stop: r.residue_stop.as_ref().map(ResidueStopDoc::from),
            stop_failure: r.stop_failure,
            cgroup_usage: r.cgroup_usage.map(super::docs::cgroup_usage_doc),
            limit_usage: r.limit_usage.map(super::docs::limit_usage_doc),
        }),
        Ok(None) => None,
        Err(e) => Some(ResultDoc::Unreadable {
            error: error_chain(&e),
        }),
    };
    Ok(ShowDoc {
        id: id.to_string(),
        state: a.state,
        reason: a.reason.clone(),
        assessment: AssessmentDoc {
            state: a.state,
            reason: a.reason,
        },
        record: record_doc(&reg),
        result,
        receipt: a.receipt.as_ref().map(ReceiptDoc::of),
        artifacts: {
            let receipt = rt.capture_receipt_path(id);
            let doc = |path: &str, name: &str| ArtifactDoc {
                incomplete: super::docs::capture_end(&receipt, name),
                ..artifact_doc(Path::new(path))
            };
            ArtifactsDoc {
                stdout: doc(&reg.stdout_path, "stdout"),
                stderr: doc(&reg.stderr_path, "stderr"),
            }
        },
        watch: stall_record(rt, &reg, a.state).map(|r| watch_doc(&r)),
        processes: if a.state == State::Live {
            processes(&reg)
        } else {
            Vec::new()
        },
        readiness: reg.readiness.as_ref().map(|spec| {
            let rec = rt.read_ready(id).ok().flatten();
            refine_protocol::docs::ReadinessDoc {
                mode: spec.mode,
                fd: spec.fd,
                cmd: spec.cmd.clone(),
                timeout_ms: spec.timeout_ms,
                state: rec
                    .as_ref()
                    .map_or(refine_protocol::docs::ReadyState::Starting, |r| r.state),
                since: rec.as_ref().map(|r| utc(r.at_unix_ms)),
                status: rec.as_ref().and_then(|r| r.status.clone()),
                reason: rec.as_ref().and_then(|r| r.reason.clone()),
                probes: rec.as_ref().map_or(0, |r| r.probes),
            }
        }),
    })
}

/// The live scope's processes: below the guardian, and those carrying its owner marker.
/// For display: a process that ends during the scan is left out.
fn processes(reg: &Registration) -> Vec<ProcessDoc> {
    let Ok(boot) = assess::BootSource::boot_id(&assess::KERNEL_BOOT) else {
        return Vec::new();
    };
    let roots = tree::Roots {
        guardian: Some(reg.hello.guardian),
        members: Vec::new(),
        owner: Some(reg.id),
    };
    let Ok(scope) = tree::discover(&roots, boot) else {
        return Vec::new();
    };
    scope
        .members
        .iter()
        .filter_map(|m| {
            let pid = procfs::pid_of(&m.witness)?;
            let usage = procfs::usage(pid).ok()?;
            let (program, args) = procfs::program_and_args(pid);
            Some(ProcessDoc {
                pid: m.witness.pid,
                ppid: m.ppid,
                start_time: m.witness.start_time,
                state: format!("{:?}", m.state).to_lowercase(),
                program,
                args,
                cpu_ms: refine_protocol::time::saturating_ms(usage.cpu),
                rss_bytes: usage.rss_bytes,
                found: m.found,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Shared operations (CLI and service).

/// Whether `reg` has ended as `wait` means it (not live, and its launcher has its output and
/// result, so `logs` shows it all): its state and `wait`'s exit code, or `None` while not.
pub fn ended(rt: &Runtime, reg: &Registration) -> Option<(State, i32)> {
    let a = assess_one(rt, reg);
    if a.state == State::Live || !rt.let_go(reg.id) {
        return None;
    }
    let reported = rt
        .read_result(reg.id)
        .ok()
        .flatten()
        .map(|r| r.workload_status);
    let (code, _) = wait_code(a.receipt.map(|r| r.status).or(reported));
    Some((a.state, code))
}

/// The one shared assessment (A1), flattened for display.
pub fn assess_one(rt: &Runtime, reg: &Registration) -> Assessed {
    flatten(&assess::assess(rt, reg, &assess::KERNEL_BOOT))
}

/// An [`assess::Assessment`] as the CLI shows it.
pub fn flatten(a: &assess::Assessment) -> Assessed {
    match a {
        assess::Assessment::Live => Assessed {
            state: State::Live,
            reason: None,
            receipt: None,
        },
        assess::Assessment::Exited { proof } => match proof {
            assess::ExitProof::Receipt(r) => Assessed {
                state: State::Exited,
                reason: None,
                receipt: Some(*r),
            },
            assess::ExitProof::EarlierBoot { boot_id } => Assessed {
                state: State::Exited,
                reason: Some(ScopeReason::EarlierBoot {
                    boot_id: boot_id.to_string(),
                }),
                receipt: None,
            },
        },
        assess::Assessment::Unverified { reason } => Assessed {
            state: State::Unverified,
            reason: Some(ScopeReason::Unverified {
                failed: reason.doc(),
            }),
            receipt: None,
        },
    }
}

/// The shared stop for one registration, with an optional grace (its length and polite
/// signal, T7); the `stop --json` document.
pub fn stop_one(
    rt: &Runtime,
    reg: &Registration,
    cause: StopCause,
    grace: Option<(Duration, refine_supervisor::kernel::signal::Signal)>,
) -> StopDoc {
    let mut opts = stop::StopOptions {
        cause: Some(cause),
        grace: grace.map(|(g, _)| g),
        ..stop::StopOptions::default()
    };
    if let Some((_, sig)) = grace {
        opts.grace_signal = sig;
    }
    match stop::stop(rt, reg, &opts) {
        Ok(report) => {
            let a = flatten(&report.assessment);
            let us = refine_protocol::time::saturating_us;
            StopDoc {
                id: reg.id.to_string(),
                outcome: StopOutcomeDoc::Stopped(report.outcome),
                state: a.state,
                reason: a.reason,
                detail: StopDetail::Done {
                    killed: report.killed,
                    signalled: report.signalled.len(),
                    timings_us: StopTimingsDoc {
                        grace: us(report.timings.grace),
                        fence_wait: us(report.timings.fence_wait),
                        quiesce: us(report.timings.quiesce),
                        kill_to_exit: us(report.timings.kill_to_exit),
                        total: us(report.timings.total),
                    },
                    receipt: a.receipt.as_ref().map(|r| Box::new(ReceiptDoc::of(r))),
                },
            }
        }
        Err(e) => StopDoc {
            id: reg.id.to_string(),
            outcome: StopOutcomeDoc::Failed(StopFailed::Failed),
            state: assess_one(rt, reg).state,
            reason: Some(ScopeReason::Error {
                error: error_chain(&e),
            }),
            detail: StopDetail::Failed {
                error: error_chain(&e),
            },
        },
    }
}

/// The recovery pass (A4); the `recover --json` document.
pub fn recover_all(rt: &Runtime) -> Result<RecoverDoc, ServiceError> {
    use recover::RecoveryAction as A;
    // A runtime written before the open index existed gets it now (once).
    rt.ensure_open_index()?;
    let report = recover::recover(rt, &recover::RecoverOptions::default())?;
    let mut counts: BTreeMap<RecoverAction, usize> = BTreeMap::new();
    let mut entries = Vec::with_capacity(report.entries.len());
    for e in &report.entries {
        let (action, after) = match &e.action {
            A::Stopped { report } => (RecoverAction::Stopped, flatten(&report.assessment)),
            A::Released { assessment } => (RecoverAction::Released, flatten(assessment)),
            A::Adopted => (
                RecoverAction::Adopted,
                match rt.read_registration(e.id) {
                    Ok(reg) => assess_one(rt, &reg),
                    Err(err) => corrupt(&err),
                },
            ),
            A::Kept { reason, .. } => (
                RecoverAction::Kept,
                Assessed {
                    state: State::Unverified,
                    reason: Some(ScopeReason::Unverified {
                        failed: reason.doc(),
                    }),
                    receipt: None,
                },
            ),
            A::StopFailed { error, assessment } => {
                let mut a = flatten(assessment);
                a.reason = Some(ScopeReason::Error {
                    error: error_chain(error),
                });
                (RecoverAction::StopFailed, a)
            }
            A::Owned => (
                RecoverAction::Owned,
                match rt.read_registration(e.id) {
                    Ok(reg) => assess_one(rt, &reg),
                    Err(err) => corrupt(&err),
                },
            ),
            A::Corrupt { error } => (RecoverAction::Corrupt, corrupt(error)),
        };
        *counts.entry(action).or_default() += 1;
        entries.push(RecoverEntryDoc {
            id: e.id.to_string(),
            action,
            state: after.state,
            reason: after.reason,
        });
    }
    Ok(RecoverDoc {
        dry_run: false,
        summary: Some(counts),
        registrations: entries,
        unwritten_dropped: report.unwritten_dropped,
    })
}

/// What the recovery pass would do now (`recover --dry-run`): the same assessment, the same
/// lock test (a held lock is an owner), and nothing signalled, released or written.
pub fn recover_plan(rt: &Runtime) -> Result<RecoverDoc, RegistryError> {
    let mut counts: BTreeMap<RecoverAction, usize> = BTreeMap::new();
    let mut entries = Vec::new();
    // What recovery reads: the open index (F1).
    for id in rt.open_ids()? {
        let lock = rt.lock(id, recover::DEFAULT_LOCK_WAIT);
        let (action, after) = match (lock, rt.read_registration(id)) {
            (
                Err(RegistryError::Fence(refine_supervisor::store::fence::FenceError::Timeout {
                    ..
                })),
                Ok(reg),
            ) => (RecoverAction::Owned, assess_one(rt, &reg)),
            (_, Err(err)) => (RecoverAction::Corrupt, corrupt(&err)),
            (_, Ok(reg)) => {
                let a = assess_one(rt, &reg);
                let kept = reg.on_service_loss == Some(refine_protocol::record::ServiceLoss::Keep);
                let action = match a.state {
                    State::Live if kept => RecoverAction::WouldAdopt,
                    State::Live => RecoverAction::WouldStop,
                    State::Exited => RecoverAction::WouldRelease,
                    State::Unverified | State::Corrupt => RecoverAction::WouldKeep,
                };
                (action, a)
            }
        };
        *counts.entry(action).or_default() += 1;
        entries.push(RecoverEntryDoc {
            id: id.to_string(),
            action,
            state: after.state,
            reason: after.reason,
        });
    }
    Ok(RecoverDoc {
        dry_run: true,
        summary: Some(counts),
        registrations: entries,
        unwritten_dropped: 0,
    })
}

fn corrupt(err: &RegistryError) -> Assessed {
    Assessed {
        state: State::Corrupt,
        reason: Some(ScopeReason::Error {
            error: error_chain(err),
        }),
        receipt: None,
    }
}

/// `gc`: retention, then forgetting, then (unless a dry run) re-indexing of records that lost
/// their open-index marker but are not proven exited. O(history): an operator's pass.
pub(crate) fn gc(
    rt: &Runtime,
    opts: retention::Options,
    forget_opts: forget::Options,
) -> Result<GcDoc, CliError> {
    if !opts.dry_run {
        rt.ensure_open_index()?;
    }
    let retention = retire(rt, opts)?;
    let forget = forget::forget(rt, forget_opts, &assess::KERNEL_BOOT)?;
    let reindexed = if opts.dry_run {
        Vec::new()
    } else {
        open_index::reindex(rt, &assess::KERNEL_BOOT)?
            .into_iter()
            .map(|id| id.to_string())
            .collect()
    };
    // D5: what no record covers, after forgetting (which may have left a `.stall` behind).
    let strays = refine_supervisor::history::strays::collect(rt, opts.dry_run)?;
    Ok(GcDoc {
        retention: retention_doc(&retention),
        forget: forget_doc(&forget),
        reindexed,
        strays: strays.iter().map(stray_doc).collect(),
    })
}

/// One retention pass with the shared assessment as the evidence.
pub fn retire(
    rt: &Runtime,
    opts: retention::Options,
) -> Result<retention::Report, retention::RetentionError> {
    retention::retire(rt, opts, &|rt, reg| {
        let a = assess_one(rt, reg);
        if a.state == State::Exited {
            retention::Evidence::Exited(a.receipt)
        } else {
            retention::Evidence::NotExited {
                state: a.state,
                reason: a.reason.map(|r| r.to_string()).unwrap_or_default(),
            }
        }
    })
}

/// The engine request for what the caller asked.
/// The service's launch from a socket request: the ask's text as the command's bytes.
pub(crate) fn launch_command(spec: &LaunchAsk) -> Result<Command, ServiceError> {
    if spec.argv.is_empty() {
        return Err(SpecError::EmptyCommand.into());
    }
    let mut cmd = Command::new(&spec.argv[0])
        .args(&spec.argv[1..])
        .envs(&spec.env)
        .label(spec.label.clone());
    if let Some(cwd) = &spec.cwd {
        cmd = cmd.current_dir(cwd);
    }
    if spec.input {
        cmd = cmd.stdin(refine_supervisor::StdinMode::Pipe);
    }
    for (k, v) in &spec.meta {
        cmd = cmd.purpose(k.clone(), v.clone());
    }
    launch_options(
        cmd,
        LaunchOptions {
            kind: spec.kind,
            timeout: spec.timeout,
            idle_timeout: spec.idle_timeout,
            kill_after: spec.kill_after,
            log_cap_bytes: spec.log_cap_bytes,
            pty: spec.pty,
            user: spec.user.as_deref(),
            allow_setns: spec.allow_setns,
            protect: spec.protect,
            memory_max_bytes: spec.memory_max_bytes,
            cpu_millis: spec.cpu_millis,
            pids_max: spec.pids_max,
            ready: match &spec.ready {
                None => None,
                Some(text) => Some((
                    text.parse().map_err(SpecError::Ready)?,
                    spec.ready_timeout
                        .unwrap_or(refine_supervisor::launch::readiness::DEFAULT_READY_TIMEOUT),
                )),
            },
        },
    )
}

/// What a launch asks beyond its command, whoever asks (`run`, the socket).
pub(crate) struct LaunchOptions<'a> {
    pub kind: Kind,
    pub timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    /// `0`: no grace, the kill at once.
    pub kill_after: Option<Duration>,
    /// `None`: the default cap; `0`: none.
    pub log_cap_bytes: Option<u64>,
    pub pty: bool,
    /// `USER[:GROUP]`.
    pub user: Option<&'a str>,
    /// X7's opt-out: no filter against `setns` into PID and user namespaces.
    pub allow_setns: bool,
    /// X11: the Landlock protection asked for.
    pub protect: refine_protocol::record::ProtectAsk,
    /// H8: the tree's memory, CPU and pids limits.
    pub memory_max_bytes: Option<u64>,
    pub cpu_millis: Option<u32>,
    pub pids_max: Option<u64>,
    /// H6: how the workload says it is ready, and how long it may take (zero: no bound).
    pub ready: Option<(refine_supervisor::launch::readiness::ReadyAsk, Duration)>,
}

/// The rest of a launch on its command: the one place both callers share.
pub(crate) fn launch_options(
    mut cmd: Command,
    o: LaunchOptions<'_>,
) -> Result<Command, ServiceError> {
    cmd = cmd
        .kind(o.kind)
        .owner(std::env::var("USER").unwrap_or_default());
    if let Some(t) = o.timeout {
        cmd = cmd.timeout(t);
    }
    if let Some(t) = o.idle_timeout {
        cmd = cmd.idle_timeout(t);
    }
    match o.log_cap_bytes {
        None => {}
        Some(0) => cmd = cmd.log_cap(None),
        Some(n) => cmd = cmd.log_cap(Some(n)),
    }
    if let Some(k) = o.kill_after {
        cmd = cmd.kill_after(k);
    }
    if o.pty {
        cmd = cmd.pty(WindowSize::default());
    }
    if let Some(user) = o.user {
        refine_supervisor::launch::credentials::require_privilege()?;
        cmd = cmd.user(refine_supervisor::launch::credentials::resolve(user)?);
    }
    if o.allow_setns {
        cmd = cmd.allow_setns();
    }
    cmd = cmd.protect(o.protect);
    if let Some(b) = o.memory_max_bytes {
        cmd = cmd.memory_max(b);
    }
    if let Some(m) = o.cpu_millis {
        cmd = cmd.cpu_millis(m);
    }
    if let Some(n) = o.pids_max {
        cmd = cmd.pids_max(n);
    }
    if let Some((ask, t)) = o.ready {
        cmd = cmd.ready(ask, (!t.is_zero()).then_some(t));
    }
    Ok(cmd)
}

/// What `wait` prints and exits with for a workload status: its code, 128+N for signal N, 127
/// for a workload that never started; when nothing says, `-1` is printed (as `podman wait`
/// does) and the exit code is 255.
pub(crate) fn wait_code(status: Option<refine_protocol::WorkloadStatus>) -> (i32, String) {
    use refine_protocol::WorkloadStatus as W;
    match status {
        Some(W::Exited(c)) => (c, c.to_string()),
        Some(W::Signaled(s)) => (128 + s, (128 + s).to_string()),
        Some(W::NeverStarted) => (127, "127".into()),
        Some(W::Unknown) | None => (255, "-1".into()),
    }
}

/// L1: what wakes `logs -f` (and the socket's `follow`), by inotify: an artifact growing or
/// created, the receipt landing, the record closed (its launcher letting go of its lock). No busy polling: an idle follower
/// sleeps until one of those, or [`FOLLOW_BACKSTOP`] for what brings no event. Without inotify
/// (a kernel or limit that refuses it) the follower looks every 100 ms instead.
pub struct Changes {
    fd: Option<std::os::fd::OwnedFd>,
}

/// The longest an idle `logs -f` sleeps without an event.
const FOLLOW_BACKSTOP: Duration = Duration::from_secs(1);

impl Changes {
    /// No watch: [`Changes::wait`] sleeps 100 ms.
    pub fn none() -> Changes {
        Changes { fd: None }
    }

    pub fn watch(rt: &Runtime, id: RegistrationId, artifacts: &[PathBuf]) -> Changes {
        use rustix::fs::inotify::{add_watch, init, CreateFlags, WatchFlags};
        let Ok(fd) = init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
            return Changes { fd: None };
        };
        // The folder: an artifact created by its first byte (a launcher's capture, F3).
        let logs = rt.dir().join("logs");
        let _ = add_watch(&fd, &logs, WatchFlags::CREATE | WatchFlags::MOVED_TO);
        let _ = add_watch(
            &fd,
            rt.proof_path(id),
            WatchFlags::MODIFY | WatchFlags::CLOSE_WRITE,
        );
        let _ = add_watch(&fd, rt.record_path(id), WatchFlags::CLOSE);
        let changes = Changes { fd: Some(fd) };
        changes.rewatch(artifacts);
        changes
    }

    /// Watches a folder: a file created or moved into it, or written in it (the events
    /// journal's segments).
    pub fn watch_dir(dir: &Path) -> Changes {
        use rustix::fs::inotify::{add_watch, init, CreateFlags, WatchFlags};
        let Ok(fd) = init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
            return Changes { fd: None };
        };
        let flags = WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::MODIFY;
        if add_watch(&fd, dir, flags).is_err() {
            return Changes { fd: None };
        }
        Changes { fd: Some(fd) }
    }

    /// Watches the artifacts that exist now (adding a watch again only updates it).
    pub fn rewatch(&self, artifacts: &[PathBuf]) {
        if let Some(fd) = &self.fd {
            for path in artifacts {
                let _ = rustix::fs::inotify::add_watch(
                    fd,
                    path,
                    rustix::fs::inotify::WatchFlags::MODIFY,
                );
            }
        }
    }

    /// Sleeps until something changed (or the backstop), then drains the events.
    pub fn wait(&mut self) {
        let Some(fd) = &self.fd else {
            std::thread::sleep(NO_INOTIFY_TICK);
            return;
        };
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let limit = rustix::time::Timespec {
            tv_sec: FOLLOW_BACKSTOP.as_secs() as i64,
            tv_nsec: 0,
        };
        let _ = rustix::event::poll(&mut fds, Some(&limit));
        self.drain();
    }

    /// [`Changes::wait`] as a task of the service's event loop: no thread waits meanwhile.
    pub async fn wait_async(&mut self) {
        let readable = self
            .fd
            .as_ref()
            .and_then(|fd| fd.try_clone().ok())
            // SAFETY: the descriptor is an `OwnedFd` of our own (a duplicate of the inotify
            // one) that the `AsyncFd` owns: nothing else closes or replaces it while it is
            // registered, and dropping the `AsyncFd` deregisters it before closing it.
            .and_then(|fd| unsafe { tokio::io::unix::AsyncFd::register(fd) }.ok());
        let Some(readable) = readable else {
            tokio::time::sleep(NO_INOTIFY_TICK).await;
            return;
        };
        let _ = tokio::time::timeout(FOLLOW_BACKSTOP, readable.readable()).await;
        self.drain();
    }

    fn drain(&self) {
        if let Some(fd) = &self.fd {
            let mut buf = [0u8; 4096];
            while matches!(rustix::io::read(fd, &mut buf), Ok(n) if n > 0) {}
        }
    }
}

/// How often a follower without inotify looks.
const NO_INOTIFY_TICK: Duration = Duration::from_millis(100);

//! The assessment as the CLI shows it: the `ps` rows and the `show` document.

use super::*;

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
pub(super) fn view(rt: &Runtime, reg: &Registration, a: Assessed) -> ScopeView {
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
        age_secs: crate::kernel::clock::unix_ms().saturating_sub(reg.started_at_unix_ms) / 1000,
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
        health: reg.health.as_ref().map(|_| {
            rt.read_health(reg.id)
                .ok()
                .flatten()
                .map_or(refine_protocol::docs::HealthState::Starting, |r| r.state)
        }),
    }
}

/// Whether the workload's witness names a running process (not a zombie). A `/proc` that cannot
/// be read says nothing: the process is taken for running, as `ps` showed it before it knew.
pub(super) fn workload_runs(w: &refine_protocol::ProcessWitness) -> bool {
    match procfs::stat_of(w) {
        Ok(Some(stat)) => !stat.state.is_exited(),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// A row for a record that does not decode: shown, never guessed at, never deleted.
pub(super) fn corrupt_view(rt: &Runtime, id: RegistrationId, err: &RegistryError) -> ScopeView {
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
        health: None,
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
pub(super) fn stall_record(rt: &Runtime, reg: &Registration, state: State) -> Option<StallRecord> {
    if state != State::Live {
        return None;
    }
    rt.read_stall(reg.id).ok().flatten()
}

/// The `show --json` document: record, receipt, assessment.
/// Issue 38 item 7: a reader that finds a scope quiesced by a stop nobody runs any more (its
/// lease left, the runtime's stop fence free) completes that stop before it reports; nothing
/// (one `readdir`) when there is none, and never a wait on a running stop.
pub(super) fn finish_abandoned_stops(rt: &Runtime) {
    crate::end::stop::complete_if_abandoned(
        rt,
        &crate::end::assess::KERNEL_BOOT,
        std::time::Duration::ZERO,
    );
}

pub fn show_doc(rt: &Runtime, id: RegistrationId) -> Result<ShowDoc, RegistryError> {
    finish_abandoned_stops(rt);
    let reg = rt.read_registration(id)?;
    let a = assess(rt, &reg);
    let result = match rt.read_result(id) {
        Ok(Some(r)) => Some(ResultDoc::Written {
            reason: crate::host::docs::result_reason(&r),
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
            cgroup_usage: r.cgroup_usage.map(crate::host::docs::cgroup_usage_doc),
            limit_usage: r.limit_usage.map(crate::host::docs::limit_usage_doc),
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
                incomplete: crate::host::docs::capture_end(&receipt, name),
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
        health: reg
            .health
            .as_ref()
            .map(|spec| crate::host::docs::health_doc(spec, rt.read_health(id).ok().flatten())),
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
pub(super) fn processes(reg: &Registration) -> Vec<ProcessDoc> {
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

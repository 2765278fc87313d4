//! The application's side of the JSON contract: the documents themselves are types of
//! `refine-protocol` ([`refine_protocol::docs`], re-exported here), and this module turns the
//! library's answers (registrations, assessments, holders, retention, capacity, ...) into them.
//! No mechanism struct is printed as it is: a field renamed in the library changes a
//! conversion below, never a key of a document.

use std::path::Path;

use refine_protocol::record::{StallIncident, StallRecord};
use refine_protocol::Registration;
use serde::Serialize;

pub use refine_protocol::docs::*;

use crate::{kernel::cgroup, kernel::observe};

/// The stall watch's open incidents of a scope, as `show` prints them.
pub fn watch_doc(r: &StallRecord) -> WatchDoc {
    let incident = |i: &StallIncident| IncidentDoc {
        since: utc(i.since_unix_ms),
        samples: i.samples,
        cpu_percent: f64::from(i.cpu_permille) / 10.0,
        last_write: utc(i.last_write_unix_ms),
    };
    WatchDoc {
        sampled_at: utc(r.sampled_at_unix_ms),
        stalled: r.stalled.as_ref().map(incident),
        silent: r.silent.as_ref().map(incident),
    }
}

/// One live scope's `top` row from two samples of it (`earlier` first): the CPU share over the
/// time between them, the other figures as the later one read them.
pub fn top_scope_doc(
    reg: &Registration,
    earlier: &observe::Sample,
    later: &observe::Sample,
) -> TopScopeDoc {
    let window = later.at.saturating_duration_since(earlier.at);
    let cpu = later.cpu_since(earlier);
    let cpu_percent = if window.is_zero() {
        0.0
    } else {
        cpu.as_secs_f64() / window.as_secs_f64() * 100.0
    };
    let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    TopScopeDoc {
        id: reg.id.to_string(),
        label: reg.label.clone(),
        kind: reg.kind,
        source: later.source,
        cpu_percent,
        cpu_window_us: us(cpu),
        window_us: us(window),
        memory_bytes: later.memory_bytes.value,
        memory_source: later.memory_bytes.source,
        pids: later.tasks.value,
        pids_source: later.tasks.source,
        block_read_bytes: later.block_io.value.read_bytes,
        block_write_bytes: later.block_io.value.write_bytes,
        io_source: later.block_io.source,
    }
}

/// An artifact's path, and whether and how large it is now.
pub fn artifact_doc(p: &Path) -> ArtifactDoc {
    let bytes = std::fs::metadata(p).map(|m| m.len());
    ArtifactDoc {
        path: p.to_owned(),
        exists: bytes.is_ok(),
        bytes: bytes.unwrap_or(0),
        incomplete: None,
    }
}

/// What the capture receipt at `path` says of the stream `name` when it was not read whole:
/// `incomplete: ...` or `capture failure: ...`. None when there is no receipt (every stream
/// was whole), it cannot be read, or the stream ended at end of file.
pub fn capture_end(path: &Path, name: &str) -> Option<IncompleteDoc> {
    use refine_protocol::record::{CaptureReceipt, MAX_RECORD};
    let bytes = crate::store::registry::read_bounded(path, MAX_RECORD).ok()?;
    let receipt = CaptureReceipt::decode(&bytes).ok()?;
    let stream = receipt.streams.into_iter().find(|s| s.name == name)?;
    incomplete_doc(stream.end)
}

/// Why a stream that ended as `end` is incomplete; none when it was read to end of file.
pub fn incomplete_doc(end: refine_protocol::record::StreamEnd) -> Option<IncompleteDoc> {
    use refine_protocol::record::{StreamEnd, StreamFailure, StreamIncomplete as I};
    use IncompleteDoc as D;
    Some(match end {
        StreamEnd::Eof => return None,
        StreamEnd::Incomplete(i) => match i {
            I::MemoryLimit { kept } => D::MemoryLimit { kept_bytes: kept },
            I::ArtifactCap { cap } => D::ArtifactCap { cap_bytes: cap },
            I::DrainEnded { drain_ms } => D::DrainEnded { drain_ms },
            I::ReaderGone => D::ReaderGone,
            I::HeldOutside => D::HeldOutside,
            I::Worded(words) => D::WordedIncomplete { words },
        },
        StreamEnd::CaptureFailure(f) => match f {
            StreamFailure::Read { errno } => D::Read { errno },
            StreamFailure::ArtifactWrite { errno } => D::ArtifactWrite { errno },
            StreamFailure::Worded(words) => D::WordedFailure { words },
        },
    })
}

/// One stream of a launch's result as `run --json` gives it (none: it was not captured).
pub fn stream_doc(capture: Option<&crate::launch::capture::StreamCapture>) -> StreamDoc {
    match capture {
        Some(c) => StreamDoc {
            complete: c.state == crate::launch::capture::StreamState::Eof,
            path: Some(c.artifact.clone()),
            bytes: c.artifact_bytes,
            end: match incomplete_doc(c.state.to_record()) {
                None => StreamEndDoc::Eof,
                Some(why) => StreamEndDoc::Incomplete { why },
            },
        },
        None => StreamDoc {
            complete: false,
            path: None,
            bytes: 0,
            end: StreamEndDoc::NotCaptured,
        },
    }
}

/// What the kernel accounted to a scope's cgroup.
pub fn cgroup_usage_doc(u: cgroup::CgroupUsage) -> CgroupUsageDoc {
    CgroupUsageDoc {
        cpu_us: u.cpu_us,
        user_us: u.user_us,
        system_us: u.system_us,
        memory_peak_bytes: u.memory_peak_bytes,
        oom_kills: u.oom_kills,
    }
}

/// H8: what the limits' controllers accounted.
pub fn limit_usage_doc(
    u: refine_protocol::record::LimitUsage,
) -> refine_protocol::docs::LimitUsageDoc {
    refine_protocol::docs::LimitUsageDoc {
        memory_peak_bytes: u.memory_peak_bytes,
        oom_kills: u.oom_kills,
        pids_peak: u.pids_peak,
        pids_refused: u.pids_refused,
        throttled_us: u.throttled_us,
    }
}

/// `oom` when the out-of-memory killer killed a member of the scope (its limits' memory
/// controller, or its F4 cgroup's, counted a kill) and the workload died of SIGKILL.
pub fn result_reason(
    r: &refine_protocol::LaunchResultRecord,
) -> Option<refine_protocol::docs::ResultReason> {
    let kills = r.limit_usage.and_then(|u| u.oom_kills).unwrap_or(0)
        + r.cgroup_usage.and_then(|u| u.oom_kills).unwrap_or(0);
    let killed = r.workload_status == refine_protocol::WorkloadStatus::Signaled(9);
    (kills > 0 && killed).then_some(refine_protocol::docs::ResultReason::Oom)
}

/// The registration record as `show` prints it.
pub fn record_doc(reg: &Registration) -> RecordDoc {
    let h = &reg.hello;
    RecordDoc {
        id: reg.id.to_string(),
        runtime: reg.runtime.to_string(),
        kind: reg.kind,
        label: reg.label.clone(),
        owner: reg.owner.clone(),
        purpose: reg.purpose.clone(),
        argv: reg.argv.clone(),
        argv_bytes: reg.argv_bytes.clone(),
        cwd: reg.cwd.clone(),
        stdout: reg.stdout_path.clone(),
        stderr: reg.stderr_path.clone(),
        stdin: reg.stdin_path.clone(),
        pty: reg.pty,
        scope_policy: format!("{:?}", reg.scope_policy).to_lowercase(),
        limits: LimitsDoc {
            completion_timeout_ms: reg.limits.completion_timeout_ms,
            idle_timeout_ms: reg.limits.idle_timeout_ms,
            log_cap_bytes: reg.limits.log_cap_bytes,
            memory_max_bytes: reg.resources.as_ref().and_then(|r| r.memory_max_bytes),
            cpu_millis: reg.resources.as_ref().and_then(|r| r.cpu_millis),
            pids_max: reg.resources.as_ref().and_then(|r| r.pids_max),
            placements: reg
                .resources
                .iter()
                .flat_map(|r| &r.placements)
                .map(|p| refine_protocol::docs::LimitPlacementDoc {
                    controller: p.controller.name().to_owned(),
                    dir: p.dir.clone(),
                    unified: p.unified,
                })
                .collect(),
        },
        started_at_unix_ms: reg.started_at_unix_ms,
        started: utc(reg.started_at_unix_ms),
        boot_id: h.boot_id.to_string(),
        guardian: h.guardian.into(),
        workload: WorkloadDoc {
            pid: h.workload.pid,
            start_time: h.workload.start_time,
            pgid: h.workload_pgid,
            sid: h.workload_sid,
        },
        proof: ProofDoc {
            path: Some(reg.proof_path.clone()),
            dev: h.proof.dev,
            ino: h.proof.ino,
        },
        cgroup: reg.cgroup.as_ref().map(|c| CgroupDoc {
            path: c.path.clone(),
            forked_into: c.holds_scope(),
            refused_errno: c.refused_errno,
            usage: c
                .holds_scope()
                .then(|| cgroup::usage(Path::new(&c.path)))
                .flatten()
                .map(cgroup_usage_doc),
        }),
        allow_setns: reg.allow_setns,
        protection: reg.protection,
        sandbox: reg.sandbox.clone(),
        provenance: refine_protocol::docs::BuildsDoc {
            supervisor: reg.supervisor_provenance.clone(),
            guardian: reg.guardian_provenance.clone(),
        },
    }
}

/// `version --json` (V1): this build, and the guardian's at `guardian` (what a launch would
/// start), read from its executable.
pub fn version_doc(guardian: &Path) -> refine_protocol::docs::VersionDoc {
    let (provenance, problem) = match crate::kernel::provenance::of_guardian(guardian) {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(crate::error_chain(&e))),
    };
    refine_protocol::docs::VersionDoc {
        supervisor: crate::kernel::provenance::own(),
        guardian: refine_protocol::docs::GuardianBuildDoc {
            path: guardian.display().to_string(),
            provenance,
            problem,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Hygiene: `holders` and `reap`.

/// `holders --json`.
pub fn holders_doc(h: &crate::hygiene::holders::Holders) -> HoldersDoc {
    HoldersDoc {
        path: h.path.clone(),
        exists: h.exists,
        holders: h.holders.iter().map(holder_doc).collect(),
        scanned: h.scanned,
        unreadable: h.unreadable,
        elapsed_ms: h.elapsed_ms,
    }
}

pub fn holder_doc(h: &crate::hygiene::holders::Holder) -> HolderDoc {
    use crate::hygiene::holders::Adopter;
    HolderDoc {
        witness: h.witness.into(),
        ppid: h.ppid,
        program: h.program.clone(),
        cpu_ms: h.cpu_ms,
        age_ms: h.age_ms,
        via: h.via,
        path: h.path.clone(),
        owner: h.owner.map(|o| OwnerDoc {
            id: o.id.to_string(),
            port: o.port,
            state: o.state,
            found: o.found,
            workload_alive: o.workload_alive,
        }),
        orphaned: h.orphaned.as_ref().map(|a| match a {
            Adopter::Init => AdopterDoc::Init,
            Adopter::Subreaper { pid, program } => AdopterDoc::Subreaper {
                pid: *pid,
                program: program.clone(),
            },
            Adopter::EndedGuardian { id } => AdopterDoc::EndedGuardian { id: id.to_string() },
        }),
    }
}

/// `reap --checkout --json`.
pub fn reap_doc(r: &crate::hygiene::reap_checkout::ReapReport) -> ReapDoc {
    use crate::hygiene::reap_checkout::Why;
    let guardian_of = |g: &crate::hygiene::holders::GuardianOf| GuardianOfDoc {
        home: g.home.clone(),
        port: g.port,
        id: g.id.to_string(),
    };
    ReapDoc {
        path: r.path.clone(),
        exists: r.exists,
        refused: r.refused.iter().map(holder_doc).collect(),
        stopped: r
            .stopped
            .iter()
            .map(|s| ScopeStopDoc {
                id: s.id.to_string(),
                port: s.port,
                outcome: s.outcome,
                receipt_verified: s.receipt_verified,
                error: s.error.clone(),
            })
            .collect(),
        killed: r.killed.iter().map(|&w| w.into()).collect(),
        left: r
            .left
            .iter()
            .map(|l| LeftDoc {
                holder: holder_doc(&l.holder),
                why: match &l.why {
                    Why::LiveWorkload => WhyDoc::LiveWorkload,
                    Why::ResidueSurvived => WhyDoc::ResidueSurvived,
                    Why::NotOrphan { ppid, parent } => WhyDoc::NotOrphan {
                        ppid: *ppid,
                        parent: parent.clone(),
                    },
                    Why::Guardian { guardian_of: g } => WhyDoc::Guardian {
                        guardian_of: guardian_of(g),
                    },
                    Why::GuardianBelow { guardian_of: g } => WhyDoc::GuardianBelow {
                        guardian_of: guardian_of(g),
                    },
                    Why::Survived => WhyDoc::Survived,
                },
            })
            .collect(),
        error: r.error.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// History: `gc`.

/// Retention's report, as `gc --json` carries it at its top level.
pub fn retention_doc(r: &crate::history::retention::Report) -> RetentionDoc {
    RetentionDoc {
        older_than_secs: r.older_than_secs,
        dry_run: r.dry_run,
        deleted_files: r.deleted_files,
        deleted_bytes: r.deleted_bytes,
        entries: r
            .entries
            .iter()
            .map(|e| RetentionEntryDoc {
                id: e.id.clone(),
                action: e.action,
                reason: e.reason.clone(),
                files: e.files.clone(),
                bytes: e.bytes,
                age_secs: e.age_secs,
            })
            .collect(),
    }
}

/// Forgetting's report.
pub fn forget_doc(r: &crate::history::forget::Report) -> ForgetDoc {
    ForgetDoc {
        forget_after_secs: r.forget_after_secs,
        dry_run: r.dry_run,
        forgotten: r.forgotten,
        resumed: r.resumed,
        young: r.young,
        entries: r
            .entries
            .iter()
            .map(|e| ForgetEntryDoc {
                id: e.id.clone(),
                action: e.action,
                reason: e.reason.clone(),
                unchanged_secs: e.unchanged_secs,
            })
            .collect(),
    }
}

/// One stray file.
pub fn stray_doc(e: &crate::history::strays::Entry) -> StrayDoc {
    use crate::history::strays::Reason;
    StrayDoc {
        path: e.path.clone(),
        id: e.id.clone(),
        bytes: e.bytes,
        action: e.action,
        reason: match &e.reason {
            Reason::NoRecord => StrayReasonDoc::NoRecord,
            Reason::Temporary => StrayReasonDoc::Temporary,
            Reason::Young { age, limit } => StrayReasonDoc::Young {
                age_secs: age.as_secs(),
                limit_secs: limit.as_secs(),
            },
            Reason::Locked => StrayReasonDoc::Locked,
            Reason::Failed { error } => StrayReasonDoc::Failed {
                error: error.clone(),
            },
            Reason::EndedScopeCgroup => StrayReasonDoc::EndedScopeCgroup,
            Reason::UnnamedCgroup => StrayReasonDoc::UnnamedCgroup,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Capacity.

/// `capacity --json`.
pub fn capacity_doc(r: &crate::capacity::CapacityReport) -> CapacityDoc {
    CapacityDoc {
        cores: r.cores,
        available_memory: r.available_memory,
        limit_percent: r.limit_percent,
        reservation_bytes: r.reservation_bytes,
        reservation_source: r.reservation_source,
        floor_bytes: r.floor_bytes,
        derivation: r.derivation.clone(),
        cpu_slots: r.cpu_slots,
        memory_slots: r.memory_slots,
        slots: r.slots,
        live: r.live,
        unverified: r.unverified,
        free: r.free,
        samples: r
            .samples
            .iter()
            .map(|(id, s)| {
                let doc = SampleDoc {
                    complete: s.complete,
                    members: s.members,
                    rss_bytes: s.rss_bytes,
                    reason: s.reason.clone(),
                };
                (id.clone(), doc)
            })
            .collect(),
    }
}

/// A document as `key=value` fields on one log line (`outcome=stopped killed=2
/// timings_ms.total=12`): nested keys joined with `.`, nulls and empty lists left out, text
/// quoted only when it holds a space, `"` or `=`. A log event stays one line of fields that
/// journald and `grep` read, never an embedded JSON document.
pub fn json_line(doc: &impl Serialize) -> String {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        let key = |k: &str| {
            if prefix.is_empty() {
                k.to_owned()
            } else {
                format!("{prefix}.{k}")
            }
        };
        match v {
            Value::Null => {}
            Value::Object(m) => {
                for (k, v) in m {
                    walk(&key(k), v, out);
                }
            }
            Value::Array(a) if a.is_empty() => {}
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(&key(&i.to_string()), v, out);
                }
            }
            Value::String(t) => {
                let shown = if t.is_empty()
                    || t.chars()
                        .any(|c| c.is_control() || matches!(c, ' ' | '"' | '='))
                {
                    format!("{t:?}")
                } else {
                    t.clone()
                };
                out.push(format!("{prefix}={shown}"));
            }
            v => out.push(format!("{prefix}={v}")),
        }
    }
    match serde_json::to_value(doc) {
        Ok(v) => {
            let mut fields = Vec::new();
            walk("", &v, &mut fields);
            fields.join(" ")
        }
        Err(e) => format!("unserializable document: {e}"),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time in milliseconds.
pub fn utc(unix_ms: u64) -> String {
    i64::try_from(unix_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("{unix_ms} ms after the epoch"))
}

/// H7: the show document's health part: the check asked for, where it stands, the last probes.
pub fn health_doc(
    spec: &refine_protocol::record::HealthSpec,
    rec: Option<refine_protocol::record::HealthRecord>,
) -> refine_protocol::docs::HealthDoc {
    let rec = rec.as_ref();
    refine_protocol::docs::HealthDoc {
        cmd: spec.cmd.clone(),
        interval_ms: spec.interval_ms,
        timeout_ms: spec.timeout_ms,
        retries: spec.retries,
        start_period_ms: spec.start_period_ms,
        state: rec.map_or(refine_protocol::docs::HealthState::Starting, |r| r.state),
        failing_streak: rec.map_or(0, |r| r.failing_streak),
        probes: rec.map_or(0, |r| r.probes),
        last: rec.map_or_else(Vec::new, |r| {
            r.last
                .iter()
                .map(|p| refine_protocol::docs::ProbeDoc {
                    start: utc(p.started_unix_ms),
                    duration_ms: p.duration_ms,
                    exit_code: p.exit_code,
                    timed_out: p.timed_out,
                    output: String::from_utf8_lossy(&p.output).into_owned(),
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_981_266_000), "2026-11-29T19:41:06Z");
    }
}

//! H7: how `show`, `ps` and the documents carry a scope's health (its record, `logs/ID.health`).

use refine_protocol::api::ScopeView;
use refine_protocol::docs::{HealthDoc, HealthState, ProbeDoc, ShowDoc, State};
use refine_protocol::record::{HealthRecord, HealthSpec};

use super::view::escape;

/// The show document's part: the check asked for, where it stands, the last probes.
pub(crate) fn health_doc(spec: &HealthSpec, rec: Option<HealthRecord>) -> HealthDoc {
    let rec = rec.as_ref();
    HealthDoc {
        cmd: spec.cmd.clone(),
        interval_ms: spec.interval_ms,
        timeout_ms: spec.timeout_ms,
        retries: spec.retries,
        start_period_ms: spec.start_period_ms,
        state: rec.map_or(HealthState::Starting, |r| r.state),
        failing_streak: rec.map_or(0, |r| r.failing_streak),
        probes: rec.map_or(0, |r| r.probes),
        last: rec.map_or_else(Vec::new, |r| {
            r.last
                .iter()
                .map(|p| ProbeDoc {
                    start: super::docs::utc(p.started_unix_ms),
                    duration_ms: p.duration_ms,
                    exit_code: p.exit_code,
                    timed_out: p.timed_out,
                    output: String::from_utf8_lossy(&p.output).into_owned(),
                })
                .collect()
        }),
    }
}

/// `ps`'s status of a running scope with a health check: `running (healthy)`, as docker's.
pub(crate) fn with_health(base: String, r: &ScopeView) -> String {
    match r.health {
        Some(h) if r.state == State::Live && r.workload_running != Some(false) => {
            format!("{base} ({})", h.name())
        }
        _ => base,
    }
}

/// At most this much of a probe's output on its `show` line (escaped: workload text).
const EXCERPT: usize = 60;

/// `show`'s `Health` line and one line per recent probe.
pub(crate) fn show_lines(doc: &ShowDoc) -> Vec<(&'static str, String)> {
    let Some(h) = &doc.health else {
        return Vec::new();
    };
    let mut head = format!(
        "{} (cmd={}, every {} ms, timeout {} ms, retries {}",
        h.state.name(),
        escape(&h.cmd),
        h.interval_ms,
        h.timeout_ms,
        h.retries
    );
    if h.start_period_ms > 0 {
        head.push_str(&format!(", start period {} ms", h.start_period_ms));
    }
    head.push_str(&format!(
        "; {} probes, {} failing in a row)",
        h.probes, h.failing_streak
    ));
    let mut lines = vec![("Health", head)];
    for p in &h.last {
        let how = match (p.timed_out, p.exit_code) {
            (true, _) => "timed out".to_owned(),
            (false, Some(c)) => format!("exit {c}"),
            (false, None) => "no exit code".to_owned(),
        };
        let text: String = p.output.trim().chars().take(EXCERPT).collect();
        let more = if p.output.trim().chars().count() > EXCERPT {
            "…"
        } else {
            ""
        };
        lines.push((
            "  probe",
            format!(
                "{} {how} in {} ms: {:?}{more}",
                p.start,
                p.duration_ms,
                escape(&text)
            ),
        ));
    }
    lines
}

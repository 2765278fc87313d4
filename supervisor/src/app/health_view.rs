//! H7: how `show`, `ps` and the documents carry a scope's health (its record, `logs/ID.health`).

use refine_protocol::api::ScopeView;
use refine_protocol::docs::{ShowDoc, State};

use super::view::escape;

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

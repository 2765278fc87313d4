//! The `ps` and `top` tables.

use super::*;

// ---------------------------------------------------------------------------------------------
// ps.

/// The word for a registration without a label, everywhere a label is shown.
pub const NO_LABEL: &str = "(none)";

/// A label as the views show it.
pub fn label_or_none(label: &str) -> &str {
    if label.is_empty() {
        NO_LABEL
    } else {
        label
    }
}

/// The workload's status, short (podman style): `running`, `exit 0`, `signal 9`, `ended` (a live
/// scope whose main process is gone with nobody left to report how, W16), or, when the launch did
/// not simply complete, its outcome (`stopped`, `timed out`, `spawn failed`); `show` has both.
pub(super) fn ps_status(r: &ScopeView) -> String {
    super::super::health_view::with_health(ps_status_plain(r), r)
}

fn ps_status_plain(r: &ScopeView) -> String {
    match r.outcome {
        None | Some(Outcome::Completed) => {}
        Some(o) => return o.words(),
    }
    match (r.status, r.exit_code, r.signal) {
        (_, Some(c), _) => format!("exit {c}"),
        (_, _, Some(s)) => format!("signal {s}"),
        (Some(s), _, _) => s.words(),
        (None, _, _) => match (r.state, r.ready) {
            (State::Live, _) if r.workload_running == Some(false) => "ended",
            // H6: a running workload with readiness says where it stands.
            (State::Live, Some(refine_protocol::docs::ReadyState::Starting)) => "starting",
            (State::Live, Some(refine_protocol::docs::ReadyState::Ready)) => "ready",
            (State::Live, Some(refine_protocol::docs::ReadyState::Failed)) => "not ready",
            (State::Live, None) => "running",
            _ => "-",
        }
        .to_owned(),
    }
}

/// Whether a live scope's workload has ended and only what it left behind holds the scope: its
/// status is known, or its witness names no running process (W16: the launcher that would have
/// reported the status may be gone).
pub(in crate::app) fn is_residue(r: &ScopeView) -> bool {
    r.state == State::Live
        && (r.status.is_some()
            || r.exit_code.is_some()
            || r.signal.is_some()
            || r.workload_running == Some(false))
}

/// The state: `residue` for a live scope whose workload has ended (a descendant still holds
/// it), with the stall watch's open incidents (`live (stalled)`).
pub(super) fn ps_state(r: &ScopeView) -> String {
    let open: Vec<&str> = [
        ("stalled", r.stalled.is_some()),
        ("silent", r.silent.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, open)| open.then_some(name))
    .collect();
    let state = if is_residue(r) {
        "residue"
    } else {
        r.state.name()
    };
    if open.is_empty() {
        state.to_owned()
    } else {
        format!("{state} ({})", open.join(", "))
    }
}

/// The fewest columns the command keeps before the label is cut too.
pub(super) const MIN_COMMAND: usize = 8;
/// A label this wide (an id's short form) is cut only to keep the command MIN_COMMAND columns.
const SHORT_LABEL: usize = 12;

/// The `ps` table: newest first (the rows' order), the command last and cut to `width`.
pub fn ps_table(
    o: &mut impl Write,
    rows: &[ScopeView],
    width: Option<usize>,
    full_ids: bool,
) -> io::Result<()> {
    let mut table = vec![[
        "ID", "KIND", "STATE", "STATUS", "PID", "AGE", "LABEL", "COMMAND",
    ]
    .map(String::from)
    .to_vec()];
    for r in rows {
        let id = if full_ids {
            r.id.clone()
        } else {
            r.id.chars().take(12).collect()
        };
        table.push(vec![
            id,
            r.kind.name().to_owned(),
            ps_state(r),
            ps_status(r),
            r.pid.to_string(),
            if r.started_at_unix_ms == 0 {
                "-".into()
            } else {
                age(Duration::from_secs(r.age_secs))
            },
            escape(label_or_none(&r.label)).into_owned(),
            shell_join(&r.argv),
        ]);
    }
    // Only the command is cut to fit; when even the fixed columns leave it fewer than
    // MIN_COMMAND columns, the labels are cut as well (a label is free text of any length).
    if let Some(w) = width {
        let widest = |i: usize| {
            table
                .iter()
                .map(|r| display_width(&escape(&r[i])) + 2)
                .max()
                .unwrap_or(0)
        };
        const LABEL: usize = 6;
        let fixed: usize = (0..LABEL).map(widest).sum();
        let left = w.saturating_sub(fixed);
        // When the label and the command do not both fit, a label keeps at most half of what
        // the fixed columns leave (the command is what a reader scans for), or SHORT_LABEL
        // columns while the command keeps MIN_COMMAND.
        if widest(LABEL) + widest(LABEL + 1) > left {
            let half = (left / 2).saturating_sub(2);
            let short = SHORT_LABEL.min(left.saturating_sub(MIN_COMMAND + 2));
            let room = half.max(short).max(NO_LABEL.len());
            for r in table.iter_mut().skip(1) {
                r[LABEL] = cut_to_width(&r[LABEL], room).into_owned();
            }
        }
    }
    write_lines(o, &table_lines(&table, width))
}

// ---------------------------------------------------------------------------------------------
// top.

/// The `top` table, as `podman stats` prints its own: the short id, the label, CPU share, memory,
/// tasks, block I/O read / written, and where the row was read. Only the label gives way to fit
/// `width` (down to the width of [`NO_LABEL`]; past that the line is cut).
pub fn top_lines(rows: &[refine_protocol::docs::TopScopeDoc], width: Option<usize>) -> Vec<String> {
    let mut table = vec![
        ["ID", "LABEL", "CPU %", "MEM", "PIDS", "BLOCK I/O", "SOURCE"]
            .map(String::from)
            .to_vec(),
    ];
    for r in rows {
        table.push(vec![
            r.id.chars().take(12).collect(),
            escape(label_or_none(&r.label)).into_owned(),
            format!("{:.2}%", r.cpu_percent),
            refine_supervisor::human::bytes(r.memory_bytes),
            r.pids.to_string(),
            format!(
                "{} / {}",
                refine_supervisor::human::bytes(r.block_read_bytes),
                refine_supervisor::human::bytes(r.block_write_bytes)
            ),
            r.source.name().to_owned(),
        ]);
    }
    const LABEL: usize = 1;
    if let Some(w) = width {
        let widest = |i: usize| {
            table
                .iter()
                .map(|r| display_width(&r[i]))
                .max()
                .unwrap_or(0)
        };
        // Every other column with its two spaces of gap (the last one has none).
        let cols = table[0].len();
        let fixed: usize = (0..cols)
            .filter(|&i| i != LABEL)
            .map(|i| widest(i) + if i + 1 < cols { 2 } else { 0 })
            .sum::<usize>()
            + 2;
        let room = w.saturating_sub(fixed).max(NO_LABEL.len());
        for r in table.iter_mut().skip(1) {
            r[LABEL] = cut_to_width(&r[LABEL], room).into_owned();
        }
    }
    table_lines(&table, width)
}

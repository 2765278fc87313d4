//! One-line verdicts for `stop`, tables for `recover` and `gc`, the protection's words.

use super::*;

// ---------------------------------------------------------------------------------------------
// stop, recover, gc.

/// `stop`: one line, naming the scope by its id and, when it has one, its label.
pub fn stop_line(doc: &StopDoc, label: &str) -> String {
    let line = stop_line_raw(doc);
    match label {
        "" => escape(&line).into_owned(),
        l => {
            let rest = line.strip_prefix(doc.id.as_str()).unwrap_or(&line);
            format!("{} ({}){}", escape(&doc.id), escape(l), escape(rest))
        }
    }
}

fn stop_line_raw(doc: &StopDoc) -> String {
    match &doc.detail {
        StopDetail::Done {
            killed,
            timings_us,
            receipt,
            ..
        } => {
            let proof = match receipt {
                Some(r) if doc.state == State::Exited => format!("receipt {}", verified_receipt(r)),
                _ => format!(
                    "{}{}",
                    doc.state.name(),
                    doc.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
            };
            format!(
                "{}: {} ({killed} killed in {}); {proof}",
                doc.id,
                doc.outcome.words(),
                refine_supervisor::human::duration(Duration::from_micros(timings_us.total)),
            )
        }
        StopDetail::Failed { error } => format!("{}: stop failed: {error}", doc.id),
    }
}

/// `recover` (and `recover --dry-run`): one row per registration and a summary line.
pub fn recover(o: &mut impl Write, doc: &RecoverDoc) -> io::Result<()> {
    if doc.registrations.is_empty() {
        return writeln!(o, "nothing to recover");
    }
    let mut rows = vec![["ID", "ACTION", "STATE", "REASON"]
        .map(String::from)
        .to_vec()];
    for e in &doc.registrations {
        rows.push(vec![
            e.id.clone(),
            e.action.words(),
            e.state.name().to_owned(),
            e.reason
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        ]);
    }
    write_lines(o, &table_lines(&rows, None))?;
    let summary: Vec<String> = doc
        .summary
        .iter()
        .flatten()
        .map(|(a, n)| format!("{n} {}", a.words()))
        .collect();
    let head = if doc.dry_run {
        "dry run, nothing done: "
    } else {
        ""
    };
    writeln!(o, "{head}{}", summary.join(", "))
}

/// `gc`: one row per registration considered, sizes in binary units, and a total.
/// `gc`: one row per thing removed (or, with `--dry-run`, that would be), each with its reason;
/// what is kept is only counted (`--json` has every entry and why it was kept).
pub fn gc(o: &mut impl Write, report: &GcDoc) -> io::Result<()> {
    let mut rows = vec![["ID", "ACTION", "FILES", "SIZE", "REASON"]
        .map(String::from)
        .to_vec()];
    for e in &report.retention.entries {
        if !matches!(
            e.action,
            RetentionAction::Deleted | RetentionAction::WouldDelete
        ) {
            continue;
        }
        let reason = retention_words(e, report.retention.older_than_secs);
        rows.push(vec![
            e.id.clone(),
            e.action.words(),
            e.files.len().to_string(),
            human_bytes(e.bytes),
            reason,
        ]);
    }
    for e in &report.forget.entries {
        if e.action == refine_supervisor::host::docs::ForgetAction::Kept {
            continue;
        }
        let reason = forget_words(e, report.forget.forget_after_secs);
        rows.push(vec![
            e.id.clone(),
            e.action.words(),
            "-".into(),
            "-".into(),
            reason,
        ]);
    }
    let mut strays_kept = 0;
    for e in &report.strays {
        if e.action == StrayAction::Kept {
            strays_kept += 1;
            continue;
        }
        let file = e
            .path
            .file_name()
            .map(|n| escape(&n.to_string_lossy()).into_owned())
            .unwrap_or_default();
        let why = match &e.reason {
            StrayReasonDoc::NoRecord => format!(
                "{file}: no record names it (an aborted or forgotten launch), older than {}",
                age(refine_supervisor::host::STRAY_SAFETY_AGE)
            ),
            StrayReasonDoc::Temporary => {
                format!("{file}: temporary file of an interrupted replacement")
            }
            StrayReasonDoc::Young {
                age_secs,
                limit_secs,
            } => format!(
                "{file}: only {} old (limit {})",
                age(Duration::from_secs(*age_secs)),
                age(Duration::from_secs(*limit_secs))
            ),
            StrayReasonDoc::Locked => format!("{file}: its registration lock is held"),
            StrayReasonDoc::Failed { error } => format!("{file}: {}", escape(error)),
            StrayReasonDoc::EndedScopeCgroup => format!(
                "cgroup {}: its scope ended (the launcher died before removing it)",
                escape(&e.path.to_string_lossy())
            ),
            StrayReasonDoc::UnnamedCgroup => format!(
                "cgroup {}: no record names it (its launch never registered)",
                escape(&e.path.to_string_lossy())
            ),
        };
        rows.push(vec![
            e.id.clone().unwrap_or_else(|| "-".into()),
            e.action.words(),
            "1".into(),
            human_bytes(e.bytes),
            why,
        ]);
    }
    if rows.len() > 1 {
        write_lines(o, &table_lines(&rows, None))?;
    }
    let (files, bytes) = report
        .retention
        .entries
        .iter()
        .filter(|e| {
            matches!(
                e.action,
                RetentionAction::Deleted | RetentionAction::WouldDelete
            )
        })
        .fold((0, 0), |(f, b), e| (f + e.files.len(), b + e.bytes));
    writeln!(
        o,
        "{} {files} files, {}",
        if report.retention.dry_run {
            "would delete"
        } else {
            "deleted"
        },
        human_bytes(bytes)
    )?;
    let would = report
        .forget
        .entries
        .iter()
        .filter(|e| e.action == refine_supervisor::host::docs::ForgetAction::WouldForget)
        .count();
    writeln!(
        o,
        "{} {} registrations (exited, older than {}); {} younger kept",
        if report.forget.dry_run {
            "would forget"
        } else {
            "forgot"
        },
        report.forget.forgotten + report.forget.resumed + would,
        refine_supervisor::human::duration(Duration::from_secs(report.forget.forget_after_secs)),
        report.forget.young,
    )?;
    let strays = report.strays.len() - strays_kept;
    writeln!(
        o,
        "{} {strays} files no record covers; {strays_kept} kept (young or in use)",
        if report.retention.dry_run {
            "would remove"
        } else {
            "removed"
        },
    )
}

/// Why retention kept or deleted a registration's artifacts, in words (paths and errors escaped).
pub(crate) fn retention_words(
    e: &refine_protocol::docs::RetentionEntryDoc,
    limit_secs: u64,
) -> String {
    use refine_protocol::docs::RetentionReason as R;
    let limit = age(Duration::from_secs(limit_secs));
    let old = e.age_secs.map(|s| age(Duration::from_secs(s)));
    let old = old.as_deref().unwrap_or("?");
    match &e.reason {
        R::NoArtifacts => "no artifacts".to_owned(),
        R::MissingRecord => "missing record: nothing proves the scope exited".to_owned(),
        R::Young => format!("only {old} old (limit {limit})"),
        R::NotExited { state, reason } => not_exited_words(*state, reason.as_ref()),
        R::LockBusy { error } => format!("lock busy or unavailable: {}", escape(error)),
        R::RecordNotIntact { error } => format!("record not intact: {}", escape(error)),
        R::StatFailed { path, error } => format!(
            "cannot stat {}: {}",
            escape(&path.to_string_lossy()),
            escape(error)
        ),
        R::ExitedYoung => format!("exited, but only {old} old (limit {limit})"),
        R::ExitedPastLimit => format!("exited (verified), {old} old (limit {limit})"),
        R::RemoveFailed { path, error } => format!(
            "exited (verified), {old} old (limit {limit}); could not remove {}: {}",
            escape(&path.to_string_lossy()),
            escape(error)
        ),
        R::SyncFailed { error } => format!(
            "exited (verified), {old} old (limit {limit}); removed, but syncing the logs \
             directory failed: {}",
            escape(error)
        ),
    }
}

/// Why forgetting kept or forgot a registration, in words (paths and errors escaped).
pub(crate) fn forget_words(e: &refine_protocol::docs::ForgetEntryDoc, horizon_secs: u64) -> String {
    use refine_protocol::docs::ForgetReason as R;
    let limit = age(Duration::from_secs(horizon_secs));
    match &e.reason {
        R::NotExited { state, reason } => format!(
            "{}: only exited registrations are forgotten",
            not_exited_words(*state, reason.as_ref())
        ),
        R::LockBusy { error } => format!("lock busy or unavailable: {}", escape(error)),
        R::RecordNotIntact { error } => format!("record not intact: {}", escape(error)),
        R::ExitedPastHorizon => {
            let unchanged = e.unchanged_secs.map(|s| age(Duration::from_secs(s)));
            format!(
                "exited, nothing changed for {} (limit {limit})",
                unchanged.as_deref().unwrap_or("?")
            )
        }
        R::MarkerNotRemoved { error } => {
            format!("cannot remove the open marker: {}", escape(error))
        }
        R::RecordNotMoved { error } => format!("cannot move the record aside: {}", escape(error)),
        R::RemoveFailed { path, error } => format!(
            "cannot remove {}: {}",
            escape(&path.to_string_lossy()),
            escape(error)
        ),
    }
}

/// A state that is not `exited`, with the assessment's reason when it gave one.
fn not_exited_words(state: State, reason: Option<&refine_protocol::docs::ScopeReason>) -> String {
    match reason {
        Some(r) => format!("{} ({})", state.name(), escape(&r.to_string())),
        None => state.name().to_owned(),
    }
}

/// X12: `show`'s `Sandbox:` line.
pub(crate) fn sandbox_words(s: Option<&refine_protocol::record::Sandbox>) -> String {
    use refine_protocol::record::{NetworkAsk, SandboxMode};
    let Some(s) = s else {
        return "none".to_owned();
    };
    let mut words = match s.mode {
        SandboxMode::None => "no file-system sandbox".to_owned(),
        SandboxMode::ReadOnly => "read-only".to_owned(),
        SandboxMode::WorkspaceWrite => format!("workspace-write {}", s.writable.join(",")),
    };
    if let Some(t) = &s.tmpdir {
        words.push_str(&format!("; TMPDIR {t}"));
    }
    words.push_str(match s.network {
        NetworkAsk::None => "; network none (no TCP bind or connect)",
        NetworkAsk::All => "; network as it is",
    });
    words
}

/// X11: `show`'s `Protected:` line, from the record's protection.
pub(crate) fn protection_words(p: Option<&refine_protocol::record::Protection>) -> String {
    use refine_protocol::record::{ProtectAsk, ProtectPart};
    let Some(p) = p else {
        return "not recorded (an older launch: no Landlock domain)".to_owned();
    };
    if p.asked == ProtectAsk::None {
        return "none (--protect none): the workload could reach its evidence, its guardian, other scopes and the service".to_owned();
    }
    let part = |what: &str, s: ProtectPart| match s {
        ProtectPart::Held => format!("{what} held"),
        ProtectPart::OptedOut => format!("{what} off (--protect)"),
        ProtectPart::Unavailable => {
            format!("{what} missing (Landlock ABI {} too old or absent)", p.abi)
        }
        ProtectPart::SharedTmp => {
            format!("{what} not applied (evidence under a shared temporary directory)")
        }
        ProtectPart::ReadyNotify => format!("{what} not scoped (--ready notify)"),
        ProtectPart::Unlistable => {
            format!("{what} not applied (a folder above run/ cannot be listed)")
        }
    };
    format!(
        "Landlock ABI {}: {}; {}; {}; no_new_privs {}; {} rules",
        p.abi,
        part("run/ files", p.fs),
        part("signals", p.signals),
        part("abstract sockets", p.abstract_sockets),
        if p.no_new_privs { "set" } else { "not set" },
        p.rules
    )
}

//! `show` as `systemctl status` reads, `version`, the tail of an artifact, a receipt's verdict.

use super::*;

// ---------------------------------------------------------------------------------------------
// show.

/// `show ID` as `systemctl status` reads: headline, state, command, processes, receipt, output.
pub fn show(o: &mut impl Write, doc: &ShowDoc, tail: &[(String, Vec<String>)]) -> io::Result<()> {
    let rec = &doc.record;
    let dot = match doc.state {
        State::Live => "●",
        State::Exited => "○",
        State::Unverified | State::Corrupt => "×",
    };
    let label = label_or_none(&rec.label);
    writeln!(o, "{dot} {}  {}  ({})", doc.id, escape(label), rec.kind)?;

    let mut lines: Vec<(&str, String)> = Vec::new();
    // State, its reason and since when.
    let since = match (&doc.state, &doc.receipt) {
        (State::Exited, Some(r)) if r.workload_exited_at_ns > 0 || r.written_at_ns > 0 => {
            r.written_at_ns / 1_000_000
        }
        _ => rec.started_at_unix_ms,
    };
    // As `ps` names it: a live scope whose workload has ended is `residue`.
    let name = if doc.state == State::Live && !workload_listed(doc) {
        "residue (the workload ended; what it left still runs)"
    } else {
        doc.state.name()
    };
    let mut state = format!(
        "{} since {} ({} ago)",
        name,
        local_time(since),
        age_since(since)
    );
    if let Some(reason) = &doc.reason {
        let _ = write!(state, ": {reason}");
    }
    lines.push(("State", state));
    lines.push((
        "Started",
        format!(
            "{} ({} ago)",
            local_time(rec.started_at_unix_ms),
            age_since(rec.started_at_unix_ms)
        ),
    ));
    lines.push(("Command", shell_join(&rec.argv)));
    lines.push(("Cwd", rec.cwd.clone()));
    lines.push(("Main PID", main_pid(doc)));
    if let Some(ResultDoc::Written {
        outcome,
        residue_stop,
        reason,
        ..
    }) = &doc.result
    {
        // Who stopped it, when it was not the launch's own engine (recovery, an operator).
        let cause = residue_stop
            .as_ref()
            .and_then(|r| r.cause)
            .and_then(|c| refine_protocol::docs::variant_name(&c));
        let mut words = match cause {
            Some(c) => format!("{} (cause: {})", outcome.words(), c.replace('_', " ")),
            None => outcome.words(),
        };
        if let Some(refine_protocol::docs::ResultReason::Oom) = reason {
            words.push_str("; killed out of memory (oom) at its --memory-max");
        }
        lines.push(("Outcome", words));
    }
    // H6: where the workload's readiness stands.
    if let Some(r) = &doc.readiness {
        let how = match (r.mode, &r.cmd) {
            (refine_protocol::record::ReadyMode::Cmd, Some(c)) => format!("cmd={}", escape(c)),
            (refine_protocol::record::ReadyMode::Fd, _) => format!("fd={}", r.fd.unwrap_or(0)),
            _ => "notify".to_owned(),
        };
        let mut text = format!("{} ({how}", r.state.words());
        if r.probes > 0 {
            text.push_str(&format!(
                ", {} probe{}",
                r.probes,
                if r.probes == 1 { "" } else { "s" }
            ));
        }
        text.push(')');
        if let Some(since) = &r.since {
            text.push_str(&format!(" since {since}"));
        }
        if let Some(s) = &r.status {
            text.push_str(&format!(": {}", escape(s)));
        }
        if let Some(why) = &r.reason {
            text.push_str(&format!(": {}", escape(why)));
        }
        lines.push(("Ready", text));
    }
    // H7: where its health stands, and its last probes.
    lines.extend(super::super::health_view::show_lines(doc));
    lines.push(("Receipt", receipt_line(doc)));
    // F4: the kernel's accounting of the scope's own cgroup: live while it exists, then the
    // final figures the result kept.
    let kept = match &doc.result {
        Some(ResultDoc::Written { cgroup_usage, .. }) => *cgroup_usage,
        _ => None,
    };
    let accounting = |u: &refine_protocol::docs::CgroupUsageDoc| {
        format!(
            "CPU {:.2}s; memory peak {}; OOM kills {}",
            u.cpu_us as f64 / 1e6,
            u.memory_peak_bytes.map_or(
                "not available (no memory controller)".to_owned(),
                human_bytes
            ),
            u.oom_kills
                .map_or("not available".to_owned(), |n| n.to_string()),
        )
    };
    let cgroup = match &rec.cgroup {
        Some(cg) => match (&cg.usage, cg.refused_errno, kept) {
            (_, Some(errno), _) => format!(
                "{} (not used: clone3 refused, errno {errno}; the stop uses /proc): \
                 accounting not available",
                escape(&cg.path)
            ),
            (Some(u), None, _) => format!("{}: {}", escape(&cg.path), accounting(u)),
            (None, None, Some(u)) => format!(
                "{} (removed after the receipt): {}",
                escape(&cg.path),
                accounting(&u)
            ),
            (None, None, None) => format!(
                "{} (removed after the receipt): accounting not available",
                escape(&cg.path)
            ),
        },
        None => "none (the /proc path): accounting not available".to_owned(),
    };
    lines.push(("Cgroup", cgroup));
    // H8: the limits, where they were applied, and what their controllers counted.
    if !rec.limits.placements.is_empty() {
        let mut asked = Vec::new();
        if let Some(b) = rec.limits.memory_max_bytes {
            asked.push(format!("memory {}", human_bytes(b)));
        }
        if let Some(m) = rec.limits.cpu_millis {
            asked.push(format!("cpus {}", f64::from(m) / 1000.0));
        }
        if let Some(n) = rec.limits.pids_max {
            asked.push(format!("pids {n}"));
        }
        let hierarchy = if rec.limits.placements.iter().all(|p| p.unified) {
            "cgroup v2"
        } else if rec.limits.placements.iter().any(|p| p.unified) {
            "cgroup v2 and v1"
        } else {
            "cgroup v1"
        };
        let mut text = format!("{} ({hierarchy})", asked.join(", "));
        if let Some(ResultDoc::Written {
            limit_usage: Some(u),
            ..
        }) = &doc.result
        {
            let mut seen = Vec::new();
            if let Some(b) = u.memory_peak_bytes {
                seen.push(format!("memory peak {}", human_bytes(b)));
            }
            if let Some(n) = u.oom_kills {
                seen.push(format!("{n} OOM kill{}", if n == 1 { "" } else { "s" }));
            }
            if let Some(n) = u.pids_peak {
                seen.push(format!("pids peak {n}"));
            }
            if let Some(n) = u.pids_refused {
                seen.push(format!("{n} fork{} refused", if n == 1 { "" } else { "s" }));
            }
            if let Some(us) = u.throttled_us {
                seen.push(format!("throttled {:.2}s", us as f64 / 1e6));
            }
            if !seen.is_empty() {
                text.push_str(&format!(": {}", seen.join(", ")));
            }
        }
        lines.push(("Limits", text));
    }
    // X7: whether the workload could join PID and user namespaces made outside its scope.
    let setns = match rec.allow_setns {
        Some(false) => "refused into PID and user namespaces (seccomp)",
        Some(true) => "allowed (--allow-setns): outside namespaces could be joined",
        None => "not recorded (an older launch: no filter)",
    };
    lines.push(("Setns", setns.to_owned()));
    // X11: what the Landlock domain held.
    lines.push(("Protected", protection_words(rec.protection.as_ref())));
    lines.push(("Sandbox", sandbox_words(rec.sandbox.as_ref())));
    // V1: the builds that registered and hold the scope.
    let built = |who: &str, p: &Option<refine_protocol::BuildProvenance>| match p {
        Some(p) => format!("{who} {}", build_words(p, 12)),
        None => format!("{who} not recorded"),
    };
    lines.push((
        "Built",
        format!(
            "{}; {}",
            built("supervisor", &rec.provenance.supervisor),
            built("guardian", &rec.provenance.guardian)
        ),
    ));
    if let Some(u) = doc.receipt.as_ref().and_then(|r| r.usage) {
        // H4: what the whole tree cost, from the receipt.
        lines.push((
            "Cost",
            format!(
                "CPU {:.2}s user, {:.2}s system; largest peak RSS {}",
                u.user_us as f64 / 1e6,
                u.system_us as f64 / 1e6,
                human_bytes(u.max_rss_kib.saturating_mul(1024))
            ),
        ));
    }
    for (heading, a) in [
        ("Stdout", &doc.artifacts.stdout),
        ("Stderr", &doc.artifacts.stderr),
    ] {
        // An artifact is created by the stream's first byte (F3): none means no output.
        let size = if a.exists {
            human_bytes(a.bytes)
        } else {
            "no output".into()
        };
        let line = match &a.incomplete {
            Some(why) => format!("{} ({size}; {})", a.path.display(), incomplete_words(why)),
            None => format!("{} ({size})", a.path.display()),
        };
        lines.push((heading, line));
    }
    if !rec.purpose.is_empty() {
        let meta: Vec<String> = rec
            .purpose
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        lines.push(("Purpose", meta.join(" ")));
    }
    for (k, v) in &lines {
        writeln!(o, "{k:>10}: {}", escape(v))?;
    }
    if !doc.processes.is_empty() {
        writeln!(o, "{:>10}:", "Processes")?;
        let mut rows = vec![["PID", "PPID", "STATE", "CPU", "RSS", "PROGRAM", "ARGS"]
            .map(String::from)
            .to_vec()];
        for p in &doc.processes {
            rows.push(process_row(p));
        }
        let width = terminal_width().map(|w| w.saturating_sub(12));
        for l in table_lines(&rows, width) {
            writeln!(o, "            {l}")?;
        }
    }
    for (stream, tail) in tail {
        if tail.is_empty() {
            continue;
        }
        writeln!(o)?;
        let n = tail.len();
        writeln!(
            o,
            "Last {n} line{} of {stream}:",
            if n == 1 { "" } else { "s" }
        )?;
        for l in tail {
            writeln!(o, "  {}", escape(l))?;
        }
    }
    Ok(())
}

/// A build in words (V1): `0.1.0 source 0123456789ab dirty`, the commit cut to `commit_len`
/// digits; what is not known says `unknown`. Escape before printing (the text is a file's).
pub fn build_words(p: &refine_protocol::BuildProvenance, commit_len: usize) -> String {
    let commit = p
        .commit
        .as_deref()
        .map_or("commit unknown".to_owned(), |c| {
            c.chars().take(commit_len).collect()
        });
    let tree = match p.dirty {
        Some(true) => "dirty",
        Some(false) => "clean",
        None => "tree unknown",
    };
    format!("{} {} {commit} {tree}", p.version, p.class.as_str())
}

/// `version`: one line per binary.
pub fn version(o: &mut impl Write, doc: &refine_protocol::docs::VersionDoc) -> io::Result<()> {
    writeln!(
        o,
        "refine-supervisor {}",
        escape(&build_words(&doc.supervisor, 64))
    )?;
    let g = &doc.guardian;
    match (&g.provenance, &g.problem) {
        (Some(p), _) => writeln!(
            o,
            "refine-guardian {} ({})",
            escape(&build_words(p, 64)),
            escape(&g.path)
        ),
        (None, problem) => writeln!(
            o,
            "refine-guardian unknown: {}",
            escape(problem.as_deref().unwrap_or("no provenance"))
        ),
    }
}

fn process_row(p: &ProcessDoc) -> Vec<String> {
    let mut program = p.program.clone();
    if p.found == Found::OwnerMarker {
        program.push_str(" (marker)");
    }
    vec![
        p.pid.to_string(),
        p.ppid.to_string(),
        p.state.clone(),
        format!("{:.2}s", p.cpu_ms as f64 / 1000.0),
        human_bytes(p.rss_bytes),
        program,
        shell_join(&p.args),
    ]
}

/// `1234 (sh): running`, or the workload's status once it ended; the guardian's pid beside it.
/// Whether the workload is among the scope's processes now.
fn workload_listed(doc: &ShowDoc) -> bool {
    let w = &doc.record.workload;
    doc.processes
        .iter()
        .any(|p| p.pid == w.pid && p.start_time == w.start_time)
}

fn main_pid(doc: &ShowDoc) -> String {
    let w = &doc.record.workload;
    let program = doc
        .record
        .argv
        .first()
        .map(|a| {
            Path::new(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| a.clone())
        })
        .unwrap_or_default();
    let status = if workload_listed(doc) {
        "running".to_owned()
    } else {
        let from_receipt = doc.receipt.as_ref().map(|r| r.status);
        let from_result = match &doc.result {
            Some(ResultDoc::Written { status, .. }) => Some(*status),
            _ => None,
        };
        from_receipt
            .or(from_result)
            .and_then(|s| status_words(&s))
            .map(|s| format!("ended, {s}"))
            .unwrap_or_else(|| "ended, status not known yet".into())
    };
    format!(
        "{} ({program}): {status}; guardian {}",
        w.pid, doc.record.guardian.pid
    )
}

/// `verified, 3 processes reaped, written 12:00:01`, or why there is none.
fn receipt_line(doc: &ShowDoc) -> String {
    match (&doc.state, &doc.receipt) {
        (State::Exited, Some(r)) => verified_receipt(r),
        (State::Exited, None) => "none needed: its boot has ended".into(),
        (State::Live, _) => "not yet: the guardian is alive and still reaping".into(),
        (_, _) => format!(
            "none verifies{}",
            doc.reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
    }
}

pub(super) fn verified_receipt(r: &ReceiptDoc) -> String {
    let status = status_words(&r.status).unwrap_or_else(|| "status unknown".into());
    format!(
        "verified, {} process{} reaped, workload {status}, written {}",
        r.reaped,
        if r.reaped == 1 { "" } else { "es" },
        short_time(r.written_at_ns / 1_000_000)
    )
}

/// The last `n` lines of a file, for display: at most the last 64 KiB of it (a workload that
/// writes one endless line does not fill the screen or the memory of `show`).
pub fn tail_lines(path: &Path, n: usize) -> io::Result<Vec<String>> {
    const SHOWN: u64 = 64 * 1024;
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut f = std::fs::File::open(path)?;
    let len = f.seek(SeekFrom::End(0))?;
    let start = tail_offset(&mut f, len.saturating_sub(SHOWN), len, n)?;
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(len - start).read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().map(str::to_owned).collect())
}

/// The offset where the last `n` lines of the bytes `floor..len` of `f` start (`floor` when
/// there are fewer).
pub fn tail_offset(f: &mut std::fs::File, floor: u64, len: u64, n: usize) -> io::Result<u64> {
    const CHUNK: u64 = 16 * 1024;
    if n == 0 {
        return Ok(len);
    }
    let mut pos = len;
    let mut newlines = 0usize;
    let mut buf = vec![0u8; CHUNK as usize];
    // A final newline ends the last line rather than starting an empty one.
    let mut skip_last = true;
    while pos > floor {
        let step = CHUNK.min(pos - floor);
        pos -= step;
        f.seek(SeekFrom::Start(pos))?;
        let chunk = &mut buf[..step as usize];
        f.read_exact(chunk)?;
        for i in (0..chunk.len()).rev() {
            if chunk[i] != b'\n' {
                skip_last = false;
                continue;
            }
            if skip_last {
                skip_last = false;
                continue;
            }
            newlines += 1;
            if newlines == n {
                return Ok(pos + i as u64 + 1);
            }
        }
    }
    Ok(floor)
}

/// `receipt`: one line.
pub fn receipt_verdict(doc: &ReceiptVerdictDoc) -> String {
    let line = match (&doc.receipt, doc.verified) {
        (Some(r), true) => format!("{}: receipt {}", doc.id, verified_receipt(r)),
        (_, _) => format!(
            "{}: receipt does not verify{} ({})",
            doc.id,
            doc.state
                .map(|s| format!(", scope {}", s.name()))
                .unwrap_or_default(),
            doc.reason
                .as_ref()
                .map_or_else(|| "no receipt".to_owned(), ToString::to_string)
        ),
    };
    escape(&line).into_owned()
}

/// Why an artifact is incomplete, in the capture receipt's words (`incomplete: …` or
/// `capture failure: …`).
pub(crate) fn incomplete_words(why: &refine_protocol::docs::IncompleteDoc) -> String {
    use refine_protocol::docs::IncompleteDoc as D;
    match why {
        D::MemoryLimit { kept_bytes } => format!(
            "incomplete: output past the {kept_bytes}-byte memory limit (artifact complete)"
        ),
        D::ArtifactCap { cap_bytes } => {
            format!("incomplete: log cap of {cap_bytes} bytes reached (the pipe is still drained)")
        }
        D::DrainEnded { drain_ms } => {
            format!("incomplete: final drain of {drain_ms}ms ended before end of file")
        }
        D::ReaderGone => "incomplete: the reader of the forwarded stream went away".to_owned(),
        D::HeldOutside => "incomplete: held open outside the scope".to_owned(),
        D::Read { errno } => format!("capture failure: reading the stream failed (errno {errno})"),
        D::ArtifactWrite { errno } => {
            format!("capture failure: writing the artifact failed (errno {errno})")
        }
        D::WordedIncomplete { words } => format!("incomplete: {}", escape(words)),
        D::WordedFailure { words } => format!("capture failure: {}", escape(words)),
    }
}

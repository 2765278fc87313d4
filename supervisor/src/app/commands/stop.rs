//! The commands that end things: `stop`, `holders`, `reap`, and the interrupts they hold.

use super::*;

/// Issue 38 item 7: the termination signals an operator's `stop` or `recover` gets (Ctrl-C, a
/// `timeout`, a systemd `ExecStop=` at its limit, a cancelled CI job) wait until the stop in
/// progress has finished: a quiesce is never left half done by them. They stay blocked while
/// the command runs; the first one taken then makes it exit 128+N, its output written. A
/// SIGKILL cannot be held: what such a stop left frozen or stopped, the next `stop` of the
/// scope ends (it kills a cgroup frozen by someone else, and stopped members, all the same).
pub(super) struct Interrupts {
    signals: Option<std::os::fd::OwnedFd>,
}

impl Interrupts {
    const HELD: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

    pub(super) fn hold() -> Interrupts {
        let blocked = refine_supervisor::host::signals::Blocked::block(&Self::HELD);
        Interrupts {
            signals: blocked.signalfd().ok(),
        }
    }

    /// The first held signal that came, if any: the command's exit status becomes 128+N.
    pub(super) fn first(&self) -> Option<i32> {
        use std::os::fd::AsFd;
        let fd = self.signals.as_ref()?;
        refine_supervisor::host::signals::read_signal(fd.as_fd()).map(|t| t.signo)
    }

    pub(super) fn exit_code(&self, code: ExitCode) -> ExitCode {
        self.first().map_or(code, |sig| 128 + sig)
    }
}

pub(super) fn stop(home: &Path, port: u16, args: StopArgs) -> Result<ExitCode, CliError> {
    let interrupts = Interrupts::hold();
    let code = stop_held(home, port, args);
    code.map(|c| interrupts.exit_code(c))
}

pub(super) fn stop_held(home: &Path, port: u16, args: StopArgs) -> Result<ExitCode, CliError> {
    let grace = args.grace.map(|g| (g, args.signal));
    if let [one] = &args.ids[..] {
        let (rt, id) = runtime_and_id(home, port, one, resolve::Intent::Change)?;
        let reg = rt.read_registration(id)?;
        let doc = ops::stop_one(&rt, &reg, refine_protocol::StopCause::Operator, grace);
        if args.json {
            print_json(&doc)?;
        } else {
            writeln!(out(), "{}", view::stop_line(&doc, &reg.label)).map_err(CliError::Output)?;
        }
        let proven = doc.state == State::Exited;
        return verdict(
            proven,
            CliError::StopNotProven {
                id,
                reason: doc.reason.as_ref().map(ToString::to_string),
            },
        );
    }
    // Several ids stop at once, as `docker stop a b c` does: their graces overlap (only the
    // quiesce, kill and proof of each is serialized, by the runtime's stop fence). Each id is
    // resolved first (a failure is one line on stderr and the others still stop); a line is
    // printed as each stop ends, the JSON array in the order given; the exit is the first
    // non-zero one in that order.
    let resolved: Vec<Result<(Runtime, refine_protocol::record::Registration), CliError>> = args
        .ids
        .iter()
        .map(|w| {
            let (rt, id) = runtime_and_id(home, port, w, resolve::Intent::Change)?;
            let reg = rt.read_registration(id)?;
            Ok((rt, reg))
        })
        .collect();
    let lines = std::sync::Mutex::new(());
    let json = args.json;
    let docs: Vec<Result<crate::app::docs::StopDoc, CliError>> = std::thread::scope(|s| {
        let running: Vec<_> = resolved
            .into_iter()
            .map(|r| {
                r.map(|(rt, reg)| {
                    let lines = &lines;
                    s.spawn(move || {
                        let doc =
                            ops::stop_one(&rt, &reg, refine_protocol::StopCause::Operator, grace);
                        if !json {
                            let _held = lines.lock();
                            writeln!(out(), "{}", view::stop_line(&doc, &reg.label))
                                .map_err(CliError::Output)?;
                        }
                        Ok(doc)
                    })
                })
            })
            .collect();
        running
            .into_iter()
            .map(|r| r.and_then(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))))
            .collect()
    });
    let mut code = 0;
    let mut shown = Vec::new();
    for d in docs {
        let c = match d {
            Err(CliError::Output(e)) => return Err(CliError::Output(e)),
            Err(e) => {
                eprintln!("refine-supervisor: error: {}", crate::app::one_line(&e));
                1
            }
            Ok(doc) => {
                let Some(id) = RegistrationId::parse(&doc.id) else {
                    shown.push(doc);
                    continue;
                };
                let c = match verdict(
                    doc.state == State::Exited,
                    CliError::StopNotProven {
                        id,
                        reason: doc.reason.as_ref().map(ToString::to_string),
                    },
                ) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("refine-supervisor: error: {}", crate::app::one_line(&e));
                        1
                    }
                };
                shown.push(doc);
                c
            }
        };
        if code == 0 {
            code = c;
        }
    }
    if json {
        print_json(&shown)?;
    }
    Ok(code)
}

/// `holders PATH` (H1): exit 0 when nothing holds PATH, 1 when something does.
pub(super) fn holders_cmd(home: &Path, args: HoldersArgs) -> Result<ExitCode, CliError> {
    let doc: HoldersDoc = ops::holders(home, &args.path)?;
    if args.json {
        print_json(&doc)?;
    } else if doc.holders.is_empty() {
        let shown = doc.path.display().to_string();
        writeln!(out(), "nothing holds {}", view::escape(&shown)).map_err(CliError::Output)?;
    } else {
        holders_table(&doc.holders, None)?;
    }
    if !args.json && doc.unreadable > 0 {
        writeln!(
            out(),
            "({} could not be read (permission denied): {} may hold it too)",
            match doc.unreadable {
                1 => "1 process".to_owned(),
                n => format!("{n} processes"),
            },
            if doc.unreadable == 1 { "it" } else { "they" }
        )
        .map_err(CliError::Output)?;
    }
    Ok(ExitCode::from(!doc.holders.is_empty()))
}

/// The holders table; `why` adds a column (the reason a holder was left by `reap`).
pub(super) fn holders_table(rows: &[HolderDoc], why: Option<&[String]>) -> Result<(), CliError> {
    let mut head = vec!["PID", "PROGRAM", "CPU", "AGE", "VIA", "OWNER", "PATH"];
    if why.is_some() {
        head.push("WHY");
    }
    let mut table = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for (i, h) in rows.iter().enumerate() {
        let owner = match &h.owner {
            Some(o) => format!("{} ({})", o.id, o.state),
            None => "no owner".to_owned(),
        };
        let mut row = vec![
            h.witness.pid.to_string(),
            h.program.clone(),
            format!("{:.2}s", h.cpu_ms as f64 / 1000.0),
            view::age(Duration::from_millis(h.age_ms)),
            h.via.words(),
            owner,
            h.path.clone(),
        ];
        if let Some(why) = why {
            row.push(why.get(i).cloned().unwrap_or_default());
        }
        table.push(row);
    }
    write_table(&table)
}

/// `reap --checkout PATH` (H2): exit 0 only when nothing holds PATH afterwards.
pub(super) fn reap(home: &Path, port: u16, args: ReapArgs) -> Result<ExitCode, CliError> {
    let rt = open_runtime(home, port)?;
    let (doc, clean): (ReapDoc, bool) = ops::reap(home, rt.as_ref(), &args.checkout, args.budget)?;
    let code = ExitCode::from(!clean);
    if args.json {
        print_json(&doc)?;
        return Ok(code);
    }
    let mut o = out();
    let shown = doc.path.display().to_string();
    let path = view::escape(&shown);
    if !doc.refused.is_empty() {
        writeln!(
            o,
            "refused: a live workload works in {path} (end it first); nothing was signalled"
        )
        .map_err(CliError::Output)?;
        drop(o);
        holders_table(&doc.refused, None)?;
        return Ok(code);
    }
    for s in &doc.stopped {
        let verdict = match (&s.outcome, s.receipt_verified, &s.error) {
            (_, true, _) => "stopped, receipt verified".to_owned(),
            (_, _, Some(e)) => format!("stop failed: {e}"),
            (Some(outcome), false, None) => format!("{}, no receipt", outcome.words()),
            (None, false, None) => "not stopped".to_owned(),
        };
        writeln!(o, "scope {}: {}", s.id, view::escape(&verdict)).map_err(CliError::Output)?;
    }
    writeln!(o, "orphans killed: {}", doc.killed.len()).map_err(CliError::Output)?;
    if let Some(e) = &doc.error {
        writeln!(o, "kill failed: {}", view::escape(e)).map_err(CliError::Output)?;
    }
    if doc.left.is_empty() {
        writeln!(o, "nothing holds {path} any more").map_err(CliError::Output)?;
        return Ok(code);
    }
    writeln!(o, "still holding {path}:").map_err(CliError::Output)?;
    drop(o);
    let why: Vec<String> = doc.left.iter().map(|l| why_text(&l.why)).collect();
    let rows: Vec<HolderDoc> = doc.left.into_iter().map(|l| l.holder).collect();
    holders_table(&rows, Some(&why))?;
    Ok(code)
}

pub(super) fn why_text(why: &WhyDoc) -> String {
    match why {
        WhyDoc::LiveWorkload => "its workload is live".to_owned(),
        WhyDoc::ResidueSurvived => "its scope's stop did not end it".to_owned(),
        WhyDoc::NotOrphan { ppid, parent } => format!("not an orphan (parent {ppid} {parent})"),
        WhyDoc::Guardian { guardian_of: g } => format!(
            "the guardian of {} in home {} (port {}): never reaped, stop it there",
            g.id,
            g.home.display(),
            g.port
        ),
        WhyDoc::GuardianBelow { guardian_of: g } => format!(
            "the guardian of {} in home {} (port {}) is below it",
            g.id,
            g.home.display(),
            g.port
        ),
        WhyDoc::Survived => "survived SIGKILL within the budget".to_owned(),
    }
}

/// Exit 0 when `ok`; otherwise the verdict (with the document's reason) is the one-line error.
pub(super) fn verdict(ok: bool, failure: CliError) -> Result<ExitCode, CliError> {
    if ok {
        Ok(0)
    } else {
        Err(failure)
    }
}

//! The commands over the runtime and its history: `receipt`, `recover`, `upgrade`, `gc`, `capacity`.

use super::*;

pub(super) fn receipt(home: &Path, port: u16, args: ReceiptArgs) -> Result<ExitCode, CliError> {
    // A path has a slash; a bare word is an id, prefix or label, else a file of that name here.
    let by_id = if args.target.contains('/') {
        None
    } else {
        match runtime_and_id(home, port, &args.target, resolve::Intent::Read) {
            Err(CliError::UnknownId(_)) if Path::new(&args.target).is_file() => None,
            other => Some(other?),
        }
    };
    let doc = if let Some((rt, id)) = by_id {
        let reg = rt.read_registration(id)?;
        let a = assess(&rt, &reg);
        ReceiptVerdictDoc {
            id: id.to_string(),
            path: PathBuf::from(&reg.proof_path),
            verified: a.state == State::Exited && a.receipt.is_some(),
            state: Some(a.state),
            reason: a.reason,
            receipt: a.receipt.as_ref().map(ReceiptDoc::of),
        }
    } else {
        let path = PathBuf::from(&args.target);
        let r = receipts::read_receipt_file(&path)?;
        let rt = open_runtime(home, port)?;
        let binding = receipts::bind_receipt(rt.as_ref(), &r, &receipts::KERNEL_BOOT);
        let verified = binding.verified();
        let (state, reason) = match &binding {
            receipts::ReceiptBinding::Holds { assessment, .. } => {
                let a = ops::flatten(assessment);
                (Some(a.state), a.reason)
            }
            receipts::ReceiptBinding::Differs { assessment, .. } => {
                let a = ops::flatten(assessment);
                let reason = a
                    .reason
                    .unwrap_or(refine_protocol::docs::ScopeReason::NotTheProofFilesReceipt);
                (Some(a.state), Some(reason))
            }
            receipts::ReceiptBinding::Unbound => (
                None,
                Some(refine_protocol::docs::ScopeReason::Unbound {
                    registration: r.registration.to_string(),
                    port,
                }),
            ),
        };
        ReceiptVerdictDoc {
            id: r.registration.to_string(),
            path,
            verified,
            state,
            reason,
            receipt: Some(ReceiptDoc::of(&r)),
        }
    };
    if args.json {
        print_json(&doc)?;
    } else {
        writeln!(out(), "{}", view::receipt_verdict(&doc)).map_err(CliError::Output)?;
    }
    verdict(
        doc.verified,
        CliError::ReceiptNotVerified {
            reason: doc.reason.as_ref().map(ToString::to_string),
        },
    )
}

pub(super) fn recover(home: &Path, port: u16, args: RecoverArgs) -> Result<ExitCode, CliError> {
    let interrupts = Interrupts::hold();
    let code = recover_held(home, port, args);
    code.map(|c| interrupts.exit_code(c))
}

pub(super) fn recover_held(
    home: &Path,
    port: u16,
    args: RecoverArgs,
) -> Result<ExitCode, CliError> {
    let doc = match open_runtime(home, port)? {
        Some(rt) if args.dry_run => ops::recover_plan(&rt)?,
        Some(rt) => ops::recover_all(&rt)?,
        None => RecoverDoc {
            dry_run: args.dry_run,
            ..RecoverDoc::default()
        },
    };
    if args.json {
        print_json(&doc)
    } else {
        view::recover(&mut out(), &doc).map_err(CliError::Output)
    }?;
    Ok(0)
}

/// `upgrade`: SIGHUP to the service (found by the socket's peer credentials), then waits until
/// the binary at the path it was started from is what runs and its socket answers (L5).
pub(super) fn upgrade(home: &Path, port: u16, args: UpgradeArgs) -> Result<ExitCode, CliError> {
    use std::os::unix::fs::MetadataExt;
    let fail = |why: String| CliError::Upgrade(why);
    let rt = open_runtime(home, port)?.ok_or_else(|| fail("no service is running".into()))?;
    let sock = rt.socket_path();
    let stream = std::os::unix::net::UnixStream::connect(&sock)
        .map_err(|e| fail(format!("no service answers on {}: {e}", sock.display())))?;
    let cred = rustix::net::sockopt::socket_peercred(&stream)
        .map_err(|e| fail(format!("cannot tell which process serves: {e}")))?;
    drop(stream);
    let pid = cred.pid.as_raw_nonzero().get();
    let link = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| fail(format!("cannot read the service's executable: {e}")))?;
    let text = link.to_string_lossy();
    let path = PathBuf::from(text.strip_suffix(" (deleted)").unwrap_or(&text));
    let ino = |p: &Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let new = ino(&path).ok_or_else(|| fail(format!("no binary at {}", path.display())))?;
    if ino(&exe) == Some(new) {
        return Err(fail(format!(
            "the service (pid {pid}) already runs the binary at {}",
            path.display()
        )));
    }
    let pidfd = rustix::process::pidfd_open(cred.pid, rustix::process::PidfdFlags::empty())
        .map_err(|e| fail(format!("the service (pid {pid}) is gone: {e}")))?;
    rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::HUP)
        .map_err(|e| fail(format!("cannot signal the service (pid {pid}): {e}")))?;
    let end = std::time::Instant::now() + args.timeout;
    while std::time::Instant::now() < end {
        // Answered, not only connected: the carried listener accepts into its backlog before
        // the new image has its signal handlers, and a SIGHUP then (the next upgrade, a
        // `systemctl reload`) would end it by the default action. A reply comes only from a
        // loop whose handlers are in place. The wait for that reply is bounded by the time
        // left: an image that accepts and never answers must not hold `upgrade` past it.
        let answered = || {
            let left = end.saturating_duration_since(std::time::Instant::now());
            let list = refine_protocol::api::Request::List { all: false };
            super::client::request_within(&rt, &list, Some(left)).is_ok()
        };
        if ino(&exe) == Some(new) && answered() {
            println!("upgraded: pid {pid} runs {}", path.display());
            return Ok(0);
        }
        // Only the pidfd tells that the service ended: `/proc/PID/exe` can fail to read for a
        // moment while the process executes the new image (seen once in 40 upgrades), and
        // that is not an exit. The pidfd turns readable when the process has exited; waiting
        // on it paces the loop.
        if service_exited(&pidfd, std::time::Duration::from_millis(20)) {
            return Err(fail(format!("the service (pid {pid}) exited; see its log")));
        }
    }
    Err(fail(format!(
        "the service (pid {pid}) did not start {} within {} (it serves on with its old binary \
         if it refused it; see its log)",
        path.display(),
        refine_supervisor::human::duration(args.timeout)
    )))
}

/// Whether the process behind `pidfd` exited, waiting up to `within` for it.
fn service_exited(pidfd: &std::os::fd::OwnedFd, within: std::time::Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let limit = rustix::time::Timespec {
        tv_sec: within.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: within.subsec_nanos().into(),
    };
    matches!(poll(&mut fds, Some(&limit)), Ok(n) if n > 0)
}

pub(super) fn gc(home: &Path, port: u16, args: GcArgs) -> Result<ExitCode, CliError> {
    let opts = RetentionOptions {
        older_than: args.older_than,
        dry_run: args.dry_run,
    };
    let forget_opts = ForgetOptions {
        after: args.forget_after,
        dry_run: args.dry_run,
    };
    let report: GcDoc = match open_runtime(home, port)? {
        Some(rt) => ops::gc(&rt, opts, forget_opts)?,
        None => GcDoc {
            retention: retention_doc(&RetentionReport {
                older_than_secs: opts.older_than.as_secs(),
                dry_run: opts.dry_run,
                ..Default::default()
            }),
            forget: forget_doc(&ForgetReport {
                forget_after_secs: forget_opts.after.as_secs(),
                dry_run: forget_opts.dry_run,
                ..Default::default()
            }),
            reindexed: Vec::new(),
            strays: Vec::new(),
        },
    };
    if args.json {
        print_json(&report)?;
    } else {
        view::gc(&mut out(), &report).map_err(CliError::Output)?;
    }
    Ok(0)
}

pub(super) fn capacity_cmd(
    home: &Path,
    port: u16,
    args: CapacityArgs,
) -> Result<ExitCode, CliError> {
    let rt = open_runtime(home, port)?;
    let report: CapacityDoc = ops::capacity(rt.as_ref(), Some(args.limit_percent))?;
    if args.json {
        print_json(&report)?;
        return Ok(0);
    }
    let mem = report
        .available_memory
        .map(refine_supervisor::host::human_bytes)
        .unwrap_or_else(|| "unavailable".into());
    let rows = [
        ("cores", report.cores.to_string()),
        ("available memory", mem),
        ("limit", format!("{}%", report.limit_percent)),
        (
            "reservation",
            format!(
                "{} ({})",
                refine_supervisor::host::human_bytes(report.reservation_bytes),
                report.reservation_source
            ),
        ),
        ("derivation", report.derivation.clone()),
        ("slots", report.slots.to_string()),
        ("live", report.live.to_string()),
        ("unverified", report.unverified.to_string()),
        ("free", report.free.to_string()),
    ];
    let table: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(k, v)| vec![k.to_owned(), v])
        .collect();
    write_table(&table)?;
    Ok(0)
}

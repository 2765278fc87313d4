//! The commands (SPEC O1, O3, O4): [`dispatch`] runs one parsed command line ([`super::cli`])
//! and returns the exit code. Each command works from the files under `run/P` with the same
//! locks the service uses, and prints one JSON document with `--json`, else its human view.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::api::{LaunchAsk, Reply, Request};
use refine_protocol::docs::ScopeReason;
use refine_protocol::RegistrationId;

use super::cli::*;
use super::docs::{
    capacity_doc, forget_doc, holders_doc, reap_doc, retention_doc, CapacityDoc,
    DetachedSpawnFailedDoc, GcDoc, HolderDoc, HoldersDoc, LaunchedDoc, Outcome, PsDoc, ReapDoc,
    ReceiptDoc, ReceiptVerdictDoc, RecoverDoc, ScopeKind, State, Vocabulary, WhyDoc,
};
use super::error::{CliError, ClientError, ServiceError, SpecError};
use super::ops::{self, assess, list_views, out, print_json, show_doc};
use super::{client, resolve, run, serve, view};
use refine_supervisor::capacity;
use refine_supervisor::end::assess::{self, KERNEL_BOOT};
use refine_supervisor::hygiene::holders::{self, Registrations, Target};
use refine_supervisor::hygiene::reap_checkout;
use refine_supervisor::store::registry::{RegistryError, Runtime};
use refine_supervisor::{history::forget, history::retention};

/// Opens `run/P` if it exists; `Ok(None)` when the home exists but nothing ran on this port.
fn open_runtime(home: &Path, port: u16) -> Result<Option<Runtime>, CliError> {
    match Runtime::open_existing(home, port) {
        Ok(rt) => {
            tracing::debug!(dir = %rt.dir().display(), "opened the runtime");
            Ok(Some(rt))
        }
        Err(RegistryError::MissingRuntime(dir)) => {
            tracing::debug!(dir = %dir.display(), "no runtime on this port yet");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens `run/P` and resolves what the operator typed for an id ([`resolve::resolve`]).
fn runtime_and_id(
    home: &Path,
    port: u16,
    text: &str,
    intent: resolve::Intent,
) -> Result<(Runtime, RegistrationId), CliError> {
    let rt = open_runtime(home, port)?;
    let id = resolve::resolve(rt.as_ref(), text, intent)?;
    tracing::debug!(%id, given = text, "resolved the id");
    match rt {
        Some(rt) => Ok((rt, id)),
        None => Err(CliError::Registry(RegistryError::NotFound(id))),
    }
}

/// Runs one parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    // These need no home.
    match &cli.command {
        Command::Completions(Deferred(args)) => {
            super::completions::write(
                <Cli as clap::CommandFactory>::command(),
                args.shell,
                &mut out(),
            )
            .map_err(CliError::Output)?;
            return Ok(0);
        }
        Command::Schema(Deferred(args)) => {
            schema(args.name.as_deref())?;
            return Ok(0);
        }
        Command::Version(Deferred(args)) => {
            let doc =
                super::docs::version_doc(&refine_supervisor::launch::guardian::guardian_exe());
            if args.json {
                print_json(&doc)?;
            } else {
                view::version(&mut out(), &doc).map_err(CliError::Output)?;
            }
            return Ok(0);
        }
        Command::Man(Deferred(args)) => {
            match &args.dir {
                Some(dir) => super::man::write_all(&<Cli as clap::CommandFactory>::command(), dir)?,
                None => super::man::write(
                    <Cli as clap::CommandFactory>::command(),
                    args.subcommand.as_deref(),
                    &mut out(),
                )
                .map_err(CliError::Output)?,
            }
            return Ok(0);
        }
        Command::CompleteIds => {
            // Quiet: a TAB never prints an error into the command line.
            let mut o = out();
            let Ok(home) = home(&cli, false) else {
                return Ok(0);
            };
            let Ok(Some(rt)) = open_runtime(&home, cli.port) else {
                return Ok(0);
            };
            let rows = list_views(&rt, true).unwrap_or_default();
            let mut labels = std::collections::BTreeSet::new();
            for r in &rows {
                writeln!(o, "{}", r.id).map_err(CliError::Output)?;
                if !r.label.is_empty() && !r.label.contains(char::is_whitespace) {
                    labels.insert(r.label.as_str());
                }
            }
            for l in labels {
                writeln!(o, "{}", view::escape(l)).map_err(CliError::Output)?;
            }
            return Ok(0);
        }
        _ => {}
    }
    let creates = matches!(cli.command, Command::Run(_) | Command::Serve(_));
    let home = home(&cli, creates)?;
    let port = cli.port;
    tracing::debug!(home = %home.display(), port, "home");
    match cli.command {
        Command::Run(Deferred(mut args)) => {
            // `timeout 0` (coreutils): a zero deadline is no deadline.
            args.timeout = args.timeout.filter(|d| !d.is_zero());
            args.idle_timeout = args.idle_timeout.filter(|d| !d.is_zero());
            run(&home, port, args)
        }
        Command::Serve(Deferred(args)) => {
            let watch = args.stall().validate().map_err(CliError::Stall)?;
            refine_supervisor::kernel::cgroup::configure(
                match (&args.cgroup_root, args.no_cgroup) {
                    (_, true) => refine_supervisor::kernel::cgroup::Setting::Off,
                    (Some(root), false) => {
                        refine_supervisor::kernel::cgroup::Setting::Root(root.clone())
                    }
                    (None, false) => refine_supervisor::kernel::cgroup::Setting::from_env(),
                },
            );
            match refine_supervisor::kernel::cgroup::base() {
                Ok(base) => {
                    tracing::info!(base = %base.display(), "scopes get a cgroup of their own")
                }
                Err(why) => tracing::info!(
                    why,
                    "scopes get no cgroup of their own: the stop uses /proc"
                ),
            }
            serve::serve(
                &home,
                port,
                serve::ServeConfig {
                    maintenance_every: args.maintenance_every,
                    keep: serve::Housekeeping {
                        retain: args.retain,
                        forget_after: args.forget_after,
                    },
                    watch,
                    metrics_addr: args.metrics,
                    shutdown_grace: args.shutdown_grace,
                    live_restore: args.live_restore,
                    log_format: args.log_format,
                    log_file: args.log_file,
                },
            )?;
            Ok(0)
        }
        // Answered above, before the home is required.
        Command::CompleteIds => Ok(0),
        Command::Ps(Deferred(args)) => ps(&home, port, args),
        Command::Show(Deferred(args)) => show(&home, port, args),
        Command::Stop(Deferred(args)) => stop(&home, port, args),
        Command::Logs(Deferred(args)) => logs(&home, port, args),
        Command::Wait(Deferred(args)) => wait(&home, port, args),
        Command::Events(Deferred(args)) => super::events::events(&home, port, args),
        Command::Receipt(Deferred(args)) => receipt(&home, port, args),
        Command::Recover(Deferred(args)) => recover(&home, port, args),
        Command::Upgrade(Deferred(args)) => upgrade(&home, port, args),
        Command::Gc(Deferred(args)) => gc(&home, port, args),
        Command::Capacity(Deferred(args)) => capacity_cmd(&home, port, args),
        Command::Top(Deferred(args)) => super::top::top(&home, port, args),
        Command::Holders(Deferred(args)) => holders_cmd(&home, args),
        Command::Reap(Deferred(args)) => reap(&home, port, args),
        Command::Completions(_) | Command::Man(_) | Command::Schema(_) | Command::Version(_) => {
            Ok(0)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Commands.

/// `schema [NAME]`: the documents of the contract, or one document's JSON Schema (the text
/// committed as `protocol/schema/NAME.json`).
fn schema(name: Option<&str>) -> Result<(), CliError> {
    use refine_protocol::schema::{schema_text, DOCUMENTS};
    let mut o = out();
    match name {
        None => {
            let width = DOCUMENTS.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (name, what) in DOCUMENTS {
                writeln!(o, "{name:width$}  {what}").map_err(CliError::Output)?;
            }
        }
        Some(name) => {
            // The parser admits only the names of DOCUMENTS, each of which has a schema.
            let text = schema_text(name).unwrap_or_default();
            o.write_all(text.as_bytes()).map_err(CliError::Output)?;
        }
    }
    Ok(())
}

fn run(home: &Path, port: u16, mut args: RunArgs) -> Result<ExitCode, CliError> {
    // W11: a deadline alone is `timeout DUR`: SIGTERM first, the kill 5 s later.
    args.kill_after = args.kill_after.or_else(|| {
        (args.timeout.is_some() || args.idle_timeout.is_some()).then_some(KILL_AFTER_DEFAULT)
    });
    if !args.detach {
        // The bytes themselves: the command, the environment, the directory (W6).
        let rt = Runtime::open(home, port)?;
        return run::run_embedded(&rt, args);
    }
    // The service's launch request is JSON text: it carries the arguments and environment as
    // UTF-8 text, refused otherwise.
    let text = |s: &OsString| s.to_str().map(str::to_owned);
    let (argv, env, cwd) = (
        args.command.iter().map(text).collect::<Option<Vec<_>>>(),
        args.env
            .iter()
            .map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect::<Option<_>>(),
        args.cwd.as_ref().map(|p| p.to_str().map(str::to_owned)),
    );
    let (Some(argv), Some(env), None | Some(Some(_))) = (argv, env, &cwd) else {
        return Err(ServiceError::from(SpecError::DetachNotText).into());
    };
    let spec = LaunchAsk {
        argv,
        kind: args.kind.kind(),
        label: args.label,
        cwd: cwd.flatten(),
        env,
        meta: args.meta.into_iter().collect(),
        timeout: args.timeout,
        idle_timeout: args.idle_timeout,
        kill_after: args.kill_after,
        pty: args.pty,
        wait_for_slot: args.wait_for_slot,
        log_cap_bytes: Some(args.log_cap),
        user: args.user,
        unique: args.unique,
        allow_setns: args.allow_setns,
        protect: args.protect,
        on_service_loss: args.on_service_loss,
        input: false,
        end_with_connection: false,
        memory_max_bytes: args.memory_max,
        cpu_millis: args.cpus,
        pids_max: args.pids_max,
        ready: args.ready.as_ref().map(ToString::to_string),
        ready_timeout: args.ready.as_ref().map(|_| args.ready_timeout),
    };
    let rt = Runtime::open(home, port)?;
    let resp = client::request(&rt, &Request::Launch(spec.clone()))?;
    match resp {
        Reply::Launched { id } => {
            // H6: --wait-ready returns once the workload is ready (the service's watch decides
            // within the ready timeout; a margin covers its stop).
            let mut code = 0;
            if args.wait_ready {
                let reg_id = id.parse().map_err(|_| CliError::UnknownId(id.clone()))?;
                let bound = (!args.ready_timeout.is_zero())
                    .then(|| args.ready_timeout + Duration::from_secs(5));
                use refine_supervisor::launch::readiness::{wait_ready, WaitedReady};
                match wait_ready(&rt, reg_id, bound)? {
                    WaitedReady::Decided(r)
                        if r.state == refine_protocol::docs::ReadyState::Ready => {}
                    WaitedReady::NotAsked => {}
                    WaitedReady::Decided(r) => {
                        let why = r.reason.unwrap_or_else(|| "failed".to_owned());
                        eprintln!("refine-supervisor: error: {id}: {}", view::escape(&why));
                        code = 1;
                    }
                    WaitedReady::Undecided | WaitedReady::TimedOut(_) => {
                        eprintln!("refine-supervisor: error: {id}: nothing decided its readiness");
                        code = 1;
                    }
                }
            }
            if args.json {
                print_json(&LaunchedDoc { id })?;
            } else {
                writeln!(out(), "{id}").map_err(CliError::Output)?;
            }
            Ok(code)
        }
        Reply::SpawnFailed { id, errno, step } => {
            if args.json {
                print_json(&DetachedSpawnFailedDoc {
                    id,
                    outcome: Outcome::SpawnFailed,
                    errno,
                })?;
            } else {
                let failed = run::Failed {
                    program: spec.argv.first().map(OsStr::new),
                    cwd: spec.cwd.as_deref().map(Path::new),
                    user: spec.user.as_deref(),
                };
                eprintln!("refine-supervisor: {}", failed.line(errno, step));
            }
            Ok(run::spawn_failure_code(errno))
        }
        other => Err(ClientError::Unexpected(Box::new(other)).into()),
    }
}

fn ps(home: &Path, port: u16, args: PsArgs) -> Result<ExitCode, CliError> {
    let all = args.all || args.state == Some(StateArg::Exited);
    let mut rows = match open_runtime(home, port)? {
        Some(rt) => list_views(&rt, all)?,
        None => Vec::new(),
    };
    rows.retain(|r| {
        args.kind
            .is_none_or(|k| r.kind == ScopeKind::Known(k.kind()))
            && args.label.as_ref().is_none_or(|l| &r.label == l)
            && args.state.is_none_or(|s| s.keeps(r))
    });
    if args.json {
        print_json(&PsDoc {
            port,
            registrations: rows,
        })?;
        return Ok(0);
    }
    let mut o = out();
    if args.quiet {
        for r in &rows {
            writeln!(o, "{}", r.id).map_err(CliError::Output)?;
        }
        return Ok(0);
    }
    let width = if args.no_trunc {
        None
    } else {
        view::terminal_width()
    };
    view::ps_table(&mut o, &rows, width, args.no_trunc).map_err(CliError::Output)?;
    Ok(0)
}

/// Runs `each` for every word of a command that takes several ids: a failure is one line on
/// stderr and the others still run; the exit is the first non-zero one.
fn for_each_id(
    words: &[String],
    mut each: impl FnMut(&str) -> Result<ExitCode, CliError>,
) -> Result<ExitCode, CliError> {
    if let [one] = words {
        return each(one);
    }
    let mut code = 0;
    for w in words {
        let c = match each(w) {
            Ok(c) => c,
            Err(CliError::Output(e)) => return Err(CliError::Output(e)),
            Err(e) => {
                eprintln!("refine-supervisor: error: {}", super::one_line(&e));
                1
            }
        };
        if code == 0 {
            code = c;
        }
    }
    Ok(code)
}

fn show(home: &Path, port: u16, args: ShowArgs) -> Result<ExitCode, CliError> {
    if args.json && args.ids.len() > 1 {
        let mut docs = Vec::new();
        let code = for_each_id(&args.ids, |w| {
            let (rt, id) = runtime_and_id(home, port, w, resolve::Intent::Read)?;
            docs.push(show_doc(&rt, id)?);
            Ok(0)
        })?;
        print_json(&docs)?;
        return Ok(code);
    }
    let mut first = true;
    for_each_id(&args.ids, |w| {
        let (rt, id) = runtime_and_id(home, port, w, resolve::Intent::Read)?;
        let doc = show_doc(&rt, id)?;
        if args.json {
            print_json(&doc)?;
            return Ok(0);
        }
        let mut tails = Vec::new();
        for (name, a) in [
            ("stdout", &doc.artifacts.stdout),
            ("stderr", &doc.artifacts.stderr),
        ] {
            if a.exists && a.bytes > 0 {
                // Display only: an unreadable artifact shows no tail (its size is shown above).
                let lines = view::tail_lines(&a.path, args.lines).unwrap_or_default();
                tails.push((name.to_owned(), lines));
            }
        }
        let mut o = out();
        if !std::mem::take(&mut first) {
            writeln!(o).map_err(CliError::Output)?;
        }
        view::show(&mut o, &doc, &tails).map_err(CliError::Output)?;
        Ok(0)
    })
}

/// Issue 38 item 7: the termination signals an operator's `stop` or `recover` gets (Ctrl-C, a
/// `timeout`, a systemd `ExecStop=` at its limit, a cancelled CI job) wait until the stop in
/// progress has finished: a quiesce is never left half done by them. They stay blocked while
/// the command runs; the first one taken then makes it exit 128+N, its output written. A
/// SIGKILL cannot be held: what such a stop left frozen or stopped, the next `stop` of the
/// scope ends (it kills a cgroup frozen by someone else, and stopped members, all the same).
struct Interrupts {
    signals: Option<std::os::fd::OwnedFd>,
}

impl Interrupts {
    const HELD: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

    fn hold() -> Interrupts {
        let blocked = refine_supervisor::kernel::child_signals::Blocked::block(&Self::HELD);
        Interrupts {
            signals: blocked.signalfd().ok(),
        }
    }

    /// The first held signal that came, if any: the command's exit status becomes 128+N.
    fn first(&self) -> Option<i32> {
        use std::os::fd::AsFd;
        let fd = self.signals.as_ref()?;
        refine_supervisor::kernel::child_signals::read_signal(fd.as_fd()).map(|t| t.signo)
    }

    fn exit_code(&self, code: ExitCode) -> ExitCode {
        self.first().map_or(code, |sig| 128 + sig)
    }
}

fn stop(home: &Path, port: u16, args: StopArgs) -> Result<ExitCode, CliError> {
    let interrupts = Interrupts::hold();
    let code = stop_held(home, port, args);
    code.map(|c| interrupts.exit_code(c))
}

fn stop_held(home: &Path, port: u16, args: StopArgs) -> Result<ExitCode, CliError> {
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
    let docs: Vec<Result<super::docs::StopDoc, CliError>> = std::thread::scope(|s| {
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
                eprintln!("refine-supervisor: error: {}", super::one_line(&e));
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
                        eprintln!("refine-supervisor: error: {}", super::one_line(&e));
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
fn holders_cmd(home: &Path, args: HoldersArgs) -> Result<ExitCode, CliError> {
    let target = Target::resolve(&args.path)?;
    let regs = Registrations::load(home, &KERNEL_BOOT);
    let doc: HoldersDoc = holders_doc(&holders::holders(&target, &regs)?);
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
fn holders_table(rows: &[HolderDoc], why: Option<&[String]>) -> Result<(), CliError> {
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
fn reap(home: &Path, port: u16, args: ReapArgs) -> Result<ExitCode, CliError> {
    let rt = open_runtime(home, port)?;
    let report =
        reap_checkout::reap_checkout(home, rt.as_ref(), &args.checkout, args.budget, &KERNEL_BOOT)?;
    let code = ExitCode::from(!report.clean());
    let doc: ReapDoc = reap_doc(&report);
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

fn why_text(why: &WhyDoc) -> String {
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
fn verdict(ok: bool, failure: CliError) -> Result<ExitCode, CliError> {
    if ok {
        Ok(0)
    } else {
        Err(failure)
    }
}

/// One artifact being printed by `logs`: where it is read, where it goes.
struct Follow {
    path: PathBuf,
    /// `None` while the artifact does not exist: a stream creates it with its first byte (F3).
    file: Option<std::fs::File>,
    sink: Sink,
}

/// Where `logs` writes a stream.
#[derive(Clone, Copy)]
enum Sink {
    Stdout,
    /// This process's stderr; `mark`: in red (a terminal, no `NO_COLOR`), so that it can be
    /// told from stdout on the same screen.
    Stderr {
        mark: bool,
    },
}

/// Why `logs --since/--until/--timestamps` is refused for a scope.
const NO_TIME_INDEX: &str = "this scope's output has no time index (its launcher captured it, as a foreground run's or a library launch's; only a guardian's capture keeps times), so no time can be answered (use -n N for the last lines)";

/// L2: the streams' bytes moved within `[since, until]`, in the order they were moved (by the
/// batches' times; a stream's own order always kept), each line prefixed with its batch's
/// time when `times`.
fn print_indexed(
    streams: &[(
        PathBuf,
        Sink,
        refine_supervisor::store::output_index::OutputIndex,
    )],
    since: Option<std::time::SystemTime>,
    until: Option<std::time::SystemTime>,
    times: bool,
) -> Result<(), CliError> {
    let mut pieces = Vec::new();
    for (i, (_, _, index)) in streams.iter().enumerate() {
        for seg in &index.segments {
            if since.is_none_or(|t| seg.at >= t) && until.is_none_or(|t| seg.at <= t) {
                pieces.push((seg.at, i, seg.start, seg.end));
            }
        }
    }
    // Stable: a stream's own segments keep their order at equal times.
    pieces.sort_by_key(|&(at, i, start, _)| (at, i, start));
    let mut files: Vec<Option<std::fs::File>> = streams.iter().map(|_| None).collect();
    let mut line_start = vec![true; streams.len()];
    let mut buf = Vec::new();
    for (at, i, start, end) in pieces {
        let (path, sink, _) = &streams[i];
        let artifact = |source| CliError::Artifact {
            path: path.clone(),
            source,
        };
        let file = match &mut files[i] {
            Some(f) => f,
            slot => slot.insert(std::fs::File::open(path).map_err(artifact)?),
        };
        file.seek(SeekFrom::Start(start)).map_err(artifact)?;
        buf.clear();
        file.take(end - start)
            .read_to_end(&mut buf)
            .map_err(artifact)?;
        let mut text = Vec::with_capacity(buf.len() + 32);
        if times {
            let stamp = format!("{} ", view::utc_ms(at));
            for &b in &buf {
                if line_start[i] {
                    text.extend_from_slice(stamp.as_bytes());
                }
                text.push(b);
                line_start[i] = b == b'\n';
            }
        } else {
            text.extend_from_slice(&buf);
        }
        sink.write(&text)?;
    }
    out().flush().map_err(CliError::Output)
}

impl Sink {
    /// Writes `bytes` where this sink goes (stderr marked on a terminal).
    fn write(self, bytes: &[u8]) -> Result<(), CliError> {
        if let Sink::Stderr { mark } = self {
            let mut e = io::stderr().lock();
            if mark {
                e.write_all(STDERR_MARK).map_err(CliError::Output)?;
            }
            e.write_all(bytes).map_err(CliError::Output)?;
            if mark {
                e.write_all(MARK_END).map_err(CliError::Output)?;
            }
            Ok(())
        } else {
            out().write_all(bytes).map_err(CliError::Output)
        }
    }
}

/// ECMA-48 SGR: red foreground, and back to the default.
const STDERR_MARK: &[u8] = b"\x1b[31m";
const MARK_END: &[u8] = b"\x1b[0m";

impl Follow {
    /// Copies what was appended since the last call; returns whether anything was.
    fn pump(&mut self, buf: &mut [u8]) -> Result<bool, CliError> {
        let mut any = false;
        if self.file.is_none() {
            match std::fs::File::open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(source) => {
                    return Err(CliError::Artifact {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(false);
        };
        loop {
            let n = file.read(buf).map_err(|source| CliError::Artifact {
                path: self.path.clone(),
                source,
            })?;
            if n == 0 {
                return Ok(any);
            }
            any = true;
            self.sink.write(&buf[..n])?;
        }
    }
}

fn logs(home: &Path, port: u16, args: LogsArgs) -> Result<ExitCode, CliError> {
    use refine_supervisor::store::registry::Stream;
    let (rt, id) = runtime_and_id(home, port, &args.id, resolve::Intent::Read)?;
    let reg = rt.read_registration(id)?;
    // Both streams unless one is asked for, as `docker logs`; on a terminal, stderr is marked.
    let mark = super::colour_on(&io::stderr());
    let streams: Vec<(&String, Sink, Stream)> = if args.stdout {
        vec![(&reg.stdout_path, Sink::Stdout, Stream::Stdout)]
    } else if args.stderr {
        vec![(&reg.stderr_path, Sink::Stdout, Stream::Stderr)]
    } else {
        vec![
            (&reg.stdout_path, Sink::Stdout, Stream::Stdout),
            (&reg.stderr_path, Sink::Stderr { mark }, Stream::Stderr),
        ]
    };
    // L2: a time filter or times are answered from the guardian's index, never from an
    // artifact's modification time; a scope without one is refused in one line.
    let timed = args.since.is_some() || args.until.is_some() || args.timestamps;
    let mut starts: Vec<Option<u64>> = vec![None; streams.len()];
    if timed {
        let flag = match (args.since, args.until) {
            (Some(_), _) => "--since",
            (None, Some(_)) => "--until",
            _ => "--timestamps",
        };
        let mut indexed = Vec::new();
        for (path, sink, stream) in &streams {
            let index = refine_supervisor::store::output_index::read(&rt.index_path(id, *stream))
                .map_err(|source| CliError::Artifact {
                    path: rt.index_path(id, *stream),
                    source,
                })?
                .ok_or(CliError::Unanswerable {
                    flag,
                    why: NO_TIME_INDEX,
                })?;
            indexed.push((PathBuf::from(path), *sink, index));
        }
        let ms = |t: u64| std::time::UNIX_EPOCH + Duration::from_millis(t);
        let (since, until) = (args.since.map(ms), args.until.map(ms));
        print_indexed(&indexed, since, until, args.timestamps)?;
        if !args.follow {
            return Ok(0);
        }
        // -f --since: what came after the window is followed from where it ended.
        for (slot, (_, _, index)) in starts.iter_mut().zip(&indexed) {
            *slot = Some(index.range(since, until).1);
        }
    }
    let mut follows = Vec::new();
    for ((path, sink, _), at) in streams.into_iter().zip(starts) {
        let path = PathBuf::from(path);
        let artifact = |source| CliError::Artifact {
            path: path.clone(),
            source,
        };
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            // The stream wrote nothing (yet): its artifact comes with its first byte (F3).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                follows.push(Follow {
                    path,
                    file: None,
                    sink,
                });
                continue;
            }
            Err(e) => return Err(artifact(e)),
        };
        let len = file.metadata().map_err(artifact)?.len();
        let start = if let Some(at) = at {
            at.min(len)
        } else if let Some(n) = args.tail {
            view::tail_offset(&mut file, 0, len, n).map_err(artifact)?
        } else {
            0
        };
        file.seek(SeekFrom::Start(start)).map_err(artifact)?;
        follows.push(Follow {
            path,
            file: Some(file),
            sink,
        });
    }
    let paths = |follows: &[Follow]| follows.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
    let mut changes = if args.follow {
        ops::Changes::watch(&rt, id, &paths(&follows))
    } else {
        ops::Changes::none()
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut printed = false;
    loop {
        let mut any = false;
        for f in &mut follows {
            any |= f.pump(&mut buf)?;
        }
        printed |= any;
        out().flush().map_err(CliError::Output)?;
        if !args.follow || any {
            if !args.follow {
                break;
            }
            continue;
        }
        // Follow ends once the scope has ended, its launcher has let go (the output is all
        // captured), and everything written before that was read.
        if assess(&rt, &reg).state != State::Live && rt.let_go(id) {
            let mut rest = false;
            for f in &mut follows {
                rest |= f.pump(&mut buf)?;
            }
            printed |= rest;
            if !rest {
                break;
            }
            continue;
        }
        // An artifact created meanwhile is watched too (F3: created by its first byte).
        changes.rewatch(&paths(&follows));
        changes.wait();
    }
    out().flush().map_err(CliError::Output)?;
    if !printed && follows.iter().all(|f| f.file.is_none()) {
        // A note, not output: stdout stays exactly the stream's bytes (none).
        // A missing artifact is a stream that wrote nothing (F3), or output gc has retired.
        eprintln!("{id}: no output (none was written, or gc has retired it)");
    }
    Ok(0)
}

/// `wait --json`: each scope in the order given, ended or not.
fn wait_doc(
    regs: &[refine_protocol::Registration],
    states: &[State],
    ended: &[Option<(i32, String)>],
    timed_out: bool,
) -> super::docs::WaitDoc {
    super::docs::WaitDoc {
        scopes: regs
            .iter()
            .zip(ended)
            .zip(states)
            .map(|((r, e), state)| super::docs::WaitScope {
                id: r.id.to_string(),
                state: *state,
                exit_code: e.as_ref().map(|(c, _)| *c),
                ready: None,
            })
            .collect(),
        timed_out,
    }
}

fn wait(home: &Path, port: u16, args: WaitArgs) -> Result<ExitCode, CliError> {
    let rt = open_runtime(home, port)?;
    let ids = args
        .ids
        .iter()
        .map(|t| resolve::resolve(rt.as_ref(), t, resolve::Intent::Read))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(rt) = rt else {
        return Err(CliError::UnknownId(args.ids.join(" ")));
    };
    let regs = ids
        .iter()
        .map(|&id| rt.read_registration(id))
        .collect::<Result<Vec<_>, _>>()?;
    if args.wait_for == super::cli::WaitFor::Ready {
        return wait_ready(&rt, &regs, args.timeout, args.json);
    }
    let started = std::time::Instant::now();
    let mut ended: Vec<Option<(i32, String)>> = vec![None; regs.len()];
    let mut states: Vec<State> = vec![State::Live; regs.len()];
    loop {
        for ((reg, slot), state) in regs.iter().zip(ended.iter_mut()).zip(states.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            // Ended, and its launcher has its output and result (`logs` then shows it all).
            let a = assess(&rt, reg);
            if a.state == State::Live || !rt.let_go(reg.id) {
                continue;
            }
            let reported = rt
                .read_result(reg.id)
                .ok()
                .flatten()
                .map(|r| r.workload_status);
            *slot = Some(ops::wait_code(a.receipt.map(|r| r.status).or(reported)));
            *state = a.state;
        }
        if ended.iter().all(Option::is_some) {
            break;
        }
        if let Some(limit) = args.timeout {
            if started.elapsed() >= limit {
                let live: Vec<String> = regs
                    .iter()
                    .zip(&ended)
                    .filter(|(_, e)| e.is_none())
                    .map(|(r, _)| r.id.to_string())
                    .collect();
                if args.json {
                    print_json(&wait_doc(&regs, &states, &ended, true))?;
                }
                eprintln!(
                    "refine-supervisor: error: {}",
                    CliError::WaitTimeout {
                        after: refine_supervisor::human::duration(limit),
                        live: live.join(", "),
                    }
                );
                return Ok(124);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if args.json {
        print_json(&wait_doc(&regs, &states, &ended, false))?;
        return Ok(ended.iter().flatten().last().map_or(0, |(c, _)| *c));
    }
    let mut o = out();
    let mut code = 0;
    for (c, text) in ended.into_iter().flatten() {
        writeln!(o, "{text}").map_err(CliError::Output)?;
        code = c;
    }
    Ok(code)
}

/// `wait --for ready` (H6): each scope's readiness decided, in turn, within one `timeout` for
/// all: exit 0 when every one is ready, 1 when one failed to be (its reason on stderr), 124 when
/// the time ran out first.
fn wait_ready(
    rt: &Runtime,
    regs: &[refine_protocol::Registration],
    timeout: Option<Duration>,
    json: bool,
) -> Result<ExitCode, CliError> {
    use refine_protocol::docs::ReadyState;
    use refine_supervisor::launch::readiness::{wait_ready, WaitedReady};
    let started = std::time::Instant::now();
    let mut scopes = Vec::new();
    let (mut failed, mut timed_out) = (false, false);
    let mut o = out();
    for reg in regs {
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        let (ready, line) = match wait_ready(rt, reg.id, left)? {
            WaitedReady::Decided(r) if r.state == ReadyState::Ready => (ReadyState::Ready, None),
            WaitedReady::Decided(r) => (
                ReadyState::Failed,
                Some(r.reason.unwrap_or_else(|| "failed".to_owned())),
            ),
            WaitedReady::NotAsked => (ReadyState::Ready, None),
            WaitedReady::Undecided => (
                ReadyState::Failed,
                Some("its scope ended with nothing recorded about its readiness".to_owned()),
            ),
            WaitedReady::TimedOut(_) => {
                timed_out = true;
                (ReadyState::Starting, Some("still starting".to_owned()))
            }
        };
        failed |= ready == ReadyState::Failed;
        if !json {
            match &line {
                None => writeln!(o, "{} ready", reg.id).map_err(CliError::Output)?,
                Some(why) => eprintln!(
                    "refine-supervisor: error: {}: {}",
                    reg.id,
                    view::escape(why)
                ),
            }
        }
        scopes.push(super::docs::WaitScope {
            id: reg.id.to_string(),
            state: assess(rt, reg).state,
            exit_code: None,
            ready: Some(ready),
        });
    }
    if json {
        print_json(&super::docs::WaitDoc { scopes, timed_out })?;
    }
    Ok(if timed_out {
        124
    } else if failed {
        1
    } else {
        0
    })
}

fn receipt(home: &Path, port: u16, args: ReceiptArgs) -> Result<ExitCode, CliError> {
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
        let r = assess::read_receipt_file(&path)?;
        let rt = open_runtime(home, port)?;
        let binding = assess::bind_receipt(rt.as_ref(), &r, &assess::KERNEL_BOOT);
        let verified = binding.verified();
        let (state, reason) = match &binding {
            assess::ReceiptBinding::Holds { assessment, .. } => {
                let a = ops::flatten(assessment);
                (Some(a.state), a.reason)
            }
            assess::ReceiptBinding::Differs { assessment, .. } => {
                let a = ops::flatten(assessment);
                let reason = a.reason.unwrap_or(ScopeReason::NotTheProofFilesReceipt);
                (Some(a.state), Some(reason))
            }
            assess::ReceiptBinding::Unbound => (
                None,
                Some(ScopeReason::Unbound {
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

fn recover(home: &Path, port: u16, args: RecoverArgs) -> Result<ExitCode, CliError> {
    let interrupts = Interrupts::hold();
    let code = recover_held(home, port, args);
    code.map(|c| interrupts.exit_code(c))
}

fn recover_held(home: &Path, port: u16, args: RecoverArgs) -> Result<ExitCode, CliError> {
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
fn upgrade(home: &Path, port: u16, args: UpgradeArgs) -> Result<ExitCode, CliError> {
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
        if ino(&exe) == Some(new) && std::os::unix::net::UnixStream::connect(&sock).is_ok() {
            println!("upgraded: pid {pid} runs {}", path.display());
            return Ok(0);
        }
        if ino(&exe).is_none() {
            return Err(fail(format!("the service (pid {pid}) exited; see its log")));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(fail(format!(
        "the service (pid {pid}) did not start {} within {} (it serves on with its old binary \
         if it refused it; see its log)",
        path.display(),
        refine_supervisor::human::duration(args.timeout)
    )))
}

fn gc(home: &Path, port: u16, args: GcArgs) -> Result<ExitCode, CliError> {
    let opts = retention::Options {
        older_than: args.older_than,
        dry_run: args.dry_run,
    };
    let forget_opts = forget::Options {
        after: args.forget_after,
        dry_run: args.dry_run,
    };
    let report: GcDoc = match open_runtime(home, port)? {
        Some(rt) => ops::gc(&rt, opts, forget_opts)?,
        None => GcDoc {
            retention: retention_doc(&retention::Report {
                older_than_secs: opts.older_than.as_secs(),
                dry_run: opts.dry_run,
                ..Default::default()
            }),
            forget: forget_doc(&forget::Report {
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

fn capacity_cmd(home: &Path, port: u16, args: CapacityArgs) -> Result<ExitCode, CliError> {
    let policy = capacity::Policy {
        limit_percent: args.limit_percent,
        ..capacity::Policy::default()
    };
    let rt = open_runtime(home, port)?;
    let report: CapacityDoc = capacity_doc(&capacity::capacity_report(
        rt.as_ref(),
        policy,
        &mut *capacity::probe(),
    )?);
    if args.json {
        print_json(&report)?;
        return Ok(0);
    }
    let mem = report
        .available_memory
        .map(capacity::human_bytes)
        .unwrap_or_else(|| "unavailable".into());
    let rows = [
        ("cores", report.cores.to_string()),
        ("available memory", mem),
        ("limit", format!("{}%", report.limit_percent)),
        (
            "reservation",
            format!(
                "{} ({})",
                capacity::human_bytes(report.reservation_bytes),
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

// ---------------------------------------------------------------------------------------------
// Human output.

/// Prints rows as aligned columns.
fn write_table(rows: &[Vec<String>]) -> Result<(), CliError> {
    let mut o = out();
    for l in view::table_lines(rows, None) {
        writeln!(o, "{l}").map_err(CliError::Output)?;
    }
    Ok(())
}

//! The commands that launch and list: `schema`, `run`, `ps`, `show`.

use super::*;

// ---------------------------------------------------------------------------------------------
// Commands.

/// `schema [NAME]`: the documents of the contract, or one document's JSON Schema (the text
/// committed as `protocol/schema/NAME.json`).
pub(super) fn schema(name: Option<&str>) -> Result<(), CliError> {
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

pub(super) fn run(home: &Path, port: u16, mut args: RunArgs) -> Result<ExitCode, CliError> {
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
    use refine_protocol::record::SandboxMode;
    // X12: a workspace is this directory, never the service's.
    let sandbox = args.sandbox_ask();
    let cwd = match cwd {
        None if sandbox
            .as_ref()
            .is_some_and(|s| s.mode == SandboxMode::WorkspaceWrite) =>
        {
            std::env::current_dir()
                .ok()
                .map(|d| d.to_str().map(str::to_owned))
        }
        c => c,
    };
    let spec = LaunchAsk {
        sandbox,
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
        health_interval: args.health_cmd.as_ref().map(|_| args.health_interval),
        health_timeout: args.health_cmd.as_ref().map(|_| args.health_timeout),
        health_retries: args.health_cmd.as_ref().map(|_| args.health_retries),
        health_start_period: args.health_cmd.as_ref().map(|_| args.health_start_period),
        health_cmd: args.health_cmd,
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
                use refine_supervisor::host::{wait_ready, WaitedReady};
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

pub(super) fn ps(home: &Path, port: u16, args: PsArgs) -> Result<ExitCode, CliError> {
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
pub(super) fn for_each_id(
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
                eprintln!("refine-supervisor: error: {}", crate::app::one_line(&e));
                1
            }
        };
        if code == 0 {
            code = c;
        }
    }
    Ok(code)
}

pub(super) fn show(home: &Path, port: u16, args: ShowArgs) -> Result<ExitCode, CliError> {
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

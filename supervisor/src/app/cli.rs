//! The operator command line (SPEC O1, O3, O4): `refine-supervisor [--home DIR] [--port P] COMMAND`.
//!
//! Thin over the engine: every command works from the files under `run/P` with the same locks the
//! service uses, so `ps`, `show`, `stop`, `logs`, `receipt`, `gc`, `capacity` and `recover` need no
//! service. `run` launches in this process ([`super::run`]); `run --detach` asks the service
//! ([`super::client`]). Every command has `--json`, which prints exactly one JSON document; human
//! output is an aligned table.
//!
//! Errors are typed ([`CliError`]); `main` prints them as one line on stderr and exits non-zero.
//! No error path deletes anything.
//!
//! # Caveats
//! The home comes from the executable ([`crate::registry::default_home`]), never from the cwd.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use refine_protocol::api::{LaunchAsk, Reply, Request, ScopeView};
use refine_protocol::{Receipt, RegistrationId};
use serde::Serialize;

use super::docs::{
    utc, CapacityDoc, GcDoc, LaunchedDoc, PsDoc, ReceiptDoc, ReceiptVerdictDoc, RecoverDoc, State,
};
use super::error::{CliError, ServiceError};
use super::ops::{self, assess, list_views, out, print_json, show_doc};
use super::{client, run, serve};
use crate::capacity;
use crate::registry::{self, RegistryError, Runtime};
use crate::{forget, retention};

/// Process supervision with kernel proof: launch commands through a subreaping guardian, see what
/// runs and why, stop whole trees, and read the receipt that proves they ended.
#[derive(Debug, Parser)]
#[command(name = "refine-supervisor", version)]
pub struct Cli {
    /// Product home (default: derived from this executable, never the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Runtime port: state lives in <home>/run/<port>.
    #[arg(long, global = true, value_name = "P", default_value_t = registry::DEFAULT_PORT)]
    pub port: u16,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Launch one managed command in this process, stream its output, exit with its status.
    Run(RunArgs),
    /// Run the service for this port (foreground; SIGTERM/SIGINT stop it, guardians outlive it).
    Serve(ServeArgs),
    /// List registrations: id, kind, label, state, workload status, start, age, pid, cwd, outputs.
    Ps(PsArgs),
    /// Show one registration: the record, the decoded receipt, the assessment and its reason.
    Show(IdArgs),
    /// Stop a registration's whole tree through the shared stop; exit 0 only when exit is proven.
    Stop(IdArgs),
    /// Print a registration's stdout (or stderr) artifact.
    Logs(LogsArgs),
    /// Decode and verify a receipt, by registration id or proof-file path; exit 0 only if it verifies.
    Receipt(ReceiptArgs),
    /// Run the recovery pass: stop stale live scopes, release exited ones, report unverified ones.
    Recover(JsonArgs),
    /// Retention: delete artifacts of exited scopes older than the limit, and nothing else.
    Gc(GcArgs),
    /// Capacity admission figures: cores, memory, reservation, slots, live/unverified, free.
    Capacity(CapacityArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Human label.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Kind of workload.
    #[arg(long, value_enum, default_value_t = KindArg::Command)]
    pub kind: KindArg,
    /// Completion deadline from the start (e.g. 30s, 5m, 2h, 7d).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Idle deadline: no output, input or signal activity for this long.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// Working directory of the workload (default: this one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Extra environment variable for the workload (repeatable).
    #[arg(long = "env", value_name = "K=V", value_parser = parse_kv)]
    pub env: Vec<(String, String)>,
    /// Purpose metadata stored in the record (repeatable).
    #[arg(long = "meta", value_name = "K=V", value_parser = parse_kv)]
    pub meta: Vec<(String, String)>,
    /// Run on a pseudo-terminal.
    #[arg(long)]
    pub pty: bool,
    /// Ask the running service to launch it; print the id and return.
    #[arg(long)]
    pub detach: bool,
    /// For `agent`: when no capacity slot is free, wait up to this long instead of refusing.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub wait_for_slot: Option<Duration>,
    /// Print the result object at the end instead of streaming output.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    Agent,
    Quality,
    Command,
    Terminal,
}

impl KindArg {
    pub fn kind(self) -> refine_protocol::Kind {
        match self {
            KindArg::Agent => refine_protocol::Kind::Agent,
            KindArg::Quality => refine_protocol::Kind::Quality,
            KindArg::Command => refine_protocol::Kind::Command,
            KindArg::Terminal => refine_protocol::Kind::Terminal,
        }
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Seconds between maintenance passes (deadlines, retention, capacity sampling).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
    pub maintenance_every: Duration,
    /// Retention age limit used by the maintenance loop.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "7d")]
    pub retain: Duration,
    /// The maintenance loop forgets whole exited registrations older than this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30d")]
    pub forget_after: Duration,
}

#[derive(Debug, Args)]
pub struct PsArgs {
    /// Include exited registrations.
    #[arg(long)]
    pub all: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IdArgs {
    /// Registration id (32 hex digits).
    pub id: String,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Registration id (32 hex digits).
    pub id: String,
    /// The stderr artifact instead of stdout.
    #[arg(long)]
    pub stderr: bool,
    /// Keep printing new output until the scope has exited.
    #[arg(long)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct ReceiptArgs {
    /// Registration id, or the path of a proof file.
    pub target: String,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct JsonArgs {
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Age limit of the artifacts and capture receipts (e.g. 0s, 12h, 7d).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "7d")]
    pub older_than: Duration,
    /// Forget whole exited registrations (record, proof, artifacts, lock) older than this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30d")]
    pub forget_after: Duration,
    /// Check everything, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// Share of cores and available memory automatic admission may spend.
    #[arg(long, default_value_t = capacity::DEFAULT_LIMIT_PERCENT, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub limit_percent: u8,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// What `main` should exit with after a command succeeded.
pub type ExitCode = i32;

/// Parses `30s`, `5m`, `2h`, `7d`, `0s`, `250ms`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "{text:?} is not a duration (examples: 30s, 5m, 2h, 7d, 0s)"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is out of range"))?;
    let mult_ms: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    n.checked_mul(mult_ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is out of range"))
}

fn parse_kv(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

fn parse_id(text: &str) -> Result<RegistrationId, CliError> {
    RegistrationId::parse(text).ok_or_else(|| CliError::BadId(text.to_owned()))
}

/// Resolves the home: `--home`, else from the executable.
pub fn home(cli: &Cli) -> Result<PathBuf, CliError> {
    match &cli.home {
        Some(h) => Ok(h.clone()),
        None => registry::default_home().map_err(CliError::NoHome),
    }
}

/// Opens `run/P` if it exists; `Ok(None)` when the home exists but nothing ran on this port.
fn open_runtime(home: &Path, port: u16) -> Result<Option<Runtime>, CliError> {
    match Runtime::open_existing(home, port) {
        Ok(rt) => Ok(Some(rt)),
        Err(RegistryError::MissingRuntime(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Opens `run/P` for a command naming an id: a missing runtime means the id is unknown.
fn runtime_for(home: &Path, port: u16, id: RegistrationId) -> Result<Runtime, CliError> {
    open_runtime(home, port)?.ok_or(CliError::Registry(RegistryError::NotFound(id)))
}

/// Runs one parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    let home = home(&cli)?;
    if !home.is_dir() {
        return Err(RegistryError::MissingHome(home).into());
    }
    let port = cli.port;
    match cli.command {
        Command::Run(args) => run(&home, port, args),
        Command::Serve(args) => {
            serve::serve(
                &home,
                port,
                args.maintenance_every,
                serve::Housekeeping {
                    retain: args.retain,
                    forget_after: args.forget_after,
                },
            )?;
            Ok(0)
        }
        Command::Ps(args) => ps(&home, port, args),
        Command::Show(args) => show(&home, port, args),
        Command::Stop(args) => stop(&home, port, args),
        Command::Logs(args) => logs(&home, port, args),
        Command::Receipt(args) => receipt(&home, port, args),
        Command::Recover(args) => recover(&home, port, args),
        Command::Gc(args) => gc(&home, port, args),
        Command::Capacity(args) => capacity_cmd(&home, port, args),
    }
}

// ---------------------------------------------------------------------------------------------
// Commands.

fn run(home: &Path, port: u16, args: RunArgs) -> Result<ExitCode, CliError> {
    let spec = LaunchAsk {
        argv: args.command,
        kind: args.kind.kind(),
        label: args.label,
        cwd: args.cwd.as_ref().map(|p| p.display().to_string()),
        env: args.env.into_iter().collect(),
        meta: args.meta.into_iter().collect(),
        timeout: args.timeout,
        idle_timeout: args.idle_timeout,
        pty: args.pty,
        wait_for_slot: args.wait_for_slot,
    };
    if args.detach {
        let rt = Runtime::open(home, port)?;
        let resp = client::request(&rt, &Request::Launch(spec))?;
        return match resp {
            Reply::Launched { id } => {
                if args.json {
                    print_json(&LaunchedDoc { id })?;
                } else {
                    writeln!(out(), "{id}").map_err(CliError::Output)?;
                }
                Ok(0)
            }
            other => Err(ServiceError::Unexpected(format!("{other:?}")).into()),
        };
    }
    let rt = Runtime::open(home, port)?;
    run::run_embedded(&rt, spec, args.json)
}

fn ps(home: &Path, port: u16, args: PsArgs) -> Result<ExitCode, CliError> {
    let rows = match open_runtime(home, port)? {
        Some(rt) => list_views(&rt, args.all)?,
        None => Vec::new(),
    };
    if args.json {
        print_json(&PsDoc {
            port,
            registrations: rows,
        })?;
        return Ok(0);
    }
    let mut table = vec![[
        "ID", "KIND", "STATE", "STATUS", "PID", "STARTED", "AGE", "LABEL", "CWD", "STDOUT",
    ]
    .map(String::from)
    .to_vec()];
    for r in &rows {
        table.push(vec![
            r.id.clone(),
            r.kind.clone(),
            r.state.clone(),
            status_text(r),
            r.pid.to_string(),
            utc(r.started_at_unix_ms),
            human_age(r.age_secs),
            r.label.clone(),
            r.cwd.clone(),
            r.stdout.clone(),
        ]);
    }
    write_table(&table)?;
    Ok(0)
}

/// The workload's status, and the outcome when it is not a plain completion
/// (`signal 9, stopped`).
fn status_text(r: &ScopeView) -> String {
    let status = match (r.status.as_deref(), r.exit_code, r.signal) {
        (_, Some(c), _) => format!("exit {c}"),
        (_, _, Some(s)) => format!("signal {s}"),
        (Some(s), _, _) => s.to_owned(),
        (None, _, _) => "-".to_owned(),
    };
    match r.outcome.as_deref() {
        None | Some("completed") => status,
        Some(o) => format!("{status}, {o}"),
    }
}

fn show(home: &Path, port: u16, args: IdArgs) -> Result<ExitCode, CliError> {
    let id = parse_id(&args.id)?;
    let rt = runtime_for(home, port, id)?;
    let doc = show_doc(&rt, id)?;
    print_doc(&doc, args.json)?;
    Ok(0)
}

fn stop(home: &Path, port: u16, args: IdArgs) -> Result<ExitCode, CliError> {
    let id = parse_id(&args.id)?;
    let rt = runtime_for(home, port, id)?;
    let reg = rt.read_registration(id)?;
    let doc = ops::stop_one(&rt, &reg, refine_protocol::StopCause::Operator);
    let proven = doc.state == State::Exited;
    let failure = format!("stop of {id} not proven");
    print_verdict(&doc, args.json, proven, &failure, doc.reason.as_deref())
}

/// A document as JSON (`--json`) or as indented `key: value` lines.
fn print_doc(doc: &impl Serialize, json: bool) -> Result<(), CliError> {
    if json {
        print_json(doc)
    } else {
        print_tree(doc)
    }
}

/// Prints a document, then exits 0 only if `ok`; otherwise the verdict (with the document's
/// reason) is the one-line error.
fn print_verdict(
    doc: &impl Serialize,
    json: bool,
    ok: bool,
    failure: &str,
    reason: Option<&str>,
) -> Result<ExitCode, CliError> {
    print_doc(doc, json)?;
    if ok {
        Ok(0)
    } else {
        Err(CliError::Verdict(format!(
            "{failure}: {}",
            reason.unwrap_or("no verified receipt")
        )))
    }
}

fn logs(home: &Path, port: u16, args: LogsArgs) -> Result<ExitCode, CliError> {
    let id = parse_id(&args.id)?;
    let rt = runtime_for(home, port, id)?;
    let reg = rt.read_registration(id)?;
    let path = PathBuf::from(if args.stderr {
        &reg.stderr_path
    } else {
        &reg.stdout_path
    });
    let open = || {
        std::fs::File::open(&path).map_err(|source| CliError::Artifact {
            path: path.clone(),
            source,
        })
    };
    let mut file = open()?;
    let mut o = out();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(|source| CliError::Artifact {
            path: path.clone(),
            source,
        })?;
        if n > 0 {
            o.write_all(&buf[..n]).map_err(CliError::Output)?;
            continue;
        }
        if !args.follow {
            break;
        }
        o.flush().map_err(CliError::Output)?;
        // Follow ends once the scope has exited and everything written before that was read.
        if assess(&rt, &reg).state != State::Live {
            let pos = file.stream_position().map_err(CliError::Output)?;
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(pos);
            if pos >= len {
                break;
            }
            file.seek(SeekFrom::Start(pos)).map_err(CliError::Output)?;
            continue;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    o.flush().map_err(CliError::Output)?;
    Ok(0)
}

fn receipt(home: &Path, port: u16, args: ReceiptArgs) -> Result<ExitCode, CliError> {
    let doc = if let Some(id) = RegistrationId::parse(&args.target) {
        let rt = runtime_for(home, port, id)?;
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
        let bytes =
            registry::read_bounded(&path, 64 * 1024).map_err(|source| CliError::ReceiptRead {
                path: path.clone(),
                source,
            })?;
        if refine_protocol::is_unwritten(&bytes) {
            return Err(CliError::ReceiptUnwritten { path });
        }
        let r = Receipt::decode(&bytes).map_err(|source| CliError::ReceiptCorrupt {
            path: path.clone(),
            source,
        })?;
        // The checksum verified; binding it to a registration needs the record and the one
        // assessment (same runtime, same proof inode, every bound field equal).
        let rt = open_runtime(home, port)?;
        let reg = rt
            .as_ref()
            .and_then(|rt| rt.read_registration(r.registration).ok());
        let (verified, state, reason) = match (&rt, &reg) {
            (Some(rt), Some(reg)) => {
                let a = assess(rt, reg);
                let same = a.receipt == Some(r);
                let reason = if same {
                    a.reason
                } else {
                    Some(a.reason.unwrap_or_else(|| {
                        "receipt is not the one the registration's proof file holds".into()
                    }))
                };
                (same && a.state == State::Exited, Some(a.state), reason)
            }
            _ => (
                false,
                None,
                Some(format!(
                    "checksum valid, but no registration {} on port {port} to bind it to",
                    r.registration
                )),
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
    let reason = doc.reason.as_deref();
    print_verdict(
        &doc,
        args.json,
        doc.verified,
        "receipt does not verify",
        reason,
    )
}

fn recover(home: &Path, port: u16, args: JsonArgs) -> Result<ExitCode, CliError> {
    let doc = match open_runtime(home, port)? {
        Some(rt) => ops::recover_all(&rt)?,
        None => RecoverDoc::default(),
    };
    print_doc(&doc, args.json)?;
    Ok(0)
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
            retention: retention::Report {
                older_than_secs: opts.older_than.as_secs(),
                dry_run: opts.dry_run,
                ..Default::default()
            },
            forget: forget::Report {
                forget_after_secs: forget_opts.after.as_secs(),
                dry_run: forget_opts.dry_run,
                ..Default::default()
            },
            reindexed: Vec::new(),
        },
    };
    if args.json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut table = vec![["ID", "ACTION", "FILES", "BYTES", "REASON"]
        .map(String::from)
        .to_vec()];
    for e in &report.retention.entries {
        table.push(vec![
            e.id.clone(),
            snake_name(&e.action),
            e.files.len().to_string(),
            e.bytes.to_string(),
            e.reason.clone(),
        ]);
    }
    for e in &report.forget.entries {
        table.push(vec![
            e.id.clone(),
            snake_name(&e.action),
            "-".into(),
            "-".into(),
            e.reason.clone(),
        ]);
    }
    write_table(&table)?;
    let (files, bytes) = report
        .retention
        .entries
        .iter()
        .filter(|e| {
            matches!(
                e.action,
                retention::Action::Deleted | retention::Action::WouldDelete
            )
        })
        .fold((0, 0), |(f, b), e| (f + e.files.len(), b + e.bytes));
    writeln!(
        out(),
        "{} {files} files, {bytes} bytes",
        if report.retention.dry_run {
            "would delete"
        } else {
            "deleted"
        },
    )
    .map_err(CliError::Output)?;
    let would = report
        .forget
        .entries
        .iter()
        .filter(|e| e.action == forget::Action::WouldForget)
        .count();
    writeln!(
        out(),
        "{} {} registrations (exited, older than {}s); {} younger kept",
        if report.forget.dry_run {
            "would forget"
        } else {
            "forgot"
        },
        report.forget.forgotten + report.forget.resumed + would,
        report.forget.forget_after_secs,
        report.forget.young,
    )
    .map_err(CliError::Output)?;
    Ok(0)
}

/// A unit enum's serde name (`would_delete`, `forgotten`).
fn snake_name(action: &impl Serialize) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn capacity_cmd(home: &Path, port: u16, args: CapacityArgs) -> Result<ExitCode, CliError> {
    let policy = capacity::Policy {
        limit_percent: args.limit_percent,
        ..capacity::Policy::default()
    };
    let rt = open_runtime(home, port)?;
    let report: CapacityDoc = ops::capacity_report(rt.as_ref(), policy, &mut *ops::probe())?;
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
                serde_json::to_value(report.reservation_source)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
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

/// Prints rows as columns aligned on the widest cell; the last column is not padded.
fn write_table(rows: &[Vec<String>]) -> Result<(), CliError> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0usize; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut o = out();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let pad = width[i] - c.chars().count();
                line.push_str(c);
                line.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        writeln!(o, "{}", line.trim_end()).map_err(CliError::Output)?;
    }
    Ok(())
}

/// Prints a JSON document as indented `key: value` lines (the human form of show/stop/recover).
fn print_tree(doc: &impl Serialize) -> Result<(), CliError> {
    fn walk(v: &serde_json::Value, indent: usize, key: &str, o: &mut impl Write) -> io::Result<()> {
        let pad = " ".repeat(indent);
        match v {
            serde_json::Value::Object(m) => {
                if !key.is_empty() {
                    writeln!(o, "{pad}{key}:")?;
                }
                let width = m.keys().map(|k| k.len()).max().unwrap_or(0);
                for (k, v) in m {
                    if v.is_object()
                        || (v.is_array()
                            && v.as_array()
                                .is_some_and(|a| a.iter().any(|x| x.is_object())))
                    {
                        walk(v, indent + usize::from(!key.is_empty()) * 2, k, o)?;
                    } else {
                        let ipad = " ".repeat(indent + usize::from(!key.is_empty()) * 2);
                        writeln!(o, "{ipad}{k:width$}  {}", scalar(v))?;
                    }
                }
            }
            serde_json::Value::Array(a) => {
                writeln!(o, "{pad}{key}:")?;
                for (i, item) in a.iter().enumerate() {
                    walk(item, indent + 2, &format!("[{i}]"), o)?;
                }
            }
            other => writeln!(o, "{pad}{key}  {}", scalar(other))?,
        }
        Ok(())
    }
    fn scalar(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::Null => "-".into(),
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(" "),
            other => other.to_string(),
        }
    }
    let doc = serde_json::to_value(doc).map_err(|e| CliError::Output(io::Error::other(e)))?;
    walk(&doc, 0, "", &mut out()).map_err(CliError::Output)
}

fn human_age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "s", "5x", "-1s", "1.5h", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn clap_contract_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

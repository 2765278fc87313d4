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
    utc, CapacityDoc, GcDoc, HoldersDoc, LaunchedDoc, PsDoc, ReapDoc, ReceiptDoc,
    ReceiptVerdictDoc, RecoverDoc, State,
};
use super::error::{CliError, ServiceError};
use super::ops::{self, assess, list_views, out, print_json, show_doc};
use super::{client, run, serve};
use crate::assess::KERNEL_BOOT;
use crate::capacity;
use crate::holders::{self, Holder, Registrations, Target, Via};
use crate::reap_checkout::{self, Why};
use crate::registry::{self, RegistryError, Runtime};
use crate::retention;
use crate::stall::{self, StallConfig};

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
    /// Every process whose cwd, root, open or mapped files lie under PATH, with its owner; exit 1
    /// when something holds PATH.
    Holders(HoldersArgs),
    /// End what works under a checkout and has no live owner (residue of exited workloads
    /// through the shared stop, orphans); exit 1 when something stays.
    Reap(ReapArgs),
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
    /// Run the workload as USER[:GROUP] (names or numeric ids; root only). The guardian, the
    /// proof file and run/P stay this user's, so the workload cannot tamper with its evidence.
    #[arg(long, value_name = "USER[:GROUP]")]
    pub user: Option<String>,
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
    /// Stall watch: time between two samples of each live scope's tree CPU and output.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "60s")]
    pub stall_period: Duration,
    /// Stall watch: CPU threshold, percent of one core (calm is under half of it).
    #[arg(long, value_name = "PERCENT", default_value_t = 75, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub stall_cpu: u32,
    /// Stall watch: busy samples in a row without output before a scope is `stalled` (0: off).
    #[arg(long, value_name = "N", default_value_t = stall::DEFAULT_STALLED_SAMPLES)]
    pub stall_samples: u32,
    /// Stall watch: samples without output before a live scope is `silent` (0: off).
    #[arg(long, value_name = "M", default_value_t = stall::DEFAULT_SILENT_SAMPLES)]
    pub silent_samples: u32,
}

impl ServeArgs {
    /// The stall watch's settings.
    pub fn stall(&self) -> StallConfig {
        StallConfig {
            period: self.stall_period,
            threshold: f64::from(self.stall_cpu) / 100.0,
            stalled_samples: self.stall_samples,
            silent_samples: self.silent_samples,
        }
    }
}

#[derive(Debug, Args)]
pub struct HoldersArgs {
    /// A directory or file; it need not exist any more (a removed checkout is matched too).
    pub path: PathBuf,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReapArgs {
    /// The checkout (a directory; it need not exist any more).
    #[arg(long, value_name = "PATH")]
    pub checkout: PathBuf,
    /// Budget of each stop, for coordination and proof.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "2s")]
    pub budget: Duration,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
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
    /// Age limit (e.g. 0s, 12h, 7d).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "7d")]
    pub older_than: Duration,
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
            let watch = args.stall().validate().map_err(CliError::Stall)?;
            serve::serve(&home, port, args.maintenance_every, args.retain, watch)?;
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
        Command::Holders(args) => holders_cmd(&home, args),
        Command::Reap(args) => reap(&home, port, args),
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
        user: args.user,
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
            state_text(r),
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

/// The state, with the stall watch's open incidents (`live (stalled)`).
fn state_text(r: &ScopeView) -> String {
    let open: Vec<&str> = [
        ("stalled", r.stalled.is_some()),
        ("silent", r.silent.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, open)| open.then_some(name))
    .collect();
    if open.is_empty() {
        r.state.clone()
    } else {
        format!("{} ({})", r.state, open.join(", "))
    }
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

/// `holders PATH` (H1): exit 0 when nothing holds PATH, 1 when something does.
fn holders_cmd(home: &Path, args: HoldersArgs) -> Result<ExitCode, CliError> {
    let target = Target::resolve(&args.path)?;
    let regs = Registrations::load(home, &KERNEL_BOOT);
    let doc: HoldersDoc = holders::holders(&target, &regs)?;
    if args.json {
        print_json(&doc)?;
    } else if doc.holders.is_empty() {
        writeln!(out(), "nothing holds {}", doc.path.display()).map_err(CliError::Output)?;
    } else {
        holders_table(&doc.holders, None)?;
    }
    if !args.json && doc.unreadable > 0 {
        writeln!(
            out(),
            "({} processes could not be read (permission denied): they may hold it too)",
            doc.unreadable
        )
        .map_err(CliError::Output)?;
    }
    Ok(ExitCode::from(!doc.holders.is_empty()))
}

/// The holders table; `why` adds a column (the reason a holder was left by `reap`).
fn holders_table(rows: &[Holder], why: Option<&[String]>) -> Result<(), CliError> {
    let mut head = vec!["PID", "PROGRAM", "CPU", "AGE", "VIA", "OWNER", "PATH"];
    if why.is_some() {
        head.push("WHY");
    }
    let mut table = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for (i, h) in rows.iter().enumerate() {
        let owner = match &h.owner {
            Some(o) => format!("{} ({})", o.id, o.state.name()),
            None => "no owner".to_owned(),
        };
        let via = match h.via {
            Via::Cwd => "cwd",
            Via::Root => "root",
            Via::OpenFile => "open file",
            Via::MappedFile => "mapped file",
        };
        let mut row = vec![
            h.witness.pid.to_string(),
            h.program.clone(),
            format!("{:.2}s", h.cpu_ms as f64 / 1000.0),
            human_age(h.age_ms / 1000),
            via.to_owned(),
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
    let doc: ReapDoc =
        reap_checkout::reap_checkout(home, rt.as_ref(), &args.checkout, args.budget, &KERNEL_BOOT)?;
    let code = ExitCode::from(!doc.clean());
    if args.json {
        print_json(&doc)?;
        return Ok(code);
    }
    let mut o = out();
    if !doc.refused.is_empty() {
        writeln!(
            o,
            "refused: a live workload works in {} (end it first); nothing was signalled",
            doc.path.display()
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
            (Some(outcome), false, None) => format!("{outcome:?}, no receipt").to_lowercase(),
            (None, false, None) => "not stopped".to_owned(),
        };
        writeln!(o, "scope {}: {verdict}", s.id).map_err(CliError::Output)?;
    }
    writeln!(o, "orphans killed: {}", doc.killed.len()).map_err(CliError::Output)?;
    if let Some(e) = &doc.error {
        writeln!(o, "kill failed: {e}").map_err(CliError::Output)?;
    }
    if doc.left.is_empty() {
        writeln!(o, "nothing holds {} any more", doc.path.display()).map_err(CliError::Output)?;
        return Ok(code);
    }
    writeln!(o, "still holding {}:", doc.path.display()).map_err(CliError::Output)?;
    drop(o);
    let why: Vec<String> = doc.left.iter().map(|l| why_text(&l.why)).collect();
    let rows: Vec<Holder> = doc.left.into_iter().map(|l| l.holder).collect();
    holders_table(&rows, Some(&why))?;
    Ok(code)
}

fn why_text(why: &Why) -> String {
    match why {
        Why::LiveWorkload => "its workload is live".to_owned(),
        Why::ResidueSurvived => "its scope's stop did not end it".to_owned(),
        Why::NotOrphan { ppid, parent } => format!("not an orphan (parent {ppid} {parent})"),
        Why::GuardianBelow => "a live scope's guardian is below it".to_owned(),
        Why::Survived => "survived SIGKILL within the budget".to_owned(),
    }
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
    let report: GcDoc = match open_runtime(home, port)? {
        Some(rt) => ops::retire(&rt, opts)?,
        None => retention::Report {
            older_than_secs: opts.older_than.as_secs(),
            dry_run: opts.dry_run,
            ..Default::default()
        },
    };
    if args.json {
        print_json(&report)?;
        return Ok(0);
    }
    let mut table = vec![["ID", "ACTION", "FILES", "BYTES", "REASON"]
        .map(String::from)
        .to_vec()];
    for e in &report.entries {
        table.push(vec![
            e.id.clone(),
            serde_json::to_value(&e.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            e.files.len().to_string(),
            e.bytes.to_string(),
            e.reason.clone(),
        ]);
    }
    write_table(&table)?;
    let (files, bytes) = report
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
        if report.dry_run {
            "would delete"
        } else {
            "deleted"
        },
    )
    .map_err(CliError::Output)?;
    Ok(0)
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

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
//! The home comes from the executable ([`refine_supervisor::store::registry::default_home`]), never from the cwd.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};
use refine_protocol::api::{LaunchAsk, Reply, Request};
use refine_protocol::RegistrationId;

use super::docs::{
    capacity_doc, forget_doc, holders_doc, reap_doc, retention_doc, CapacityDoc,
    DetachedSpawnFailedDoc, GcDoc, HolderDoc, HoldersDoc, LaunchedDoc, Outcome, PsDoc, ReapDoc,
    ReceiptDoc, ReceiptVerdictDoc, RecoverDoc, ScopeKind, State, Vocabulary, WhyDoc,
};
use super::error::{CliError, ClientError, ServiceError, SpecError};
use super::ops::{self, assess, list_views, out, print_json, show_doc};
use super::serve::LogFormat;
use super::{client, resolve, run, serve, view};
use refine_supervisor::capacity;
use refine_supervisor::end::assess::{self, KERNEL_BOOT};
use refine_supervisor::hygiene::holders::{self, Registrations, Target};
use refine_supervisor::hygiene::reap_checkout;
use refine_supervisor::hygiene::stall::{self, StallConfig};
use refine_supervisor::store::registry::{self, RegistryError, Runtime};
use refine_supervisor::{history::forget, history::retention};

/// Process supervision with kernel proof: launch commands through a subreaping guardian, see what
/// runs and why, stop whole trees, and read the receipt that proves they ended.
///
/// Wherever an ID is taken, a unique prefix of 4+ hex digits or a label works too. Durations
/// read like 1h30m, 1.5s, 500ms or 7d; a bare number is seconds. RUST_LOG=debug traces a command
/// on stderr.
#[derive(Debug, Parser)]
#[command(name = "refine-supervisor", version)]
pub struct Cli {
    /// Product home (default: derived from this executable, never the current directory);
    /// created if missing.
    #[arg(long, global = true, value_name = "DIR", env = "REFINE_HOME")]
    pub home: Option<PathBuf>,
    /// Runtime port: state lives in HOME/run/PORT.
    #[arg(long, global = true, value_name = "P", default_value_t = registry::DEFAULT_PORT)]
    pub port: u16,
    #[command(subcommand)]
    pub command: Command,
}

/// A subcommand's arguments, defined only when that subcommand is the one given
/// ([`clap::Command::defer`]): a `run` does not first build, and then drop, the definitions of
/// every other subcommand (most of the parser's start-up work; `scripts/bench-launch`).
#[derive(Debug)]
pub struct Deferred<T>(pub T);

impl<T: Args> Args for Deferred<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args_for_update)
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

impl<T: clap::FromArgMatches> clap::FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(
        &mut self,
        matches: &mut clap::ArgMatches,
    ) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Launch one managed command in this process, stream its output, exit with its status.
    /// The workload gets this process's stdin and the signal state it inherited (ignored
    /// signals, blocked mask; a signal inherited as ignored is not relayed); every other signal
    /// run receives is forwarded to it (SIGINT/SIGTERM: see --stop-grace).
    Run(Deferred<RunArgs>),
    /// Run the service for this port in the foreground. SIGTERM/SIGINT stop it and its own
    /// launches: SIGTERM to each, up to --shutdown-grace for them to end, then the shared stop,
    /// each with a receipt. A killed service leaves its launches running for the next recovery.
    /// The socket accepts first; recovery runs behind it (requests meanwhile see each scope's
    /// state as the assessment gives it: an orphan not yet stopped is live).
    Serve(Deferred<ServeArgs>),
    /// List registrations, newest first: id, kind, state, status, pid, age, label, command.
    Ps(Deferred<PsArgs>),
    /// Show one registration as `systemctl status` does: state, command, processes, receipt, output.
    Show(Deferred<ShowArgs>),
    /// Stop a registration's whole tree through the shared stop; exit 0 only when exit is proven.
    /// With --grace, the workload's process group gets SIGTERM (or --signal) first and that long
    /// to end by itself (docker stop -t); then the rest is killed.
    Stop(Deferred<StopArgs>),
    /// Print a registration's output (stdout, stderr or both); -f follows until the scope exits.
    Logs(Deferred<LogsArgs>),
    /// Block until every scope has ended; print each workload's status, exit with the last one's.
    Wait(Deferred<WaitArgs>),
    /// Decode and verify a receipt, by registration id or proof-file path; exit 0 only if it verifies.
    Receipt(Deferred<ReceiptArgs>),
    /// Run the recovery pass: stop stale live scopes, release exited ones, report unverified ones.
    Recover(Deferred<RecoverArgs>),
    /// Retention: delete artifacts of exited scopes older than the limit, and nothing else.
    Gc(Deferred<GcArgs>),
    /// Capacity admission figures: cores, memory, reservation, slots, live/unverified, free.
    Capacity(Deferred<CapacityArgs>),
    /// Every process whose cwd, root, open or mapped files lie under PATH, with its owner; exit 1
    /// when something holds PATH.
    Holders(Deferred<HoldersArgs>),
    /// End what works under a checkout and has no live owner (residue of exited workloads
    /// through the shared stop, orphans); exit 1 when something stays.
    Reap(Deferred<ReapArgs>),
    /// Print the JSON Schema of a document of the JSON contract (what --json prints, what the
    /// socket returns); without NAME, list the documents.
    Schema(Deferred<SchemaArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(Deferred<CompletionsArgs>),
    /// Print the manual page of the whole, or of one subcommand (roff); --dir writes them all.
    Man(Deferred<ManArgs>),
    /// For the completion scripts: the ids and labels of the port, newest first, one a line;
    /// nothing (and exit 0) when there are none or the home cannot be read.
    #[command(name = "__complete-ids", hide = true)]
    CompleteIds,
}

/// `run --stop-grace` when not given.
pub const STOP_GRACE_DEFAULT: &str = "10s";
/// `run --kill-after` when a deadline is given without it (W11).
pub const KILL_AFTER_DEFAULT: Duration = Duration::from_secs(5);
/// `run --log-cap` when not given.
pub const LOG_CAP_DEFAULT: &str = "1GiB";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Human label.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Kind of workload.
    #[arg(long, value_enum, default_value_t = KindArg::Command)]
    pub kind: KindArg,
    /// Completion deadline from the start (e.g. 30s, 0.5, 5m, 2h, 7d; a bare number is
    /// seconds, at most 3650d), for the whole scope: SIGTERM to the workload's process group,
    /// then the scope is stopped after --kill-after; run exits 124 (137 if it had to kill).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Idle deadline: no output, input, resize or signal activity for this long.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// When a deadline passes, SIGTERM the workload's process group first and stop the scope
    /// only this much later (coreutils `timeout -k`; default 5s, 0: kill at once); the outcome
    /// stays the deadline's, and run exits 124 (137 once it had to kill), as timeout does.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub kill_after: Option<Duration>,
    /// Working directory of the workload (default: this one; `-w`/`--workdir` as docker).
    #[arg(long, short = 'w', visible_alias = "workdir", value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Extra environment variable for the workload (repeatable; the value may be any bytes).
    #[arg(long = "env", short = 'e', value_name = "K=V", value_parser = clap::builder::OsStringValueParser::new().try_map(parse_env))]
    pub env: Vec<(OsString, OsString)>,
    /// Purpose metadata stored in the record (repeatable).
    #[arg(long = "meta", value_name = "K=V", value_parser = parse_kv)]
    pub meta: Vec<(String, String)>,
    /// Run on a pseudo-terminal. On a terminal it is interactive (keys, resizes); a pipe, file
    /// or /dev/null on stdin is relayed into it and then its end of file (Ctrl-D), as `script`
    /// does.
    #[arg(long, short = 't', visible_alias = "tty")]
    pub pty: bool,
    /// Ask the running service to launch it; print the id and return.
    #[arg(long, short = 'd')]
    pub detach: bool,
    /// Refuse to start while another scope with this --label is live or unverified (one at a
    /// time, checked atomically with admission).
    #[arg(long, requires = "label")]
    pub unique: bool,
    /// For `agent`: when no capacity slot is free, wait up to this long instead of refusing.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub wait_for_slot: Option<Duration>,
    /// Print the result object at the end instead of streaming output.
    #[arg(long)]
    pub json: bool,
    /// After a SIGINT or SIGTERM (forwarded to the workload), how long the workload has to end
    /// by itself before its whole scope is stopped (the same signal again: at once; the other
    /// one is only forwarded). Once the workload has ended, the rest of its scope is stopped and
    /// run exits with the workload's status. Every other signal (HUP, QUIT, USR1...) is only
    /// forwarded.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = STOP_GRACE_DEFAULT)]
    pub stop_grace: Duration,
    /// Byte cap of each output artifact (e.g. 10M, 1.5M, 1GiB; 0: none); past it the stream is
    /// incomplete ("log cap") and the pipe is still drained.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = LOG_CAP_DEFAULT)]
    pub log_cap: u64,
    /// Run the workload as USER[:GROUP] (names or numeric ids; root only). The guardian, the
    /// proof file and run/P stay this user's, so the workload cannot tamper with its evidence.
    #[arg(long, value_name = "USER[:GROUP]")]
    pub user: Option<String>,
    /// The command and its arguments, after `--`.
    /// Passed as bytes: arguments need not be UTF-8.
    #[arg(last = true, required = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    pub command: Vec<OsString>,
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
    /// Serve Prometheus metrics on http://ADDR/metrics (e.g. 127.0.0.1:9411); no authentication.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// On SIGTERM/SIGINT: how long the service's launches get to end after their SIGTERM before
    /// the shared stop kills what is left.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "10s")]
    pub shutdown_grace: Duration,
    /// Format of the service log (stderr, or --log-file); RUST_LOG filters it (default: info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log to this file instead of stderr, rotated by size (PATH.1 ... PATH.5 of 10 MiB each;
    /// mode 0600).
    #[arg(long, value_name = "PATH", env = "REFINE_LOG_FILE")]
    pub log_file: Option<PathBuf>,
    /// The cgroup v2 directory below which each scope gets a cgroup of its own (F4; also
    /// REFINE_CGROUP_ROOT). Default: this process's own cgroup, where it is writable.
    #[arg(long, value_name = "PATH", conflicts_with = "no_cgroup")]
    pub cgroup_root: Option<PathBuf>,
    /// Give scopes no cgroup of their own: the stop works through /proc (also REFINE_CGROUP=off).
    #[arg(long)]
    pub no_cgroup: bool,
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
    #[arg(long, short = 'a')]
    pub all: bool,
    /// Only this kind.
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Only registrations with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only this state (`exited` implies --all).
    #[arg(long, value_enum)]
    pub state: Option<StateArg>,
    /// Print the full ids only, one a line.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Do not cut ids and commands to fit the terminal.
    #[arg(long)]
    pub no_trunc: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateArg {
    Live,
    Exited,
    Unverified,
    Corrupt,
}

impl StateArg {
    fn state(self) -> State {
        match self {
            StateArg::Live => State::Live,
            StateArg::Exited => State::Exited,
            StateArg::Unverified => State::Unverified,
            StateArg::Corrupt => State::Corrupt,
        }
    }
}

#[derive(Debug, Args)]
pub struct IdArgs {
    /// Registration id, a unique prefix of it (4+ hex digits), or a label.
    pub id: String,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Registration ids, unique prefixes of them (4+ hex digits), or labels; each is shown
    /// (`--json` of several: an array).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// How many of the last output lines to show (per stream).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10)]
    pub lines: usize,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// Registration ids, unique prefixes of them (4+ hex digits), or labels; each is stopped
    /// in turn, and the exit is 0 only when every stop was proven (`--json` of several: an
    /// array).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// Send the polite signal to the workload's process group first and wait this long for the
    /// scope to end by itself before the kill (the runtime's stop fence is not held meanwhile;
    /// `-t 10` as `docker stop -t`: a bare number is seconds).
    #[arg(long, short = 't', value_name = "DUR", value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// The polite signal of --grace (name or number: TERM, INT, HUP, USR1, 15, ...).
    #[arg(long, value_name = "SIG", value_parser = refine_supervisor::kernel::signal::parse, default_value = "TERM", requires = "grace")]
    pub signal: refine_supervisor::kernel::signal::Signal,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Registration id, a unique prefix of it (4+ hex digits), or a label.
    pub id: String,
    /// The stderr artifact instead of stdout.
    #[arg(long, conflicts_with = "all")]
    pub stderr: bool,
    /// Both streams: stdout to stdout, stderr to stderr.
    #[arg(long)]
    pub all: bool,
    /// Keep printing new output until the scope has exited.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only the last N lines (then new ones with -f).
    #[arg(long, short = 'n', value_name = "N")]
    pub tail: Option<usize>,
    /// Only output written since DUR ago or TIME (`10m`, `2026-01-31 12:00`, RFC 3339). The
    /// artifacts carry no per-line times: an artifact last written before that shows nothing,
    /// otherwise all of it (cut by -n); with -f, new output always shows.
    #[arg(long, value_name = "DUR|TIME", value_parser = view::parse_since)]
    pub since: Option<u64>,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Registration ids (or unique prefixes, or labels).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// Give up after this long (exit 124, naming the scopes still live).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// One JSON document: each scope's state and exit code, and whether the wait timed out.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Say what recovery would do; stop, release and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// The document whose schema to print (default: list the documents).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(
        refine_protocol::docs::DOCUMENTS.iter().map(|(name, _)| *name)
    ))]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (default: the page of the whole).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(super::man::SUBCOMMANDS), conflicts_with = "dir")]
    pub subcommand: Option<String>,
    /// Write every page into DIR (e.g. /usr/local/share/man/man1) instead of printing one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
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

/// Parses a duration ([`view::parse_duration`]).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    view::parse_duration(text)
}

/// A byte size: a number, with an optional fraction (`1.5M`; what is below one byte is dropped),
/// and an optional unit, `K`/`M`/`G`/`T` (powers of 1024, also spelt `KiB`, `KB`, `k`...) or
/// `B`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let not_a_size = || format!("{text:?} is not a size (examples: 0, 512K, 1.5M, 1GiB)");
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (num.contains('.') && frac.is_empty()) {
        return Err(not_a_size());
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use K, M, G or T)"
            ))
        }
    };
    let out_of_range = || format!("{text:?} is out of range (at most 16EiB)");
    let int: u128 = int.parse().map_err(|_| out_of_range())?;
    // Fraction digits past what one byte of the largest unit can tell change nothing.
    let frac = &frac[..frac.len().min(20)];
    let frac_bytes = match frac.parse::<u128>() {
        Ok(f) => (f << shift) / 10u128.pow(frac.len() as u32),
        Err(_) => 0,
    };
    let bytes = int
        .checked_mul(1 << shift)
        .and_then(|b| b.checked_add(frac_bytes))
        .ok_or_else(out_of_range)?;
    u64::try_from(bytes).map_err(|_| out_of_range())
}

/// `K=V` for `--env`: the name is text, the value any bytes.
pub(super) fn parse_env(text: OsString) -> Result<(OsString, OsString), String> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = text.as_bytes();
    match bytes.iter().position(|&b| b == b'=') {
        Some(i) if i > 0 => Ok((
            std::ffi::OsStr::from_bytes(&bytes[..i]).to_owned(),
            std::ffi::OsStr::from_bytes(&bytes[i + 1..]).to_owned(),
        )),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

pub(super) fn parse_kv(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// Resolves the home: `--home` or `REFINE_HOME`, made absolute (X4), else derived from the
/// executable. Only `create` (`run`, `serve`) makes a missing one, 0700 whatever the umask, and
/// says where; every other command refuses it in one line and creates nothing (D7).
pub fn home(cli: &Cli, create: bool) -> Result<PathBuf, CliError> {
    let Some(h) = &cli.home else {
        let home = registry::default_home().map_err(CliError::NoHome)?;
        if !home.is_dir() {
            return Err(RegistryError::MissingHome(home).into());
        }
        return Ok(home);
    };
    let h = std::path::absolute(h).map_err(|source| CliError::CreateHome {
        path: h.clone(),
        source,
    })?;
    if !h.is_dir() {
        if !create {
            return Err(RegistryError::MissingHome(h).into());
        }
        refine_supervisor::store::durable::create_private_dirs(&h).map_err(|source| {
            CliError::CreateHome {
                path: h.clone(),
                source,
            }
        })?;
        let shown = h.display().to_string();
        eprintln!(
            "refine-supervisor: created the home {}",
            view::escape(&shown)
        );
    }
    Ok(h)
}

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
        Command::Run(Deferred(args)) => run(&home, port, args),
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
        Command::Receipt(Deferred(args)) => receipt(&home, port, args),
        Command::Recover(Deferred(args)) => recover(&home, port, args),
        Command::Gc(Deferred(args)) => gc(&home, port, args),
        Command::Capacity(Deferred(args)) => capacity_cmd(&home, port, args),
        Command::Holders(Deferred(args)) => holders_cmd(&home, args),
        Command::Reap(Deferred(args)) => reap(&home, port, args),
        Command::Completions(_) | Command::Man(_) | Command::Schema(_) => Ok(0),
    }
}

// ---------------------------------------------------------------------------------------------
// Commands.

/// `schema [NAME]`: the documents of the contract, or one document's JSON Schema (the text
/// committed as `protocol/schema/NAME.json`).
fn schema(name: Option<&str>) -> Result<(), CliError> {
    use refine_protocol::docs::{schema_text, DOCUMENTS};
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
    };
    let rt = Runtime::open(home, port)?;
    let resp = client::request(&rt, &Request::Launch(spec.clone()))?;
    match resp {
        Reply::Launched { id } => {
            if args.json {
                print_json(&LaunchedDoc { id })?;
            } else {
                writeln!(out(), "{id}").map_err(CliError::Output)?;
            }
            Ok(0)
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
    let want = args.state.map(StateArg::state);
    let all = args.all || want.is_some_and(|s| s == State::Exited);
    let mut rows = match open_runtime(home, port)? {
        Some(rt) => list_views(&rt, all)?,
        None => Vec::new(),
    };
    rows.retain(|r| {
        args.kind
            .is_none_or(|k| r.kind == ScopeKind::Known(k.kind()))
            && args.label.as_ref().is_none_or(|l| &r.label == l)
            && want.is_none_or(|s| r.state == s)
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

fn stop(home: &Path, port: u16, args: StopArgs) -> Result<ExitCode, CliError> {
    let grace = args.grace.map(|g| (g, args.signal));
    let several = args.ids.len() > 1;
    let mut docs = Vec::new();
    let code = for_each_id(&args.ids, |w| {
        let (rt, id) = runtime_and_id(home, port, w, resolve::Intent::Change)?;
        let reg = rt.read_registration(id)?;
        let doc = ops::stop_one(&rt, &reg, refine_protocol::StopCause::Operator, grace);
        let proven = doc.state == State::Exited;
        let reason = doc.reason.clone();
        if args.json && several {
            docs.push(doc);
        } else if args.json {
            print_json(&doc)?;
        } else {
            writeln!(out(), "{}", view::stop_line(&doc)).map_err(CliError::Output)?;
        }
        verdict(proven, CliError::StopNotProven { id, reason })
    })?;
    if args.json && several {
        print_json(&docs)?;
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
            "({} processes could not be read (permission denied): they may hold it too)",
            doc.unreadable
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
    to_stderr: bool,
}

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
            if self.to_stderr {
                let mut e = io::stderr().lock();
                e.write_all(&buf[..n]).map_err(CliError::Output)?;
            } else {
                out().write_all(&buf[..n]).map_err(CliError::Output)?;
            }
        }
    }
}

fn logs(home: &Path, port: u16, args: LogsArgs) -> Result<ExitCode, CliError> {
    let (rt, id) = runtime_and_id(home, port, &args.id, resolve::Intent::Read)?;
    let reg = rt.read_registration(id)?;
    let streams: Vec<(&String, bool)> = if args.all {
        vec![(&reg.stdout_path, false), (&reg.stderr_path, true)]
    } else if args.stderr {
        vec![(&reg.stderr_path, false)]
    } else {
        vec![(&reg.stdout_path, false)]
    };
    let mut follows = Vec::new();
    for (path, to_stderr) in streams {
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
                    to_stderr,
                });
                continue;
            }
            Err(e) => return Err(artifact(e)),
        };
        let meta = file.metadata().map_err(artifact)?;
        let len = meta.len();
        let written_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, refine_protocol::time::saturating_ms);
        let start = if args.since.is_some_and(|since| written_ms < since) {
            len
        } else if let Some(n) = args.tail {
            view::tail_offset(&mut file, 0, len, n).map_err(artifact)?
        } else {
            0
        };
        file.seek(SeekFrom::Start(start)).map_err(artifact)?;
        follows.push(Follow {
            path,
            file: Some(file),
            to_stderr,
        });
    }
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
        // Follow ends once the scope has exited and everything written before that was read.
        if assess(&rt, &reg).state != State::Live {
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
        std::thread::sleep(Duration::from_millis(100));
    }
    out().flush().map_err(CliError::Output)?;
    if !printed && follows.iter().all(|f| f.file.is_none()) {
        // A note, not output: stdout stays exactly the stream's bytes (none).
        // A missing artifact is a stream that wrote nothing (F3), or output gc has retired.
        eprintln!("{id}: no output (none was written, or gc has retired it)");
    }
    Ok(0)
}

/// What `wait` prints and exits with for a workload status: its code, 128+N for signal N, 127
/// for a workload that never started; when nothing says, `-1` is printed (as `podman wait`
/// does) and the exit code is 255.
fn wait_code(status: Option<refine_protocol::WorkloadStatus>) -> (i32, String) {
    use refine_protocol::WorkloadStatus as W;
    match status {
        Some(W::Exited(c)) => (c, c.to_string()),
        Some(W::Signaled(s)) => (128 + s, (128 + s).to_string()),
        Some(W::NeverStarted) => (127, "127".into()),
        Some(W::Unknown) | None => (255, "-1".into()),
    }
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
    let started = std::time::Instant::now();
    let mut ended: Vec<Option<(i32, String)>> = vec![None; regs.len()];
    let mut states: Vec<State> = vec![State::Live; regs.len()];
    loop {
        for ((reg, slot), state) in regs.iter().zip(ended.iter_mut()).zip(states.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            let a = assess(&rt, reg);
            if a.state == State::Live {
                continue;
            }
            let reported = rt
                .read_result(reg.id)
                .ok()
                .flatten()
                .map(|r| r.workload_status);
            *slot = Some(wait_code(a.receipt.map(|r| r.status).or(reported)));
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
                let reason = a.reason.unwrap_or_else(|| {
                    "receipt is not the one the registration's proof file holds".into()
                });
                (Some(a.state), Some(reason))
            }
            assess::ReceiptBinding::Unbound => (
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
    if args.json {
        print_json(&doc)?;
    } else {
        writeln!(out(), "{}", view::receipt_verdict(&doc)).map_err(CliError::Output)?;
    }
    verdict(
        doc.verified,
        CliError::ReceiptNotVerified { reason: doc.reason },
    )
}

fn recover(home: &Path, port: u16, args: RecoverArgs) -> Result<ExitCode, CliError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand has a man page and every page a subcommand (`man.rs`).
    #[test]
    fn man_pages_match_the_definition() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let defined: Vec<&str> = cmd
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name())
            .filter(|n| *n != "help")
            .collect();
        assert_eq!(defined, super::super::man::SUBCOMMANDS);
        assert_eq!(super::super::man::paged(), super::super::man::SUBCOMMANDS);
    }

    #[test]
    fn clap_contract_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1.5M"), Ok(3 << 19));
        assert_eq!(parse_size("0.5k"), Ok(512));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1.7b"), Ok(1));
        assert_eq!(
            parse_size("16777215.99T"),
            Ok((16_777_215 << 40) + (99 << 40) / 100)
        );
        for bad in [
            "",
            "M",
            ".5M",
            "5.M",
            "1.2.3K",
            "5X",
            "-1",
            "16777216T",
            "1e6",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}

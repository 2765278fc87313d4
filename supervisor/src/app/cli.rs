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
//! The home comes from the executable ([`refine_supervisor::host::default_home`]), never from the cwd.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};

use super::docs::State;
use super::error::CliError;
use super::serve::LogFormat;
use super::view;
use refine_supervisor::host::{
    self as registry, RegistryError, StallConfig, CAPACITY_LIMIT_PERCENT, DEFAULT_SILENT_SAMPLES,
    DEFAULT_STALLED_SAMPLES,
};

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
    /// `run` and `serve` create it if missing, every other command needs it to exist.
    #[arg(long, global = true, value_name = "DIR", env = "REFINE_HOME")]
    pub home: Option<PathBuf>,
    /// Runtime port: state lives in HOME/run/PORT.
    #[arg(long, global = true, value_name = "P", default_value_t = registry::DEFAULT_SERVICE_PORT)]
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

// Parsed once per process: the size of `run`'s arguments costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
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
    /// Print the scopes' events from the journal, oldest first, as `docker events` does:
    /// launched, started, exited, receipt, stop requested and ended, unverified, adopted,
    /// collected; -f keeps printing new ones as they are written.
    Events(Deferred<EventsArgs>),
    /// Decode and verify a receipt, by registration id or proof-file path; exit 0 only if it verifies.
    Receipt(Deferred<ReceiptArgs>),
    /// Run the recovery pass: stop stale live scopes, release exited ones, report unverified ones.
    Recover(Deferred<RecoverArgs>),
    /// Upgrade the running service in place: it executes the binary now at the path it was
    /// started from, keeping its pid, its socket (no connect is refused) and every launch
    /// (adopted by the new binary). A new binary that does not run leaves the old one serving.
    /// The shipped unit's `systemctl reload` does the same (SIGHUP).
    Upgrade(Deferred<UpgradeArgs>),
    /// Retention: delete artifacts of exited scopes older than the limit, and nothing else.
    Gc(Deferred<GcArgs>),
    /// Capacity admission figures: cores, memory, reservation, slots, live/unverified, free.
    Capacity(Deferred<CapacityArgs>),
    /// Show CPU %, memory, pids and block I/O of every live scope, as `podman stats` does: on a
    /// terminal a table redrawn every --interval until q or Ctrl-C; off one (or with
    /// --no-stream, --json) one sample over a 1 s window. SOURCE says where a row was read: the
    /// scope's own cgroup, or its processes in /proc.
    Top(Deferred<TopArgs>),
    /// Every process whose cwd, root, open or mapped files lie under PATH, with its owner; exit 1
    /// when something holds PATH.
    Holders(Deferred<HoldersArgs>),
    /// End what works under a checkout and has no live owner (residue of exited workloads
    /// through the shared stop, orphans); exit 1 when something stays.
    Reap(Deferred<ReapArgs>),
    /// Print the JSON Schema of a document of the JSON contract (what --json prints, what the
    /// socket returns); without NAME, list the documents.
    Schema(Deferred<SchemaArgs>),
    /// Print this build's version, commit, dirty flag and class (release or source), and the
    /// guardian's a launch would start.
    Version(Deferred<VersionArgs>),
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
/// `run --kill-after` when a deadline is given without it (W11): the face's rule.
pub const KILL_AFTER_DEFAULT: Duration = refine_supervisor::host::Timeout::DEFAULT_KILL_AFTER;
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
    /// seconds, at most 3650d; 0: none, as `timeout 0`), for the whole scope: SIGTERM to the workload's process group,
    /// then the scope is stopped after --kill-after; run exits 124 (137 if it had to kill).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    /// Idle deadline: no output, input, resize or signal activity for this long (0: none).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
    pub idle_timeout: Option<Duration>,
    /// When a deadline passes, SIGTERM the workload's process group first and stop the scope
    /// only this much later (coreutils `timeout -k`; default 5s, 0: kill at once); the outcome
    /// stays the deadline's, and run exits 124 (137 once it had to kill), as timeout does.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
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
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
    pub wait_for_slot: Option<Duration>,
    /// Print the result object at the end instead of streaming output.
    #[arg(long)]
    pub json: bool,
    /// After a SIGINT or SIGTERM (forwarded to the workload), how long the workload has to end
    /// by itself before its whole scope is stopped (the same signal again: at once; the other
    /// one is only forwarded). Once the workload has ended, the rest of its scope is stopped and
    /// run exits with the workload's status. Every other signal (HUP, QUIT, USR1...) is only
    /// forwarded.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = STOP_GRACE_DEFAULT)]
    pub stop_grace: Duration,
    /// Byte cap of each output artifact (e.g. 10M, 1.5M, 1GiB; 0: none); past it the stream is
    /// incomplete ("log cap") and the pipe is still drained.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = LOG_CAP_DEFAULT)]
    pub log_cap: u64,
    /// Run the workload as USER[:GROUP] (names or numeric ids; root only). The guardian, the
    /// proof file and run/P stay this user's, so the workload cannot tamper with its evidence.
    #[arg(long, value_name = "USER[:GROUP]")]
    pub user: Option<String>,
    /// Let the workload join PID and user namespaces made outside its scope (`setns`, e.g.
    /// `nsenter -p`). Off by default: a process forked there is out of the guardian's reach, so
    /// a seccomp filter refuses that `setns` (EPERM). With this, only the scope's cgroup still
    /// witnesses such a process (where the scope has one).
    #[arg(long)]
    pub allow_setns: bool,
    /// What the workload's Landlock domain takes away (SPEC X11): `all` (the default: no
    /// write, truncate, rename, link or removal under the home's run/, no read of scopes'
    /// output, no signal or abstract-socket connection outside the scope), `fs` (the files
    /// only: for a debugger or a tool that signals other scopes), `signals` (the scoping
    /// only), `none` (no domain). Recorded and shown either way.
    #[arg(long, value_name = "all|fs|signals|none", value_parser = parse_protect, default_value = "all")]
    pub protect: refine_protocol::record::ProtectAsk,
    /// A sandbox for the workload (SPEC X12, Landlock): `read-only` (reads everywhere, writes
    /// only to a private TMPDIR and the null-like devices), `workspace-write[=PATH,...]` (also
    /// the working directory and each PATH, comma-separated, relative to the working
    /// directory), `none` (the default). Refused where the kernel cannot hold it.
    #[arg(long, value_name = "read-only|workspace-write[=PATH,...]|none", value_parser = parse_sandbox, default_value = "none")]
    pub sandbox: refine_protocol::record::SandboxAsk,
    /// `none`: no TCP bind or connect (SPEC X12, Landlock ABI 4); `all` (the default).
    #[arg(long, value_name = "none|all", value_parser = parse_network, default_value = "all")]
    pub network: refine_protocol::record::NetworkAsk,
    /// With --detach: what a restarted service does with this scope if the service is lost
    /// meanwhile (a crash, a kill -9): `keep` it running (the default, but for agents) or
    /// `stop` it (the default for agents).
    #[arg(long, value_name = "keep|stop", value_parser = parse_service_loss, requires = "detach")]
    pub on_service_loss: Option<refine_protocol::record::ServiceLoss>,
    /// End with the process that started this one (its parent thread): `run` asks the kernel
    /// for SIGKILL when its parent dies (PR_SET_PDEATHSIG), and its scope then ends as for any
    /// killed `run`. For hosts whose work must not outlive them; refused with --detach.
    #[arg(long, conflicts_with = "detach")]
    pub end_with_parent: bool,
    /// The whole tree's memory limit (e.g. 512M, 2G) through its cgroup (v2 where the memory
    /// controller is there, else its v1 hierarchy); an OOM kill is the result's reason (`oom`).
    /// Refused on a host with neither.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_max)]
    pub memory_max: Option<u64>,
    /// The tree's CPU bandwidth in cores (e.g. 0.5, 2), as `docker run --cpus`.
    #[arg(long, value_name = "CORES", value_parser = parse_cpus)]
    pub cpus: Option<u32>,
    /// The most processes and threads the tree holds at once; a fork past it fails (EAGAIN).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pids_max: Option<u64>,
    /// How the workload says it is ready: `notify` (sd_notify's READY=1 on $NOTIFY_SOCKET, from
    /// a process of the scope), `fd=N` (s6: a newline on descriptor N), `cmd=COMMAND` (a probe,
    /// each run a scope of its own, every second until it exits 0). Until then the scope is
    /// `starting`.
    #[arg(long, value_name = "notify|fd=N|cmd=COMMAND", value_parser = parse_ready)]
    pub ready: Option<refine_supervisor::host::ReadyAsk>,
    /// With --ready: how long the workload has to be ready before its scope is stopped
    /// (outcome `timed_out`; 0: no bound).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, requires = "ready", default_value = "90s")]
    pub ready_timeout: Duration,
    /// With --detach and --ready: return only once the workload is ready (exit 1 when it failed
    /// to be).
    #[arg(long, requires_all = ["detach", "ready"])]
    pub wait_ready: bool,
    /// A health probe (docker's HEALTHCHECK): `sh -c CMD` in the workload's directory, each run
    /// a scope of its own; the scope's health goes `starting` -> `healthy` / `unhealthy`. It is
    /// reported only: nothing is stopped or restarted for it.
    #[arg(long, value_name = "CMD")]
    pub health_cmd: Option<String>,
    /// With --health-cmd: between probes.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "health_cmd", default_value = "30s")]
    pub health_interval: Duration,
    /// With --health-cmd: a probe running longer is stopped and fails.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "health_cmd", default_value = "30s")]
    pub health_timeout: Duration,
    /// With --health-cmd: failures in a row that make it `unhealthy`.
    #[arg(long, value_name = "N", requires = "health_cmd", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub health_retries: u32,
    /// With --health-cmd: from the start, failures do not count (a success makes it healthy).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "health_cmd", default_value = "0s")]
    pub health_start_period: Duration,
    /// The command and its arguments (`--` before them is optional, as for tini and
    /// `timeout`: every word from the command's first on is the command's, `--json` too).
    /// Passed as bytes: arguments need not be UTF-8.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
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
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "5s")]
    pub maintenance_every: Duration,
    /// Retention age limit used by the maintenance loop.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "7d")]
    pub retain: Duration,
    /// The maintenance loop forgets whole exited registrations older than this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "30d")]
    pub forget_after: Duration,
    /// Stall watch: time between two samples of each live scope's tree CPU and output.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "60s")]
    pub stall_period: Duration,
    /// Stall watch: CPU threshold, percent of one core (calm is under half of it).
    #[arg(long, value_name = "PERCENT", default_value_t = 75, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub stall_cpu: u32,
    /// Stall watch: busy samples in a row without output before a scope is `stalled` (0: off).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_STALLED_SAMPLES)]
    pub stall_samples: u32,
    /// Stall watch: samples without output before a live scope is `silent` (0: off).
    #[arg(long, value_name = "M", default_value_t = DEFAULT_SILENT_SAMPLES)]
    pub silent_samples: u32,
    /// Serve Prometheus metrics on http://ADDR/metrics (e.g. 127.0.0.1:9411); no authentication.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// On SIGTERM/SIGINT: how long the service's launches get to end after their SIGTERM before
    /// the shared stop kills what is left.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "10s")]
    pub shutdown_grace: Duration,
    /// On SIGTERM/SIGINT: leave the service's launches running (their guardians keep capturing
    /// their output); the next `serve` adopts them, or stops those that asked for it
    /// (`run --on-service-loss stop`, agents by default). For upgrades and restarts.
    #[arg(long)]
    pub live_restore: bool,
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
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "2s")]
    pub budget: Duration,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

mod operator;
pub use operator::*;

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
        registry::create_home(&h)?;
        let shown = h.display().to_string();
        eprintln!(
            "refine-supervisor: created the home {}",
            view::escape(&shown)
        );
    }
    Ok(h)
}

/// X12: `--sandbox read-only | workspace-write[=PATH,...] | none`.
pub(crate) fn parse_sandbox(s: &str) -> Result<refine_protocol::record::SandboxAsk, String> {
    use refine_protocol::record::{SandboxAsk, SandboxMode};
    let (mode, paths) = match s.split_once('=') {
        Some(("workspace-write", list)) => (
            SandboxMode::WorkspaceWrite,
            list.split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        None if s == "workspace-write" => (SandboxMode::WorkspaceWrite, Vec::new()),
        None if s == "read-only" => (SandboxMode::ReadOnly, Vec::new()),
        None if s == "none" => (SandboxMode::None, Vec::new()),
        _ => {
            return Err(format!(
                "{s:?} is not one of read-only, workspace-write[=PATH,...], none"
            ))
        }
    };
    Ok(SandboxAsk {
        mode,
        paths,
        ..SandboxAsk::default()
    })
}

/// X12: `--network none | all`.
pub(crate) fn parse_network(s: &str) -> Result<refine_protocol::record::NetworkAsk, String> {
    match s {
        "none" => Ok(refine_protocol::record::NetworkAsk::None),
        "all" => Ok(refine_protocol::record::NetworkAsk::All),
        _ => Err(format!("{s:?} is not one of none, all")),
    }
}

impl RunArgs {
    /// X12: `--sandbox` and `--network` as one ask (`None`: neither).
    pub(crate) fn sandbox_ask(&self) -> Option<refine_protocol::record::SandboxAsk> {
        let ask = refine_protocol::record::SandboxAsk {
            network: self.network,
            ..self.sandbox.clone()
        };
        (!ask.is_none()).then_some(ask)
    }
}

/// `keep` or `stop` (`--on-service-loss`).
pub(crate) fn parse_protect(s: &str) -> Result<refine_protocol::record::ProtectAsk, String> {
    use refine_protocol::record::ProtectAsk;
    match s {
        "all" => Ok(ProtectAsk::All),
        "fs" => Ok(ProtectAsk::Fs),
        "signals" => Ok(ProtectAsk::Signals),
        "none" => Ok(ProtectAsk::None),
        _ => Err(format!("{s:?} is not one of all, fs, signals, none")),
    }
}

pub(crate) fn parse_service_loss(s: &str) -> Result<refine_protocol::record::ServiceLoss, String> {
    match s {
        "keep" => Ok(refine_protocol::record::ServiceLoss::Keep),
        "stop" => Ok(refine_protocol::record::ServiceLoss::Stop),
        _ => Err(format!("{s:?} is neither keep nor stop")),
    }
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

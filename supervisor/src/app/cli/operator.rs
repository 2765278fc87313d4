//! The arguments of the operator's commands over scopes and the runtime: `ps` to `capacity`.

use super::*;

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
    /// Only this state, as the STATE column shows it (`exited` implies --all; `residue`: live,
    /// its workload ended, what it left still runs; `live` excludes those).
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
    /// Live, with its workload ended: what it left holds the scope.
    Residue,
    Exited,
    Unverified,
    Corrupt,
}

impl StateArg {
    /// The assessment's state of the rows this filter keeps (`residue` is a kind of `live`).
    pub(in crate::app) fn state(self) -> State {
        match self {
            StateArg::Live | StateArg::Residue => State::Live,
            StateArg::Exited => State::Exited,
            StateArg::Unverified => State::Unverified,
            StateArg::Corrupt => State::Corrupt,
        }
    }

    /// Whether a row passes, as its STATE column reads.
    pub(in crate::app) fn keeps(self, r: &refine_protocol::api::ScopeView) -> bool {
        r.state == self.state()
            && match self {
                StateArg::Live => !crate::app::view::is_residue(r),
                StateArg::Residue => crate::app::view::is_residue(r),
                _ => true,
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
    #[arg(long, short = 't', value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
    pub grace: Option<Duration>,
    /// The polite signal of --grace (name or number: TERM, INT, HUP, USR1, 15, ...).
    #[arg(long, value_name = "SIG", value_parser = refine_supervisor::host::parse_signal, default_value = "TERM", requires = "grace")]
    pub signal: refine_supervisor::host::Signal,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Registration id, a unique prefix of it (4+ hex digits), or a label.
    pub id: String,
    /// Only the stdout artifact.
    #[arg(long, conflicts_with_all = ["stderr", "all"])]
    pub stdout: bool,
    /// Only the stderr artifact, printed to stdout (to pipe it on).
    #[arg(long, conflicts_with = "all")]
    pub stderr: bool,
    /// Both streams, the default: stdout to stdout, stderr to stderr (marked on a terminal).
    #[arg(long)]
    pub all: bool,
    /// Keep printing new output until the scope has exited and its output is all captured.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only the last N lines (then new ones with -f).
    #[arg(long, short = 'n', value_name = "N")]
    pub tail: Option<usize>,
    /// Only output written since DUR ago or TIME (`10m`, `2026-01-31 12:00`, RFC 3339), by the
    /// time index its guardian keeps (detached launches); refused for a scope without one.
    #[arg(long, value_name = "DUR|TIME", value_parser = view::parse_since)]
    pub since: Option<u64>,
    /// Only output written before DUR ago or TIME (as --since).
    #[arg(long, value_name = "DUR|TIME", value_parser = view::parse_since, conflicts_with = "follow")]
    pub until: Option<u64>,
    /// Each line prefixed with the time it was written (UTC, ms; the batch's time), both
    /// streams in the order they were written.
    #[arg(long, short = 't', conflicts_with = "follow")]
    pub timestamps: bool,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// One JSON document per line (an event's `cursor` resumes after it: --after).
    #[arg(long)]
    pub json: bool,
    /// Only events since DUR ago or TIME (`10m`, `2026-01-31 12:00`, RFC 3339).
    #[arg(long, value_name = "DUR|TIME", value_parser = view::parse_since)]
    pub since: Option<u64>,
    /// Only events before DUR ago or TIME (as --since); with -f, the stream ends there.
    #[arg(long, value_name = "DUR|TIME", value_parser = view::parse_since)]
    pub until: Option<u64>,
    /// Only events after this cursor (an event's `cursor` in --json): a reader that comes back
    /// with its last cursor sees every later event still kept exactly once.
    #[arg(long, value_name = "CURSOR", value_parser = parse_cursor)]
    pub after: Option<refine_supervisor::host::JournalCursor>,
    /// KEY=VALUE: `kind` (or `event`: launched, started, exited, receipt, stop_requested,
    /// stop_ended, unverified, adopted, collected), `id` (an id or a prefix), `label`. Repeated,
    /// one key widens (either kind) and different keys narrow, as docker's.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_event_filter)]
    pub filter: Vec<EventFilter>,
    /// Keep printing events as they are written, until --until or Ctrl-C.
    #[arg(long, short = 'f')]
    pub follow: bool,
}

/// One `events --filter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventFilter {
    Kind(refine_protocol::docs::EventKind),
    /// An id, a prefix of one, or a label.
    Scope(String),
}

pub(in crate::app) fn parse_event_filter(text: &str) -> Result<EventFilter, String> {
    use refine_protocol::docs::{EventKind, Vocabulary};
    let (key, value) = parse_kv(text)?;
    match key.as_str() {
        "kind" | "event" => EventKind::from_name(&value)
            .map(EventFilter::Kind)
            .ok_or_else(|| {
                format!(
                    "{value:?} is no event kind (one of {})",
                    EventKind::names().join(", ")
                )
            }),
        "id" if value.len() >= 4 && value.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(EventFilter::Scope(value))
        }
        "id" => Err(format!("{value:?} is no id (4 or more hex digits)")),
        "label" if !value.is_empty() => Ok(EventFilter::Scope(value)),
        "label" => Err("an empty label matches no event".to_owned()),
        _ => Err(format!("{key:?} is no filter (kind, id or label)")),
    }
}

pub(in crate::app) fn parse_ready(text: &str) -> Result<refine_supervisor::host::ReadyAsk, String> {
    text.parse()
}

pub(in crate::app) fn parse_memory_max(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        n if n < 1 << 20 => Err(format!(
            "{text:?} is below 1 MiB, too little to run a program"
        )),
        n => Ok(n),
    }
}

/// `--cpus`: cores as a decimal, kept as thousandths (0.001 to 1024 cores).
pub(in crate::app) fn parse_cpus(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a number of cores from 0.001 to 1024 (e.g. 0.5, 2)");
    let cores: f64 = text.trim().parse().map_err(|_| bad())?;
    if !cores.is_finite() || !(0.001..=1024.0).contains(&cores) {
        return Err(bad());
    }
    Ok((cores * 1000.0).round() as u32)
}

pub(in crate::app) fn parse_cursor(
    text: &str,
) -> Result<refine_supervisor::host::JournalCursor, String> {
    text.parse()
}

/// `wait --for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    Exited,
    Ready,
    Healthy,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Registration ids (or unique prefixes, or labels).
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// Give up after this long (exit 124, naming the scopes still live).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true)]
    pub timeout: Option<Duration>,
    /// What to wait for: `exited` (the default: the end, with the output and result recorded)
    /// or `ready` (a launch with --ready: ready, exit 0; failed to be, exit 1) or `healthy`
    /// (a launch with --health-cmd: healthy, exit 0; no check, or ended first, exit 1).
    #[arg(long = "for", value_name = "exited|ready|healthy", value_enum, default_value_t = WaitFor::Exited)]
    pub wait_for: WaitFor,
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
pub struct UpgradeArgs {
    /// How long to wait for the new binary to serve.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// The document whose schema to print (default: list the documents).
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(
        refine_protocol::schema::DOCUMENTS.iter().map(|(name, _)| *name)
    ))]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
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
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(crate::app::man::SUBCOMMANDS), conflicts_with = "dir")]
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
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "7d")]
    pub older_than: Duration,
    /// Forget whole exited registrations (record, proof, artifacts, lock) older than this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_negative_numbers = true, default_value = "30d")]
    pub forget_after: Duration,
    /// Check everything, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Time between two redraws of the table (and the window its CPU shares are taken over).
    #[arg(long, value_name = "DUR", value_parser = parse_interval, default_value = "2s")]
    pub interval: Duration,
    /// Print one sample and exit, as off a terminal (podman stats --no-stream).
    #[arg(long)]
    pub no_stream: bool,
    /// One JSON document: one sample of every live scope, then exit.
    #[arg(long)]
    pub json: bool,
}

/// `top --interval`: a duration of at least 10 ms (a redraw needs time to be read).
pub(in crate::app) fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_millis(10) {
        return Err(format!("{text:?} is shorter than 10ms"));
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// Share of cores and available memory automatic admission may spend.
    #[arg(long, default_value_t = CAPACITY_LIMIT_PERCENT, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub limit_percent: u8,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// What `main` should exit with after a command succeeded.
pub type ExitCode = i32;

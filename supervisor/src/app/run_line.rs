//! A `run` line read without building the parser (its cost: `scripts/bench-launch`).
//!
//! clap builds its definitions of the command line before it reads a word: for a `run`, that is
//! a large share of what the CLI does before it spawns the guardian (page faults in the parser's
//! code, many allocations). A `run` line is what a container entrypoint or a CI step
//! types on every launch, so [`parse`] reads the common shapes of it by hand and hands
//! everything else to clap:
//!
//! - before `run`: only `--home DIR` and `--port P` (also `--name=value`);
//! - after `run`: `run`'s own long options, each in the form clap takes (`--name value`,
//!   `--name=value`, a bare flag), and the globals again;
//! - then `--` and at least one word of command.
//!
//! Declined, and so parsed by clap with its full messages: `-h`/`--help`/`--version`, a short
//! option, a name it does not know, `--unique` without `--label`, an option given twice (only
//! `--env` and `--meta` repeat), a
//! value that is empty, starts with `-`, is not UTF-8 where the option wants text, or that the
//! option's own value parser (the same function clap calls) refuses, and an empty
//! `REFINE_HOME`. An accepted line gives exactly the [`Cli`] clap gives for it: the tests
//! compare both on every option, and check that every argument clap defines for `run` is known
//! here with the same shape (a new option that is not is simply parsed by clap).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::ValueEnum;

use super::cli::{
    parse_duration, parse_env, parse_kv, parse_size, Cli, Command, Deferred, KindArg, RunArgs,
    LOG_CAP_DEFAULT, STOP_GRACE_DEFAULT,
};

/// How an option of the `run` line takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A flag: no value.
    Flag,
    /// One value, at most once.
    Value,
    /// One value, repeatable (appended).
    Repeated,
}

/// Every option [`parse`] reads: its long name and shape (the tests hold this table to clap's).
pub(crate) const OPTIONS: &[(&str, Shape)] = &[
    ("home", Shape::Value),
    ("port", Shape::Value),
    ("label", Shape::Value),
    ("kind", Shape::Value),
    ("timeout", Shape::Value),
    ("idle-timeout", Shape::Value),
    ("kill-after", Shape::Value),
    ("cwd", Shape::Value),
    ("env", Shape::Repeated),
    ("meta", Shape::Repeated),
    ("pty", Shape::Flag),
    ("detach", Shape::Flag),
    ("unique", Shape::Flag),
    ("allow-setns", Shape::Flag),
    ("end-with-parent", Shape::Flag),
    ("wait-for-slot", Shape::Value),
    ("json", Shape::Flag),
    ("stop-grace", Shape::Value),
    ("log-cap", Shape::Value),
    ("user", Shape::Value),
    ("on-service-loss", Shape::Value),
    ("protect", Shape::Value),
    ("sandbox", Shape::Value),
    ("network", Shape::Value),
    ("memory-max", Shape::Value),
    ("cpus", Shape::Value),
    ("pids-max", Shape::Value),
    ("ready", Shape::Value),
    ("ready-timeout", Shape::Value),
    ("wait-ready", Shape::Flag),
    ("health-cmd", Shape::Value),
    ("health-interval", Shape::Value),
    ("health-timeout", Shape::Value),
    ("health-retries", Shape::Value),
    ("health-start-period", Shape::Value),
];

/// The [`Cli`] of a `run` line of the shapes above, `None` for anything else (see the module).
pub fn parse(args: &[OsString]) -> Option<Cli> {
    let mut line = Line::default();
    let mut words = args.iter().skip(1);
    // Globals, up to `run`.
    loop {
        let word = words.next()?;
        if word == "run" {
            break;
        }
        let (name, inline) = long_option(word)?;
        if name != "home" && name != "port" {
            return None;
        }
        line.take(name, inline, &mut words)?;
    }
    // `run`'s options, up to `--`.
    loop {
        let word = words.next()?;
        if word == "--" {
            break;
        }
        let (name, inline) = long_option(word)?;
        line.take(name, inline, &mut words)?;
    }
    let command: Vec<OsString> = words.cloned().collect();
    if command.is_empty() {
        return None;
    }
    line.finish(command, std::env::var_os("REFINE_HOME"))
}

/// `--name` or `--name=value` (the value as given); `None` for any other word.
fn long_option(word: &OsStr) -> Option<(&str, Option<&OsStr>)> {
    use std::os::unix::ffi::OsStrExt;
    let rest = word.as_bytes().strip_prefix(b"--")?;
    let (name, value) = match rest.iter().position(|&b| b == b'=') {
        Some(i) => (&rest[..i], Some(OsStr::from_bytes(&rest[i + 1..]))),
        None => (rest, None),
    };
    Some((std::str::from_utf8(name).ok()?, value))
}

/// What the line has said so far, by option.
#[derive(Default)]
struct Line {
    seen: Vec<&'static str>,
    home: Option<PathBuf>,
    port: Option<u16>,
    run: Option<RunArgs>,
}

impl Line {
    /// The run arguments given so far, clap's defaults where none is.
    fn run(&mut self) -> &mut RunArgs {
        self.run.get_or_insert_with(|| RunArgs {
            label: String::new(),
            kind: KindArg::Command,
            timeout: None,
            idle_timeout: None,
            kill_after: None,
            cwd: None,
            env: Vec::new(),
            meta: Vec::new(),
            pty: false,
            detach: false,
            unique: false,
            wait_for_slot: None,
            json: false,
            stop_grace: parse_duration(STOP_GRACE_DEFAULT).unwrap_or_default(),
            log_cap: parse_size(LOG_CAP_DEFAULT).unwrap_or_default(),
            user: None,
            allow_setns: false,
            protect: refine_protocol::record::ProtectAsk::All,
            sandbox: Default::default(),
            network: Default::default(),
            on_service_loss: None,
            end_with_parent: false,
            memory_max: None,
            cpus: None,
            pids_max: None,
            ready: None,
            ready_timeout: parse_duration("90s").unwrap_or_default(),
            wait_ready: false,
            health_cmd: None,
            health_interval: refine_supervisor::host::HEALTH_INTERVAL,
            health_timeout: refine_supervisor::host::HEALTH_TIMEOUT,
            health_retries: refine_supervisor::host::HEALTH_RETRIES,
            health_start_period: std::time::Duration::ZERO,
            command: Vec::new(),
        })
    }

    /// Takes option `name` (its value inline, or the next word); `None` declines the line.
    fn take<'a>(
        &mut self,
        name: &str,
        inline: Option<&'a OsStr>,
        words: &mut impl Iterator<Item = &'a OsString>,
    ) -> Option<()> {
        let &(name, shape) = OPTIONS.iter().find(|(n, _)| *n == name)?;
        if shape != Shape::Repeated {
            if self.seen.contains(&name) {
                return None;
            }
            self.seen.push(name);
        }
        if shape == Shape::Flag {
            if inline.is_some() {
                return None;
            }
            let run = self.run();
            match name {
                "pty" => run.pty = true,
                "detach" => run.detach = true,
                "unique" => run.unique = true,
                "allow-setns" => run.allow_setns = true,
                "end-with-parent" => run.end_with_parent = true,
                "wait-ready" => run.wait_ready = true,
                _ => run.json = true,
            }
            return Some(());
        }
        let value: &OsStr = match inline {
            Some(v) => v,
            None => words.next()?,
        };
        if value.is_empty() || value.as_encoded_bytes().first() == Some(&b'-') {
            return None;
        }
        let text = value.to_str();
        let duration = || text.and_then(|t| parse_duration(t).ok());
        match name {
            "home" => self.home = Some(PathBuf::from(value)),
            "port" => self.port = Some(text?.parse().ok()?),
            "label" => self.run().label = text?.to_owned(),
            "kind" => self.run().kind = KindArg::from_str(text?, false).ok()?,
            "timeout" => self.run().timeout = Some(duration()?),
            "idle-timeout" => self.run().idle_timeout = Some(duration()?),
            "kill-after" => self.run().kill_after = Some(duration()?),
            "wait-for-slot" => self.run().wait_for_slot = Some(duration()?),
            "stop-grace" => self.run().stop_grace = duration()?,
            "cwd" => self.run().cwd = Some(PathBuf::from(value)),
            "env" => {
                let pair = parse_env(value.to_owned()).ok()?;
                self.run().env.push(pair);
            }
            "meta" => {
                let pair = parse_kv(text?).ok()?;
                self.run().meta.push(pair);
            }
            "log-cap" => self.run().log_cap = parse_size(text?).ok()?,
            "memory-max" => self.run().memory_max = Some(super::cli::parse_memory_max(text?).ok()?),
            "cpus" => self.run().cpus = Some(super::cli::parse_cpus(text?).ok()?),
            "ready" => self.run().ready = Some(super::cli::parse_ready(text?).ok()?),
            "ready-timeout" => self.run().ready_timeout = duration()?,
            "pids-max" => {
                self.run().pids_max = Some(text?.parse::<u64>().ok().filter(|&n| n >= 1)?)
            }
            "on-service-loss" => {
                self.run().on_service_loss = Some(super::cli::parse_service_loss(text?).ok()?)
            }
            "protect" => self.run().protect = super::cli::parse_protect(text?).ok()?,
            "sandbox" => self.run().sandbox = super::cli::parse_sandbox(text?).ok()?,
            "network" => self.run().network = super::cli::parse_network(text?).ok()?,
            "health-cmd" => self.run().health_cmd = Some(text?.to_owned()),
            "health-interval" => self.run().health_interval = duration()?,
            "health-timeout" => self.run().health_timeout = duration()?,
            "health-retries" => {
                self.run().health_retries = text?.parse::<u32>().ok().filter(|&n| n >= 1)?
            }
            "health-start-period" => self.run().health_start_period = duration()?,
            _ => self.run().user = Some(text?.to_owned()),
        }
        Some(())
    }

    /// The [`Cli`]; `env_home` is `REFINE_HOME`, which clap reads where `--home` is not given.
    fn finish(mut self, command: Vec<OsString>, env_home: Option<OsString>) -> Option<Cli> {
        let home = match self.home.take() {
            Some(h) => Some(h),
            None => match env_home {
                Some(h) if h.is_empty() => return None,
                h => h.map(PathBuf::from),
            },
        };
        let port = self
            .port
            .unwrap_or(refine_supervisor::host::DEFAULT_SERVICE_PORT);
        let mut run = self.run.take().unwrap_or_else(|| {
            let mut line = Line::default();
            line.run();
            line.run.take().expect("just made")
        });
        run.command = command;
        // `--unique` requires `--label`, `--on-service-loss` `--detach`, and `--end-with-parent`
        // refuses `--detach`: clap's message says so.
        if run.unique && !self.seen.contains(&"label")
            || run.on_service_loss.is_some() && !run.detach
            || run.end_with_parent && run.detach
            || self.seen.contains(&"ready-timeout") && run.ready.is_none()
            || run.wait_ready && !(run.detach && run.ready.is_some())
            || run.health_cmd.is_none()
                && [
                    "health-interval",
                    "health-timeout",
                    "health-retries",
                    "health-start-period",
                ]
                .iter()
                .any(|f| self.seen.contains(f))
        {
            return None;
        }
        Some(Cli {
            home,
            port,
            command: Command::Run(Deferred(run)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn line(words: &[&str]) -> Vec<OsString> {
        std::iter::once("refine-supervisor")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn by_clap(args: &[OsString]) -> String {
        format!(
            "{:?}",
            Cli::try_parse_from(args).expect("clap accepts the line")
        )
    }

    /// Lines the fast path must take, each giving exactly clap's [`Cli`].
    const TAKEN: &[&[&str]] = &[
        &["run", "--", "true"],
        &["--home", "/tmp/h", "run", "--", "/bin/true"],
        &[
            "--home=/tmp/h",
            "--port",
            "7000",
            "run",
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
        &["--port=9", "run", "--home", "/x", "--", "a", "--", "-b"],
        &[
            "run", "--label", "build", "--kind", "quality", "--", "make", "-j2",
        ],
        &[
            "run",
            "--kind=agent",
            "--timeout",
            "1h30m",
            "--idle-timeout=5s",
            "--",
            "x",
        ],
        &[
            "run",
            "--kill-after",
            "2s",
            "--wait-for-slot",
            "500ms",
            "--",
            "x",
        ],
        &[
            "run",
            "--cwd",
            "/tmp",
            "--env",
            "A=1",
            "--env=B=2=3",
            "--",
            "env",
        ],
        &[
            "run", "--meta", "k=v", "--meta", "k2=", "--pty", "--detach", "--", "x",
        ],
        &[
            "run",
            "--json",
            "--stop-grace",
            "0s",
            "--log-cap",
            "10M",
            "--",
            "x",
        ],
        &["run", "--log-cap=0", "--user", "nobody:nogroup", "--", "id"],
        &["run", "--stop-grace=1.5s", "--label=a=b", "--", "x", "y"],
        &["run", "--unique", "--label", "nightly", "--", "x"],
    ];

    /// Lines it must leave to clap (which accepts some, refuses others).
    const DECLINED: &[&[&str]] = &[
        &["run", "--help"],
        &["run", "--unique", "--", "x"],
        &["--version"],
        &["run", "-h"],
        &["ps"],
        &["run", "true"],
        &["run", "--"],
        &["run", "--nope", "--", "x"],
        &["run", "--json", "--json", "--", "x"],
        &["run", "--json=true", "--", "x"],
        &["run", "--label", "a", "--label", "b", "--", "x"],
        &["run", "--label", "--", "x"],
        &["run", "--label=", "--", "x"],
        &["run", "--label", "-x", "--", "y"],
        &["run", "--timeout", "soon", "--", "x"],
        &["run", "--kind", "Agent", "--", "x"],
        &["run", "--env", "=1", "--", "x"],
        &["run", "--meta", "novalue", "--", "x"],
        &["run", "--log-cap", "1Q", "--", "x"],
        &["--port", "70000", "run", "--", "x"],
        &["--home", "/a", "run", "--home", "/b", "--", "x"],
        &["--label", "a", "run", "--", "x"],
        &["run", "--timeout"],
    ];

    #[test]
    fn a_taken_line_parses_exactly_as_clap_parses_it() {
        for words in TAKEN {
            let args = line(words);
            let fast = parse(&args).unwrap_or_else(|| panic!("declined {words:?}"));
            assert_eq!(format!("{fast:?}"), by_clap(&args), "{words:?}");
        }
    }

    #[test]
    fn anything_else_is_left_to_clap() {
        for words in DECLINED {
            assert!(parse(&line(words)).is_none(), "taken: {words:?}");
        }
    }

    #[test]
    fn arguments_that_are_not_utf8_are_taken_as_bytes() {
        use std::os::unix::ffi::OsStringExt;
        let mut args = line(&["run", "--cwd"]);
        args.push(OsString::from_vec(b"/tmp/\xff".to_vec()));
        args.push("--env".into());
        args.push(OsString::from_vec(b"K=\xfe".to_vec()));
        args.push("--".into());
        args.push(OsString::from_vec(b"printf\xff".to_vec()));
        let fast = parse(&args).expect("taken");
        assert_eq!(format!("{fast:?}"), by_clap(&args));
        // Text options want text: clap says so.
        let mut label = line(&["run", "--label"]);
        label.push(OsString::from_vec(b"\xff".to_vec()));
        label.extend(["--".into(), "x".into()]);
        assert!(parse(&label).is_none());
    }

    /// Every argument clap defines for `run` (and every global) is known here with the same
    /// shape, so no option of a taken line can mean something else to clap.
    #[test]
    fn the_table_is_clap_s_run_arguments() {
        use clap::{ArgAction, CommandFactory};
        let mut cli = Cli::command();
        cli.build();
        let run = cli
            .get_subcommands_mut()
            .find(|c| c.get_name() == "run")
            .expect("run");
        run.build();
        let mut defined: Vec<(String, Shape)> = run
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?.to_owned();
                let shape = match a.get_action() {
                    ArgAction::SetTrue => Shape::Flag,
                    ArgAction::Append => Shape::Repeated,
                    ArgAction::Set => Shape::Value,
                    ArgAction::Help | ArgAction::HelpLong | ArgAction::Version => return None,
                    other => panic!("--{long}: unexpected action {other:?}"),
                };
                Some((long, shape))
            })
            .collect();
        defined.sort_by(|a, b| a.0.cmp(&b.0));
        let mut known: Vec<(String, Shape)> =
            OPTIONS.iter().map(|&(n, s)| (n.to_owned(), s)).collect();
        known.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(known, defined);
    }

    #[test]
    fn refine_home_stands_in_for_home_and_an_empty_one_is_left_to_clap() {
        let taken = |env: Option<&str>| {
            let mut l = Line::default();
            l.take("label", Some(OsStr::new("x")), &mut std::iter::empty())?;
            l.finish(vec!["true".into()], env.map(OsString::from))
        };
        let home = |c: Option<Cli>| c.map(|c| c.home);
        assert_eq!(home(taken(Some("/h"))), Some(Some(PathBuf::from("/h"))));
        assert_eq!(home(taken(None)), Some(None));
        assert!(taken(Some("")).is_none());
    }
}

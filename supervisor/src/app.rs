//! The application: the operator command line, the foreground `run`, output formatting, the
//! socket client and `serve`. It sits on top of the library's mechanisms and nothing in the
//! library reaches back into it; `main` needs only [`Cli`], [`dispatch`] and [`CliError`].
//!
//! - `cli`: the clap definitions (the command line, its value parsers, the home);
//!   `commands`: one function per command, with its human output.
//! - `run`: `run` in the foreground (streaming, terminal forwarding, signals); `run_line`: a
//!   common `run` line read without building clap's parser.
//! - `completions`: the shell completion scripts, put right where the generator falls short.
//! - `serve`: the per-port service; `client`: its socket client.
//! - `metrics`: the service's Prometheus exposition (`serve --metrics`).
//! - `ops`: the face's operations on a runtime (list, show, stop, recover, gc), with the
//!   application's standard output (`output`), launch options (`launch_ask`) and follower
//!   wake-ups (`follow`).
//! - `view`: the human views drawn from the documents; `resolve`: ids, prefixes and labels.
//! - `top`: CPU, memory, pids and I/O of the live scopes, sampled and redrawn (H8).
//! - `man`: the manual, a page per subcommand.
//! - `error`: the application's errors.
//!
//! What the app does to a runtime it asks the face for ([`refine_supervisor::host`]): the
//! operations of `host::ops`, the types it re-exports (the errors, the values clap parses
//! into, health and readiness, the output index, the journal, the capacity census, `gc`'s
//! options), and the face's modules for what a host needs beside the operations, each naming
//! the part of a mechanism a host uses:
//! - `host::terminal`, `host::signals`: the foreground process's own terminal job, raw mode,
//!   window size, output forwarding and signal mask (`run`, `top`, the interrupts `stop`
//!   holds, the service's upgrade across `execve`, `main`'s inherited signal state).
//! - `host::observe`: a scope's figures and a process's state (`top`, `run`'s job control,
//!   the service's reap of guardians inherited across an upgrade).
//! - `host::files`: files written as the store writes them (the manual's pages, the
//!   journal's private folder).
//! - `host::cgroup`: where scopes get their cgroups (`serve --no-cgroup`, `--cgroup-root`).
//! - `host::receipts`: `receipt verify PATH`, a receipt file bound by the one assessment.
//! - `host::admission`: slots and the `unique` rule (`run` waits in `admit`, the service's
//!   FIFO drives `try_admit`).
//! - `host::stopping`: the stop driven step by step (the service's `stop_async`), the shared
//!   stop of a residue (`run`), a signal without a stop (the socket's `signal`).
//! - `host::service`: the service's own lock, its stall watch and its health queue.
//!
//! No path past the face remains:
//! `grep -rnE 'refine_supervisor::(kernel|store|end|history|hygiene|launch|capacity)' src/app`
//! finds no line (41 before issue 41's item 2 was finished), and the imports the grep does not
//! see (`commands`' grouped `history` import, the crate-root `Command` and `Supervisor`) name
//! the face too.

mod cli;
mod client;
mod commands;
mod completions;
mod error;
mod events;
mod follow;
mod health_view;
mod launch_ask;
mod man;
mod metrics;
mod output;
/// The documents of the contract and the library's conversions into them (the face's).
mod docs {
    pub(crate) use refine_supervisor::host::docs::*;
}
/// The operations on a runtime (the face's, E3) and what only the application adds: standard
/// output, the launch a command line or an API spec asks for, the follower's wake-ups.
mod ops {
    pub(crate) use super::follow::Changes;
    pub(crate) use super::launch_ask::{
        health_spec, launch_command, launch_options, LaunchOptions,
    };
    pub(crate) use super::output::{out, print_json};
    pub(crate) use refine_supervisor::host::ops::*;
}
mod resolve;
mod run;
mod run_line;
mod serve;
mod throttle;
mod top;
mod view;

pub use cli::{Cli, Command};
pub use commands::dispatch;

/// The command line: a common `run` line read by hand (`run_line`), anything else by clap.
pub fn parse_args(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    use clap::Parser;
    match run_line::parse(args) {
        Some(cli) => Ok(cli),
        None => Cli::try_parse_from(args),
    }
}

/// An error and its causes on one line (`op: cause: cause`, from `source()`), escaped for the
/// terminal (X6); only the candidates of an ambiguous id are lines of their own (their cells
/// are escaped by the table).
pub fn one_line(e: &CliError) -> String {
    refine_supervisor::error_chain(e)
        .split('\n')
        .map(view::escape)
        .collect::<Vec<_>>()
        .join("\n")
}
pub use error::CliError;

/// Whether to write colour codes to `stream`: only on a terminal, and never when `NO_COLOR` is
/// set to anything non-empty (no-color.org).
pub fn colour_on(stream: &impl std::os::fd::AsFd) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && rustix::termios::isatty(stream)
}

//! The commands (SPEC O1, O3, O4): [`dispatch`] runs one parsed command line ([`super::cli`])
//! and returns the exit code. Each command works from the files under `run/P` with the same
//! locks the service uses, and prints one JSON document with `--json`, else its human view.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::api::{LaunchAsk, Reply, Request};
use refine_protocol::RegistrationId;

use super::cli::*;
use super::docs::{
    forget_doc, retention_doc, CapacityDoc, DetachedSpawnFailedDoc, GcDoc, HolderDoc, HoldersDoc,
    LaunchedDoc, Outcome, PsDoc, ReapDoc, ReceiptDoc, ReceiptVerdictDoc, RecoverDoc, ScopeKind,
    State, Vocabulary, WhyDoc,
};
use super::error::{CliError, ClientError, ServiceError, SpecError};
use super::ops::{self, assess, list_views, out, print_json, show_doc};
use super::{client, resolve, run, serve, view};
use refine_supervisor::host::receipts;
use refine_supervisor::host::{ForgetOptions, ForgetReport, RetentionOptions, RetentionReport};
use refine_supervisor::host::{RegistryError, Runtime};

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
            let doc = super::docs::version_doc(&refine_supervisor::host::guardian_exe());
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
            refine_supervisor::host::cgroup::configure(match (&args.cgroup_root, args.no_cgroup) {
                (_, true) => refine_supervisor::host::cgroup::Setting::Off,
                (Some(root), false) => refine_supervisor::host::cgroup::Setting::Root(root.clone()),
                (None, false) => refine_supervisor::host::cgroup::Setting::from_env(),
            });
            match refine_supervisor::host::cgroup::base() {
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

mod history;
mod logs;
mod scopes;
mod stop;
use history::*;
use logs::*;
use scopes::*;
use stop::*;

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

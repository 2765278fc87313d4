//! `refine-supervisor`: the operator CLI and the service. `main` only parses, dispatches and
//! turns an error into one line on stderr and a non-zero exit; everything else is in
//! [`refine_supervisor::app`].

use clap::Parser;
use refine_supervisor::app::{self as cli, Cli};

/// Exit code of every failed command (clap's usage errors exit 2).
const FAILURE: i32 = 1;

fn main() {
    refine_supervisor::child_signals::reset(); // G11: before any thread, any child
    refine_supervisor::raise_nofile_limit(); // T6
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                e.exit();
            }
            eprintln!("refine-supervisor: {}", one_line_usage_error(&e, &args));
            std::process::exit(2);
        }
    };
    match cli::dispatch(cli) {
        Ok(code) => std::process::exit(code),
        // The reader went away (`... | head`): not an error of this command, and nothing more
        // can be said to it.
        Err(cli::CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            std::process::exit(0)
        }
        Err(e) => {
            let e = anyhow::Error::new(e);
            // `{:#}` joins the error chain on one line.
            eprintln!("refine-supervisor: error: {e:#}");
            std::process::exit(FAILURE);
        }
    }
}

/// clap's message reduced to one line; `run` without `--` gets a message that says so.
fn one_line_usage_error(e: &clap::Error, args: &[std::ffi::OsString]) -> String {
    let is_run = args.iter().skip(1).any(|a| a == "run");
    let has_dashes = args.iter().any(|a| a == "--");
    if is_run && !has_dashes {
        return "error: run: missing `--` before the command (usage: refine-supervisor run [OPTIONS] -- CMD [ARGS]...)".to_owned();
    }
    let text = e.render().to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    format!("{} (see --help)", first.trim())
}

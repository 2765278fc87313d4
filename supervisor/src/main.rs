//! `refine-supervisor`: the operator CLI and the service. `main` only parses, dispatches and
//! turns an error into one line on stderr and a non-zero exit; everything else is in
//! the `app` module, the application built on the library.

mod app;

use app::{self as cli, Command};

/// Exit code of every failed command (clap's usage errors exit 2).
const FAILURE: i32 = 1;

fn main() {
    refine_supervisor::host::signals::capture_inherited(); // W10: before anything changes it
    refine_supervisor::host::signals::reset(); // G11: before any thread, any child
    refine_supervisor::raise_nofile_limit(); // T6
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cli::parse_args(&args) {
        Ok(c) => c,
        Err(e) => usage_error(e),
    };
    // `RUST_LOG` traces a command on stderr; unset, nothing is installed (the service installs
    // its own subscriber). Colour only on a terminal, never with NO_COLOR.
    if !matches!(cli.command, Command::Serve(_)) && std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(cli::colour_on(&std::io::stderr()))
            .try_init();
    }
    match cli::dispatch(cli) {
        Ok(code) => std::process::exit(code),
        // The reader went away (`... | head`): not an error of this command, and nothing more
        // can be said to it.
        Err(cli::CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("refine-supervisor: error: {}", cli::one_line(&e));
            std::process::exit(FAILURE);
        }
    }
}

/// clap's own message, whole (argument names, suggestions, usage), under this program's one
/// error prefix; help and version go to stdout as clap writes them.
fn usage_error(e: clap::Error) -> ! {
    if !e.use_stderr() {
        e.exit()
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("refine-supervisor: error: {text}");
    std::process::exit(e.exit_code())
}

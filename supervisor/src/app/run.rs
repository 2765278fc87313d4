//! `run` without `--detach`: launch in this process, stream the output, exit with the workload's
//! code.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::time::Duration;

use refine_protocol::api::LaunchAsk;

use super::docs::{RunDoc, RunScope, StatusFields, StreamDoc};
use super::error::{CliError, ServiceError};
use super::ops::{admit, launch_request, print_json};
use crate::capture::StreamState;
use crate::error_chain;
use crate::launch::{LaunchOutcome, LaunchResult, ScopeState, Supervisor};
use crate::registry::{Runtime, Stream};

/// `run` without `--detach`: launch in this process, stream, exit with the workload's code.
/// Forwards the operator's keys and window resizes to an interactive launch's terminal, on two
/// detached threads that end with the input (or the process).
fn forward_terminal(input: crate::launch::InputWriter) -> Result<(), CliError> {
    let keys = input.clone();
    std::thread::Builder::new()
        .name("refine-keys".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match rustix::io::read(io::stdin(), &mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if keys.write_input(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break,
                }
            }
        })
        .map_err(|source| ServiceError::Io {
            op: "start the key forwarder",
            source,
        })?;
    let mut winch =
        signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH]).map_err(|source| {
            ServiceError::Io {
                op: "install the window-size handler",
                source,
            }
        })?;
    std::thread::Builder::new()
        .name("refine-winch".into())
        .spawn(move || {
            for _ in winch.forever() {
                if let Ok(size) = crate::pty::window_size(io::stdin().as_fd()) {
                    let _ = input.resize(size);
                }
            }
        })
        .map_err(|source| ServiceError::Io {
            op: "start the window-size forwarder",
            source,
        })?;
    Ok(())
}

pub fn run_embedded(rt: &Runtime, spec: LaunchAsk, json_out: bool) -> Result<i32, CliError> {
    // C4: the admission lock is held from the check until the registration is durable.
    let slot = admit(rt, &spec)?;
    let mut req = launch_request(&spec)?;
    if !json_out {
        req.on_output = Some(Box::new(|stream, bytes| {
            // Live streaming; a closed stdout of ours must not stop the capture.
            let _ = match stream {
                Stream::Stderr => io::stderr().write_all(bytes),
                _ => io::stdout()
                    .write_all(bytes)
                    .and_then(|()| io::stdout().flush()),
            };
        }));
    }
    // `run --pty` on a terminal is interactive: the workload's terminal takes the operator's
    // size, keys and resizes, and ours is raw meanwhile (restored when this function returns).
    let interactive = req.pty.is_some() && rustix::termios::isatty(io::stdin());
    if interactive {
        if let Ok(size) = crate::pty::window_size(io::stdin().as_fd()) {
            req.pty = Some(size);
        }
    }
    let sup = Supervisor::new(rt.clone());
    let handle = sup.launch(req).map_err(ServiceError::Launch)?;
    drop(slot);
    let _raw = if interactive {
        let raw =
            crate::pty::RawMode::enter(io::stdin().as_fd()).map_err(|e| ServiceError::Io {
                op: "put the terminal in raw mode",
                source: io::Error::other(e),
            })?;
        forward_terminal(handle.input_writer())?;
        Some(raw)
    } else {
        None
    };
    // SIGINT/SIGTERM/SIGHUP to `run` cancel the launch (the tree is stopped through the shared
    // stop); the workload's own process group does not see the terminal's SIGINT.
    let canceller = handle.canceller();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(|e| ServiceError::Io {
        op: "install signal handlers",
        source: e,
    })?;
    let sig_handle = signals.handle();
    let forwarder = std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            canceller.cancel();
        }
    });
    let result = handle.wait().map_err(ServiceError::Launch);
    sig_handle.close();
    let _ = forwarder.join();
    let mut result = result?;
    let code = exit_code(&result);
    // The `stop` scope policy (quality) is ending the scope on the engine's watch thread: see it
    // through before this process exits, or the stop would die with us.
    let mut doc = run_doc(&result);
    if result.scope == ScopeState::Stopping {
        match result.scope_watch.wait(POLICY_STOP_WAIT) {
            Some(end) if end.receipt.is_some() => doc.scope = RunScope::Exited,
            Some(end) => {
                doc.scope = RunScope::Unknown;
                doc.stop_failure = end.stop_failure.as_ref().map(|f| error_chain(f));
            }
            None => doc.scope = RunScope::Stopping,
        }
    }
    if json_out {
        print_json(&doc)?;
    } else if let Some(f) = doc.stop_failure {
        tracing::warn!(id = %result.id, error = %f, "scope stop failed");
        eprintln!(
            "refine-supervisor: warning: stopping the scope of {} failed: {f}",
            result.id
        );
    }
    Ok(code)
}

/// How long `run` waits for the `stop` scope policy to prove the scope's end.
const POLICY_STOP_WAIT: Duration = Duration::from_secs(10);

fn scope_name(s: &ScopeState) -> RunScope {
    match s {
        ScopeState::Exited(_) => RunScope::Exited,
        ScopeState::Live => RunScope::Live,
        ScopeState::Stopping => RunScope::Stopping,
        ScopeState::Unknown => RunScope::Unknown,
    }
}

/// The shell's view of a launch: the workload's code, 128+signal, 127/126 for a spawn failure.
fn exit_code(r: &LaunchResult) -> i32 {
    match (r.outcome, r.status.shell_code()) {
        (_, Some(c)) => c,
        (LaunchOutcome::SpawnFailed { errno }, None) if errno == libc::ENOENT => 127,
        (LaunchOutcome::SpawnFailed { .. }, None) => 126,
        _ => 1,
    }
}

/// The `run --json` document: id, outcome, exit_code or signal, stdout/stderr {complete, path}.
fn run_doc(r: &LaunchResult) -> RunDoc {
    let stream = |s: Stream| match r.capture.stream(s) {
        Some(c) => StreamDoc {
            complete: c.state == StreamState::Eof,
            path: Some(c.artifact.clone()),
            bytes: c.artifact_bytes,
            end: match &c.state {
                StreamState::Eof => "eof".to_owned(),
                StreamState::Failed(f) => format!("capture failure: {f}"),
                StreamState::Incomplete(i) => format!("incomplete: {i}"),
            },
        },
        None => StreamDoc {
            complete: false,
            path: None,
            bytes: 0,
            end: "not captured".to_owned(),
        },
    };
    RunDoc {
        id: r.id.to_string(),
        outcome: r.outcome.name(),
        errno: match r.outcome {
            LaunchOutcome::SpawnFailed { errno } => Some(errno),
            _ => None,
        },
        status: StatusFields::of(Some(r.status)),
        stdout: stream(Stream::Stdout),
        stderr: stream(Stream::Stderr),
        scope: scope_name(&r.scope),
        capture_receipt: r.capture_receipt.clone(),
        stop_failure: r.stop_failure.as_ref().map(|f| error_chain(f)),
    }
}

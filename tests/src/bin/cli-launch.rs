//! `cli-launch HOME PORT MODE -- CMD ARGS...`: makes one real managed scope for the CLI tests
//! through the launcher API (`launch::launch_registered`), with the workload's stdout/stderr
//! opened directly on its artifact files under `run/P/logs/`. Prints the registration id.
//!
//! - `wait`: waits for the scope's receipt, then exits (an `exited` registration).
//! - `hold`: stays, holding the registration lock as a live launcher does, until it is killed.
//! - `leave`: exits at once; the launch asks for no parent-death signal, so the scope stays
//!   live with its guardian and no launcher.
//!
//! `CLI_LAUNCH_TIMEOUT_MS`, if set, is recorded as the completion deadline (nobody in this
//! process enforces it: the service's maintenance loop does).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use refine_protocol::Limits;
use refine_supervisor::launch::env_policy::to_entries;
use refine_supervisor::launch::guardian::{GuardianEvent, LaunchConfig, Stdio};
use refine_supervisor::launch::{launch_registered_into, RegisteredLaunch};
use refine_supervisor::store::registry::{Runtime, Stream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (head, argv) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (&args[..], &[][..]),
    };
    let [home, port, mode] = head else {
        eprintln!("usage: cli-launch HOME PORT wait|hold|leave -- CMD ARGS...");
        std::process::exit(2);
    };
    let rt = Runtime::open(Path::new(home), port.parse().expect("port")).expect("runtime");
    let id = rt.new_id().expect("id");
    let (lock, pending) = rt.begin_registration(id).expect("registration lock");
    let open = |s: Stream| -> OwnedFd {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(rt.log_path(id, s))
            .expect("artifact")
            .into()
    };
    let stdin: OwnedFd = File::open("/dev/null").expect("/dev/null").into();
    let (reg, mut link) = launch_registered_into(
        &rt,
        pending,
        id,
        RegisteredLaunch {
            owner: String::new(),
            limits: Limits {
                completion_timeout_ms: std::env::var("CLI_LAUNCH_TIMEOUT_MS")
                    .ok()
                    .and_then(|v| v.parse().ok()),
                ..Limits::default()
            },
            ..refine_tests::stopkit::registered(
                &format!("cli-launch {mode}"),
                LaunchConfig {
                    env: to_entries(&std::env::vars_os().collect()),
                    pdeath_signal: (mode != "leave").then_some(rustix::process::Signal::KILL),
                    ..LaunchConfig::new(
                        argv.iter().map(Into::into).collect(),
                        Stdio::Fds([stdin, open(Stream::Stdout), open(Stream::Stderr)]),
                    )
                },
            )
        },
    )
    .expect("launch");
    println!("{id}");
    std::io::stdout().flush().expect("flush");
    match mode.as_str() {
        "wait" => {
            loop {
                match link.next_event(None).expect("event") {
                    Some(GuardianEvent::ScopeExited(_)) => {
                        // What a launcher does after the receipt: the scope's cgroup goes.
                        let _ = refine_supervisor::kernel::cgroup::finish(&reg);
                        break;
                    }
                    Some(GuardianEvent::ChannelClosed) => panic!("no receipt"),
                    _ => {}
                }
            }
            link.wait_guardian().expect("reap guardian");
        }
        "hold" => loop {
            if let Some(event @ (GuardianEvent::ChannelClosed | GuardianEvent::ScopeExited(_))) =
                link.next_event(None).expect("event")
            {
                if matches!(event, GuardianEvent::ScopeExited(_)) {
                    let _ = refine_supervisor::kernel::cgroup::finish(&reg);
                }
                // Keep holding the lock until killed, as a launcher that has not finished.
                std::thread::park();
            }
        },
        "leave" => {
            drop(lock);
            // The link's drop leaves a thread to reap the guardian; exit without waiting.
            std::process::exit(0);
        }
        other => panic!("unknown mode {other}"),
    }
    drop(lock);
}

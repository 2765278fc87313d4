//! Test helper for the fault-injection loop: a launcher that pauses at the gate.
//!
//! ```text
//! chaos-gate HOME PORT -- ARGV...
//! ```
//!
//! It does what `launch::launch_registered` does — spawns the guardian, receives its hello,
//! writes the registration durably — and then, before it says *start*, prints
//!
//! ```text
//! gated ID WPID WSTART
//! ```
//!
//! and waits for one line on stdin (end of file: it says *start* too). The test stops the gated
//! child (`SIGSTOP`, state `T`) in that window. It prints `start sent` once it said *start*,
//! then follows the guardian's events
//! until the receipt (`scope STATUS END`) or a closed channel (`closed`), reaps the guardian by
//! pid and exits 0. Killed at any point, it leaves the guardian to notice the closed channel.
//!
//! The workload's stdio is `/dev/null`; its environment is this process's, with
//! `REFINE_OWNER=ID` on top. The parent-death signal is SIGKILL (0).

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use refine_protocol::record::Registration;
use refine_supervisor::launch::guardian::{self, GuardianEvent, LaunchConfig, Stdio, OWNER_VAR};
use refine_supervisor::store::registry::Runtime;

fn say(line: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn null() -> OwnedFd {
    File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .expect("/dev/null")
        .into()
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let split = args.iter().position(|a| a == "--");
    let (Some(split), [home, port, ..]) = (split, args.as_slice()) else {
        eprintln!("usage: chaos-gate HOME PORT -- ARGV...");
        std::process::exit(2);
    };
    let argv: Vec<OsString> = args[split + 1..].to_vec();
    let port: u16 = port.to_str().and_then(|p| p.parse().ok()).expect("port");
    let rt = Runtime::open(Path::new(home), port).expect("runtime");
    let id = rt.new_id().expect("id");
    // Held as a live launcher holds it, until this process ends.
    let (_lock, pending) = rt.begin_registration(id).expect("registration lock");

    let mut env: Vec<OsString> = std::env::vars_os()
        .filter(|(k, _)| k != OWNER_VAR)
        .map(|(k, v)| {
            let mut e = k;
            e.push("=");
            e.push(v);
            e
        })
        .collect();
    env.push(format!("{OWNER_VAR}={id}").into());
    let proof_path = rt.proof_path(id);
    let mut link = guardian::spawn(LaunchConfig {
        registration: id,
        runtime: rt.id(),
        proof_path,
        env,
        ..LaunchConfig::new(argv.clone(), Stdio::Fds([null(), null(), null()]))
    })
    .expect("spawn the guardian");
    let hello = *link.hello();
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let registration = Registration {
        owner: "tests".into(),
        argv: argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: std::env::current_dir()
            .map(|c| text(&c))
            .unwrap_or_default(),
        started_at_unix_ms: refine_supervisor::kernel::clock::unix_ms(),
        ..refine_tests::history::record(&rt, id, "chaos-gate", hello)
    };
    if let Err(e) = rt.commit_registration(pending, &registration) {
        let _ = link.abort();
        panic!("register: {e}");
    }
    say(&format!(
        "gated {id} {} {}",
        hello.workload.pid, hello.workload.start_time
    ));
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    link.start().expect("start");
    say("start sent");
    loop {
        match link.next_event(None).expect("event") {
            Some(GuardianEvent::ScopeExited(r)) => {
                say(&format!("scope {:?} {:?}", r.status, r.end));
                break;
            }
            Some(GuardianEvent::ChannelClosed) => {
                say("closed");
                break;
            }
            _ => {}
        }
    }
    link.wait_guardian().expect("reap the guardian");
}

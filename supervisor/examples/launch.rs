//! Launches one command through the guardian and prints its events and receipt.
//!
//! ```text
//! cargo run -p refine-supervisor --example launch -- [--home DIR] -- CMD ARGS...
//! ```
//! The workload inherits this terminal. The registration, proof and receipt land under
//! `<home>/run/7411/` (home: the workspace, unless `--home` is given).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context};
use refine_protocol::record::{Kind, Limits, ScopePolicy};
use refine_protocol::Receipt;
use refine_supervisor::launch::guardian::{self, GuardianEvent, Stdio};
use refine_supervisor::launch::{launch_registered, RegisteredLaunch};
use refine_supervisor::store::registry::{self, Runtime, DEFAULT_PORT};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let mut home: Option<PathBuf> = None;
    let mut argv: Vec<OsString> = Vec::new();
    while let Some(a) = args.next() {
        if a == "--home" {
            home = Some(args.next().context("--home needs a directory")?.into());
        } else if a == "--" {
            argv.extend(args.by_ref());
        } else {
            argv.push(a);
            argv.extend(args.by_ref());
        }
    }
    if argv.is_empty() {
        bail!("usage: launch [--home DIR] -- CMD ARGS...");
    }
    let home = match home {
        Some(h) => h,
        None => registry::default_home().context("cannot derive the home from this executable")?,
    };
    let rt = Runtime::open(&home, DEFAULT_PORT)?;
    let id = rt.new_id()?;
    let (reg, mut link) = launch_registered(
        &rt,
        id,
        RegisteredLaunch {
            kind: Kind::Command,
            label: "example".into(),
            owner: std::env::var("USER").unwrap_or_default(),
            purpose: BTreeMap::new(),
            argv,
            env: std::env::vars_os().collect(),
            cwd: None,
            stdio: Stdio::Inherit,
            stdin_path: None,
            pty: false,
            new_session: false,
            limits: Limits::default(),
            scope_policy: ScopePolicy::Keep,
            pdeath_signal: Some(refine_supervisor::kernel::signal::Signal::TERM),
            start_timeout: guardian::DEFAULT_START_TIMEOUT,
            guardian_exe: None,
            credentials: None,
            signal_state: None,
        },
    )?;
    eprintln!(
        "registered {} (guardian pid {}, workload pid {})",
        reg.id, reg.hello.guardian.pid, reg.hello.workload.pid
    );
    loop {
        match link.next_event(None)? {
            Some(GuardianEvent::ScopeExited(receipt)) => {
                print_receipt(&receipt, &reg.proof_path);
                break;
            }
            Some(GuardianEvent::ChannelClosed) => {
                bail!("guardian closed its channel without a receipt")
            }
            Some(event) => eprintln!("event: {event:?}"),
            None => {}
        }
    }
    link.wait_guardian()?;
    // Read it back from the proof file: the receipt on disk is the proof, not the frame.
    let on_disk = Receipt::decode(&std::fs::read(&reg.proof_path)?)?;
    println!(
        "receipt on disk at {} decodes and matches: {}",
        reg.proof_path,
        on_disk.registration == reg.id
    );
    Ok(())
}

fn print_receipt(r: &Receipt, path: &str) {
    println!("receipt {path}");
    println!("  registration  {}", r.registration);
    println!("  runtime       {}", r.runtime);
    println!("  boot id       {}", r.boot_id);
    println!(
        "  guardian      pid {} start {}",
        r.guardian.pid, r.guardian.start_time
    );
    println!(
        "  workload      pid {} start {}",
        r.workload.pid, r.workload.start_time
    );
    println!("  status        {:?} ({:?})", r.status, r.end);
    println!("  reaped        {}", r.reaped);
    println!("  proof         dev {} ino {}", r.proof.dev, r.proof.ino);
}

//! The facade's showcase (SPEC E1): launches one command through the guardian, streams nothing,
//! waits, and prints the result and the guardian's receipt, blocking or from a tokio task.
//!
//! ```text
//! cargo run -p refine-supervisor --example launch -- [--home DIR] [--async] -- CMD ARGS...
//! ```
//! The registration, proof, output and receipt land under `<home>/run/7411/` (home: the
//! workspace, as the CLI chooses it, unless `--home` is given).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use refine_supervisor::store::registry::Stream;
use refine_supervisor::{Command, LaunchResult, Receipt, ScopeState, Supervisor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let mut home: Option<PathBuf> = None;
    let mut asynchronous = false;
    let mut argv: Vec<OsString> = Vec::new();
    while let Some(a) = args.next() {
        if a == "--home" {
            home = Some(args.next().ok_or("--home needs a directory")?.into());
        } else if a == "--async" {
            asynchronous = true;
        } else if a == "--" {
            argv.extend(args.by_ref());
        } else {
            argv.push(a);
            argv.extend(args.by_ref());
        }
    }
    let Some((program, rest)) = argv.split_first() else {
        return Err("usage: launch [--home DIR] [--async] -- CMD ARGS...".into());
    };
    let mut supervisor = match home {
        Some(h) => Supervisor::open(h)?,
        None => Supervisor::open_default()?,
    };
    if let Some(guardian) = refine_supervisor::host::built_guardian() {
        supervisor = supervisor.with_guardian_exe(guardian);
    }
    let command = Command::new(program)
        .args(rest)
        .label("example")
        .purpose("from", "examples/launch.rs")
        .timeout(Duration::from_secs(3600))
        .kill_after(Duration::from_secs(5));
    let mut child = supervisor.spawn(command)?;
    let reg = child.registration();
    eprintln!(
        "registered {} (guardian pid {}, workload pid {})",
        reg.id, reg.hello.guardian.pid, reg.hello.workload.pid
    );
    let proof_path = reg.proof_path.clone();
    let result = if asynchronous {
        tokio::runtime::Builder::new_current_thread()
            .build()?
            .block_on(child.wait_async())?
    } else {
        child.wait()?
    };
    print_result(&result);
    if let ScopeState::Exited(receipt) = &result.scope {
        print_receipt(receipt, &proof_path);
        // Read it back from the proof file: the receipt on disk is the proof, not the frame.
        let on_disk = Receipt::decode(&std::fs::read(&proof_path)?)?;
        println!(
            "receipt on disk at {proof_path} decodes and matches: {}",
            on_disk == *receipt
        );
    }
    Ok(())
}

fn print_result(r: &LaunchResult) {
    println!("launch {}", r.id);
    println!("  outcome       {:?}", r.outcome);
    println!("  status        {:?}", r.status);
    for s in [Stream::Stdout, Stream::Stderr] {
        match r.complete_output(s) {
            Ok(bytes) => println!("  {s:?}        {:?}", String::from_utf8_lossy(bytes)),
            Err(e) => println!("  {s:?}        incomplete: {e}"),
        }
    }
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

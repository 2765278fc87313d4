//! Builds a process tree for the stop tests and reports readiness over its stdout.
//!
//! ```text
//! tree-builder [--sessions S] [--groups G] [--leaves N] [--ignorers K] [--forker] [--stopped]
//!              [--orphan] [--ignore-term] [--then stay|exit]
//! tree-builder --stand-in-guardian --proof PATH --registration HEX --runtime HEX [tree options]
//! ```
//!
//! The tree: S session leaders (`setsid`), each with G process groups, each group a leader plus N
//! leaves. The first K leaves ignore SIGTERM; `--forker` adds a leaf that keeps forking sleepers;
//! `--stopped` adds a leaf that SIGSTOPs itself after reporting. `--orphan` makes the session
//! leaders exit once their groups are up (their descendants are reparented); `--ignore-term`
//! makes the root itself ignore SIGTERM. Every node writes one
//! line to an internal pipe once it is set up; the root prints `ready <nodes>` when all are up,
//! then stays (default) or exits (`--then exit`).
//!
//! `--stand-in-guardian` runs a minimal guardian in front of the tree: subreaper bit, proof file
//! (`O_EXCL`), `hello ...` line with the identities, reaps until `ECHILD`, then writes a receipt
//! encoded by the protocol crate. (Used until and besides the real `refine-guardian`.)
#![deny(unsafe_code)]
// The tree is deliberately left unreaped by its builders: the subreaper above reaps it.
#![allow(clippy::zombie_processes)]

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use refine_protocol::{
    BootId, ProcessWitness, ProofIdentity, Receipt, RegistrationId, RuntimeId, ScopeEnd,
    WorkloadStatus,
};
use rustix::process::{getpid, Pid, Signal, WaitOptions};

#[derive(Clone, Debug, Default)]
struct Plan {
    sessions: u32,
    groups: u32,
    leaves: u32,
    ignorers: u32,
    forker: bool,
    stopped: bool,
    orphan: bool,
    exit_when_ready: bool,
}

impl Plan {
    fn nodes(&self) -> u32 {
        self.sessions * (1 + self.groups * (1 + self.leaves))
            + u32::from(self.forker)
            + u32::from(self.stopped)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("@session") => session(&args[1..]),
        Some("@group") => group(&args[1..]),
        Some("@leaf") => leaf(&args[1..]),
        Some("@forker") => forker(),
        _ => root(&args),
    }
}

fn me() -> Command {
    Command::new(std::env::current_exe().expect("current_exe"))
}

fn up() {
    // One short write to the inherited pipe: atomic below PIPE_BUF.
    let _ = std::io::stdout().write_all(format!("up {}\n", getpid().as_raw_nonzero()).as_bytes());
    let _ = std::io::stdout().flush();
}

fn idle() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn root(args: &[String]) {
    let mut plan = Plan {
        sessions: 3,
        groups: 3,
        leaves: 5,
        ..Plan::default()
    };
    let mut stand_in = false;
    let mut proof = None;
    let mut reg = None;
    let mut runtime = None;
    // The tree options, passed on to the workload when running as a stand-in guardian.
    let mut tree_args: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().expect("option value");
        match a.as_str() {
            "--stand-in-guardian" => stand_in = true,
            "--proof" => proof = Some(value()),
            "--registration" => reg = RegistrationId::parse(&value()),
            "--runtime" => runtime = RuntimeId::parse(&value()),
            "--forker" => plan.forker = true,
            "--stopped" => plan.stopped = true,
            "--orphan" => plan.orphan = true,
            "--ignore-term" => ignore_sigterm(),
            opt @ ("--sessions" | "--groups" | "--leaves" | "--ignorers" | "--then") => {
                let v = value();
                match opt {
                    "--sessions" => plan.sessions = v.parse().expect("number"),
                    "--groups" => plan.groups = v.parse().expect("number"),
                    "--leaves" => plan.leaves = v.parse().expect("number"),
                    "--ignorers" => plan.ignorers = v.parse().expect("number"),
                    _ => plan.exit_when_ready = v == "exit",
                }
                tree_args.push(a.clone());
                tree_args.push(v);
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        if matches!(
            a.as_str(),
            "--forker" | "--stopped" | "--orphan" | "--ignore-term"
        ) {
            tree_args.push(a.clone());
        }
    }
    if stand_in {
        stand_in_guardian(
            &tree_args,
            &proof.expect("--proof"),
            reg.expect("--registration"),
            runtime.expect("--runtime"),
        );
    }
    build(&plan);
}

/// Builds the tree below this process, prints `ready N`, then stays or exits.
fn build(plan: &Plan) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    let out = || Stdio::from(writer.try_clone().expect("dup"));
    let mut ignorers_left = plan.ignorers;
    for _ in 0..plan.sessions {
        let ign = ignorers_left.min(plan.groups * plan.leaves);
        ignorers_left -= ign;
        me().arg("@session")
            .arg(plan.groups.to_string())
            .arg(plan.leaves.to_string())
            .arg(ign.to_string())
            .arg(if plan.orphan { "orphan" } else { "stay" })
            .stdout(out())
            .spawn()
            .expect("spawn session");
    }
    if plan.forker {
        me().arg("@forker")
            .stdout(out())
            .spawn()
            .expect("spawn forker");
    }
    if plan.stopped {
        me().args(["@leaf", "stop"])
            .stdout(out())
            .spawn()
            .expect("spawn stopped leaf");
    }
    drop(writer);
    let mut lines = BufReader::new(reader).lines();
    let want = plan.nodes();
    let mut n = 0;
    while n < want {
        match lines.next() {
            Some(Ok(l)) if l.starts_with("up ") => n += 1,
            Some(Ok(_)) => {}
            _ => break,
        }
    }
    println!("ready {n}");
    let _ = std::io::stdout().flush();
    if plan.exit_when_ready {
        std::process::exit(0);
    }
    idle();
}

fn session(args: &[String]) {
    let groups: u32 = args[0].parse().expect("groups");
    let leaves: u32 = args[1].parse().expect("leaves");
    let mut ignorers: u32 = args[2].parse().expect("ignorers");
    let orphan = args[3] == "orphan";
    rustix::process::setsid().expect("setsid");
    for _ in 0..groups {
        let ign = ignorers.min(leaves);
        ignorers -= ign;
        me().arg("@group")
            .arg(leaves.to_string())
            .arg(ign.to_string())
            .process_group(0)
            .spawn()
            .expect("spawn group");
    }
    up();
    if orphan {
        std::process::exit(0);
    }
    idle();
}

fn group(args: &[String]) {
    let leaves: u32 = args[0].parse().expect("leaves");
    let ignorers: u32 = args[1].parse().expect("ignorers");
    for i in 0..leaves {
        let mut cmd = me();
        cmd.arg("@leaf");
        if i < ignorers {
            cmd.arg("ignore-term");
        }
        cmd.spawn().expect("spawn leaf");
    }
    up();
    idle();
}

fn leaf(args: &[String]) {
    for a in args {
        match a.as_str() {
            "ignore-term" => ignore_sigterm(),
            "stop" => {}
            _ => {}
        }
    }
    up();
    if args.iter().any(|a| a == "stop") {
        let _ = rustix::process::kill_process(getpid(), Signal::STOP);
    }
    idle();
}

fn forker() {
    up();
    for _ in 0..300 {
        let _ = me()
            .arg("@leaf")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        std::thread::sleep(Duration::from_millis(10));
    }
    idle();
}

#[allow(unsafe_code)]
fn ignore_sigterm() {
    // SAFETY: single-threaded helper process; installing SIG_IGN has no handler code to race.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}

fn read_boot_id() -> BootId {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    BootId::parse(text.trim()).expect("boot id")
}

/// Field `n` (1-based, n >= 3) of `/proc/PID/stat`, parsed after the last `)`.
fn stat_field(pid: Pid, n: usize) -> u64 {
    let text =
        std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())).expect("stat");
    let after = &text[text.rfind(')').expect(")") + 1..];
    after
        .split_ascii_whitespace()
        .nth(n - 3)
        .and_then(|v| v.parse().ok())
        .expect("stat field")
}

fn start_time(pid: Pid) -> u64 {
    stat_field(pid, 22)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A minimal guardian: subreaper, proof file, hello, reap to ECHILD, receipt.
fn stand_in_guardian(tree_args: &[String], proof: &str, reg: RegistrationId, runtime: RuntimeId) {
    rustix::process::set_child_subreaper(Some(getpid())).expect("subreaper");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(proof)
        .expect("create proof");
    let meta = file.metadata().expect("fstat proof");
    let proof_id = ProofIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let boot = read_boot_id();
    let me_pid = getpid();
    let guardian = ProcessWitness {
        pid: me_pid.as_raw_nonzero().get() as u32,
        start_time: start_time(me_pid),
    };
    let child = me()
        .args(tree_args)
        .process_group(0)
        .spawn()
        .expect("spawn workload");
    let wpid = Pid::from_child(&child);
    let workload = ProcessWitness {
        pid: wpid.as_raw_nonzero().get() as u32,
        start_time: start_time(wpid),
    };
    // From /proc: getsid() says 0 for a session outside this pid namespace.
    let sid = stat_field(me_pid, 6);
    println!(
        "hello {} {} {} {} {} {} {} {} {}",
        guardian.pid,
        guardian.start_time,
        workload.pid,
        workload.start_time,
        workload.pid,
        sid,
        proof_id.dev,
        proof_id.ino,
        boot
    );
    let _ = std::io::stdout().flush();
    drop(child);
    let mut status = WorkloadStatus::Unknown;
    let mut reaped = 0u32;
    let mut exited_at = 0;
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, st))) => {
                reaped += 1;
                if pid == wpid {
                    exited_at = now_ns();
                    status = if let Some(code) = st.exit_status() {
                        WorkloadStatus::Exited(code)
                    } else if let Some(sig) = st.terminating_signal() {
                        WorkloadStatus::Signaled(sig)
                    } else {
                        WorkloadStatus::Unknown
                    };
                }
            }
            Ok(None) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::CHILD) => break,
            Err(e) => panic!("waitpid: {e}"),
        }
    }
    let receipt = Receipt {
        registration: reg,
        runtime,
        boot_id: boot,
        guardian,
        workload,
        proof: proof_id,
        status,
        end: ScopeEnd::Completed,
        spawn_errno: 0,
        reaped,
        workload_exited_at_ns: exited_at,
        written_at_ns: now_ns(),
    };
    file.write_all(&receipt.encode()).expect("write receipt");
    file.sync_data().expect("fdatasync");
    std::process::exit(0);
}

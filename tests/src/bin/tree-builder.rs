//! Builds a process tree for the stop tests and reports readiness over its stdout.
//!
//! ```text
//! tree-builder [--sessions S] [--groups G] [--leaves N] [--ignorers K] [--forker] [--stopped]
//!              [--vforker] [--orphan] [--ignore-term] [--then stay|exit]
//! ```
//!
//! The tree: S session leaders (`setsid`), each with G process groups, each group a leader plus N
//! leaves. The first K leaves ignore SIGTERM; `--forker` adds a leaf that keeps forking sleepers;
//! `--stopped` adds a leaf that SIGSTOPs itself after reporting; `--vforker` a leaf blocked in
//! a vfork wait on a child that stopped itself before exec. `--orphan` makes the session
//! leaders exit once their groups are up (their descendants are reparented); `--ignore-term`
//! makes the root itself ignore SIGTERM (inherited by the whole tree). Every node writes one line
//! to an internal pipe once it is set up; the root prints `ready <nodes>` when all are up, then
//! stays (default) or exits (`--then exit`).
#![deny(unsafe_code)]
// The tree is deliberately left unreaped by its builders: the subreaper above reaps it.
#![allow(clippy::zombie_processes)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::{getpid, Signal};

#[derive(Clone, Debug, Default)]
struct Plan {
    sessions: u32,
    groups: u32,
    leaves: u32,
    ignorers: u32,
    forker: bool,
    stopped: bool,
    vforker: bool,
    orphan: bool,
    exit_when_ready: bool,
}

impl Plan {
    fn nodes(&self) -> u32 {
        self.sessions * (1 + self.groups * (1 + self.leaves))
            + u32::from(self.forker)
            + u32::from(self.stopped)
            + u32::from(self.vforker)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("@session") => session(&args[1..]),
        Some("@group") => group(&args[1..]),
        Some("@leaf") => leaf(&args[1..]),
        Some("@forker") => forker(),
        Some("@vforker") => vforker(),
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
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().expect("option value");
        match a.as_str() {
            "--forker" => plan.forker = true,
            "--stopped" => plan.stopped = true,
            "--vforker" => plan.vforker = true,
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
            }
            other => panic!("unknown argument {other}"),
        }
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
    if plan.vforker {
        me().arg("@vforker")
            .stdout(out())
            .spawn()
            .expect("spawn vforker");
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

/// Reports, then `clone(CLONE_VFORK)`s a child that stops itself before it would exec: the parent
/// stays blocked in the kernel's vfork wait (state D) until the child exits.
#[allow(unsafe_code)]
fn vforker() {
    up();
    // SAFETY: a raw clone without CLONE_VM gives the child its own copy of memory (as fork does);
    // the child only makes async-signal-safe calls (getpid, kill, _exit) and never returns into
    // Rust code that could observe the missing atfork handling.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_VFORK | libc::SIGCHLD,
            0,
            0,
            0,
            0,
        )
    };
    if pid == 0 {
        // SAFETY: as above; only async-signal-safe calls in the child.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGSTOP);
            libc::_exit(0);
        }
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

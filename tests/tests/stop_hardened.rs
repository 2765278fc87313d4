//! The stop and the assessment where real hosts break them (SPEC T5, T6, A6, A7): a main thread
//! that called `pthread_exit`, a stray process carrying the owner marker, a forged receipt, and a
//! tree larger than the descriptor limit.

use refine_tests::cli_support;

use std::ffi::OsString;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use refine_protocol::receipt::{ScopeEnd, WorkloadStatus};
use refine_protocol::Receipt;
use refine_supervisor::end::assess::{self, KERNEL_BOOT};
use refine_supervisor::end::stop::{self, StopOptions, StopOutcome};
use refine_supervisor::kernel::procfs;
use refine_tests::stopkit::*;
use refine_tests::wait_until;

const TREE_BUILDER: &str = env!("CARGO_BIN_EXE_tree-builder");
const ZOMBIE_LEADER: &str = env!("CARGO_BIN_EXE_zombie-leader");
const STOP_RUN: &str = env!("CARGO_BIN_EXE_stop-run");

/// The raw state letter of `/proc/PID/stat` and the number of threads in `/proc/PID/task`.
fn raw_state(pid: u32) -> Option<(char, usize)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count();
    Some((state, threads))
}

#[test]
fn a_main_thread_that_called_pthread_exit_is_stopped_with_proof() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch_guardian(&rt, Path::new(ZOMBIE_LEADER), &[]);
    assert_eq!(scope.wait_ready(), 1);
    let workload = scope.reg.hello.workload;
    // The leader reads `Z` while its worker thread runs.
    assert!(
        wait_until(GENEROUS, || raw_state(workload.pid)
            .is_some_and(|(s, threads)| s == 'Z' && threads >= 2)),
        "the leader never showed Z with a live thread: {:?}",
        raw_state(workload.pid)
    );
    // It is a live member of the scope.
    assert!(
        scope.members().iter().any(|m| m.witness == workload),
        "{:?}",
        scope.members()
    );
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert!(report.assessment.receipt().is_some());
    scope.reap();
    assert!(!exists(&workload), "{:?}", raw_state(workload.pid));
}

#[test]
fn run_timeout_ends_a_pthread_exit_program() {
    let home = cli_support::Home::new();
    let mut run = home.spawn_cli(
        &["run", "--json", "--timeout", "2s", "--", ZOMBIE_LEADER],
        Stdio::piped(),
    );
    let what = "run --timeout 2s of a pthread_exit program";
    cli_support::assert_returns(&mut run, GENEROUS, what);
    let rows = home.ps();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["state"], "exited", "{rows:?}");
}

#[test]
fn an_owner_marker_outside_the_tree_is_never_killed_while_the_guardian_lives() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch_tree(&rt, TREE_BUILDER, "--sessions 1 --groups 1 --leaves 1");
    scope.wait_ready();
    // A process that inherited the marker (an `at` job, say) but lives outside the guardian's
    // tree: this test process is its parent.
    let mut stray = Command::new("sleep")
        .arg("1000")
        .env("REFINE_OWNER", scope.reg.id.to_string())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn stray");
    let stray_pid = rustix::process::Pid::from_raw(stray.id() as i32).expect("pid");
    let stray_w = procfs::stat(stray_pid).expect("stat").witness();
    assert!(wait_until(GENEROUS, || procfs::owner_marker(stray_pid)
        .ok()
        .flatten()
        == Some(scope.reg.id)));

    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    let alive = running(&stray_w);
    let _ = stray.kill();
    let _ = stray.wait();
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert!(alive, "the stray marker process was killed: {report:#?}");
    assert!(
        !report.signalled.iter().any(|s| matches!(
            s.target,
            stop::Target::Process(w) if w == stray_w
        )),
        "{report:#?}"
    );
    scope.reap();
}

#[test]
fn a_receipt_forged_by_a_live_workload_is_live() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch_tree(&rt, TREE_BUILDER, "--sessions 1 --groups 1 --leaves 1");
    scope.wait_ready();
    let reg = &scope.reg;
    // What a workload of the same uid can build from its registration record.
    let forged = Receipt {
        registration: reg.id,
        runtime: reg.runtime,
        boot_id: reg.hello.boot_id,
        guardian: reg.hello.guardian,
        workload: reg.hello.workload,
        proof: reg.hello.proof,
        status: WorkloadStatus::Exited(0),
        end: ScopeEnd::Completed,
        spawn_errno: 0,
        reaped: 1,
        workload_exited_at_ns: 1,
        written_at_ns: 2,
        usage: Some(refine_protocol::TreeUsage::default()),
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&reg.proof_path)
        .expect("open proof file");
    f.seek(SeekFrom::Start(0)).expect("seek");
    f.write_all(&forged.encode()).expect("forge");
    drop(f);
    assert!(
        matches!(
            assess::check_proof(&rt, reg),
            assess::ProofState::Verified(_)
        ),
        "the forged receipt should verify on its own"
    );

    let a = assess::assess(&rt, reg, &KERNEL_BOOT);
    assert!(a.is_live(), "a forged receipt of a live scope: {a:?}");
    let report = stop::stop(&rt, reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert!(report.killed > 0, "{report:#?}");
    let receipt = report.assessment.receipt().expect("receipt");
    assert_ne!(receipt.written_at_ns, 2, "the guardian's own receipt");
    scope.reap();
}

/// 20 sessions x 9 groups x (leader + 10 leaves) = 2,000 processes, stopped by a process whose
/// soft and hard RLIMIT_NOFILE are 1,024: fewer descriptors than members.
#[test]
fn two_thousand_processes_stop_with_proof_under_1024_descriptors() {
    let (home, rt) = home_and_runtime();
    let mut scope = launch_tree(&rt, TREE_BUILDER, "--sessions 20 --groups 9 --leaves 10");
    assert_eq!(scope.wait_ready(), 2000);
    let before = scope.members();
    assert!(before.len() > 2000, "{}", before.len());
    let script = "ulimit -n 1024 && exec \"$@\"";
    let args: Vec<OsString> = vec![
        home.path().into(),
        "7000".into(),
        scope.reg.id.to_string().into(),
        "30".into(),
    ];
    let out = Command::new("sh")
        .args(["-c", script, "sh", STOP_RUN])
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("stop-run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("outcome=stopped state=exited"),
        "{}: {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    scope.reap();
    let left = survivors(&before);
    assert!(
        left.is_empty(),
        "{} survivors: {:?}",
        left.len(),
        &left[..left.len().min(5)]
    );
}

/// The uid of a process (`/proc/PID/status`, real uid).
fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// T6: one member refuses the stop's signals (EPERM: a stopping process without CAP_KILL, a
/// member of another uid). The others are still killed; the stop reports the refusal and stays
/// unproven. Root only (it needs a second uid and a capability to drop).
#[test]
fn a_member_that_refuses_signals_does_not_keep_the_others_alive() {
    if refine_tests::skip_unless_root("needs root (a member of another uid, and CAP_KILL to drop)")
    {
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let (home, rt) = home_and_runtime();
    let script = "setpriv --reuid=65534 --regid=65534 --clear-groups sleep 1000 & \
                  sleep 1000 & echo ready 2; wait";
    let mut scope = launch_guardian(&rt, Path::new("/bin/sh"), &["-c", script]);
    assert_eq!(scope.wait_ready(), 2);
    let mut members = Vec::new();
    assert!(wait_until(GENEROUS, || {
        members = scope.members();
        members.len() == 3 && members.iter().any(|m| uid_of(m.witness.pid) == Some(65534))
    }));
    let foreign = members
        .iter()
        .find(|m| uid_of(m.witness.pid) == Some(65534))
        .expect("the other uid's member")
        .witness;
    let ours: Vec<_> = members
        .iter()
        .filter(|m| m.witness != foreign)
        .cloned()
        .collect();

    // The stop runs as root without CAP_KILL: the kernel refuses signals to the other uid only.
    let out = Command::new("setpriv")
        .args(["--bounding-set", "-kill", "--", STOP_RUN])
        .arg(home.path())
        .args(["7000", &scope.reg.id.to_string(), "2"])
        .stdin(Stdio::null())
        .output()
        .expect("stop-run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let foreign_alive = running(&foreign);
    let left = survivors(&ours);
    // Clean up with full privileges before asserting (the guardian exits once all are gone).
    for w in std::iter::once(foreign).chain(ours.iter().map(|m| m.witness)) {
        if let Ok(v) = refine_supervisor::kernel::signal::Verified::open(w) {
            let _ = v.signal(refine_supervisor::kernel::signal::Signal::KILL);
        }
    }
    scope.reap();
    if scope.reg.cgroup.as_ref().is_some_and(|c| c.holds_scope()) {
        // F4: the scope has a cgroup of its own, and the kernel kills its members for whoever
        // may write its cgroup.kill, whatever their uid: nothing refuses, the stop is proven.
        assert!(out.status.success(), "{err}");
        assert!(!foreign_alive, "cgroup.kill left the other uid's member");
        assert!(left.is_empty(), "{left:?}");
        assert!(assess::assess(&rt, &scope.reg, &KERNEL_BOOT).is_exited());
        return;
    }
    assert!(!out.status.success(), "the stop cannot be proven: {err}");
    assert!(
        err.contains("refused") && err.contains(&format!("pid {}", foreign.pid)),
        "{err}"
    );
    assert!(foreign_alive, "the refusing member was signalled after all");
    assert!(
        left.is_empty(),
        "the refusal kept others alive: {left:?}; {err}"
    );
    assert!(assess::assess(&rt, &scope.reg, &KERNEL_BOOT).is_exited());
}

/// T5: `run --timeout` of a command that itself runs through a guardian. The outer stop kills
/// the inner workload, lets the inner guardian write its receipt and exit, and only then proves
/// the outer scope: both registrations end `exited`.
#[test]
fn a_nested_run_ends_with_both_receipts() {
    let home = cli_support::Home::new();
    let sup = refine_tests::bin("refine-supervisor");
    let port = home.port.to_string();
    let inner: Vec<&str> = vec![
        sup.to_str().expect("utf-8 path"),
        "--home",
        home.path().to_str().expect("utf-8 path"),
        "--port",
        &port,
        "run",
        "--",
        "sleep",
        "1000",
    ];
    let mut args = vec!["run", "--json", "--timeout", "2s", "--"];
    args.extend(inner);
    let mut run = home.spawn_cli(&args, Stdio::null());
    cli_support::assert_returns(&mut run, GENEROUS, "the outer run");
    // Whatever is left is stopped before asserting.
    let rows = home.wait_settled(2);
    assert!(rows.iter().all(|r| r["state"] == "exited"), "{rows:#?}");
}

/// T6: every command raises its own soft descriptor limit, and the workload still gets the limit
/// the command was started with.
#[test]
fn the_workload_keeps_the_descriptor_limit_the_command_started_with() {
    let home = cli_support::Home::new();
    let sup = refine_tests::bin("refine-supervisor");
    let script = "ulimit -Sn 512 && exec \"$@\"";
    let out = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&sup)
        .arg("--home")
        .arg(home.path())
        .args(["--port", &home.port.to_string(), "run", "--", "sh", "-c"])
        .arg("ulimit -Sn; grep 'Max open files' /proc/$PPID/limits")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {text}", out.status);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("512"), "{text}");
    // The guardian (the workload's parent) runs with the raised limit.
    let raised = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("the guardian's soft limit");
    assert!(raised > 512, "{text}");
}

//! Issue 39 (L1, L2, L4): the scope owns its output. A detached scope's guardian drains its
//! stdout and stderr into the artifacts itself, so a `kill -9` of the service breaks no pipe:
//! the workload writes on, ends with its own status, and the artifact holds every byte.

mod cli_support;

use std::io::Write;
use std::path::Path;

use cli_support::{describe, detach, show, Home, Serving, DEADLINE};
use refine_tests::wait_until;

/// Makes a FIFO at `path` (the workload waits on it: the test's event, not a sleep).
fn fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// Opens the FIFO for writing and closes it: the workload's `read` returns.
fn release(path: &Path) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the fifo");
    f.write_all(b"go\n").expect("write the fifo");
}

fn artifact(home: &Home, id: &str, stream: &str) -> String {
    std::fs::read_to_string(home.run_dir().join("logs").join(format!("{id}.{stream}")))
        .unwrap_or_default()
}

/// L1, L4: `kill -9` of `serve` while a detached scope writes. Before, the service held the
/// read ends: the workload's next write broke (SIGPIPE, "signal 13") and the artifact held the
/// lines written before the kill. Now it writes its 2,000 lines to the end, exits 7 of its own,
/// and the restarted service finds it exited with a verified receipt.
#[test]
fn a_killed_service_breaks_no_detached_writer() {
    let home = Home::new();
    let mut svc = Serving::start(&home, &[]);
    let gate = home.path().join("gate");
    fifo(&gate);
    let script = format!(
        "for i in 1 2 3 4; do echo line$i; done; read go < {gate}; \
         i=5; while [ $i -le 2000 ]; do echo line$i; echo err$i >&2; i=$((i+1)); done; exit 7",
        gate = gate.display()
    );
    let id = detach(&home, &["sh", "-c", &script]);
    assert!(
        wait_until(DEADLINE, || artifact(&home, &id, "stdout")
            .contains("line4\n")),
        "the first lines never reached the artifact"
    );
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    // The workload writes on only now, with no service running.
    release(&gate);
    let _svc = Serving::start(&home, &[]);
    home.wait_ended(&id);
    let doc = show(&home, &id);
    let out = artifact(&home, &id, "stdout");
    let want: String = (1..=2000).map(|i| format!("line{i}\n")).collect();
    assert!(
        out == want,
        "stdout holds {} of 2000 lines (last {:?}); show: {doc}",
        out.lines().count(),
        out.lines().last()
    );
    let err = artifact(&home, &id, "stderr");
    assert_eq!(err.lines().count(), 1996, "stderr: {doc}");
    let args = ["show", "--json", &id];
    let text = doc.to_string();
    assert!(
        !text.contains("\"signal\":13") && !text.contains("PIPE"),
        "the writer died of SIGPIPE: {text}"
    );
    assert_eq!(
        doc.pointer("/receipt/exit_code").and_then(|v| v.as_i64()),
        Some(7),
        "{}",
        describe(&args, &home.cli(&args))
    );
}

/// L6: `serve --live-restore` on SIGTERM leaves its launches running (for an upgrade or a
/// restart): the writer goes on, and the next service adopts it. Without the flag, W8 holds
/// (SIGTERM ends the launches: `serve_shutdown.rs`).
#[test]
fn live_restore_keeps_the_launches_across_a_restart() {
    let home = Home::new();
    let mut svc = Serving::start(&home, &["--live-restore"]);
    let gate = home.path().join("gate");
    fifo(&gate);
    let script = format!(
        "echo before; read go < {gate}; i=0; while [ $i -lt 500 ]; do echo after$i; i=$((i+1)); done",
        gate = gate.display()
    );
    let id = detach(&home, &["sh", "-c", &script]);
    assert!(
        wait_until(DEADLINE, || artifact(&home, &id, "stdout")
            .contains("before\n")),
        "the first line never reached the artifact"
    );
    svc.signal(rustix::process::Signal::TERM);
    assert!(
        svc.wait().success(),
        "serve --live-restore did not exit cleanly"
    );
    assert_eq!(
        home.state(&id),
        "live",
        "the launch did not outlive the service"
    );
    release(&gate);
    let _svc = Serving::start(&home, &[]);
    home.wait_ended(&id);
    let doc = show(&home, &id);
    assert_eq!(doc["receipt"]["exit_code"], 0, "{doc}");
    let out = artifact(&home, &id, "stdout");
    assert_eq!(out.lines().count(), 501, "{out}");
}

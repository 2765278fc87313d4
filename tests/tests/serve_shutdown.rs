//! W8: what happens to the service's own launches when `serve` stops. SIGTERM: SIGTERM to each
//! launch, the grace (`--shutdown-grace`), then the shared stop for the rest; every one ends
//! `exited` with a receipt. A SIGKILLed service asks the guardians for nothing (the launch frame
//! says "no parent-death signal"): its launches keep running until the next recovery.
//! W7 for the service: a detached launch's completion deadline ends the residue its workload
//! left.

use refine_tests::cli_support;

use std::time::{Duration, Instant};

use cli_support::*;
use refine_tests::wait_until;

fn stdout_of(home: &Home, id: &str) -> String {
    std::fs::read_to_string(home.run_dir().join("logs").join(format!("{id}.stdout")))
        .unwrap_or_default()
}

#[test]
fn sigterm_to_serve_forwards_term_waits_the_grace_and_stops_the_rest() {
    let (home, mut svc) =
        Home::with_service(&["--maintenance-every", "200ms", "--shutdown-grace", "2s"]);
    let polite = detach(
        &home,
        &[
            "sh",
            "-c",
            "trap 'echo bye; exit 0' TERM; echo ready; sleep 600 & wait",
        ],
    );
    let stubborn = detach(&home, &[env!("CARGO_BIN_EXE_term-ignorer")]);
    let residue = detach(&home, &["sh", "-c", "sleep 600 & echo ready; exit 0"]);
    for id in [&polite, &stubborn, &residue] {
        assert!(
            wait_until(DEADLINE, || stdout_of(&home, id).contains("ready")),
            "{id} never printed ready"
        );
        assert_eq!(home.state(id), "live");
    }
    let t = Instant::now();
    svc.signal(rustix::process::Signal::TERM);
    assert!(svc.wait().success(), "serve's own status");
    // The grace was waited (the ignorer needs it), not much more.
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    for id in [&polite, &stubborn, &residue] {
        let s = show(&home, id);
        assert_eq!(s["state"], "exited", "{id}: {s}");
        assert!(s["receipt"].is_object(), "{id}: {s}");
    }
    // The polite one ran its trap and exited 0: SIGTERM came before any kill.
    assert!(stdout_of(&home, &polite).contains("bye"));
    assert_eq!(show(&home, &polite)["receipt"]["exit_code"], 0);
    // The ignorer saw SIGTERM, then was killed.
    assert!(stdout_of(&home, &stubborn).contains("term"));
    let log = std::fs::read_to_string(home.run_dir().join("service.log")).unwrap();
    assert!(log.contains("shutdown"), "{log}");
}

/// L4, L6: a SIGKILLed service leaves its launches running (no parent-death signal); the next
/// service's recovery adopts what asked to be kept (the default) and stops what asked to be
/// stopped, with a receipt.
#[test]
fn a_sigkilled_service_leaves_its_launches_running_until_recovery() {
    let (home, mut svc) = Home::with_service(&["--maintenance-every", "200ms"]);
    let id = detach(&home, &["sh", "-c", "echo ready; exec sleep 600"]);
    let stopped = cli_support::detach_with(
        &home,
        &["--on-service-loss", "stop"],
        &["sh", "-c", "echo ready; exec sleep 600"],
    );
    for id in [&id, &stopped] {
        assert!(wait_until(DEADLINE, || stdout_of(&home, id).contains("ready")));
    }
    let [_, workload] = witnesses(&home, &id);
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    // No parent-death signal: the guardian does not kill the workload when its launcher dies.
    // (Negative control: `run` asks for SIGKILL on launcher loss, see `cli.rs`.) Give the
    // guardian time to have acted on its channel's end, then check.
    let [guardian, _] = witnesses(&home, &id);
    assert!(alive(guardian.0, guardian.1));
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(workload.0, workload.1), "the workload was killed");
    assert_eq!(home.state(&id), "live");
    // The next service's recovery ends the one that asked for it, with a receipt, and adopts
    // the other.
    let mut svc = Serving::start(&home, &["--maintenance-every", "200ms"]);
    home.wait_state(&stopped, "exited");
    assert!(show(&home, &stopped)["receipt"].is_object());
    let log = std::fs::read_to_string(home.run_dir().join("service.log")).unwrap_or_default();
    assert!(
        wait_until(DEADLINE, || std::fs::read_to_string(
            home.run_dir().join("service.log")
        )
        .unwrap_or_default()
        .contains("adopted")),
        "recovery did not report the adoption: {log}"
    );
    assert!(
        alive(workload.0, workload.1),
        "the kept workload was stopped"
    );
    assert_eq!(home.state(&id), "live");
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    assert!(show(&home, &id)["receipt"].is_object());
    svc.signal(rustix::process::Signal::TERM);
    assert!(svc.wait().success());
}

#[test]
fn serve_help_states_the_shutdown_rule() {
    let home = Home::new();
    let out = home.cli(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--shutdown-grace"), "{help}");
    assert!(!help.contains("guardians outlive it"), "{help}");
    // Bind first: the help says recovery runs behind the socket.
    assert!(help.contains("recovery runs behind it"), "{help}");
}

/// W7: `run --detach --timeout` ends the residue after the workload exited.
#[test]
fn a_detached_launch_deadline_ends_its_residue() {
    let (home, mut svc) = Home::with_service(&["--maintenance-every", "200ms"]);
    let mut args = vec!["run", "--detach", "--timeout", "2s", "--"];
    args.extend_from_slice(&["sh", "-c", "sleep 1000 & exit 0"]);
    let out = home.cli_ok(&args);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let t = Instant::now();
    home.wait_state(&id, "exited");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    svc.signal(rustix::process::Signal::TERM);
    assert!(svc.wait().success());
}

/// W7: the service's idle deadline (for a registration it did not launch) counts input and
/// signals as activity, as the launching engine does: a launch that only takes input, then only
/// signals, each for longer than its idle deadline, completes. The negative control, with
/// neither, is ended as `idle_timeout`.
#[test]
fn the_services_idle_deadline_counts_input_and_signals() {
    use refine_protocol::Kind;
    use refine_supervisor::launch::{LaunchOutcome, LaunchRequest, StdinMode, Supervisor};
    use refine_supervisor::store::registry::Runtime;

    let home = Home::new();
    let rt = Runtime::open(home.path(), home.port).expect("runtime");
    let sup = Supervisor::new(rt).with_guardian_exe(refine_tests::bin("refine-guardian"));
    let mut svc = Serving::start(&home, &["--maintenance-every", "200ms"]);
    let launch = |active: bool| {
        let mut r = LaunchRequest::new(Kind::Command, ["sh", "-c", "while read l; do :; done"]);
        r.idle_timeout = Some(Duration::from_millis(1500));
        r.stdin = StdinMode::Pipe;
        let h = sup.launch(r).expect("launch");
        let pace = Duration::from_millis(250);
        if active {
            // Pacing, not synchronization: the activity itself is what is tested.
            for _ in 0..10 {
                h.write_input(b"x\n").expect("input");
                std::thread::sleep(pace);
            }
            for _ in 0..10 {
                h.signal(libc::SIGWINCH).expect("signal");
                std::thread::sleep(pace);
            }
            h.close_input();
        }
        let id = h.id();
        (id, h.wait().expect("result"))
    };
    let (id, active) = launch(true);
    assert_eq!(active.outcome, LaunchOutcome::Completed, "{id}: {active:?}");
    let (_, idle) = launch(false);
    assert_eq!(idle.outcome, LaunchOutcome::IdleTimeout);
    svc.signal(rustix::process::Signal::TERM);
    assert!(svc.wait().success());
}

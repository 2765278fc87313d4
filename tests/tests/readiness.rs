//! H6 (issue 43, item 1): readiness. `run --ready notify` (sd_notify's READY=1 on
//! $NOTIFY_SOCKET, from a process of the scope) and `--ready cmd=...` (a probe, each run a
//! scope of its own); `starting` → `ready`, or `failed` after `--ready-timeout` (the scope is
//! then stopped: outcome `timed_out`) or when the main process ends first; `run --detach
//! --wait-ready`, `wait --for ready`, the socket's `wait` `until: ready`, `ps`, `show`, events.

use refine_tests::cli_support;

use cli_support::*;
use serde_json::{json, Value};

/// A workload that notifies as sd_notify does (a datagram of assignments to the abstract
/// socket NOTIFY_SOCKET names), then sleeps.
const NOTIFIER: &str = r#"
import os, socket, sys, time
addr = os.environ["NOTIFY_SOCKET"]
if addr.startswith("@"):
    addr = "\0" + addr[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b"STATUS=warming up", addr)
s.sendto(b"READY=1\nSTATUS=serving", addr)
time.sleep(600)
"#;

fn events(home: &Home, kind: &str) -> Vec<Value> {
    let out = home.cli(&["events", "--json", "--filter", &format!("kind={kind}")]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_notify_launch_is_starting_until_ready_1_and_wait_ready_returns_then() {
    let (home, _svc) = Home::with_service(&[]);
    let id = cli_support::detach_with(
        &home,
        &["--ready", "notify", "--wait-ready", "--label", "web"],
        &["python3", "-c", NOTIFIER],
    );
    // --wait-ready returned: the record already says ready.
    let doc = home.json(&["show", "--json", &id]);
    assert_eq!(doc["readiness"]["state"], "ready", "{doc:#}");
    assert_eq!(doc["readiness"]["status"], "serving", "{doc:#}");
    assert_eq!(home.row(&id)["ready"], "ready");
    let shown = String::from_utf8_lossy(&home.cli(&["show", &id]).stdout).into_owned();
    assert!(shown.contains("Ready: ready (notify)"), "{shown}");
    let ps = String::from_utf8_lossy(&home.cli(&["ps"]).stdout).into_owned();
    assert!(
        ps.lines()
            .any(|l| l.contains("web") && l.contains(" ready ")),
        "{ps}"
    );
    let ready = events(&home, "ready");
    assert_eq!(ready.len(), 1, "{ready:#?}");
    assert_eq!(ready[0]["ready_status"], "serving");
    let human = home.cli(&["events", "--filter", "kind=ready"]);
    let human = String::from_utf8_lossy(&human.stdout).into_owned();
    assert!(human.trim_end().ends_with("(web): serving"), "{human}");
    let out = home.cli(&["wait", "--for", "ready", "--timeout", "5s", &id]);
    assert!(out.status.success(), "{}", describe(&["wait"], &out));
    home.cli(&["stop", &id]);
}

#[test]
fn a_datagram_from_outside_the_scope_does_not_make_it_ready() {
    let (home, _svc) = Home::with_service(&[]);
    let id = cli_support::detach_with(
        &home,
        &["--ready", "notify", "--ready-timeout", "0"],
        &["sleep", "600"],
    );
    // This test process is no process of the scope: its READY=1 is dropped.
    let name = format!("\0refine-notify/{id}");
    let sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            &name.as_bytes()[1..],
        )
        .unwrap();
    sock.send_to_addr(b"READY=1", &addr).unwrap();
    // Time must pass for a negative: a second in which nothing makes it ready.
    let args = ["wait", "--for", "ready", "--timeout", "1s", &id];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(124), "{}", describe(&args, &out));
    assert_eq!(home.row(&id)["ready"], "starting");
    let log = std::fs::read_to_string(home.run_dir().join("service.log")).unwrap_or_default();
    assert!(
        log.contains("dropped a notify datagram from outside the scope"),
        "{log}"
    );
    home.cli(&["stop", &id]);
}

#[test]
fn a_probe_command_makes_it_ready_and_each_probe_is_a_proven_scope() {
    let home = Home::new();
    let flag = home.path().join("up");
    let probe = format!("cmd=test -e {}", flag.display());
    let mut run = home
        .command(&[
            "run", "--label", "svc", "--ready", &probe, "--", "sleep", "600",
        ])
        .spawn()
        .unwrap();
    let id = home.wait_labelled("svc");
    // At least one probe failed before the flag exists.
    let probed = refine_tests::wait_until(DEADLINE, || {
        home.json(&["show", "--json", &id])["readiness"]["probes"]
            .as_u64()
            .is_some_and(|n| n >= 1)
    });
    assert!(probed);
    assert_eq!(home.row(&id)["ready"], "starting");
    std::fs::write(&flag, b"").unwrap();
    let out = home.cli(&["wait", "--for", "ready", "--timeout", "30s", &id]);
    assert!(out.status.success(), "{}", describe(&["wait"], &out));
    let probes: Vec<Value> = home.json(&["ps", "-a", "--json"])["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["label"] == "svc.ready")
        .cloned()
        .collect();
    assert!(probes.len() >= 2, "{probes:#?}");
    for p in &probes {
        let id = p["id"].as_str().unwrap();
        home.wait_ended(id);
        assert_eq!(home.state(id), "exited", "a probe without its receipt");
    }
    home.cli(&["stop", &id]);
    wait_bounded(&mut run, DEADLINE, "run after the stop");
}

#[test]
fn not_ready_in_time_stops_the_scope_with_outcome_timed_out() {
    let home = Home::new();
    let args = words("run --ready notify --ready-timeout 1s --kill-after 0 -- sleep 600");
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(124), "{}", describe(&args, &out));
    let id = home.json(&["ps", "-a", "--json"])["registrations"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let doc = home.json(&["show", "--json", &id]);
    assert_eq!(doc["state"], "exited", "{doc:#}");
    assert_eq!(doc["result"]["outcome"], "timed_out", "{doc:#}");
    assert_eq!(doc["readiness"]["state"], "failed", "{doc:#}");
    assert_eq!(doc["readiness"]["reason"], "not ready within 1s", "{doc:#}");
    let stopped = events(&home, "stop_requested");
    assert_eq!(stopped[0]["cause"], "ready_timeout", "{stopped:#?}");
    assert_eq!(events(&home, "not_ready").len(), 1);
}

#[test]
fn a_workload_that_ends_before_it_is_ready_fails_its_readiness() {
    let home = Home::new();
    let out = home.cli(&["run", "--ready", "notify", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    let id = home.json(&["ps", "-a", "--json"])["registrations"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = home.cli(&["wait", "--for", "ready", "--timeout", "30s", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&["wait"], &out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ended before it was ready"),
        "{}",
        describe(&["wait"], &out)
    );
}

#[test]
fn the_socket_launches_with_ready_and_waits_until_ready() {
    let (_home, _svc, mut conn) = served();
    let mut call = |req: Value| conn.call(req);
    let r = call(
        json!({"v": 1, "op": "launch", "argv": ["python3", "-c", NOTIFIER], "ready": "notify"}),
    );
    let id = r["result"]["launched"]["id"].as_str().unwrap().to_owned();
    let w = call(json!({"v": 1, "op": "wait", "id": id, "until": "ready", "timeout_ms": 30000}));
    assert_eq!(w["result"]["wait"]["scopes"][0]["ready"], "ready", "{w}");
    assert_eq!(w["result"]["wait"]["timed_out"], false, "{w}");
    let bad = call(json!({"v": 1, "op": "launch", "argv": ["true"], "ready": "soon"}));
    assert_eq!(bad["ok"], false, "{bad}");
    call(json!({"v": 1, "op": "stop", "id": id}));
}

/// s6's notification descriptor: `--ready fd=N` puts a pipe on descriptor N of the workload (and
/// nothing else past stdio); a newline written on it makes the scope ready, its end without one
/// fails the readiness. Both a service launch (its guardian captures: seven descriptors sent)
/// and a foreground one (four).
#[test]
fn a_newline_on_the_notification_descriptor_makes_it_ready() {
    let (home, _svc) = Home::with_service(&[]);
    let id = cli_support::detach_with(
        &home,
        &["--ready", "fd=9", "--wait-ready"],
        &words("sh -c 'ls /proc/self/fd > fds; echo >&9; exec 9>&-; exec sleep 600'"),
    );
    let doc = home.json(&["show", "--json", &id]);
    assert_eq!(doc["readiness"]["state"], "ready", "{doc:#}");
    assert_eq!(doc["readiness"]["fd"], 9, "{doc:#}");
    let cwd = doc["record"]["cwd"].as_str().unwrap().to_owned();
    let fds = std::fs::read_to_string(std::path::Path::new(&cwd).join("fds")).unwrap();
    let _ = std::fs::remove_file(std::path::Path::new(&cwd).join("fds"));
    // stdio, the descriptor ls opened for /proc/self/fd, and 9: nothing else leaked in.
    let mut open: Vec<u32> = fds.lines().filter_map(|l| l.trim().parse().ok()).collect();
    open.sort_unstable();
    assert!(open.contains(&9), "{open:?}");
    assert!(open.len() <= 5, "descriptors past stdio: {open:?}");
    home.cli(&["stop", &id]);

    // Foreground, and the descriptor closed without a newline.
    let args = words("run --ready fd=3 -- sh -c 'exec 3>&-; sleep 0.1; exit 4'");
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&args, &out));
    let closed = events(&home, "not_ready");
    assert_eq!(closed.len(), 1, "{closed:#?}");
    assert!(
        closed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("closed its readiness descriptor"),
        "{closed:#?}"
    );
    let bad = home.cli(&["run", "--ready", "fd=2", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
}

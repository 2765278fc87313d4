//! H7 (issue 43, item 2): health checks with docker's HEALTHCHECK semantics. `run --health-cmd`
//! (and the socket's `health_*` fields): each probe a proven scope of its own (label
//! `<label>.health`), `starting` → `healthy` / `unhealthy`, a probe past its timeout stopped and
//! counted a failure, the last probes in `show`, `ps`'s `running (healthy)`, `health` events;
//! the service probes its launches and resumes an earlier service's; a foreground `run` probes
//! its own. Nothing is stopped for its health.

use refine_tests::cli_support;

use cli_support::*;
use serde_json::{json, Value};

fn health(home: &Home, id: &str) -> Value {
    home.json(&["show", "--json", id])["health"].clone()
}

fn wait_health(home: &Home, id: &str, state: &str) -> Value {
    let mut last = Value::Null;
    let got = refine_tests::wait_until(DEADLINE, || {
        last = health(home, id);
        last["state"] == state
    });
    assert!(got, "health never {state}: {last:#}");
    last
}

/// `run --detach --health-cmd CMD FLAGS -- ARGV` (FLAGS split at white space), required to
/// succeed: the id.
fn checked_run(home: &Home, cmd: &str, flags: &str, argv: &[&str]) -> String {
    let mut opts = vec!["--health-cmd", cmd];
    opts.extend(flags.split_whitespace());
    detach_with(home, &opts, argv)
}

/// [`checked_run`] of a `sleep 600`.
fn checked(home: &Home, cmd: &str, flags: &str) -> String {
    checked_run(home, cmd, flags, &["sleep", "600"])
}

/// `wait --for healthy --timeout 60s ID`: its output, and the call described for a failure.
fn wait_healthy(home: &Home, id: &str) -> (std::process::Output, String) {
    let args = ["wait", "--for", "healthy", "--timeout", "60s", id];
    let out = home.cli(&args);
    let why = describe(&args, &out);
    (out, why)
}

/// Stops `id`, then each of its probe scopes must end `exited` (by its receipt); `why` is the
/// failure.
fn stop_and_assert_exited(home: &Home, id: &str, probes: &[String], why: &str) {
    home.cli(&["stop", id]);
    for p in probes {
        home.wait_ended(p);
        assert_eq!(home.state(p), "exited", "{why}");
    }
}

fn events(home: &Home) -> Vec<Value> {
    let out = home.cli(&["events", "--json", "--filter", "kind=health"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn probe_scopes(home: &Home, label: &str) -> Vec<String> {
    home.json(&["ps", "-a", "--json"])["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["label"] == label)
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn failures_past_retries_make_it_unhealthy_a_success_healthy_and_nothing_is_stopped() {
    let (home, _svc) = Home::with_service(&[]);
    let flag = home.path().join("up");
    // Workload text is untrusted: the probe's output carries an escape sequence.
    let probe = format!(
        "test -e {} && echo fine || {{ printf 'down\\033[31m\\n'; exit 1; }}",
        flag.display()
    );
    let flags = "--label web --health-interval 200ms --health-retries 2";
    let id = checked(&home, &probe, flags);
    let h = wait_health(&home, &id, "unhealthy");
    assert_eq!(h["cmd"], probe.as_str());
    assert_eq!(h["retries"], 2);
    assert!(h["failing_streak"].as_u64().unwrap() >= 2, "{h:#}");
    let last = h["last"].as_array().unwrap();
    assert!(!last.is_empty() && last.len() <= 5, "{h:#}");
    assert_eq!(last.last().unwrap()["exit_code"], 1, "{h:#}");
    assert!(last.last().unwrap()["output"]
        .as_str()
        .unwrap()
        .starts_with("down"));
    // Unhealthy is reported, never acted on: the scope lives.
    assert_eq!(home.state(&id), "live");
    assert_eq!(home.row(&id)["health"], "unhealthy");
    let shown = String::from_utf8_lossy(&home.cli(&["show", &id]).stdout).into_owned();
    assert!(shown.contains("Health: unhealthy"), "{shown}");
    assert!(shown.contains("exit 1"), "{shown}");
    assert!(
        !shown.contains('\u{1b}'),
        "show printed the probe's raw escape: {shown}"
    );
    std::fs::write(&flag, b"").unwrap();
    let h = wait_health(&home, &id, "healthy");
    assert_eq!(h["failing_streak"], 0);
    let ps = String::from_utf8_lossy(&home.cli(&["ps"]).stdout).into_owned();
    assert!(
        ps.lines()
            .any(|l| l.contains("web") && l.contains("(healthy)")),
        "{ps}"
    );
    let evs = events(&home);
    let states: Vec<&str> = evs.iter().map(|e| e["health"].as_str().unwrap()).collect();
    assert!(
        states.windows(2).any(|w| w == ["unhealthy", "healthy"]),
        "{evs:#?}"
    );
    // Every probe is a scope of its own, ended with its receipt.
    let probes = probe_scopes(&home, "web.health");
    assert!(probes.len() >= 3, "{probes:?}");
    stop_and_assert_exited(&home, &id, &probes, "a probe without its receipt");
}

#[test]
fn a_probe_past_its_timeout_is_stopped_with_proof_and_fails() {
    let (home, _svc) = Home::with_service(&[]);
    let flags = "--label slow --health-interval 100ms --health-timeout 300ms --health-retries 1";
    let id = checked(&home, "sleep 600 & sleep 600", flags);
    let h = wait_health(&home, &id, "unhealthy");
    let p = &h["last"][0];
    assert_eq!(p["timed_out"], true, "{h:#}");
    assert_eq!(p["exit_code"], Value::Null, "{h:#}");
    let probes = probe_scopes(&home, "slow.health");
    assert!(!probes.is_empty());
    stop_and_assert_exited(&home, &id, &probes, "a timed-out probe left its tree");
}

#[test]
fn in_the_start_period_failures_do_not_count() {
    let (home, _svc) = Home::with_service(&[]);
    let flags = "--health-interval 100ms --health-retries 1 --health-start-period 1h";
    let id = checked(&home, "false", flags);
    let probed = refine_tests::wait_until(DEADLINE, || {
        health(&home, &id)["probes"].as_u64().unwrap_or(0) >= 3
    });
    assert!(probed);
    let h = health(&home, &id);
    assert_eq!(h["state"], "starting", "{h:#}");
    assert_eq!(h["failing_streak"], 0, "{h:#}");
    home.cli(&["stop", &id]);
}

#[test]
fn a_foreground_run_probes_its_own_launch() {
    let home = Home::new();
    let mut run = home
        .command(&words(
            "run --label fg --health-cmd true --health-interval 100ms -- sleep 600",
        ))
        .spawn()
        .unwrap();
    let id = home.wait_labelled("fg");
    wait_health(&home, &id, "healthy");
    home.cli(&["stop", &id]);
    wait_bounded(&mut run, DEADLINE, "run after the stop");
}

#[test]
fn a_restarted_service_resumes_the_probes_of_its_predecessor() {
    let (home, svc) = Home::with_service(&[]);
    let flag = home.path().join("up");
    let probe = format!("test -e {}", flag.display());
    let id = checked(&home, &probe, "--health-interval 100ms --health-retries 1");
    wait_health(&home, &id, "unhealthy");
    // A lost service (kill -9) leaves its launches running for the next one (L6).
    svc.signal(rustix::process::Signal::KILL);
    let mut svc = svc;
    wait_bounded(&mut svc.child, DEADLINE, "serve after SIGKILL");
    std::fs::write(&flag, b"").unwrap();
    let _svc = Serving::start(&home, &["--maintenance-every", "200ms"]);
    wait_health(&home, &id, "healthy");
    home.cli(&["stop", &id]);
}

#[test]
fn the_socket_launches_with_a_health_check_and_refuses_nonsense() {
    let (home, _svc, mut conn) = served();
    let mut call = |req: Value| conn.call(req);
    let r = call(json!({"v": 1, "op": "launch", "argv": ["sleep", "600"],
        "health_cmd": "true", "health_interval_ms": 100}));
    let id = r["result"]["launched"]["id"].as_str().unwrap().to_owned();
    wait_health(&home, &id, "healthy");
    let bad = call(json!({"v": 1, "op": "launch", "argv": ["true"],
        "health_cmd": "true", "health_retries": 0}));
    assert_eq!(bad["ok"], false, "{bad}");
    call(json!({"v": 1, "op": "stop", "id": id}));
}

/// Issue 43 item 5: a probe a second is a scope each time; its launches would flood the event
/// journal (and push real scopes' events out of it), so probe scopes write no lifecycle events:
/// the scope's `health` events say what changed.
#[test]
fn probe_scopes_write_no_lifecycle_events() {
    let (home, _svc) = Home::with_service(&[]);
    let id = checked(&home, "true", "--label quiet --health-interval 200ms");
    wait_health(&home, &id, "healthy");
    let probes = probe_scopes(&home, "quiet.health");
    assert!(!probes.is_empty(), "no probe scope");
    for p in &probes {
        home.wait_ended(p);
    }
    let out = home.cli(&["events", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let evs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of_probes: Vec<&Value> = evs
        .iter()
        .filter(|e| e["label"] == "quiet.health")
        .collect();
    assert!(
        of_probes.is_empty(),
        "probe scopes journalled: {of_probes:#?}"
    );
    // The scope itself keeps its own events.
    assert!(
        evs.iter()
            .any(|e| e["label"] == "quiet" && e["kind"] == "launched"),
        "{evs:#?}"
    );
    home.cli(&["stop", &id]);
}

#[test]
fn wait_for_healthy_returns_once_healthy_and_fails_clearly_without_a_check_or_on_an_end() {
    let (home, _svc) = Home::with_service(&[]);
    let id = checked(&home, "true", "--health-interval 200ms");
    let (out, why) = wait_healthy(&home, &id);
    assert!(out.status.success(), "{why}");
    assert_eq!(health(&home, &id)["state"], "healthy");
    let _ = home.cli(&["stop", &id]);

    // No health check: one clear line, exit 1, at once.
    let plain = detach(&home, &["sleep", "600"]);
    let (out, why) = wait_healthy(&home, &plain);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no health check"), "{why}");
    let _ = home.cli(&["stop", &plain]);

    // Ends before it is healthy: exit 1, saying so.
    let gone = checked_run(&home, "false", "--health-interval 200ms", &["true"]);
    let (out, why) = wait_healthy(&home, &gone);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ended before it was healthy"), "{why}");
}

/// Issue 43 item 5: the probes' cost. A probe's output is kept in memory (the start of each
/// stream, at most 4 KiB in all), never written as files of its own; `show` has it.
#[test]
fn a_probe_keeps_its_output_in_memory_and_writes_no_output_files() {
    let (home, _svc) = Home::with_service(&[]);
    let args = [
        "run",
        "--detach",
        "--label",
        "talky",
        "--health-cmd",
        "echo to-out; echo to-err >&2",
        "--health-interval",
        "100ms",
        "--",
        "sleep",
        "600",
    ];
    let out = home.cli_ok(&args);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let h = wait_health(&home, &id, "healthy");
    let shown = h["last"].as_array().unwrap().last().unwrap()["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        shown.contains("to-out") && shown.contains("to-err"),
        "{h:#}"
    );
    home.cli(&["stop", &id]);
    let probes = probe_scopes(&home, "talky.health");
    assert!(!probes.is_empty(), "no probe scope");
    let logs = home.run_dir().join("logs");
    for p in &probes {
        home.wait_ended(p);
        for ext in ["stdout", "stderr"] {
            let f = logs.join(format!("{p}.{ext}"));
            assert!(!f.exists(), "a probe wrote {}", f.display());
        }
    }
}

/// Issue 43 item 5: the health record is rewritten in place (one file for the scope's life,
/// not a new file renamed over it at every probe), and a reader never sees half of it.
#[test]
fn the_health_record_is_rewritten_in_place_and_always_reads_whole() {
    use std::os::unix::fs::MetadataExt;
    let (home, _svc) = Home::with_service(&[]);
    let args = [
        "run",
        "--detach",
        "--label",
        "steady",
        "--health-cmd",
        "true",
        "--health-interval",
        "50ms",
        "--",
        "sleep",
        "600",
    ];
    let out = home.cli_ok(&args);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    wait_health(&home, &id, "healthy");
    let record = home.run_dir().join("logs").join(format!("{id}.health"));
    let inode = std::fs::metadata(&record).unwrap().ino();
    let first = health(&home, &id)["probes"].as_u64().unwrap();
    // Read it as often as it is written, while probes go on.
    let got = refine_tests::wait_until(DEADLINE, || {
        let h = health(&home, &id);
        assert_eq!(h["state"], "healthy", "a reader saw {h:#}");
        h["probes"].as_u64().unwrap() >= first + 5
    });
    assert!(got, "the probes stopped: {:#}", health(&home, &id));
    assert_eq!(
        std::fs::metadata(&record).unwrap().ino(),
        inode,
        "the health record was replaced, not rewritten"
    );
    home.cli(&["stop", &id]);
}

/// Issue 43 item 5: a probe scope gets no cgroup of its own (the guardian's subreaper and the
/// tree stop are its proof and its stop path, as on a host without cgroups); it still ends
/// with its receipt, and the probed scope keeps its own cgroup.
#[test]
fn a_probe_scope_has_no_cgroup_of_its_own_and_still_ends_with_proof() {
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let id = checked(&home, "true", "--label lean --health-interval 100ms");
    wait_health(&home, &id, "healthy");
    if home.json(&["show", "--json", &id])["record"]["cgroup"].is_null() {
        println!("skipped: this host gives scopes no cgroup, so a probe's cannot be told apart");
        home.cli(&["stop", &id]);
        return;
    }
    let probes = probe_scopes(&home, "lean.health");
    assert!(!probes.is_empty(), "no probe scope");
    home.cli(&["stop", &id]);
    for p in &probes {
        home.wait_ended(p);
        let shown = home.json(&["show", "--json", p]);
        assert!(
            shown["record"]["cgroup"].is_null(),
            "a probe got a cgroup: {:#}",
            shown["record"]["cgroup"]
        );
        assert_eq!(home.state(p), "exited", "{shown:#}");
    }
}

/// Issue 43 item 2/5: probe scopes do not pile up until retention runs. The prober keeps the
/// files of the probes its record shows (the last 5) and of any probe not proven ended, and
/// removes older probes' registrations and receipts once their receipts are written.
#[test]
fn after_20_probes_the_home_holds_only_the_last_probe_scopes() {
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let id = checked(&home, "true", "--label few --health-interval 50ms");
    let mut last = Value::Null;
    let enough = refine_tests::wait_until(DEADLINE, || {
        last = health(&home, &id);
        last["probes"].as_u64().unwrap_or(0) >= 20
    });
    assert!(enough, "never 20 probes: {last:#}");
    let probes = probe_scopes(&home, "few.health");
    home.cli(&["stop", &id]);
    assert!(
        probes.len() <= 2 * 5 + 8,
        "{} probe registrations after {} probes",
        probes.len(),
        last["probes"]
    );
    // What is kept is whole: each kept probe still reads `exited` by its receipt (a probe
    // still running at the stop may collect an older one meanwhile: a second listing says
    // which are still there).
    home.wait_ended(&id);
    for p in probe_scopes(&home, "few.health") {
        assert_eq!(home.state(&p), "exited", "probe {p}");
    }
}

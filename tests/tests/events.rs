//! V2 (issue 44, item 6): the events journal under `run/P/events`, written by whichever process
//! saw the event (a CLI `run`, the service, a `stop`, `gc`, a recovery), read by
//! `refine-supervisor events` and the socket's `events` subscription. A reader that comes back
//! with its cursor after a gap sees every event still in the journal exactly once, also when the
//! size cap has dropped the segment its cursor was in.

use refine_tests::cli_support;

use std::collections::HashSet;

use cli_support::*;
use serde_json::{json, Value};

/// Small segments, so that a few dozen launches rotate the journal past its cap (8 segments).
const SEGMENT: &str = "2048";

fn cursors(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["cursor"].as_str().unwrap().to_owned())
        .collect()
}

fn run_quietly(home: &Home, label: &str) {
    let out = home
        .command(&["run", "--label", label, "--", "true"])
        .env("REFINE_EVENTS_SEGMENT_BYTES", SEGMENT)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn kinds_of(events: &[Value], label: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["label"] == label)
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_follower_that_reconnects_with_its_cursor_sees_every_event_exactly_once() {
    let home = Home::new();
    let env = [("REFINE_EVENTS_SEGMENT_BYTES", SEGMENT)];
    let _svc = Serving::start_with_env(&home, &[], &env);
    let mut follower = Conn::open(&home);
    follower.send(json!({"v": 1, "op": "events", "follow": true}));
    run_quietly(&home, "first");
    run_quietly(&home, "second");
    // Read until the second run's receipt, then go away mid-stream.
    let mut seen = Vec::new();
    loop {
        let r = follower.reply();
        let ev = r["result"]["event"].clone();
        assert!(ev.is_object(), "{r}");
        let done = ev["label"] == "second" && ev["kind"] == "receipt";
        seen.push(ev);
        if done {
            break;
        }
    }
    drop(follower);
    let last = seen.last().unwrap()["cursor"].as_str().unwrap().to_owned();
    run_quietly(&home, "third");
    let mut again = Conn::open(&home);
    let (rest, _) = again.events(Some(&last));
    seen.extend(rest);
    let (all, _) = Conn::open(&home).events(None);
    assert_eq!(
        cursors(&seen),
        cursors(&all),
        "seen: {seen:#?}\nall: {all:#?}"
    );
    for label in ["first", "second", "third"] {
        assert_eq!(
            kinds_of(&seen, label),
            ["launched", "started", "exited", "receipt"],
            "{seen:#?}"
        );
    }
}

#[test]
fn a_reader_back_after_the_cap_dropped_its_segment_resumes_at_the_oldest_kept_event() {
    let home = Home::new();
    let env = [("REFINE_EVENTS_SEGMENT_BYTES", SEGMENT)];
    let _svc = Serving::start_with_env(&home, &[], &env);
    run_quietly(&home, "before");
    let (first, stale) = Conn::open(&home).events(None);
    assert_eq!(kinds_of(&first, "before").len(), 4, "{first:#?}");
    // About 140 B an event, 4 a launch: 40 launches fill more than 8 segments of 2 KiB.
    for n in 0..40 {
        run_quietly(&home, &format!("gap{n}"));
    }
    let events_dir = home.run_dir().join("events");
    let segments = std::fs::read_dir(&events_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        })
        .count();
    assert_eq!(segments, 8, "the cap keeps 8 segments");
    let (back, end) = Conn::open(&home).events(Some(&stale));
    let (all, _) = Conn::open(&home).events(None);
    assert_eq!(cursors(&back), cursors(&all), "every kept event, once");
    assert!(
        kinds_of(&back, "before").is_empty(),
        "the dropped ones are gone"
    );
    let unique: HashSet<String> = cursors(&back).into_iter().collect();
    assert_eq!(unique.len(), back.len(), "no event twice");
    assert!(back.iter().any(|e| e["label"] == "gap39"), "{back:#?}");
    // The CLI reads the same journal from the same cursor the same way.
    let out = home
        .command(&["events", "--json", "--after", &stale])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let by_cli: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cursors(&by_cli), cursors(&all));
    let (nothing, same) = Conn::open(&home).events(Some(&end));
    assert!(nothing.is_empty() && same == end, "{nothing:#?}");
}

#[test]
fn the_service_the_stop_recovery_and_gc_write_their_events() {
    let (home, mut svc) = Home::with_service(&[]);
    let mut conn = Conn::open(&home);
    conn.send(json!({"v": 1, "op": "launch", "label": "stopped", "argv": ["sleep", "600"]}));
    let r = conn.reply();
    let stopped = r["result"]["launched"]["id"].as_str().unwrap().to_owned();
    conn.send(json!({"v": 1, "op": "stop", "id": stopped, "grace_ms": 5000}));
    let r = conn.reply();
    assert_eq!(r["result"]["stop"]["state"], "exited", "{r}");
    conn.send(json!({"v": 1, "op": "launch", "label": "kept", "argv": ["sleep", "600"]}));
    let kept = conn.reply()["result"]["launched"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.wait_state(&kept, "live");
    drop(conn);
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    let _again = Serving::start(&home, &[]);
    let mut conn = Conn::open(&home);
    // Recovery runs behind the socket: its `adopted` comes when it has run.
    let mut all = Vec::new();
    let adopted = refine_tests::wait_until(DEADLINE, || {
        all = conn.events(None).0;
        kinds_of(&all, "kept").contains(&"adopted".to_owned())
    });
    assert!(adopted, "{all:#?}");
    let stop_kinds = kinds_of(&all, "stopped");
    for kind in words("launched started stop_requested stop_ended receipt") {
        assert!(stop_kinds.iter().any(|k| k == kind), "{kind}: {all:#?}");
    }
    let requested = all
        .iter()
        .find(|e| e["label"] == "stopped" && e["kind"] == "stop_requested")
        .unwrap();
    assert_eq!(requested["cause"], "operator", "{requested}");
    let receipt = all
        .iter()
        .find(|e| e["label"] == "stopped" && e["kind"] == "receipt")
        .unwrap();
    assert_eq!(receipt["outcome"], "stopped", "{receipt}");
    conn.send(json!({"v": 1, "op": "stop", "id": kept}));
    conn.reply();
    let out = home.cli(&["gc", "--older-than", "0s", "--forget-after", "0s"]);
    assert!(out.status.success(), "{}", describe(&["gc"], &out));
    let (after_gc, _) = conn.events(None);
    for label in ["stopped", "kept"] {
        assert!(
            kinds_of(&after_gc, label).contains(&"collected".to_owned()),
            "{label}: {after_gc:#?}"
        );
    }
}

#[test]
fn a_guardian_killed_under_a_run_makes_an_unverified_event_and_filters_narrow_the_view() {
    let home = Home::new();
    let mut run = home
        .command(&["run", "--label", "lost", "--", "sleep", "31990"])
        .spawn()
        .unwrap();
    let mut id = String::new();
    let listed = refine_tests::wait_until(DEADLINE, || {
        let row = home.ps().into_iter().find(|r| r["label"] == "lost");
        id = row.map_or(String::new(), |r| r["id"].as_str().unwrap().to_owned());
        !id.is_empty()
    });
    assert!(listed, "lost never listed");
    home.wait_state(&id, "live");
    let row = home.row(&id);
    let guardian = row["guardian_pid"].as_u64().unwrap() as i32;
    let workload = row["pid"].as_u64().unwrap() as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(guardian).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    wait_bounded(&mut run, DEADLINE, "run after its guardian's death");
    // The workload, orphaned outside the guardian, is this test's to end.
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(workload).unwrap(),
        rustix::process::Signal::KILL,
    );
    let out = home.cli(&["events", "--json", "--filter", "kind=unverified"]);
    assert!(out.status.success(), "{}", describe(&["events"], &out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["label"], "lost");
    let human = home.cli(&words("events --filter label=lost --filter kind=launched"));
    let human = String::from_utf8_lossy(&human.stdout);
    assert_eq!(human.lines().count(), 1, "{human}");
    assert!(
        human.contains(" launched ") && human.contains("(lost)"),
        "{human}"
    );
    let bad = home.cli(&["events", "--filter", "colour=red"]);
    let said = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{said}");
    assert!(
        said.contains("\"colour\" is no filter (kind, id or label)"),
        "{said}"
    );
}

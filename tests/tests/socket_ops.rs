//! The service socket serves hosts (issue 40, item 2): several requests on one connection, ids
//! as labels and prefixes as the CLI takes them (O12), `wait` until the scope exited (with a
//! timeout) and `signal` to the workload's process group.

use refine_tests::cli_support;

use std::io::{BufRead, Write};

use cli_support::*;

fn launch(conn: &mut Conn, label: &str, argv: &[&str]) -> String {
    let r = conn.call(serde_json::json!({"v": 1, "op": "launch", "argv": argv, "label": label}));
    assert_eq!(r["ok"], true, "{r}");
    r["result"]["launched"]["id"].as_str().unwrap().to_owned()
}

#[test]
fn one_connection_carries_several_requests() {
    let (_home, _svc, mut conn) = served();
    let id = launch(&mut conn, "", &["sleep", "600"]);
    for _ in 0..3 {
        let listed = conn.call(serde_json::json!({"v": 1, "op": "list"}));
        assert_eq!(listed["result"]["list"][0]["id"], id.as_str(), "{listed}");
    }
    // A refused line does not end the connection either.
    let bad = conn.call(serde_json::json!({"v": 1, "op": "explode"}));
    assert_eq!(bad["error"]["kind"], "bad_request", "{bad}");
    let stopped = conn.call(serde_json::json!({"v": 1, "op": "stop", "id": id}));
    assert_eq!(stopped["result"]["stop"]["state"], "exited", "{stopped}");
}

#[test]
fn ids_are_taken_as_labels_and_prefixes() {
    let (_home, _svc, mut conn) = served();
    let id = launch(&mut conn, "web", &["sleep", "600"]);
    let by_label = conn.call(serde_json::json!({"v": 1, "op": "show", "id": "web"}));
    assert_eq!(by_label["result"]["show"]["id"], id.as_str(), "{by_label}");
    let by_prefix = conn.call(serde_json::json!({"v": 1, "op": "show", "id": &id[..8]}));
    assert_eq!(
        by_prefix["result"]["show"]["id"],
        id.as_str(),
        "{by_prefix}"
    );
    let nobody = conn.call(serde_json::json!({"v": 1, "op": "show", "id": "nobody"}));
    assert_eq!(nobody["error"]["kind"], "not_found", "{nobody}");
    let stopped = conn.call(serde_json::json!({"v": 1, "op": "stop", "id": "web"}));
    assert_eq!(stopped["result"]["stop"]["state"], "exited", "{stopped}");
}

#[test]
fn wait_returns_the_exit_code_or_times_out() {
    let (home, _svc, mut conn) = served();
    let quick = launch(&mut conn, "", &["sh", "-c", "exit 3"]);
    let waited = conn.call(serde_json::json!({"v": 1, "op": "wait", "id": quick}));
    assert_eq!(waited["ok"], true, "{waited}");
    let doc = &waited["result"]["wait"];
    assert_eq!(doc["timed_out"], false, "{waited}");
    assert_eq!(doc["scopes"][0]["exit_code"], 3, "{waited}");
    assert_eq!(doc["scopes"][0]["state"], "exited", "{waited}");
    let slow = launch(&mut conn, "", &["sleep", "600"]);
    let started = std::time::Instant::now();
    let timed = conn.call(serde_json::json!({"v": 1, "op": "wait", "id": slow, "timeout_ms": 300}));
    println!(
        "wait with timeout_ms 300 returned after {:?}",
        started.elapsed()
    );
    assert_eq!(timed["result"]["wait"]["timed_out"], true, "{timed}");
    assert_eq!(
        timed["result"]["wait"]["scopes"][0]["state"], "live",
        "{timed}"
    );
    assert_eq!(home.state(&slow), "live");
    conn.call(serde_json::json!({"v": 1, "op": "stop", "id": slow}));
}

#[test]
fn signal_reaches_the_workload() {
    let (_home, _svc, mut conn) = served();
    let id = launch(&mut conn, "", &["sleep", "600"]);
    let sent = conn.call(serde_json::json!({"v": 1, "op": "signal", "id": id, "signal": "USR1"}));
    assert_eq!(sent["result"]["signalled"]["delivered"], true, "{sent}");
    let waited =
        conn.call(serde_json::json!({"v": 1, "op": "wait", "id": id, "timeout_ms": 30000}));
    // sleep does not handle SIGUSR1: it dies of it, 128 + 10.
    assert_eq!(
        waited["result"]["wait"]["scopes"][0]["exit_code"], 138,
        "{waited}"
    );
    let again = conn.call(serde_json::json!({"v": 1, "op": "signal", "id": id, "signal": "USR1"}));
    assert_eq!(again["result"]["signalled"]["delivered"], false, "{again}");
    let bad = conn.call(serde_json::json!({"v": 1, "op": "signal", "id": id, "signal": "NOPE"}));
    assert_eq!(bad["error"]["kind"], "bad_request", "{bad}");
}

#[test]
fn input_feeds_and_closes_the_stdin_of_a_launch_that_asked_for_one() {
    let (_home, _svc, mut conn) = served();
    let dir = tempfile::tempdir().unwrap();
    let r = conn.call(serde_json::json!({
        "v": 1, "op": "launch", "argv": ["sh", "-c", "cat > got"], "input": true,
        "cwd": dir.path().to_str().unwrap(),
    }));
    let id = r["result"]["launched"]["id"].as_str().unwrap().to_owned();
    let fed = conn.call(serde_json::json!({"v": 1, "op": "input", "id": id, "data": "hello\n"}));
    assert_eq!(fed["result"]["input"]["written"], 6, "{fed}");
    let closed = conn
        .call(serde_json::json!({"v": 1, "op": "input", "id": id, "data": "bye\n", "close": true}));
    assert_eq!(closed["result"]["input"]["closed"], true, "{closed}");
    // cat ends at the end of its input: the wait needs no stop.
    let waited =
        conn.call(serde_json::json!({"v": 1, "op": "wait", "id": id, "timeout_ms": 30000}));
    assert_eq!(
        waited["result"]["wait"]["scopes"][0]["exit_code"], 0,
        "{waited}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("got")).unwrap(),
        "hello\nbye\n"
    );
    let after = conn.call(serde_json::json!({"v": 1, "op": "input", "id": id, "data": "x"}));
    assert_eq!(after["error"]["kind"], "bad_request", "{after}");
    let none = launch(&mut conn, "", &["sleep", "600"]);
    let refused = conn.call(serde_json::json!({"v": 1, "op": "input", "id": none, "data": "x"}));
    assert_eq!(refused["error"]["kind"], "bad_request", "{refused}");
    conn.call(serde_json::json!({"v": 1, "op": "stop", "id": none}));
}

/// Standard base64 (RFC 4648, with padding) decoded, for the `follow` chunks.
fn unbase64(text: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    for quad in text.as_bytes().chunks(4) {
        let digits: Vec<u8> = quad
            .iter()
            .filter(|&&c| c != b'=')
            .map(|&c| val(c))
            .collect();
        let n = digits
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..digits.len()]);
    }
    out
}

/// `follow` (issue 40): the artifact's bytes as they are written, from an offset, in chunks
/// that carry their offset, then one `followed` once the scope has exited and its output is all
/// captured; the connection then takes requests again. The workload writes its second half only
/// after the follower has the first (a FIFO it waits on: the test's event, not a sleep).
#[test]
fn follow_streams_the_output_until_the_scope_has_ended() {
    let (home, _svc) = Home::with_service(&[]);
    let gate = home.path().join("gate");
    mkfifo(&gate);
    let script = format!(
        "printf 'one\\ntwo\\n'; read x < {}; printf 'three\\0\\377\\n'; exit 3",
        gate.display()
    );
    let mut conn = Conn::open(&home);
    let id = launch(&mut conn, "tail", &["sh", "-c", &script]);
    let req = serde_json::json!({"v": 1, "op": "follow", "id": "tail", "stream": "stdout",
        "from_offset": 4});
    let mut line = serde_json::to_vec(&req).unwrap();
    line.push(b'\n');
    conn.wr.write_all(&line).unwrap();
    let mut got = Vec::new();
    let next = |conn: &mut Conn| {
        let mut reply = String::new();
        conn.rd.read_line(&mut reply).unwrap();
        assert!(!reply.is_empty(), "the connection closed");
        serde_json::from_str::<serde_json::Value>(&reply).unwrap()
    };
    let mut released = false;
    let end = loop {
        let r = next(&mut conn);
        assert_eq!(r["ok"], true, "{r}");
        if let Some(out) = r["result"].get("output") {
            assert_eq!(out["stream"], "stdout", "{r}");
            assert_eq!(out["offset"], 4 + got.len() as u64, "{r}");
            got.extend(unbase64(out["data_b64"].as_str().unwrap()));
            if !released && got.len() >= 4 {
                assert_eq!(got, b"two\n");
                std::fs::write(&gate, b"go\n").unwrap();
                released = true;
            }
            continue;
        }
        break r["result"]["followed"].clone();
    };
    assert_eq!(got, b"two\nthree\0\xff\n", "{end}");
    assert_eq!(end["end_offset"], 16, "{end}");
    assert_eq!(end["complete"], true, "{end}");
    // The same connection answers again; the scope is over with its own status.
    let shown = conn.call(serde_json::json!({"v": 1, "op": "show", "id": id}));
    assert_eq!(shown["result"]["show"]["state"], "exited", "{shown}");
    let bad = conn.call(serde_json::json!({"v": 1, "op": "follow", "id": id, "stream": "stdin"}));
    assert_eq!(bad["error"]["kind"], "bad_request", "{bad}");
}

/// `end_with_connection`: the scope belongs to the connection that launched it. The connection
/// may sit idle past the service's idle timeout (5 s) while its scope lives; when it ends, the
/// service stops the whole scope; a scope launched without the field outlives it.
#[test]
fn a_scope_ends_with_the_connection_that_asked_for_it() {
    let (home, _svc) = Home::with_service(&["--shutdown-grace", "1s"]);
    let mut owner = Conn::open(&home);
    let r = owner.call(serde_json::json!({
        "v": 1, "op": "launch", "label": "bound", "end_with_connection": true,
        "argv": ["sh", "-c", "sleep 600 & sleep 600 & wait"],
    }));
    assert_eq!(r["ok"], true, "{r}");
    let bound = r["result"]["launched"]["id"].as_str().unwrap().to_owned();
    let free = launch(&mut owner, "free", &["sleep", "600"]);
    // Another connection waits out the idle timeout while the owner says nothing.
    let mut other = Conn::open(&home);
    let idle =
        other.call(serde_json::json!({"v": 1, "op": "wait", "id": bound, "timeout_ms": 6500}));
    assert_eq!(idle["result"]["wait"]["timed_out"], true, "{idle}");
    let listed = owner.call(serde_json::json!({"v": 1, "op": "list"}));
    assert_eq!(
        listed["ok"], true,
        "the owner's idle connection was dropped: {listed}"
    );
    drop(owner);
    let waited =
        other.call(serde_json::json!({"v": 1, "op": "wait", "id": bound, "timeout_ms": 30000}));
    assert_eq!(waited["result"]["wait"]["timed_out"], false, "{waited}");
    let shown = other.call(serde_json::json!({"v": 1, "op": "show", "id": bound}));
    let doc = &shown["result"]["show"];
    assert_eq!(doc["state"], "exited", "{shown}");
    assert_eq!(doc["result"]["outcome"], "stopped", "{shown}");
    assert_eq!(
        home.state(&free),
        "live",
        "the scope without the field was stopped too"
    );
    other.call(serde_json::json!({"v": 1, "op": "stop", "id": free}));
}

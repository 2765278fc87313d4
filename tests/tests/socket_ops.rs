//! The service socket serves hosts (issue 40, item 2): several requests on one connection, ids
//! as labels and prefixes as the CLI takes them (O12), `wait` until the scope exited (with a
//! timeout) and `signal` to the workload's process group.

mod cli_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use cli_support::*;

/// One connection; each call writes a line and reads the reply's line.
struct Conn {
    rd: BufReader<UnixStream>,
    wr: UnixStream,
}

impl Conn {
    fn open(home: &Home) -> Conn {
        let s = UnixStream::connect(home.run_dir().join("supervisor.sock")).unwrap();
        Conn {
            wr: s.try_clone().unwrap(),
            rd: BufReader::new(s),
        }
    }

    fn call(&mut self, req: serde_json::Value) -> serde_json::Value {
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.wr.write_all(&line).unwrap();
        let mut reply = String::new();
        self.rd.read_line(&mut reply).unwrap();
        assert!(!reply.is_empty(), "no reply to {req} (connection closed)");
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
    }
}

fn launch(conn: &mut Conn, label: &str, argv: &[&str]) -> String {
    let r = conn.call(serde_json::json!({"v": 1, "op": "launch", "argv": argv, "label": label}));
    assert_eq!(r["ok"], true, "{r}");
    r["result"]["launched"]["id"].as_str().unwrap().to_owned()
}

#[test]
fn one_connection_carries_several_requests() {
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let mut conn = Conn::open(&home);
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
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let mut conn = Conn::open(&home);
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
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let mut conn = Conn::open(&home);
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
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let mut conn = Conn::open(&home);
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
    let home = Home::new();
    let _svc = Serving::start(&home, &[]);
    let mut conn = Conn::open(&home);
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

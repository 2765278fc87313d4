//! `top` (SPEC H8) against the real binaries and the real kernel: `top --json` measures a
//! spinning scope busy and a sleeping one idle, each read from the scope's own cgroup where the
//! service gave it one (F4: root, as CI runs) and from `/proc` where it did not (the negative
//! control: a service with `REFINE_CGROUP=off`); on a real pseudo-terminal the table is redrawn
//! every `--interval` until `q` or Ctrl-C, which end it with exit 0 and the terminal as it was.
//!
//! Nothing waits with a sleep: the measurement window is `top`'s own, and the terminal's output
//! is read until what is expected appears, within a generous deadline.

use refine_tests::cli_support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use cli_support::*;
use refine_tests::wait_until;
use serde_json::Value;

/// Scopes launched through the service, stopped when the test ends however it ends (a killed
/// service leaves its launches running).
struct Launched<'a> {
    home: &'a Home,
    ids: Vec<String>,
}

impl<'a> Launched<'a> {
    fn new(home: &'a Home) -> Self {
        Launched {
            home,
            ids: Vec::new(),
        }
    }

    /// `run --detach --label LABEL -- ARGV`, with a deadline as a last resort.
    fn detach(&mut self, label: &str, argv: &[&str]) -> String {
        let mut args = vec![
            "run",
            "--detach",
            "--timeout",
            "60s",
            "--label",
            label,
            "--",
        ];
        args.extend_from_slice(argv);
        let out = self.home.cli(&args);
        assert!(out.status.success(), "{}", describe(&args, &out));
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        self.ids.push(id.clone());
        id
    }
}

impl Drop for Launched<'_> {
    fn drop(&mut self) {
        if !self.ids.is_empty() {
            let mut args = vec!["stop"];
            args.extend(self.ids.iter().map(String::as_str));
            let _ = self.home.cli(&args);
        }
    }
}

const SPIN: &[&str] = &["sh", "-c", "while :; do :; done"];
const SLEEP: &[&str] = &["sleep", "600"];

/// `top --json`'s row of `id`.
fn row<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed: {doc:#}"))
}

/// Whether the service gave the scope a cgroup of its own that holds it (F4).
fn has_own_cgroup(home: &Home, id: &str) -> bool {
    let cg = &show(home, id)["record"]["cgroup"];
    cg.is_object() && cg["forked_into"] == true
}

/// Both scopes are live (the spinner's CPU is measured once it runs).
fn wait_running(home: &Home, ids: &[&str]) {
    for id in ids {
        home.wait_state(id, "live");
    }
}

fn busy_and_idle(home: &Home, expect_cgroup: Option<bool>) {
    let mut launched = Launched::new(home);
    let spin = launched.detach("spin", SPIN);
    let idle = launched.detach("idle", SLEEP);
    wait_running(home, &[&spin, &idle]);
    let doc = home.json(&["top", "--json"]);
    assert_eq!(doc["window_ms"], 1000, "{doc:#}");
    let (busy, calm) = (row(&doc, &spin), row(&doc, &idle));
    let cpu = |r: &Value| r["cpu_percent"].as_f64().expect("cpu_percent");
    assert!(cpu(busy) > 10.0, "the spinner is not busy: {doc:#}");
    assert!(cpu(calm) < 5.0, "the sleeper is not idle: {doc:#}");
    for r in [busy, calm] {
        assert!(r["pids"].as_u64().expect("pids") >= 1, "{doc:#}");
        assert!(r["memory_bytes"].as_u64().expect("memory") > 0, "{doc:#}");
        assert!(
            r["window_us"].as_u64().expect("window") >= 1_000_000,
            "{doc:#}"
        );
    }
    assert_eq!(busy["label"], "spin");
    for (id, r) in [(&spin, busy), (&idle, calm)] {
        let own = has_own_cgroup(home, id);
        if let Some(expected) = expect_cgroup {
            assert_eq!(own, expected, "cgroup of {id}: {:#}", show(home, id));
        }
        let source = if own { "cgroup" } else { "proc" };
        assert_eq!(r["source"], source, "{doc:#}");
        if !own {
            // Without a cgroup (and without limits) every figure is /proc's.
            for key in ["memory_source", "pids_source", "io_source"] {
                assert_eq!(r[key], "proc", "{key}: {doc:#}");
            }
        }
    }
    // The same sample as a table, off a terminal: a header and a row per scope.
    let out = home.cli(&["top", "--no-stream"]);
    assert!(out.status.success(), "{}", describe(&["top"], &out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let head = table.lines().next().unwrap_or_default();
    for col in ["ID", "LABEL", "CPU %", "MEM", "PIDS", "BLOCK I/O", "SOURCE"] {
        assert!(head.contains(col), "{col}: {table}");
    }
    for id in [&spin, &idle] {
        assert!(
            table.lines().any(|l| l.starts_with(&id[..12])),
            "{id}: {table}"
        );
    }
}

#[test]
fn top_json_measures_a_spinning_scope_busy_and_a_sleeping_one_idle_from_its_cgroup() {
    let (home, _svc) = Home::with_service(&[]);
    // The service detects F4 as this process does (same user, cgroup and environment): as
    // root on a cgroup v2 or hybrid host each scope gets a cgroup, and top reads it; where
    // there is none (not root, or CI's second run with REFINE_CGROUP=off) the /proc path.
    use refine_supervisor::kernel::cgroup;
    cgroup::configure(cgroup::Setting::from_env());
    let f4 = cgroup::base();
    if let Err(why) = &f4 {
        eprintln!("no cgroup of their own for the scopes ({why}): checking the /proc path");
    }
    busy_and_idle(&home, Some(f4.is_ok()));
}

#[test]
fn without_a_cgroup_every_figure_is_read_from_proc() {
    let home = Home::new();
    let _svc = Serving::start_with_env(&home, &[], &[("REFINE_CGROUP", "off")]);
    busy_and_idle(&home, Some(false));
}

#[test]
fn top_without_a_runtime_prints_an_empty_sample() {
    let home = Home::new();
    let doc = home.json(&["top", "--json"]);
    assert_eq!(doc["scopes"], Value::Array(Vec::new()), "{doc:#}");
}

/// The bytes a child writes, collected as they come, until its end of file (the join).
fn collecting(
    mut r: impl Read + Send + 'static,
) -> (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (buf, reader)
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// `top --interval 0.5` on a real pseudo-terminal of 80 columns (`script`), ended by `key`
/// once two frames showed the scope. `then`: a shell line run once `top` exited, in the same
/// terminal (its output follows `top`'s); `None`: `top` is exec'd, alone in the terminal's
/// foreground group (a Ctrl-C reaches no shell). Returns the exit status and the whole output.
fn top_on_terminal(home: &Home, id: &str, key: &[u8], then: Option<&str>) -> (i32, String) {
    let top = format!(
        "'{}' --home '{}' --port {} top --interval 0.5",
        refine_tests::bin("refine-supervisor").display(),
        home.path().display(),
        home.port
    );
    let line = match then {
        Some(then) => format!("stty cols 80 rows 40 && {top}; code=$?; {then}; exit $code"),
        None => format!("stty cols 80 rows 40 && exec {top}"),
    };
    let mut child = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env_remove("COLUMNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn script (util-linux)");
    let (out, reader) = collecting(child.stdout.take().unwrap());
    let text = || String::from_utf8_lossy(&out.lock().unwrap()).into_owned();
    let two_frames = wait_until(DEADLINE, || {
        let t = text();
        count(&t, "BLOCK I/O") >= 2 && count(&t, &id[..12]) >= 2
    });
    let mut stdin = child.stdin.take().unwrap();
    if !two_frames {
        let _ = child.kill();
        let _ = child.wait();
        panic!("two frames with {id} did not come: {:?}", text());
    }
    stdin.write_all(key).expect("type the key");
    stdin.flush().unwrap();
    let status = wait_bounded(&mut child, DEADLINE, "top on a terminal");
    drop(stdin);
    reader.join().unwrap();
    (status.code().unwrap_or(-1), text())
}

#[test]
fn on_a_terminal_the_table_is_redrawn_until_q_or_ctrl_c_and_the_terminal_is_put_back() {
    let (home, _svc) = Home::with_service(&[]);
    let mut launched = Launched::new(&home);
    let id = launched.detach("tty-spin", SPIN);
    home.wait_state(&id, "live");
    // q: exit 0, the cursor shown again after the last frame, the keyboard's settings back
    // (canonical input and echo, which top turned off).
    let (code, text) = top_on_terminal(&home, &id, b"q", Some("stty -a"));
    assert_eq!(code, 0, "{text:?}");
    let last_frame = text.rfind("\x1b[2J").expect("a frame");
    let shown = text.rfind("\x1b[?25h").expect("the cursor shown again");
    assert!(shown > last_frame, "{text:?}");
    assert!(
        text.contains("\x1b[?25l"),
        "the cursor was not hidden: {text:?}"
    );
    let stty = &text[shown..];
    assert!(
        !stty.contains("-icanon") && !stty.contains("-echo "),
        "the terminal's settings were not put back: {stty}"
    );
    for l in text.lines().filter(|l| l.contains(&id[..12])) {
        let l = l.trim_end_matches('\r');
        let row = l.rsplit("\x1b[2J").next().unwrap_or(l);
        assert!(row.chars().count() <= 80, "wider than 80 columns: {row:?}");
        assert!(row.ends_with("cgroup") || row.ends_with("proc"), "{row:?}");
    }
    // Ctrl-C: the terminal's SIGINT ends it the same way, with exit 0.
    let (code, text) = top_on_terminal(&home, &id, b"\x03", None);
    assert_eq!(code, 0, "{text:?}");
    let last_frame = text.rfind("\x1b[2J").expect("a frame");
    assert!(
        text.rfind("\x1b[?25h").is_some_and(|s| s > last_frame),
        "{text:?}"
    );
}

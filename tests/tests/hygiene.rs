//! Hygiene watches (SPEC H1–H3): who holds a checkout, reap by checkout, the stall
//! watch — with real processes, managed and not.
//!
//! Every process a test starts holds a directory of the test's own tempdir, so nothing outside
//! the test is ever a holder it acts on; processes are ended by witness (pidfd + start time).

use refine_tests::cli_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cli_support::*;
use refine_tests::wait_until;
use serde_json::Value;

/// `holders PATH --json`: the exit code and the document.
fn holders(home: &Home, dir: &Path) -> (i32, Value) {
    let args = ["holders", dir.to_str().expect("utf-8 path"), "--json"];
    let out = home.cli(&args);
    let code = out.status.code().expect("exit code");
    assert!(code == 0 || code == 1, "{}", describe(&args, &out));
    (code, parse(&args, &out))
}

/// `reap --checkout PATH --json`: the exit code and the document.
fn reap(home: &Home, dir: &Path) -> (i32, Value) {
    let args = [
        "reap",
        "--checkout",
        dir.to_str().expect("utf-8 path"),
        "--json",
    ];
    let out = home.cli(&args);
    let code = out.status.code().expect("exit code");
    assert!(code == 0 || code == 1, "{}", describe(&args, &out));
    (code, parse(&args, &out))
}

/// The holder row of `pid`, if listed.
fn row(doc: &Value, pid: u32) -> Option<Value> {
    doc["holders"]
        .as_array()
        .expect("holders array")
        .iter()
        .find(|h| h["pid"] == pid)
        .cloned()
}

/// A `sleep` started by the test with its cwd in `dir` (a child of the harness: not orphaned).
fn sleeper_in(dir: &Path) -> Child {
    refine_tests::spawn_quiet(Command::new("sleep").arg("1000").current_dir(dir), "sleep")
}

fn end(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `sh -c SCRIPT` that backgrounds a detached process and prints its pid, then exits:
/// the process is orphaned (reparented to the nearest subreaper, or init).
fn orphan(script: &str) -> (u32, u64) {
    let out = Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("sh");
    assert!(out.status.success());
    let pid: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("pid");
    (pid, start_time(pid))
}

fn gone(pid: u32, start: u64) -> bool {
    !alive(u64::from(pid), start)
}

#[test]
fn a_process_outside_any_scope_with_its_cwd_in_a_dir() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let other = tempfile::tempdir().expect("tempdir");
    let (code, doc) = holders(&home, dir.path());
    assert_eq!(code, 0, "nothing holds a fresh dir: {doc}");
    let inside = sleeper_in(dir.path());
    let outside = sleeper_in(other.path());
    let (code, doc) = holders(&home, dir.path());
    assert_eq!(code, 1, "{doc}");
    let h = row(&doc, inside.id()).unwrap_or_else(|| panic!("sleep not listed: {doc}"));
    assert_eq!(h["program"], "sleep");
    assert_eq!(h["via"], "cwd");
    assert_eq!(h["owner"], Value::Null, "{h}");
    assert!(h["age_ms"].as_u64().is_some() && h["cpu_ms"].as_u64().is_some());
    assert!(row(&doc, outside.id()).is_none(), "negative control: {doc}");
    // The table says "no owner".
    let table = home.cli(&["holders", dir.path().to_str().unwrap()]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains(&inside.id().to_string()) && l.contains("no owner")),
        "{text}"
    );
    end(inside);
    end(outside);
    assert_eq!(holders(&home, dir.path()).0, 0);
}

#[test]
fn a_managed_descendant_holding_an_open_file() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let held = dir.path().join("held");
    let script = format!(
        "sleep 1000 3>'{}' </dev/null >/dev/null 2>&1 & echo $! > '{}.pid'",
        held.display(),
        held.display()
    );
    let (_launcher, id) = launch(&home, "leave", &["sh", "-c", &script]);
    let pid_file = dir.path().join("held.pid");
    assert!(wait_until(DEADLINE, || std::fs::read_to_string(&pid_file)
        .is_ok_and(|s| s.ends_with('\n'))));
    let pid = refine_tests::read_pid(&pid_file);
    let mut doc = Value::Null;
    assert!(
        wait_until(DEADLINE, || {
            doc = holders(&home, dir.path()).1;
            row(&doc, pid)
                .is_some_and(|h| h["via"] == "open_file" && h["owner"]["workload_alive"] == false)
        }),
        "the sleep holding {} is not listed: {doc}",
        held.display()
    );
    let h = row(&doc, pid).unwrap();
    assert_eq!(h["program"], "sleep");
    assert_eq!(h["owner"]["id"], id.as_str(), "{h}");
    assert_eq!(h["owner"]["state"], "live");
    assert_eq!(h["owner"]["found"], "guardian");
    assert_eq!(h["owner"]["workload_alive"], false, "the sh exited: {h}");
    assert!(h["path"].as_str().unwrap().ends_with("/held"), "{h}");
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
}

#[test]
fn a_process_whose_cwd_was_deleted() {
    let home = Home::new();
    let parent = tempfile::tempdir().expect("tempdir");
    let checkout = parent.path().join("checkout");
    std::fs::create_dir_all(checkout.join("sub")).unwrap();
    let child = sleeper_in(&checkout.join("sub"));
    std::fs::remove_dir_all(&checkout).unwrap();
    assert!(!checkout.exists());
    let (code, doc) = holders(&home, &checkout);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["exists"], false);
    let h = row(&doc, child.id()).unwrap_or_else(|| panic!("not listed: {doc}"));
    assert!(
        h["path"]
            .as_str()
            .unwrap()
            .ends_with("/checkout/sub (deleted)"),
        "{h}"
    );
    // A sibling that merely shares the prefix is not under it.
    let (code, doc) = holders(&home, &parent.path().join("check"));
    assert!(row(&doc, child.id()).is_none(), "{doc}");
    assert_eq!(code, 0);
    end(child);
}

#[test]
fn reap_ends_residue_and_orphans_and_refuses_while_a_workload_works_there() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();

    // A live workload works there: refused, nothing signalled.
    let (_launcher, live) = launch(
        &home,
        "leave",
        &["sh", "-c", &format!("cd '{d}' && exec sleep 1000")],
    );
    let [_, workload] = witnesses(&home, &live);
    assert!(wait_until(DEADLINE, || holders(&home, dir.path()).1
        ["holders"]
        .as_array()
        .is_some_and(|a| !a.is_empty())));
    let (code, doc) = reap(&home, dir.path());
    assert_eq!(code, 1, "{doc}");
    let refused = doc["refused"].as_array().expect("refused");
    assert!(
        refused.iter().any(|h| h["owner"]["id"] == live.as_str()),
        "{doc}"
    );
    assert!(alive(workload.0, workload.1), "a refusal signals nothing");
    assert!(doc["killed"].as_array().unwrap().is_empty());
    let out = home.cli(&["stop", &live]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));

    // Residue: the workload exited, its background sleep works there.
    let (_launcher, residue) = launch(
        &home,
        "leave",
        &[
            "sh",
            "-c",
            &format!(
                "cd '{d}'; sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > '{d}/residue.pid'"
            ),
        ],
    );
    let pid_file = dir.path().join("residue.pid");
    assert!(wait_until(DEADLINE, || std::fs::read_to_string(&pid_file)
        .is_ok_and(|s| s.ends_with('\n'))));
    let [_, residue_workload] = witnesses(&home, &residue);
    assert!(wait_until(DEADLINE, || !alive(
        residue_workload.0,
        residue_workload.1
    )));
    let rpid = refine_tests::read_pid(&pid_file);
    let rstart = start_time(rpid);

    // Orphans: detached from a shell that exited, their cwd there; one outside it stays.
    let (o1, o1s) = orphan(&format!(
        "cd '{d}'; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"
    ));
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let (o2, o2s) = orphan(&format!(
        "cd '{}'; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
        elsewhere.path().display()
    ));
    // And a process a live parent started there: not an orphan, never signalled.
    let kept = sleeper_in(dir.path());

    let (code, doc) = reap(&home, dir.path());
    assert_eq!(code, 1, "the harness's own sleep stays: {doc}");
    assert!(doc["refused"].as_array().unwrap().is_empty(), "{doc}");
    let stopped = doc["stopped"].as_array().unwrap();
    assert!(
        stopped
            .iter()
            .any(|s| s["id"] == residue.as_str() && s["receipt_verified"] == true),
        "{doc}"
    );
    assert!(
        doc["killed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["pid"] == o1),
        "{doc}"
    );
    let left = doc["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{doc}");
    assert_eq!(left[0]["pid"], kept.id());
    assert_eq!(left[0]["reason"], "not_orphan");
    assert!(wait_until(DEADLINE, || gone(rpid, rstart) && gone(o1, o1s)));
    assert!(!gone(o2, o2s), "an orphan elsewhere is not touched");
    // The residue's receipt verifies.
    let out = home.cli(&["receipt", &residue]);
    assert!(out.status.success(), "{}", describe(&["receipt"], &out));
    assert_eq!(home.state(&residue), "exited");

    end(kept);
    // `/` is not a checkout: every daemon init adopted works there.
    let args = ["reap", "--checkout", "/"];
    let err = assert_one_line_error(&args, &home.cli(&args));
    assert!(err.contains("refusing"), "{err}");
    let (code, doc) = reap(&home, dir.path());
    assert_eq!(code, 0, "{doc}");
    assert_eq!(holders(&home, dir.path()).0, 0);
    kill_witness(u64::from(o2), o2s, rustix::process::Signal::KILL);
}

/// Lines of the service log that mention `id` and `what`.
fn log_lines(home: &Home, id: &str, what: &str) -> Vec<String> {
    std::fs::read_to_string(home.run_dir().join("service.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(id) && l.contains(what))
        .map(str::to_owned)
        .collect()
}

const WATCH_DEADLINE: Duration = Duration::from_secs(120);

/// A busy shell loop that prints nothing until `trigger` exists, then does `then`.
fn busy_loop(home: &Home, trigger: &Path, then: &str) -> String {
    let script = format!(
        "while :; do if [ -e '{}' ]; then {then}; fi; done",
        trigger.display()
    );
    launch(home, "leave", &["sh", "-c", &script]).1
}

/// Waits until `ps` shows `id` with `signal` open (`open`) or not.
fn wait_signal(home: &Home, id: &str, signal: &str, open: bool) -> Value {
    let mut row = Value::Null;
    let ok = wait_until(WATCH_DEADLINE, || {
        row = home.row(id);
        row[signal].is_object() == open
    });
    assert!(ok, "{id}: {signal} never became {open}: {row}");
    row
}

// Thresholds are low (10 % of a core, calm under 5 %) because the machine is shared: a busy
// loop gets far more than that, a sleeping one nothing.
const WATCH: [&str; 10] = [
    "--maintenance-every",
    "200ms",
    "--stall-period",
    "300ms",
    "--stall-cpu",
    "10",
    "--stall-samples",
    "3",
    "--silent-samples",
    "0",
];

#[test]
fn a_busy_loop_that_prints_nothing_becomes_stalled_and_clears_when_it_writes() {
    let (home, _svc) = Home::with_service(&WATCH);
    let dir = tempfile::tempdir().expect("tempdir");
    let go = dir.path().join("go");
    let id = busy_loop(&home, &go, "echo working");
    let row = wait_signal(&home, &id, "stalled", true);
    let incident = &row["stalled"];
    assert!(incident["samples"].as_u64().unwrap() >= 3, "{row}");
    assert!(incident["cpu_permille"].as_u64().unwrap() >= 100, "{row}");
    let table = String::from_utf8_lossy(&home.cli(&["ps", "--no-trunc"]).stdout).into_owned();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("stalled")),
        "{table}"
    );
    let show = show(&home, &id);
    assert!(show["watch"]["stalled"].is_object(), "{show}");
    assert_eq!(log_lines(&home, &id, "stall watch: began").len(), 1);

    std::fs::write(&go, b"").unwrap();
    wait_signal(&home, &id, "stalled", false);
    let cleared = log_lines(&home, &id, "stall watch: cleared");
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    assert!(cleared[0].contains("wrote"), "{cleared:?}");
    assert_eq!(
        log_lines(&home, &id, "stall watch: began").len(),
        1,
        "told once"
    );
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
}

#[test]
fn a_busy_loop_becomes_stalled_and_clears_when_it_calms_down() {
    let (home, _svc) = Home::with_service(&WATCH);
    let dir = tempfile::tempdir().expect("tempdir");
    let calm = dir.path().join("calm");
    let id = busy_loop(&home, &calm, "exec sleep 1000");
    wait_signal(&home, &id, "stalled", true);
    std::fs::write(&calm, b"").unwrap();
    wait_signal(&home, &id, "stalled", false);
    let cleared = log_lines(&home, &id, "stall watch: cleared");
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    assert!(cleared[0].contains("calm"), "{cleared:?}");
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
}

/// The period is a second: a sample more than three periods after the previous one restarts
/// every count (the watch's rule for a suspended or stopped service), and at 300 ms a loaded
/// machine delayed the samples past that for minutes (seen at a load average near 100).
#[test]
fn a_sleeping_scope_becomes_silent() {
    let home = Home::new();
    let metrics = free_loopback_addr();
    let _svc = Serving::start(
        &home,
        &[
            "--maintenance-every",
            "200ms",
            "--stall-period",
            "1s",
            "--stall-samples",
            "0",
            "--silent-samples",
            "3",
            "--metrics",
            &metrics,
        ],
    );
    let (_l, id) = launch(&home, "leave", &["sleep", "1000"]);
    let row = wait_signal(&home, &id, "silent", true);
    assert!(row["silent"]["samples"].as_u64().unwrap() >= 3, "{row}");
    assert!(row["stalled"].is_null(), "stalled is off: {row}");
    // The metrics count it (F2 with H3).
    let mut last = String::new();
    assert!(
        wait_until(DEADLINE, || {
            last = scrape(&metrics);
            last.lines().any(|l| l == "refine_scopes_silent 1")
        }),
        "{last}"
    );
    assert_eq!(log_lines(&home, &id, "stall watch: began").len(), 1);
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    // An ended scope takes its incident with it: the status file is gone with the next pass.
    let stall_file = home.run_dir().join("logs").join(format!("{id}.stall"));
    assert!(wait_until(DEADLINE, || !stall_file.exists()));
}

/// Host pid of the process of pid namespace `ns` (the `ns/pid` link) whose innermost pid is
/// `inner`.
fn host_pid_in(ns: &str, inner: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let link = std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?;
        if link.to_str()? != ns {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let last = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))?
            .split_ascii_whitespace()
            .last()?
            .parse::<u32>()
            .ok()?;
        (last == inner).then_some(pid)
    })
}

/// An `unshare` child, SIGKILLed (and so its namespace, `--kill-child`) and reaped on drop.
struct Unshared(Child);

impl Drop for Unshared {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A new mount and pid namespace (`unshare -m -p -f`) running `script` as its init's shell,
/// which writes `ready` to `ready` when set up. Returns the unshare child and the namespace's
/// `ns/pid` link (read from its init).
fn namespace(script: &str, ready: &Path) -> (Unshared, String) {
    let child = Unshared(
        Command::new("unshare")
            .args([
                "--mount",
                "--pid",
                "--fork",
                "--kill-child",
                "sh",
                "-c",
                script,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare"),
    );
    assert!(
        wait_until(DEADLINE, || std::fs::read_to_string(ready)
            .is_ok_and(|s| s.trim() == "ready")),
        "the namespace never got ready"
    );
    let init = host_pid_in_children(child.0.id()).expect("the namespace's init");
    let ns = std::fs::read_link(format!("/proc/{init}/ns/pid"))
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (child, ns)
}

/// The first child of `pid` (the init `unshare --fork` started).
fn host_pid_in_children(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_ascii_whitespace().next()?.parse().ok()
}

/// H5: a child of a pid-namespace init is not an orphan of ours: `reap` leaves it (and the
/// init), reported as not orphaned.
#[test]
fn an_orphan_adopted_by_a_pid_namespace_init_is_not_ours_and_is_left() {
    if refine_tests::skip_unless_root("creating a pid namespace needs root") {
        return;
    }
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();
    // Inside a new pid namespace: a detached sleep in DIR whose parent exits, so the
    // namespace's init (a sleep elsewhere) adopts it.
    let script =
        format!("(cd '{d}'; setsid sleep 1000 </dev/null >/dev/null 2>&1 &); exec sleep 1000");
    let init = Unshared(
        Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare"),
    );
    let mut doc = Value::Null;
    let listed = wait_until(DEADLINE, || {
        doc = holders(&home, dir.path()).1;
        doc["holders"]
            .as_array()
            .is_some_and(|a| a.iter().any(|h| h["program"] == "sleep"))
    });
    assert!(listed, "the namespaced sleep is not listed: {doc}");
    let orphan = doc["holders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["program"] == "sleep")
        .cloned()
        .unwrap();
    assert_eq!(orphan["orphaned"], Value::Null, "not our orphan: {orphan}");
    let (code, doc) = reap(&home, dir.path());
    assert_eq!(code, 1, "it is left: {doc}");
    let (pid, start) = (
        orphan["pid"].as_u64().unwrap(),
        orphan["start_time"].as_u64().unwrap(),
    );
    assert!(doc["killed"].as_array().unwrap().is_empty(), "{doc}");
    let left = doc["left"].as_array().unwrap();
    assert!(
        left.iter()
            .any(|l| l["pid"] == pid && l["reason"] == "not_orphan"),
        "{doc}"
    );
    assert!(
        alive(pid, start),
        "a namespace's process is not ours to kill"
    );
    drop(init);
    assert!(wait_until(DEADLINE, || !alive(pid, start)));
}

/// H5: `holders` and `reap --checkout` match by file identity across mount namespaces, never
/// by path text: a process in another mount namespace whose cwd reads `X/checkout` (a tmpfs
/// there, mounted over X in its namespace only) holds neither `X/checkout` (which does not
/// exist here) nor `X`; one whose cwd really is this host's `D/real` holds `D`.
#[test]
fn holders_and_reap_match_by_file_identity_across_mount_namespaces() {
    if refine_tests::skip_unless_root("unshare -m -p needs root") {
        return;
    }
    let home = Home::new();
    let covered = tempfile::tempdir().expect("tempdir");
    let checkout = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(checkout.path().join("real")).unwrap();
    let x = covered.path().display().to_string();
    let d = checkout.path().display().to_string();
    let script = format!(
        "mount -t tmpfs none '{x}' && mkdir '{x}/checkout' && \
         (cd '{x}/checkout' && setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > '{d}/covered.pid') && \
         (cd '{d}/real' && setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > '{d}/real.pid') && \
         sleep 0.2; echo ready > '{d}/ready'; cd /; exec sleep 1000"
    );
    let (init, ns) = namespace(&script, &checkout.path().join("ready"));
    let inner = |f: &str| -> u32 {
        std::fs::read_to_string(checkout.path().join(f))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let in_covered = host_pid_in(&ns, inner("covered.pid")).expect("the covered sleep");
    let in_real = host_pid_in(&ns, inner("real.pid")).expect("the real sleep");
    let covered_start = start_time(in_covered);

    // Path text says X/checkout; it does not exist here and nothing here holds it.
    let gone = covered.path().join("checkout");
    assert!(!gone.exists());
    let (_, doc) = holders(&home, &gone);
    assert!(
        row(&doc, in_covered).is_none(),
        "matched by path text: {doc}"
    );
    let (_, doc) = holders(&home, covered.path());
    assert!(
        row(&doc, in_covered).is_none(),
        "matched by path text: {doc}"
    );
    // By identity, across the namespace: the sleep whose cwd is this host's D/real.
    let (code, doc) = holders(&home, checkout.path());
    assert_eq!(code, 1, "{doc}");
    let h = row(&doc, in_real).unwrap_or_else(|| panic!("not matched by identity: {doc}"));
    assert_eq!(h["via"], "cwd", "{h}");
    assert_eq!(h["orphaned"], Value::Null, "a namespace init's child: {h}");

    // reap kills neither.
    let (_, doc) = reap(&home, covered.path());
    assert!(doc["killed"].as_array().unwrap().is_empty(), "{doc}");
    let (_, doc) = reap(&home, &gone);
    assert!(doc["killed"].as_array().unwrap().is_empty(), "{doc}");
    let (code, doc) = reap(&home, checkout.path());
    assert_eq!(code, 1, "{doc}");
    assert!(doc["killed"].as_array().unwrap().is_empty(), "{doc}");
    assert!(alive(u64::from(in_covered), covered_start));
    assert!(alive(u64::from(in_real), start_time(in_real)));
    drop(init);
}

/// H5: a guardian of another home is never killed by `reap`: a second home inside the
/// checkout, whose launcher is gone (the guardian adopted, holding its proof file there), is
/// left and reported with the home it belongs to; its registration stays live and ends through
/// its own stop with a verified receipt.
#[test]
fn reap_never_kills_a_guardian_of_a_second_home_inside_the_checkout() {
    let home = Home::new();
    let checkout = tempfile::tempdir().expect("tempdir");
    let second = Home {
        dir: tempfile::tempdir_in(checkout.path()).expect("tempdir"),
        port: 7411,
    };
    let (_launcher, id) = launch(&second, "leave", &["sleep", "1000"]);
    let [guardian, workload] = witnesses(&second, &id);
    let mut doc = Value::Null;
    assert!(
        wait_until(DEADLINE, || {
            doc = holders(&home, checkout.path()).1;
            row(&doc, guardian.0 as u32).is_some()
        }),
        "the guardian holds its proof file in the checkout: {doc}"
    );
    let (code, doc) = reap(&home, checkout.path());
    assert_eq!(code, 1, "{doc}");
    assert!(
        alive(guardian.0, guardian.1),
        "reap killed another home's guardian: {doc}"
    );
    assert!(alive(workload.0, workload.1), "{doc}");
    let left = doc["left"].as_array().unwrap();
    let g = left
        .iter()
        .find(|l| l["pid"] == guardian.0)
        .unwrap_or_else(|| panic!("the guardian is not reported: {doc}"));
    assert_eq!(g["reason"], "guardian", "{g}");
    assert_eq!(g["guardian_of"]["id"], id.as_str(), "{g}");
    let home_of = std::fs::canonicalize(second.path()).unwrap();
    assert_eq!(
        g["guardian_of"]["home"],
        home_of.to_str().unwrap(),
        "the home it belongs to: {g}"
    );
    assert_eq!(second.state(&id), "live");
    let out = second.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    assert_eq!(second.state(&id), "exited");
}

/// Bytes a terminal acts on: C0 controls but the line feed, DEL, and the C1 controls as UTF-8
/// (U+0080..U+009F, `\xc2\x80`..`\xc2\x9f`), each with its offset.
fn raw_controls(bytes: &[u8]) -> Vec<(usize, u8)> {
    let mut found = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        let c1 = b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n));
        if (b < 0x20 && b != b'\n') || b == 0x7f || c1 {
            found.push((i, b));
        }
    }
    found
}

/// X6: an escape sequence in a label, in argv or in the output is escaped before it reaches a
/// terminal, in every human view (`ps`, `show` with its output excerpt, `stop`) and in errors
/// (an ambiguous label's candidates, a spawn failure naming the program).
#[test]
fn escape_sequences_in_a_label_argv_and_output_never_reach_the_terminal_raw() {
    let home = Home::new();
    // OSC 0 retitles the terminal, CSI 2J clears it, OSC 52 writes the clipboard, U+009B is
    // the one-character CSI.
    let label = "evil\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m";
    let arg = "\u{1b}]52;c;cHduZWQ=\u{7}";
    let script = "printf 'out \\033[31mred\\n'; sleep 600 </dev/null >/dev/null 2>&1 &";
    let mut ids = Vec::new();
    for _ in 0..2 {
        let args = [
            "run", "--label", label, "--json", "--", "sh", "-c", script, arg,
        ];
        let out = home.cli_ok(&args);
        ids.push(parse(&args, &out)["id"].as_str().unwrap().to_owned());
    }
    let check = |args: &[&str], out: &std::process::Output, want: &str| {
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let raw = raw_controls(bytes);
            assert!(
                raw.is_empty(),
                "{name} of {args:?} has raw control bytes {raw:?}: {}",
                describe(args, out)
            );
        }
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            all.contains(want),
            "{want:?} not shown: {}",
            describe(args, out)
        );
    };
    let shown_label = r"evil\x1b]0;PWNED\x07\x1b[2J\u009b31m";
    for args in [
        &["ps"][..],
        &["ps", "--all", "--no-trunc"],
        &["show", &ids[1]],
        &["show", &ids[0], "-n", "5"],
    ] {
        let out = home.cli(args);
        assert!(out.status.success(), "{}", describe(args, &out));
        check(args, &out, shown_label);
        check(args, &out, r"\x1b]52;c;cHduZWQ=\x07");
    }
    let args = ["show", &ids[1]];
    check(&args, &home.cli(&args), r"out \x1b[31mred");
    // Two live registrations with the label: stop refuses, listing them.
    let args = ["stop", label];
    let out = home.cli(&args);
    assert!(!out.status.success(), "{}", describe(&args, &out));
    check(&args, &out, shown_label);
    for id in &ids {
        let args = ["stop", id.as_str()];
        let out = home.cli_ok(&args);
        check(&args, &out, id);
    }
    // A spawn failure names the program, escaped.
    let args = ["run", "--", "/nonexistent/\u{1b}[2Jprog"];
    let out = home.cli(&args);
    assert!(!out.status.success(), "{}", describe(&args, &out));
    check(&args, &out, r"/nonexistent/\x1b[2Jprog");
}

/// H5: a child of a container shim is a container's process, not an orphan of ours: `reap`
/// leaves it (`sh` run by a link named as containerd's shim stands in for one).
#[test]
fn a_child_of_a_container_shim_is_not_our_orphan() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = tempfile::tempdir().expect("tempdir");
    let shim = tools.path().join("containerd-shim-runc-v2");
    // A link, not a copy: the kernel names the process after the path it was run by, and a
    // copy's write descriptor, inherited by another test's fork, makes its exec fail (ETXTBSY).
    std::os::unix::fs::symlink("/bin/sh", &shim).expect("link sh");
    let script = format!(
        "cd '{}' && sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; wait",
        dir.path().display()
    );
    let (mut parent, line) = refine_tests::spawn_first_line(
        Command::new(&shim)
            .args(["-c", &script])
            .stdin(Stdio::null()),
        "the shim",
    );
    let pid: u32 = line.trim().parse().expect("pid");
    let start = start_time(pid);
    let mut doc = Value::Null;
    assert!(
        wait_until(DEADLINE, || {
            doc = holders(&home, dir.path()).1;
            row(&doc, pid).is_some()
        }),
        "{doc}"
    );
    assert_eq!(row(&doc, pid).unwrap()["orphaned"], Value::Null, "{doc}");
    let (code, doc) = reap(&home, dir.path());
    assert_eq!(code, 1, "{doc}");
    assert!(doc["killed"].as_array().unwrap().is_empty(), "{doc}");
    assert!(alive(u64::from(pid), start), "{doc}");
    kill_witness(u64::from(pid), start, rustix::process::Signal::KILL);
    let _ = parent.wait();
}

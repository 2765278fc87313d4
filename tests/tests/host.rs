//! The face for Rust hosts (SPEC E1): `Supervisor::spawn(Command)`, a `Child` waited for
//! blocking, with a bound, or from a tokio task; its stop with a grace; its environment from
//! nothing. Real guardian, real workloads.

use std::time::{Duration, Instant};

use refine_supervisor::store::registry::Stream;
use refine_supervisor::{Command, LaunchOutcome, LaunchResult, ScopeState, Supervisor};
use refine_tests::bin;

/// Generous: the machine is shared by several builds.
const SLACK: Duration = Duration::from_secs(20);

fn supervisor() -> (tempfile::TempDir, Supervisor) {
    let home = tempfile::tempdir().expect("a home");
    let sup = Supervisor::open(home.path())
        .expect("open the runtime")
        .with_guardian_exe(bin("refine-guardian"));
    (home, sup)
}

fn stdout(r: &LaunchResult) -> String {
    String::from_utf8_lossy(r.complete_output(Stream::Stdout).expect("complete stdout"))
        .into_owned()
}

/// A tokio task awaits the result on a current-thread runtime: nothing blocks its only
/// thread (the engine's own thread wakes it), so a timer on the same thread still fires.
#[test]
fn wait_async_leaves_the_runtime_thread_free() {
    let (_home, sup) = supervisor();
    let mut child = sup
        .spawn(Command::new("sh").args(["-c", "sleep 0.3; echo done"]))
        .expect("spawn");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let (result, ticks) = rt.block_on(async {
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let c = counted.clone();
        let counter = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let result = tokio::time::timeout(SLACK, child.wait_async())
            .await
            .expect("the result within the bound")
            .expect("the result");
        counter.abort();
        (result, counted.load(std::sync::atomic::Ordering::Relaxed))
    });
    assert_eq!(result.outcome, LaunchOutcome::Completed);
    assert_eq!(stdout(&result), "done\n");
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?}",
        result.scope
    );
    // 300 ms of workload at one tick per 20 ms: the thread was free for the timer meanwhile.
    assert!(
        ticks >= 3,
        "the runtime's thread was blocked: {ticks} ticks"
    );
}

#[test]
fn wait_timeout_says_none_while_it_runs_then_gives_the_result() {
    let (_home, sup) = supervisor();
    let mut child = sup
        .spawn(
            Command::new("sh")
                .args(["-c", "read line; echo \"got $line\""])
                .stdin(refine_supervisor::StdinMode::Pipe),
        )
        .expect("spawn");
    assert!(child
        .wait_timeout(Duration::from_millis(50))
        .expect("a bounded wait")
        .is_none());
    child.write_input(b"x\n").expect("input");
    let result = child
        .wait_timeout(SLACK)
        .expect("a bounded wait")
        .expect("the result within the bound");
    assert_eq!(stdout(&result), "got x\n");
}

/// The stop's grace: SIGTERM first, and a workload that ends on it ends within the grace; the
/// result says it was stopped.
#[test]
fn stop_with_a_grace_ends_the_scope_and_the_result_says_stopped() {
    let (_home, sup) = supervisor();
    let child = sup
        .spawn(Command::new("sh").args([
            "-c",
            "trap 'exit 3' TERM; echo ready; while :; do sleep 0.05; done",
        ]))
        .expect("spawn");
    let started = Instant::now();
    let report = child.stop(Duration::from_secs(10)).expect("the stop");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "the grace was waited out: {report:?}"
    );
    let result = child.wait().expect("the result");
    assert_eq!(
        result.outcome,
        LaunchOutcome::Stopped,
        "{:?}",
        result.status
    );
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?} {:?} {report:?}",
        result.scope,
        result.status
    );
}

/// `env_clear`: only what the command sets, and the owner marker.
#[test]
fn env_clear_starts_from_nothing() {
    let (_home, sup) = supervisor();
    let result = sup
        .spawn(
            Command::new("/usr/bin/env")
                .env("LEAK", "no")
                .env_clear()
                .env("ONLY", "this"),
        )
        .expect("spawn")
        .wait()
        .expect("the result");
    let mut names: Vec<String> = stdout(&result)
        .lines()
        .map(|l| l.split('=').next().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["ONLY", "REFINE_OWNER"], "{}", stdout(&result));
    // Negative control: without env_clear this process's environment is there.
    let (name, value) = std::env::vars()
        .find(|(k, v)| !k.is_empty() && !v.contains('\n'))
        .expect("a variable in this process's environment");
    let result = sup
        .spawn(Command::new("/usr/bin/env"))
        .expect("spawn")
        .wait()
        .expect("the result");
    assert!(
        stdout(&result).contains(&format!("{name}={value}\n")),
        "{name} missing: {}",
        stdout(&result)
    );
}

/// A host bounds its async wait with `tokio::time::timeout`; when the bound passes, the child
/// is still there to stop, and a second wait gives the result (the stop's, with the receipt).
#[test]
fn a_timed_out_async_wait_leaves_the_child_to_stop() {
    let (_home, sup) = supervisor();
    let mut child = sup.spawn(Command::new("sleep").arg("100")).expect("spawn");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let result = rt.block_on(async {
        let first = tokio::time::timeout(Duration::from_millis(100), child.wait_async()).await;
        assert!(first.is_err(), "sleep 100 ended within 100 ms: {first:?}");
        child
            .stop_async(Duration::from_secs(5))
            .await
            .expect("the stop");
        tokio::time::timeout(SLACK, child.wait_async())
            .await
            .expect("the result within the bound")
            .expect("the result")
    });
    assert_eq!(result.outcome, LaunchOutcome::Stopped);
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?}",
        result.scope
    );
}

/// `Supervisor::open` makes a home that does not exist yet (0700, as `run` does), and refuses
/// one whose parent is a file in one line.
#[test]
fn open_creates_a_missing_home() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().expect("a parent");
    let home = parent.path().join("state").join("refine");
    let sup = Supervisor::open(&home)
        .expect("open a missing home")
        .with_guardian_exe(bin("refine-guardian"));
    let mode = std::fs::metadata(&home)
        .expect("the home")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    let result = sup
        .spawn(Command::new("true"))
        .expect("spawn")
        .wait()
        .expect("the result");
    assert_eq!(result.outcome, LaunchOutcome::Completed);
    let file = parent.path().join("file");
    std::fs::write(&file, b"").expect("a file");
    let err = Supervisor::open(file.join("home")).expect_err("a home under a file");
    let line = refine_supervisor::error_chain(&err);
    assert!(!line.contains('\n') && line.contains("file/home"), "{line}");
}

/// An embedder with no guardian beside its executable and no `REFINE_GUARDIAN` gets one line
/// naming where it looked and how to provide one, before anything runs.
#[test]
fn a_missing_guardian_is_one_line_naming_where_it_looked() {
    let (home, sup) = supervisor();
    let missing = home.path().join("no-such-guardian");
    let sup = sup.with_guardian_exe(missing.clone());
    let err = sup.spawn(Command::new("true")).expect_err("no guardian");
    let line = refine_supervisor::error_chain(&err);
    assert!(
        !line.contains('\n')
            && line.contains("no-such-guardian")
            && line.contains("REFINE_GUARDIAN"),
        "{line}"
    );
    // The embedder's own binary, copied where nothing is beside it, with REFINE_GUARDIAN unset.
    let lonely = tempfile::tempdir().expect("a dir");
    let exe = lonely.path().join("embedder");
    std::fs::copy(bin("embedder"), &exe).expect("copy the embedder");
    let out = std::process::Command::new(&exe)
        .arg(home.path().join("h2"))
        .env_remove("REFINE_GUARDIAN")
        .output()
        .expect("run the embedder");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&lonely.path().join("refine-guardian").display().to_string())
            && stderr.contains("REFINE_GUARDIAN"),
        "{stderr}"
    );
    // With a guardian beside it, the same binary launches.
    std::fs::copy(
        bin("refine-guardian"),
        lonely.path().join("refine-guardian"),
    )
    .expect("copy");
    let out = std::process::Command::new(&exe)
        .arg(home.path().join("h3"))
        .env_remove("REFINE_GUARDIAN")
        .output()
        .expect("run the embedder");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "completed\n");
}

/// E3: a Rust host reaches what the CLI does through the face, without the CLI: the `ps` rows,
/// the `show` document, a stop with a grace by id, and `gc`, each the protocol's document.
#[test]
fn a_host_lists_shows_stops_and_collects_through_the_face() {
    use refine_supervisor::host::{GcOptions, ShowDoc, State, StopOutcomeDoc};
    let (home, sup) = supervisor();
    let child = sup
        .spawn(
            Command::new("sh")
                .args(["-c", "sleep 60 & sleep 60"])
                .label("held"),
        )
        .expect("spawn");
    let id = child.id();

    let rows = sup.list(false).expect("list");
    let row = rows
        .iter()
        .find(|r| r.id == id.to_string())
        .unwrap_or_else(|| panic!("{id} is listed: {rows:?}"));
    assert_eq!(row.state, State::Live, "{row:?}");
    assert_eq!(row.label, "held");

    let shown: ShowDoc = sup.show(id).expect("show");
    assert_eq!(shown.state, State::Live, "{shown:?}");
    assert!(
        !shown.processes.is_empty(),
        "a live scope shows its processes"
    );

    let stopped = sup.stop(id, Some(Duration::from_secs(5))).expect("stop");
    assert!(
        matches!(stopped.outcome, StopOutcomeDoc::Stopped(_)),
        "{stopped:?}"
    );
    assert_eq!(stopped.state, State::Exited, "{stopped:?}");
    let result = child.wait().expect("the result");
    assert_eq!(result.outcome, LaunchOutcome::Stopped);

    assert!(
        sup.list(false)
            .expect("list")
            .iter()
            .all(|r| r.id != id.to_string()),
        "an exited scope leaves the open rows"
    );
    assert!(sup
        .list(true)
        .expect("list all")
        .iter()
        .any(|r| r.id == id.to_string() && r.state == State::Exited));

    // The maintenance pass finds nothing due: the only scope was stopped and is settled.
    let (pass, stops) = sup.maintain();
    assert!(pass.due.is_empty() && stops.is_empty(), "{pass:?}");
    let capacity = sup.capacity().expect("capacity");
    assert_eq!(capacity.live, 0, "{capacity:?}");
    let held = sup.holders(home.path()).expect("holders");
    assert!(held.holders.is_empty(), "{held:?}");

    let gc = sup.gc(GcOptions::default()).expect("gc");
    assert!(gc.strays.is_empty(), "{gc:?}");
    // Nothing is old enough to retire: the record stays.
    assert_eq!(sup.show(id).expect("show after gc").state, State::Exited);
}

//! Kernel-assisted scopes (SPEC F4) against the real kernel: the workload forked straight into a
//! cgroup v2 directory of its own, the stop through `cgroup.freeze` / `cgroup.procs` /
//! `cgroup.kill`, the fallback when the kernel refuses, and the `/proc` path when it is off.
//!
//! Every case needs a writable cgroup v2 hierarchy (root on a unified or hybrid host, or a
//! delegated subtree) and skips with the reason otherwise. The library's detection runs once
//! per process, so this binary turns the cgroup path on for itself whatever `REFINE_CGROUP` says
//! (CI runs the other test files a second time with it off); the negative control runs the
//! CLI with it off.

use refine_tests::cli_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::frame::Placement;
use refine_supervisor::end::stop::{self, StopOptions, StopOutcome, Target};
use refine_supervisor::kernel::cgroup::{self, Setting};
use refine_tests::driver::{Guardian, Launch, Msg};
use refine_tests::stopkit::*;

const TREE_BUILDER: &str = env!("CARGO_BIN_EXE_tree-builder");

/// The cgroup base for this process, or the reason there is none (then the test skips).
fn base() -> Option<&'static Path> {
    cgroup::configure(Setting::Auto);
    match cgroup::base() {
        Ok(b) => Some(b),
        Err(why) => {
            eprintln!("skipped: no writable cgroup v2 ({why})");
            None
        }
    }
}

/// [`base`], where `/usr/bin/perl` (the accounting tests' workload) exists too; `None`, with
/// the reason printed, otherwise.
fn perl_on_the_cgroup_path() -> Option<&'static Path> {
    let base = base()?;
    if !Path::new("/usr/bin/perl").exists() {
        eprintln!("skipped: no /usr/bin/perl for the workload");
        return None;
    }
    Some(base)
}

/// The cgroup v2 path of a process (`0::` in /proc/PID/cgroup).
fn cgroup_of(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
}

/// `dir` relative to the cgroup2 mount, as /proc/PID/cgroup shows it.
fn relative(dir: &Path) -> String {
    let own = cgroup_of(std::process::id()).expect("own cgroup");
    let base = base().expect("base");
    // base = <mount><own>/refine; dir = base/<id>.
    let mount_own = base.parent().expect("parent of base");
    let tail = dir.strip_prefix(mount_own).expect("dir below base");
    let own = own.trim_end_matches('/');
    format!("{own}/{}", tail.display())
}

#[test]
fn the_workload_and_every_descendant_start_in_the_scopes_cgroup_and_the_guardian_stays_out() {
    let Some(_) = base() else { return };
    let (_home, rt, scope) = ready_tree(TREE_BUILDER, "--sessions 2 --groups 2 --leaves 2");
    let cg = scope
        .reg
        .cgroup
        .clone()
        .expect("the registration records the cgroup");
    assert!(cg.holds_scope(), "clone3 refused: {cg:?}");
    // The durable record says the same.
    let on_disk = rt.read_registration(scope.reg.id).expect("record");
    assert_eq!(on_disk.cgroup.as_ref(), Some(&cg));
    let dir = PathBuf::from(&cg.path);
    let want = relative(&dir);
    let members = scope.members();
    assert!(members.len() >= 7, "{members:#?}");
    for m in &members {
        assert_eq!(
            cgroup_of(m.witness.pid).as_deref(),
            Some(want.as_str()),
            "member {m:?} outside the scope's cgroup"
        );
    }
    let guardian = cgroup_of(scope.reg.hello.guardian.pid).expect("guardian cgroup");
    assert_ne!(guardian, want, "the guardian must stay outside");
    // Exact membership: cgroup.procs holds the tree, nothing else.
    let mut procs: Vec<u32> = cgroup::members(&dir)
        .expect("cgroup.procs")
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let mut tree: Vec<u32> = members.iter().map(|m| m.witness.pid).collect();
    procs.sort_unstable();
    tree.sort_unstable();
    assert_eq!(procs, tree);
}

#[test]
fn the_stop_freezes_reads_and_kills_through_the_cgroup_and_the_receipt_proves_it() {
    let Some(_) = base() else { return };
    let (_home, rt) = home_and_runtime();
    let mut scope = launch_tree(
        &rt,
        TREE_BUILDER,
        "--sessions 3 --groups 2 --leaves 3 --ignorers 3 --forker",
    );
    scope.wait_ready();
    let before = scope.members();
    let dir = PathBuf::from(&scope.reg.cgroup.as_ref().expect("cgroup").path);
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert!(
        report.assessment.receipt().is_some(),
        "proof is the receipt"
    );
    let kills: Vec<_> = report
        .signalled
        .iter()
        .filter_map(|s| match s.target {
            Target::Cgroup { members } => Some(members),
            _ => None,
        })
        .collect();
    assert_eq!(kills.len(), 1, "one cgroup.kill: {report:#?}");
    assert!(
        kills[0] >= before.len() - 1,
        "{kills:?} vs {}",
        before.len()
    );
    assert!(
        report
            .signalled
            .iter()
            .all(|s| !matches!(s.target, Target::Process(_))),
        "no member-by-member signal on this path: {report:#?}"
    );
    scope.reap();
    let left = survivors(&before);
    assert!(left.is_empty(), "survivors: {left:#?}");
    // As the launcher would: the accounting, then the empty directory goes.
    let usage = cgroup::finish(&scope.reg).expect("cpu.stat of the empty cgroup");
    assert!(usage.cpu_us > 0, "{usage:?}");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn a_grace_on_the_cgroup_path_still_signals_the_workloads_group() {
    let Some(_) = base() else { return };
    let (_home, rt, mut scope) = ready_tree(TREE_BUILDER, "--sessions 0 --groups 1 --leaves 2");
    let opts = StopOptions {
        grace: Some(Duration::from_secs(20)),
        ..StopOptions::default()
    };
    let report = stop::stop(&rt, &scope.reg, &opts).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert!(
        matches!(
            report.signalled.first().map(|s| s.target),
            Some(Target::Group { .. })
        ),
        "T7: the grace's SIGTERM goes to the workload's group: {report:#?}"
    );
    scope.reap();
}

#[test]
fn a_directory_the_kernel_refuses_falls_back_to_fork_and_says_why() {
    let Some(_) = base() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let proof = dir.path().join("proof");
    let mut launch = Launch::new(&proof, &["/bin/true"]);
    // Not a cgroup v2 directory: clone3(CLONE_INTO_CGROUP) refuses it.
    launch.cgroup = Some(dir.path().to_path_buf());
    let g = Guardian::spawn();
    g.launch(&launch, None).expect("launch");
    let hello = g.expect_hello();
    assert_eq!(
        hello.cgroup,
        Placement::Refused { errno: libc::EBADF },
        "{hello:?}"
    );
    g.start();
    let (frames, receipt) = g.until_scope_exited();
    assert!(
        frames.iter().any(|m| matches!(m, Msg::Started)),
        "{frames:?}"
    );
    assert_eq!(receipt.status, refine_protocol::WorkloadStatus::Exited(0));
    let (status, stderr) = g.finish();
    assert!(status.success(), "{stderr}");
}

#[test]
fn the_guardian_removes_the_empty_cgroup_when_its_launcher_is_gone() {
    let Some(base) = base() else { return };
    let dir = base.join(format!("guardian-test-{}", std::process::id()));
    std::fs::create_dir(&dir).expect("mkdir cgroup");
    let tmp = tempfile::tempdir().expect("tempdir");
    let proof = tmp.path().join("proof");
    let mut launch = Launch::new(&proof, &["/bin/true"]);
    launch.cgroup = Some(dir.clone());
    let g = Guardian::spawn();
    g.launch(&launch, None).expect("launch");
    let hello = g.expect_hello();
    assert_eq!(hello.cgroup, Placement::Cgroup);
    // The launcher goes away before *start*: the guardian aborts, reaps, writes its receipt,
    // and, with nobody left to read the cgroup's accounting, removes it.
    let child = g.hang_up();
    let (status, stderr) = refine_tests::driver::reap(child);
    assert!(status.success(), "{stderr}");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn run_forks_into_a_cgroup_removes_it_after_the_receipt_and_without_it_stays_in_the_launchers() {
    let Some(base) = base() else { return };
    let home = cli_support::Home::new();
    let script = "sed -n 's/^0:://p' /proc/self/cgroup";
    // (CI's second run sets REFINE_CGROUP=off for every other test: not for this one.)
    let mut on = home.command(&["run", "--", "sh", "-c", script]);
    on.env_remove("REFINE_CGROUP");
    let on = cli_support::output_of(on);
    assert!(on.status.success(), "{on:?}");
    let inside = String::from_utf8_lossy(&on.stdout).trim().to_owned();
    let own = cgroup_of(std::process::id()).expect("own cgroup");
    assert_ne!(inside, own, "the workload ran in the launcher's cgroup");
    let id = inside.rsplit('/').next().expect("id");
    // Below the runtime's own parent (`gc` sweeps only its own).
    let runtime = std::fs::read_to_string(home.run_dir().join("runtime-id")).expect("runtime-id");
    let dir = base.join(runtime.trim()).join(id);
    assert!(
        inside.ends_with(&format!("/refine/{}/{id}", runtime.trim())),
        "{inside} is not below the runtime's parent"
    );
    assert!(!dir.exists(), "the scope's cgroup was not removed");
    // `show` reports it; the result's CPU times came from its cpu.stat before it went.
    let doc = home.json(&["show", "--json", id]);
    assert_eq!(doc["record"]["cgroup"]["forked_into"], true, "{doc}");
    assert!(doc["result"]["usage"].is_object(), "{doc}");
    // Negative control: with the cgroup path off, the workload stays in the launcher's cgroup.
    let mut off = home.command(&["run", "--", "sh", "-c", script]);
    off.env("REFINE_CGROUP", "off");
    let off = cli_support::output_of(off);
    assert!(off.status.success(), "{off:?}");
    assert_eq!(String::from_utf8_lossy(&off.stdout).trim(), own);
}

/// Burns about 200 ms of CPU holding a 32 MiB string it wrote (every page touched).
const BURN: &str = "my $x = 'x' x 33554432; my $e = (times)[0] + 0.2; 1 while (times)[0] < $e;";

/// Whether the scopes' cgroups get the memory controller (`memory.peak`, `memory.events`): the
/// base's `cgroup.subtree_control` enables it for them.
fn memory_controller(base: &Path) -> bool {
    std::fs::read_to_string(base.join("cgroup.subtree_control"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
}

/// The `Cgroup:` line of `show`.
fn cgroup_line(home: &cli_support::Home, id: &str) -> String {
    let out = home.cli(&["show", id]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.trim_start().starts_with("Cgroup:"))
        .unwrap_or_else(|| panic!("no Cgroup line: {out:?}"))
        .to_owned()
}

/// `run --json -- perl -e SCRIPT` in `home` on the cgroup path (`cgroup`) or with it turned
/// off, then the launch's `show --json`.
fn perl_show(home: &cli_support::Home, script: &str, cgroup: bool) -> serde_json::Value {
    let mut run = home.command(&["run", "--json", "--", "/usr/bin/perl", "-e", script]);
    if cgroup {
        run.env_remove("REFINE_CGROUP");
    } else {
        run.env("REFINE_CGROUP", "off");
    }
    let out = cli_support::output_of(run);
    assert!(out.status.success(), "{out:?}");
    let id = cli_support::json_of(&out.stdout)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    home.json(&["show", "--json", &id])
}

#[test]
fn the_result_keeps_the_cgroups_final_accounting_and_show_reports_it_after_the_end() {
    let Some(base) = perl_on_the_cgroup_path() else {
        return;
    };
    let memory = memory_controller(base);
    let home = cli_support::Home::new();
    let doc = perl_show(&home, BURN, true);
    let id = doc["id"].as_str().expect("id").to_owned();
    assert_eq!(doc["state"], "exited", "{doc}");
    let dir = doc["record"]["cgroup"]["path"]
        .as_str()
        .expect("cgroup path");
    assert!(!Path::new(dir).exists(), "{dir} left behind");
    let usage = &doc["result"]["cgroup_usage"];
    assert!(usage.is_object(), "the result keeps the accounting: {doc}");
    let cpu = usage["cpu_us"].as_u64().expect("cpu_us");
    assert!(cpu >= 100_000, "about 200 ms of CPU burnt: {usage}");
    assert!(usage["user_us"].as_u64().expect("user_us") > 0, "{usage}");
    let line = cgroup_line(&home, &id);
    assert!(line.contains("CPU "), "{line}");
    if memory {
        let peak = usage["memory_peak_bytes"].as_u64().expect("memory.peak");
        assert!(peak >= 32 << 20, "a 32 MiB string was written: {usage}");
        assert_eq!(usage["oom_kills"], 0, "{usage}");
        assert!(line.contains("OOM kills 0"), "{line}");
    } else {
        eprintln!(
            "no memory controller in {}: peak not available",
            base.display()
        );
        assert!(usage["memory_peak_bytes"].is_null(), "{usage}");
        assert!(usage["oom_kills"].is_null(), "{usage}");
        assert!(line.contains("memory peak not available"), "{line}");
    }
    // The /proc path: no cgroup, so no accounting in the result, and show says so.
    let doc = perl_show(&home, BURN, false);
    let id = doc["id"].as_str().expect("id").to_owned();
    assert!(doc["result"].is_object(), "{doc}");
    assert!(doc["result"].get("cgroup_usage").is_none(), "{doc}");
    assert!(doc["record"].get("cgroup").is_none(), "{doc}");
    let line = cgroup_line(&home, &id);
    assert!(line.contains("not available"), "{line}");
}

/// A child burns 200 ms of CPU under a parent that ignores SIGCHLD: the kernel reaps it
/// itself, and its time reaches no one's `RUSAGE_CHILDREN` (the receipt's count), only the
/// cgroup's `cpu.stat`. The parent outlives it, or the child would be the guardian's to reap:
/// with SIGCHLD ignored, `waitpid` returns (ECHILD) once the child is gone.
const LOST_CHILD: &str = "$SIG{CHLD} = 'IGNORE'; my $pid = fork; \
    if (!$pid) { my $e = (times)[0] + 0.2; 1 while (times)[0] < $e; exit 0 } \
    waitpid($pid, 0);";

#[test]
fn the_results_cpu_time_is_the_cgroups_once_the_end_is_proven() {
    if perl_on_the_cgroup_path().is_none() {
        return;
    }
    let doc = perl_show(&cli_support::Home::new(), LOST_CHILD, true);
    assert_eq!(doc["state"], "exited", "{doc}");
    let cgroup = &doc["result"]["cgroup_usage"];
    let cpu = |u: &serde_json::Value| {
        u["user_us"].as_u64().expect("user_us") + u["system_us"].as_u64().expect("system_us")
    };
    assert!(cpu(cgroup) >= 150_000, "the child's 200 ms: {cgroup}");
    let receipt = &doc["receipt"]["usage"];
    assert!(
        cpu(receipt) < 150_000,
        "the kernel reaped the child: {receipt}"
    );
    // The result's usage takes its CPU times from the cgroup (the receipt misses the child),
    // its peak resident set from the receipt; so do the views built on it.
    let usage = &doc["result"]["usage"];
    assert_eq!(usage["user_us"], cgroup["user_us"], "{doc}");
    assert_eq!(usage["system_us"], cgroup["system_us"], "{doc}");
    assert_eq!(usage["max_rss_kib"], receipt["max_rss_kib"], "{doc}");
}

/// A service that dies after its scope's receipt was sent but before it read it leaves the
/// scope's cgroup (the guardian found its launcher there); the next settle (recovery) reads its
/// accounting and removes it, and `gc` finds nothing left.
#[test]
fn a_cgroup_left_by_a_launcher_that_died_after_the_receipt_goes_at_the_next_recovery() {
    let Some(base) = base() else { return };
    let home = cli_support::Home::new();
    let mut serve = home.command(&["serve"]);
    serve
        .env_remove("REFINE_CGROUP")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut serve = serve.spawn().expect("spawn serve");
    let sock = home.run_dir().join("supervisor.sock");
    let up = refine_tests::wait_until(cli_support::DEADLINE, || {
        std::os::unix::net::UnixStream::connect(&sock).is_ok()
    });
    assert!(up, "serve did not come up");
    let mut run = home.command(&["run", "--detach", "--", "sleep", "1"]);
    run.env_remove("REFINE_CGROUP");
    let out = cli_support::output_of(run);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // The service stops reading; the receipt lands in the proof file and in its socket.
    let pid = rustix::process::Pid::from_child(&serve);
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP serve");
    let proven = refine_tests::wait_until(cli_support::DEADLINE, || {
        home.cli(&["receipt", &id]).status.success()
    });
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(proven, "no receipt for {id}");
    let runtime = std::fs::read_to_string(home.run_dir().join("runtime-id")).expect("runtime-id");
    let dir = base.join(runtime.trim()).join(&id);
    assert!(
        dir.exists(),
        "the dead service's cgroup is expected to stay until recovery"
    );
    let out = home.cli(&["recover"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !dir.exists(),
        "{} left behind after recovery",
        dir.display()
    );
    let doc = home.json(&["show", "--json", &id]);
    assert_eq!(doc["state"], "exited", "{doc}");
    // A settled scope whose cgroup is there again (as a launcher that settled and died before
    // the removal would leave it): `gc` collects it as a stray.
    std::fs::create_dir(&dir).expect("mkdir the cgroup again");
    let gc = home.json(&["gc", "--json"]);
    let strays = gc["strays"].as_array().expect("strays");
    assert!(
        strays
            .iter()
            .any(|e| e["reason"]["kind"] == "ended_scope_cgroup" && e["action"] == "removed"),
        "{gc}"
    );
    assert!(!dir.exists(), "{} left behind after gc", dir.display());
}

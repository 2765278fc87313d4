//! The service at scale (SPEC F1): what one detached scope costs the service in
//! descriptors, and the descriptor limits its workloads see.

use refine_tests::cli_support;

use cli_support::*;
use refine_tests::wait_until;

/// A service with one detached `sleep 600` live: its lazily opened descriptors and threads (the
/// runtime's, the log) exist before a test takes its baseline. Its id comes back for the stop.
fn warmed_service() -> (Home, Serving, String) {
    let (home, svc) = Home::with_service(&[]);
    let first = detach(&home, &["sleep", "600"]);
    home.wait_state(&first, "live");
    (home, svc, first)
}

/// A quiet detached scope holds one descriptor in the service (L3): its guardian's channel. The
/// guardian drains the output (L1) and holds the registration lock for the service (it lets go
/// when the channel ends); no control channel is kept (nobody holds its handle).
#[test]
fn a_quiet_detached_scope_costs_the_service_one_descriptor() {
    const N: usize = 8;
    let (home, svc, first) = warmed_service();
    let before = svc.fds();
    let ids: Vec<String> = (0..N).map(|_| detach(&home, &["sleep", "600"])).collect();
    for id in &ids {
        home.wait_state(id, "live");
    }
    // The engine closes a control channel at end of file, which it reads on its next wake-up.
    let mut after = 0;
    let settled = wait_until(DEADLINE, || {
        after = svc.fds();
        after <= before + N
    });
    let table: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", svc.child.id()))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        settled,
        "{N} detached scopes took {} descriptors (more than 1 each); fd table: {table:#?}",
        after - before
    );
    for id in ids.iter().chain([&first]) {
        let out = home.cli(&["stop", id]);
        assert!(out.status.success(), "{}", describe(&["stop", id], &out));
    }
}

/// L3: a detached scope's registration lock is held by its guardian for the service: no
/// descriptor of the service is the record, the lock is held while the service lives, and a
/// `kill -9` of the service lets go of it (the guardian reads the channel's end) while the
/// workload runs on, for recovery to take.
#[test]
fn the_guardian_holds_the_lock_for_the_service_until_the_service_dies() {
    use std::os::unix::fs::MetadataExt;
    let (home, mut svc) = Home::with_service(&[]);
    let id = detach(&home, &["sleep", "600"]);
    home.wait_state(&id, "live");
    let record = home.run_dir().join("registrations").join(&id);
    let meta = std::fs::metadata(&record).expect("the registration record");
    let same_file = |m: &std::fs::Metadata| (m.dev(), m.ino()) == (meta.dev(), meta.ino());
    let held_by_service: Vec<_> = std::fs::read_dir(format!("/proc/{}/fd", svc.child.id()))
        .expect("the service's fd table")
        .flatten()
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| same_file(&m)))
        .map(|e| e.path())
        .collect();
    assert!(
        held_by_service.is_empty(),
        "the service holds the record itself: {held_by_service:?}"
    );
    let try_lock = || refine_supervisor::store::fence::try_acquire(&record).expect("lock");
    assert!(
        try_lock().is_none(),
        "nobody holds the lock of a live scope"
    );
    let [_, (pid, start)] = witnesses(&home, &id);
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    assert!(
        wait_until(DEADLINE, || try_lock().is_some()),
        "the lock outlived the service"
    );
    assert!(alive(pid, start), "the workload ended with the service");
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop", &id], &out));
    assert!(!alive(pid, start));
}

/// The service's threads stay bounded however many detached scopes it holds: one shared loop
/// drives every launch's engine (not a thread per scope), and what outlives a result — the
/// watcher of a scope a residue holds, the tail of the output it still writes — runs there too.
#[test]
fn detached_scopes_do_not_cost_the_service_a_thread_each() {
    /// Scopes of each kind: a workload that runs, and a residue that outlives its workload.
    const N: usize = 16;
    /// Room for the async runtime's blocking pool and the loop's own pool growing meanwhile.
    const SLACK: usize = 8;
    let (home, svc, first) = warmed_service();
    let before = svc.threads();
    let running: Vec<String> = (0..N).map(|_| detach(&home, &["sleep", "600"])).collect();
    let residues: Vec<String> = (0..N)
        .map(|_| detach(&home, &["sh", "-c", "sleep 600 &"]))
        .collect();
    for id in running.iter().chain(&residues) {
        home.wait_state(id, "live");
    }
    // A residue's result is written when its workload has exited: its scope is followed from
    // then on (a watcher, and a tail of the streams the residue holds).
    for id in &residues {
        assert!(
            wait_until(DEADLINE, || home.row(id)["outcome"] == "completed"),
            "{}",
            home.row(id)
        );
    }
    let after = svc.threads();
    assert!(
        after <= before + SLACK,
        "{} detached scopes took the service from {before} to {after} threads",
        2 * N
    );
    // The loop still drives them: stops end them, and each ends exited.
    let all: Vec<&String> = running.iter().chain(&residues).chain([&first]).collect();
    for id in &all {
        let out = home.cli(&["stop", id]);
        assert!(out.status.success(), "{}", describe(&["stop", id], &out));
    }
    for id in &all {
        home.wait_state(id, "exited");
        assert!(show(&home, id)["receipt"].is_object());
    }
}

/// The service raises its own descriptor limit; the workloads it launches get the limits the
/// service started with.
#[test]
fn workloads_of_the_service_see_the_original_descriptor_limits() {
    let (home, _svc) = Home::with_service(&[]);
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let show = |n: Option<u64>| n.map_or("unlimited".to_owned(), |n| n.to_string());
    let id = detach(&home, &["sh", "-c", "ulimit -Sn; ulimit -Hn"]);
    home.wait_ended(&id);
    let stdout = std::fs::read_to_string(home.run_dir().join("logs").join(format!("{id}.stdout")))
        .expect("the workload's stdout");
    assert_eq!(
        stdout,
        format!("{}\n{}\n", show(lim.current), show(lim.maximum)),
        "soft and hard RLIMIT_NOFILE of a workload of the service"
    );
}

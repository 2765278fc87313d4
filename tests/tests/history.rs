//! Bounded history (SPEC R4, F1): forgetting whole exited registrations, and the open index that
//! keeps `ps`, maintenance and recovery proportional to what is open. Registrations are written
//! the way launches leave them (`refine_tests::history`), with real receipts in real proof files.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use refine_protocol::docs::State;
use refine_protocol::RegistrationId;
use refine_supervisor::end::assess::{assess, KERNEL_BOOT};
use refine_supervisor::end::open_index::{self, Settled, UNWRITTEN_AFTER};
use refine_supervisor::end::recover::{recover, RecoverOptions, RecoveryAction};
use refine_supervisor::history::forget::{self, Action, Reason};
use refine_supervisor::store::registry::{RegistryError, Runtime};
use refine_tests::history::{ago, backdate, fabricate, files_of, Fabricate};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn runtime() -> (tempfile::TempDir, Runtime) {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 7300).unwrap();
    (home, rt)
}

fn forget_after(rt: &Runtime, after: Duration, dry_run: bool) -> forget::Report {
    forget::forget(rt, forget::Options { after, dry_run }, &KERNEL_BOOT).unwrap()
}

fn exists(rt: &Runtime, id: RegistrationId) -> Vec<String> {
    files_of(rt, id)
        .into_iter()
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect()
}

/// An open marker whose launch died before it wrote its record, long ago.
fn unwritten_long_ago(rt: &Runtime) -> RegistrationId {
    let id = rt.new_id().unwrap();
    rt.add_open_marker(id).unwrap();
    fs::File::options()
        .write(true)
        .open(rt.open_marker_path(id))
        .unwrap()
        .set_modified(ago(UNWRITTEN_AFTER * 2))
        .unwrap();
    id
}

#[test]
fn forgetting_removes_exactly_the_old_exited_registrations() {
    let (_home, rt) = runtime();
    let old = ago(40 * DAY);
    // Old and exited: settled history, and one still indexed (durable, marker present).
    let settled = fabricate(&rt, Fabricate::exited(old));
    let indexed = fabricate(&rt, Fabricate::indexed(old));
    // Exited but young.
    let young = fabricate(&rt, Fabricate::exited(ago(DAY)));
    // Old, but live (its guardian witness is this process, no receipt) and unverified (gone
    // without a receipt): never forgotten, however old.
    let live = fabricate(&rt, Fabricate::live(old));
    let unverified = fabricate(&rt, Fabricate::unverified(old));
    // Old and corrupt: nothing proves it ended.
    let corrupt = fabricate(&rt, Fabricate::indexed(old));
    fs::write(rt.record_path(corrupt.id), b"not a record").unwrap();
    backdate(&rt, corrupt.id, old);
    assert!(assess(&rt, &live, &KERNEL_BOOT).is_live());
    assert_eq!(assess(&rt, &unverified, &KERNEL_BOOT).name(), "unverified");
    assert!(assess(&rt, &indexed, &KERNEL_BOOT).is_exited());
    let survivors = [young.id, live.id, unverified.id, corrupt.id];
    let lock_inodes: Vec<u64> = survivors
        .iter()
        .map(|&id| fs::metadata(rt.lock_path(id)).unwrap().ino())
        .collect();

    let dry = forget_after(&rt, 30 * DAY, true);
    assert_eq!(dry.forgotten, 0, "{dry:#?}");
    let would: Vec<&str> = dry
        .entries
        .iter()
        .filter(|e| e.action == Action::WouldForget)
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(would.len(), 2, "{dry:#?}");
    // Record (with its result, and its lock), proof, stdout (F3: the silent stderr has none).
    assert_eq!(
        exists(&rt, settled.id).len(),
        3,
        "dry run removed something"
    );

    let r = forget_after(&rt, 30 * DAY, false);
    assert_eq!(r.forgotten, 2, "{r:#?}");
    assert_eq!(r.young, 1, "{r:#?}");
    for id in [settled.id, indexed.id] {
        assert_eq!(exists(&rt, id), Vec::<String>::new(), "{r:#?}");
        assert!(!rt.open_marker_path(id).exists());
        assert!(!rt.forget_intent_path(id).exists());
        // Forgotten or unknown, in one line.
        let err = rt.read_registration(id).unwrap_err();
        assert!(matches!(err, RegistryError::NotFound(_)));
        assert!(err.to_string().contains("forgotten"), "{err}");
    }
    let kept = |id: RegistrationId| {
        r.entries
            .iter()
            .find(|e| e.id == id.to_string())
            .unwrap_or_else(|| panic!("{id} not reported: {r:#?}"))
            .clone()
    };
    let not_exited = |id: RegistrationId| match kept(id).reason {
        Reason::NotExited { state, .. } => Some(state),
        _ => None,
    };
    assert_eq!(not_exited(live.id), Some(State::Live), "{r:#?}");
    assert_eq!(not_exited(unverified.id), Some(State::Unverified), "{r:#?}");
    assert!(
        matches!(kept(corrupt.id).reason, Reason::RecordNotIntact { .. }),
        "{r:#?}"
    );
    for &id in &survivors {
        assert!(rt.record_path(id).exists());
        assert!(rt.proof_path(id).exists());
    }
    let after: Vec<u64> = survivors
        .iter()
        .map(|&id| fs::metadata(rt.lock_path(id)).unwrap().ino())
        .collect();
    assert_eq!(lock_inodes, after, "lock inodes changed");
    assert_eq!(rt.list_ids().unwrap().len(), survivors.len());
}

#[test]
fn an_interrupted_forget_is_finished_by_the_next_pass() {
    let (_home, rt) = runtime();
    let reg = fabricate(&rt, Fabricate::exited(ago(40 * DAY)));
    // A crash right after step 2: the record is the intent; everything else is still there.
    fs::rename(rt.record_path(reg.id), rt.forget_intent_path(reg.id)).unwrap();
    assert!(matches!(
        rt.read_registration(reg.id),
        Err(RegistryError::NotFound(_))
    ));
    assert!(rt.list_ids().unwrap().is_empty());
    let r = forget_after(&rt, 30 * DAY, false);
    assert_eq!((r.resumed, r.forgotten), (1, 0), "{r:#?}");
    assert_eq!(exists(&rt, reg.id), Vec::<String>::new());
    assert!(!rt.forget_intent_path(reg.id).exists());
}

#[test]
fn a_held_lock_keeps_the_registration() {
    let (_home, rt) = runtime();
    let reg = fabricate(&rt, Fabricate::exited(ago(40 * DAY)));
    let held = rt.lock(reg.id, Duration::from_secs(1)).unwrap();
    let r = forget_after(&rt, 30 * DAY, false);
    assert_eq!(r.forgotten, 0);
    assert!(
        matches!(r.entries[0].reason, Reason::LockBusy { .. }),
        "{r:#?}"
    );
    drop(held);
    assert!(rt.read_registration(reg.id).is_ok());
}

#[test]
fn the_open_index_holds_what_is_not_proven_exited() {
    let (_home, rt) = runtime();
    // write_registration creates the marker before the record.
    let exited = fabricate(&rt, Fabricate::indexed(ago(Duration::from_secs(5))));
    let live = fabricate(&rt, Fabricate::live(ago(Duration::from_secs(5))));
    // History: settled, no marker.
    let settled = fabricate(&rt, Fabricate::exited(ago(DAY)));
    let mut open = rt.open_ids().unwrap();
    open.sort();
    let mut want = vec![exited.id, live.id];
    want.sort();
    assert_eq!(open, want);

    // Settling removes exactly the exited marker, under the lock.
    let c = open_index::settle_all(&rt, &KERNEL_BOOT).unwrap();
    assert_eq!((c.open, c.closed, c.busy), (2, 1, 0), "{c:?}");
    assert_eq!(rt.open_ids().unwrap(), [live.id]);
    // The record of the exited one is kept (forgetting is a separate, later decision).
    assert!(rt.read_registration(exited.id).is_ok());
    // A held lock leaves the marker to its owner.
    let held = rt.lock(live.id, Duration::from_secs(1)).unwrap();
    assert!(open_index::settle_if_free(&rt, live.id, &KERNEL_BOOT)
        .unwrap()
        .is_none());
    drop(held);

    // A record without a marker that is not exited (tampered proof) is put back by reindex.
    assert!(!rt.is_open(settled.id));
    fs::remove_file(rt.proof_path(settled.id)).unwrap();
    let added = open_index::reindex(&rt, &KERNEL_BOOT).unwrap();
    assert_eq!(added, [settled.id]);
    assert!(rt.is_open(settled.id));
    // Reindexing an exited record does nothing.
    assert!(open_index::reindex(&rt, &KERNEL_BOOT).unwrap().is_empty());
}

#[test]
fn a_marker_without_a_record_is_kept_while_young_then_dropped() {
    let (_home, rt) = runtime();
    let id = rt.new_id().unwrap();
    rt.add_open_marker(id).unwrap();
    let lock = rt.lock(id, Duration::from_secs(1)).unwrap();
    assert!(matches!(
        open_index::settle(&rt, id, &lock, &KERNEL_BOOT).unwrap(),
        Settled::Unwritten { dropped: false }
    ));
    assert!(rt.open_marker_path(id).exists());
    let old = ago(UNWRITTEN_AFTER + Duration::from_secs(1));
    fs::File::options()
        .write(true)
        .open(rt.open_marker_path(id))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert!(matches!(
        open_index::settle(&rt, id, &lock, &KERNEL_BOOT).unwrap(),
        Settled::Unwritten { dropped: true }
    ));
    assert!(!rt.open_marker_path(id).exists());
    // Only the registration's own lock may remove a marker.
    let other = rt.new_id().unwrap();
    rt.add_open_marker(other).unwrap();
    assert!(matches!(
        rt.remove_open_marker(other, &lock),
        Err(RegistryError::NotLocked(_))
    ));
}

#[test]
fn a_runtime_without_the_index_is_migrated_once() {
    let (home, rt) = runtime();
    let regs: Vec<_> = (0..3)
        .map(|_| fabricate(&rt, Fabricate::exited(ago(DAY))))
        .collect();
    // A runtime written before the index existed.
    fs::remove_dir_all(rt.open_dir()).unwrap();
    // Read-only commands see every record as possibly open.
    let ro = Runtime::open_existing(home.path(), 7300).unwrap();
    assert_eq!(ro.open_ids().unwrap(), rt.list_ids().unwrap());
    assert!(!ro.open_dir().exists());
    // Opening it for work builds the index: every record, then settled by the next pass.
    let rt = Runtime::open(home.path(), 7300).unwrap();
    assert_eq!(rt.open_ids().unwrap(), rt.list_ids().unwrap());
    let leftovers: Vec<_> = fs::read_dir(rt.dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".open"))
        .collect();
    assert!(leftovers.is_empty());
    // Idempotent.
    Runtime::open(home.path(), 7300).unwrap();
    assert_eq!(rt.open_ids().unwrap().len(), regs.len());
    let c = open_index::settle_all(&rt, &KERNEL_BOOT).unwrap();
    assert_eq!(c.closed, regs.len());
    assert!(rt.open_ids().unwrap().is_empty());
}

#[test]
fn recovery_reads_only_the_open_index_and_settles_it() {
    let (_home, rt) = runtime();
    let exited = fabricate(&rt, Fabricate::indexed(ago(Duration::from_secs(5))));
    // History with a corrupt record and no marker: recovery does not read it.
    let history = fabricate(&rt, Fabricate::exited(ago(DAY)));
    fs::write(rt.record_path(history.id), b"not a record").unwrap();
    // A marker whose launch died before it registered, long ago.
    unwritten_long_ago(&rt);

    let r = recover(&rt, &RecoverOptions::default()).unwrap();
    assert_eq!(r.entries.len(), 1, "{r:#?}");
    assert_eq!(r.entries[0].id, exited.id);
    assert!(matches!(
        r.entries[0].action,
        RecoveryAction::Released { .. }
    ));
    assert_eq!(r.unwritten_dropped, 1);
    assert!(rt.open_ids().unwrap().is_empty());
    // A second run has nothing to read.
    let again = recover(&rt, &RecoverOptions::default()).unwrap();
    assert!(again.entries.is_empty(), "{again:#?}");
}

// ---------------------------------------------------------------------------------------------
// Through the built binary.

use refine_tests::cli_support;

use cli_support::{words, Home};

/// The runtime of a CLI test home, opened the way the binary opens it.
fn cli_runtime(home: &Home) -> Runtime {
    Runtime::open(home.path(), home.port).unwrap()
}

fn listed(rows: &serde_json::Value, id: RegistrationId) -> Option<serde_json::Value> {
    rows["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.to_string())
        .cloned()
}

#[test]
fn gc_forgets_old_exited_registrations_and_retires_capture_receipts() {
    let home = Home::new();
    let rt = cli_runtime(&home);
    let old = ago(40 * DAY);
    let gone = fabricate(&rt, Fabricate::exited(old));
    let young = fabricate(&rt, Fabricate::exited(ago(10 * DAY)));
    fs::write(rt.capture_receipt_path(young.id), b"prefixes").unwrap();
    backdate(&rt, young.id, ago(10 * DAY));
    let live = fabricate(&rt, Fabricate::live(old));
    let unverified = fabricate(&rt, Fabricate::unverified(old));
    let gc = home.json(&words("gc --older-than 7d --forget-after 30d --json"));
    // Retention: the young one's artifacts and capture receipt are past 7 days.
    assert!(!rt.capture_receipt_path(young.id).exists(), "{gc:#}");
    assert!(!rt
        .log_path(young.id, refine_supervisor::store::registry::Stream::Stdout)
        .exists());
    assert!(rt.record_path(young.id).exists());
    // Forgetting: only the old exited one, wholly.
    assert_eq!(gc["forget"]["forgotten"], 1, "{gc:#}");
    assert_eq!(exists(&rt, gone.id), Vec::<String>::new());
    for id in [young.id, live.id, unverified.id] {
        assert!(rt.record_path(id).exists(), "{id}: {gc:#}");
        assert!(rt.proof_path(id).exists(), "{id}: {gc:#}");
    }
    let all = home.json(&["ps", "--all", "--json"]);
    assert!(listed(&all, gone.id).is_none(), "{all:#}");
    assert!(listed(&all, live.id).is_some(), "{all:#}");
    let args = ["show", &gone.id.to_string()];
    let err = home.one_line_error(&args);
    assert!(err.contains("forgotten"), "{err}");
}

#[test]
fn ps_reads_the_open_index_and_ps_all_the_history() {
    let home = Home::new();
    let rt = cli_runtime(&home);
    let live = fabricate(&rt, Fabricate::live(ago(DAY)));
    // History, proven exited once, whose record is now corrupt: `ps` does not even read it.
    let history = fabricate(&rt, Fabricate::exited(ago(DAY)));
    fs::write(rt.record_path(history.id), b"not a record").unwrap();
    let ps = home.json(&["ps", "--json"]);
    assert!(listed(&ps, history.id).is_none(), "{ps:#}");
    assert_eq!(listed(&ps, live.id).unwrap()["state"], "live", "{ps:#}");
    let all = home.json(&["ps", "--all", "--json"]);
    assert_eq!(
        listed(&all, history.id).unwrap()["state"],
        "corrupt",
        "{all:#}"
    );
    assert_eq!(listed(&all, live.id).unwrap()["state"], "live", "{all:#}");
}

#[test]
fn a_proven_exited_launch_leaves_the_open_index() {
    let home = Home::new();
    let (out, doc) = home.run_json(&["true"]);
    assert!(out.status.success(), "{doc}");
    let id = RegistrationId::parse(doc["id"].as_str().unwrap()).unwrap();
    let rt = cli_runtime(&home);
    assert!(rt.record_path(id).exists());
    assert!(
        !rt.open_marker_path(id).exists(),
        "the launch's engine proved it exited but left it open"
    );
    assert!(rt.open_ids().unwrap().is_empty());
}

#[test]
fn crash_states_of_the_index_are_handled() {
    let home = Home::new();
    let rt = cli_runtime(&home);
    // A marker whose launch died before it wrote the record, long ago.
    let unwritten = unwritten_long_ago(&rt);
    // A record whose marker is gone (settled): exited, shown by `ps --all` only.
    let settled = fabricate(&rt, Fabricate::exited(ago(DAY)));
    // An exited record still indexed (its settle was lost in a crash).
    let unsettled = fabricate(&rt, Fabricate::indexed(ago(DAY)));
    let ps = home.json(&["ps", "--json"]);
    assert_eq!(ps["registrations"].as_array().unwrap().len(), 0, "{ps:#}");
    let all = home.json(&["ps", "--all", "--json"]);
    for id in [settled.id, unsettled.id] {
        assert_eq!(listed(&all, id).unwrap()["state"], "exited", "{all:#}");
    }
    assert!(listed(&all, unwritten).is_none(), "{all:#}");
    let rec = home.json(&["recover", "--json"]);
    assert!(rt.open_ids().unwrap().is_empty(), "{rec:#}");
    assert!(rt.record_path(settled.id).exists() && rt.record_path(unsettled.id).exists());
}

/// Issue 41 item 4: an `unverified` scope's reason is a typed object in the documents (the
/// check that failed, its fields beside it), not words.
#[test]
fn an_unverified_reason_is_a_typed_object_in_show_and_ps() {
    let home = Home::new();
    let (_, id) = home.run_ok(&["true"]);
    let show = home.json(&["show", "--json", &id]);
    let proof = show["record"]["proof"]["path"]
        .as_str()
        .expect("proof path");
    fs::remove_file(proof).expect("remove the proof file");
    let show = home.json(&["show", "--json", &id]);
    assert_eq!(show["state"], "unverified", "{show:#}");
    let want = serde_json::json!({"kind": "unverified", "failed": {"check": "proof_missing"}});
    assert_eq!(show["reason"], want, "{show:#}");
    assert_eq!(show["assessment"]["reason"], want, "{show:#}");
    // The human view words it.
    let text = home.cli(&["show", &id]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("proof missing"), "{text}");
}

/// Issue 41 item 4: why `gc` kept, forgot or retired something is a typed object tagged by
/// `kind` in `gc --json` (forgetting's and retention's entries alike), not words.
#[test]
fn gc_says_why_it_kept_as_typed_objects() {
    let home = Home::new();
    let rt = cli_runtime(&home);
    let old = ago(40 * DAY);
    let gone = fabricate(&rt, Fabricate::exited(old));
    let live = fabricate(&rt, Fabricate::live(old));
    let unverified = fabricate(&rt, Fabricate::unverified(old));
    let corrupt = fabricate(&rt, Fabricate::indexed(old));
    fs::write(rt.record_path(corrupt.id), b"not a record").unwrap();
    backdate(&rt, corrupt.id, old);
    let gc = home.json(&[
        "gc",
        "--older-than",
        "7d",
        "--forget-after",
        "30d",
        "--dry-run",
        "--json",
    ]);
    let entry = |list: &str, id: RegistrationId| -> serde_json::Value {
        let entries = if list == "forget" {
            &gc["forget"]["entries"]
        } else {
            &gc["entries"]
        };
        entries
            .as_array()
            .unwrap_or_else(|| panic!("no {list} entries: {gc:#}"))
            .iter()
            .find(|e| e["id"] == id.to_string())
            .unwrap_or_else(|| panic!("{id} not in {list}: {gc:#}"))
            .clone()
    };
    for list in ["forget", "retention"] {
        let r = &entry(list, live.id)["reason"];
        assert_eq!(r["kind"], "not_exited", "{list} live: {gc:#}");
        assert_eq!(r["state"], "live", "{list} live: {gc:#}");
        let r = &entry(list, unverified.id)["reason"];
        assert_eq!(r["kind"], "not_exited", "{list} unverified: {gc:#}");
        assert_eq!(r["state"], "unverified", "{list} unverified: {gc:#}");
        assert_eq!(r["reason"]["kind"], "unverified", "{list}: {gc:#}");
        assert!(r["reason"]["failed"]["check"].is_string(), "{list}: {gc:#}");
        let r = &entry(list, corrupt.id)["reason"];
        assert_eq!(r["kind"], "record_not_intact", "{list} corrupt: {gc:#}");
        assert!(r["error"].is_string(), "{list} corrupt: {gc:#}");
    }
    let r = &entry("forget", gone.id);
    assert_eq!(r["action"], "would_forget", "{gc:#}");
    assert_eq!(r["reason"]["kind"], "exited_past_horizon", "{gc:#}");
    let r = &entry("retention", gone.id);
    assert_eq!(r["action"], "would_delete", "{gc:#}");
    assert_eq!(r["reason"]["kind"], "exited_past_limit", "{gc:#}");
    // The human view words them as before.
    let out = home.cli(&[
        "gc",
        "--older-than",
        "7d",
        "--forget-after",
        "30d",
        "--dry-run",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("exited (verified),"), "{text}");
    assert!(text.contains("exited, nothing changed for"), "{text}");
}

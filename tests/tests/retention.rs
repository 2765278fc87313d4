//! `gc` (SPEC R1–R3) driven through the CLI against real scopes: only artifacts of proven-exited
//! scopes go; a damaged receipt, a live scope and a SIGKILLed guardian keep theirs; lock files
//! keep their inodes; records and proofs are never deleted.

use refine_tests::cli_support;

use std::fs;
use std::os::unix::fs::MetadataExt;

use cli_support::*;

fn artifacts(home: &Home, id: &str) -> Vec<bool> {
    ["stdout", "stderr"]
        .iter()
        .map(|s| {
            home.run_dir()
                .join("logs")
                .join(format!("{id}.{s}"))
                .exists()
        })
        .collect()
}

fn lock_inodes(home: &Home) -> Vec<(String, u64)> {
    let mut v: Vec<_> = fs::read_dir(home.run_dir().join("locks"))
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().ino(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn gc_deletes_only_artifacts_of_exited_scopes() {
    let home = Home::new();
    // 1. exited, verified.
    let (_, exited) = launch(&home, "wait", &["sh", "-c", "echo bye; echo err >&2"]);
    // 2. exited, but the receipt is damaged in place afterwards.
    let (_, damaged) = launch(&home, "wait", &["sh", "-c", "echo damaged; echo err >&2"]);
    let proof = show(&home, &damaged)["record"]["proof"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut bytes = fs::read(&proof).unwrap();
    bytes[40] ^= 0xff;
    refine_tests::overwrite_in_place(&proof, &bytes);
    // 3. live: its guardian runs on after the launcher left.
    let (_, live) = launch(
        &home,
        "leave",
        &["sh", "-c", "echo holding; exec sleep 600"],
    );
    // 4. the guardian SIGKILLed: no receipt will ever come.
    let (_, killed) = launch(&home, "leave", &["sh", "-c", "echo orphan; exec sleep 600"]);
    let [guardian, workload] = witnesses(&home, &killed);
    assert!(kill_witness(
        guardian.0,
        guardian.1,
        rustix::process::Signal::KILL
    ));
    home.wait_state(&killed, "unverified");
    assert_eq!(home.state(&exited), "exited");
    assert_eq!(home.state(&damaged), "unverified");
    assert_eq!(home.state(&live), "live");

    let locks_before = lock_inodes(&home);
    let dry = home.json(&["gc", "--older-than", "0s", "--dry-run", "--json"]);
    assert_eq!(dry["deleted_files"], 0, "{dry}");
    assert_eq!(artifacts(&home, &exited), [true, true]);

    // A too-young limit deletes nothing.
    let young = home.json(&["gc", "--json"]);
    assert_eq!(young["deleted_files"], 0, "{young}");

    let gc = home.json(&["gc", "--older-than", "0s", "--json"]);
    assert_eq!(gc["deleted_files"], 2, "{gc}");
    assert_eq!(artifacts(&home, &exited), [false, false]);
    for id in [&damaged, &live, &killed] {
        assert_eq!(
            artifacts(&home, id),
            [true, true],
            "{id} lost artifacts: {gc}"
        );
    }
    // Records and proofs stay; lock inodes are unchanged.
    for id in [&exited, &damaged, &live, &killed] {
        assert!(home.run_dir().join("registrations").join(id).exists());
        assert!(home.run_dir().join("proofs").join(id).exists());
    }
    assert_eq!(locks_before, lock_inodes(&home));
    // The exited one is still shown, with its receipt.
    assert_eq!(show(&home, &exited)["state"], "exited");

    // Clean up: the live scope through the shared stop; the orphaned workload of the killed
    // guardian too (stop ends verified witnesses even without a guardian).
    home.cli(&["stop", &live]);
    home.cli(&["stop", &killed]);
    assert!(refine_tests::wait_until(DEADLINE, || !alive(
        workload.0, workload.1
    )));
}

#[test]
fn ignore_marker_is_written_only_where_no_ignore_file_exists() {
    let home = Home::new();
    fs::create_dir_all(home.path().join("run")).unwrap();
    fs::write(home.path().join("run/.gitignore"), "mine\n").unwrap();
    launch(&home, "wait", &["true"]);
    assert_eq!(
        fs::read_to_string(home.path().join("run/.gitignore")).unwrap(),
        "mine\n"
    );

    let other = Home::new();
    launch(&other, "wait", &["true"]);
    assert!(other.path().join("run/.gitignore").exists());
}

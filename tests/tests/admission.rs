//! Capacity admission is check-and-reserve under one runtime lock (SPEC C4): concurrent `agent`
//! launches never overshoot the slots. Host figures come from the test seam
//! (`REFINE_CAPACITY_MEMORY`, `REFINE_CAPACITY_CORES`): 1 GiB and 64 cores give one slot.

use refine_tests::cli_support;

use std::process::{Command, Stdio};

use cli_support::*;

const GIB: u64 = 1024 * 1024 * 1024;

#[test]
fn six_concurrent_agent_launches_for_one_slot_admit_exactly_one() {
    let home = Home::new();
    let launch = || -> Command {
        // Each admitted agent leaves a descendant that keeps its scope (and its slot) live.
        let mut c = home.command(&words(
            "run --json --kind agent -- sh -c 'sleep 600 & echo holding'",
        ));
        c.env("REFINE_CAPACITY_MEMORY", GIB.to_string())
            .env("REFINE_CAPACITY_CORES", "64")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let children: Vec<_> = (0..6)
        .map(|_| launch().spawn().expect("spawn run"))
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait run"))
        .collect();
    let admitted: Vec<String> = outs
        .iter()
        .filter(|o| o.status.success())
        .map(|o| parse(&["run"], o)["id"].as_str().expect("id").to_owned())
        .collect();
    let ids: Vec<String> = home
        .ps()
        .iter()
        .filter(|r| r["state"] == "live")
        .map(|r| r["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    // Whatever happened, leave nothing running.
    for id in &ids {
        let _ = home.cli(&["stop", id]);
    }
    for o in outs.iter().filter(|o| !o.status.success()) {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no capacity slot"), "{err}");
    }
    assert_eq!(admitted.len(), 1, "admitted {admitted:?}, live {ids:?}");
    assert_eq!(ids, admitted);
}

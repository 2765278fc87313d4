//! H4: the receipt carries what the whole tree cost, read by the guardian with
//! `getrusage(RUSAGE_CHILDREN)` once `waitpid` said ECHILD: a detached descendant's CPU is in it.

mod cli_support;

use cli_support::{show, Home};
use refine_tests::bin;

fn cpu_us(usage: &serde_json::Value) -> u64 {
    usage["user_us"].as_u64().expect("user_us") + usage["system_us"].as_u64().expect("system_us")
}

#[test]
fn a_detached_descendants_cpu_is_in_the_receipt() {
    let home = Home::new();
    let burn = bin("burn");
    // The workload exits at once; the orphaned burner holds the scope and uses 300 ms of CPU.
    let script = format!("{} 300 & exit 0", burn.display());
    let (out, doc) = home.run_json(&["sh", "-c", &script]);
    assert!(out.status.success(), "{out:?}");
    let id = doc["id"].as_str().expect("id").to_owned();
    home.wait_state(&id, "exited");
    let shown = show(&home, &id);
    let usage = &shown["receipt"]["usage"];
    assert!(
        cpu_us(usage) >= 300_000,
        "the tree used at least 300 ms of CPU, the receipt says {usage}"
    );
    assert!(usage["max_rss_kib"].as_u64().unwrap_or(0) > 0, "{usage}");
    // ps --json shows the same figures.
    assert_eq!(&home.row(&id)["usage"], usage);
}

#[test]
fn a_scope_that_did_nothing_reports_little() {
    // Negative control: the figures are the tree's, not a constant.
    let home = Home::new();
    let (out, doc) = home.run_json(&["true"]);
    assert!(out.status.success(), "{out:?}");
    let id = doc["id"].as_str().expect("id").to_owned();
    home.wait_state(&id, "exited");
    let usage = &show(&home, &id)["receipt"]["usage"];
    assert!(cpu_us(usage) < 300_000, "{usage}");
}

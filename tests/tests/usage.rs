//! H4: the receipt carries what the whole tree cost, read by the guardian with
//! `getrusage(RUSAGE_CHILDREN)` once `waitpid` said ECHILD: a detached descendant's CPU is in it.

use refine_tests::cli_support;

use cli_support::{free_loopback_addr, scrape, show, Home, Serving};
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
    let (_, id) = home.run_ok(&["sh", "-c", &script]);
    home.wait_state(&id, "exited");
    let shown = show(&home, &id);
    let usage = &shown["receipt"]["usage"];
    assert!(
        cpu_us(usage) >= 300_000,
        "the tree used at least 300 ms of CPU, the receipt says {usage}"
    );
    assert!(usage["max_rss_kib"].as_u64().unwrap_or(0) > 0, "{usage}");
    // The human view says it in one line.
    let human = String::from_utf8_lossy(&home.cli(&["show", &id]).stdout).into_owned();
    assert!(
        human
            .lines()
            .any(|l| l.contains("Cost:") && l.contains("user")),
        "{human}"
    );
    // ps --json shows the same figures, and so does the launch's result record (written at the
    // workload's exit, completed when the receipt came).
    assert_eq!(&home.row(&id)["usage"], usage);
    assert_eq!(&show(&home, &id)["result"]["usage"], usage);
    // The record itself is completed by whoever proves the end under the lock: here the
    // recovery pass (the foreground `run` returned at the workload's exit).
    let out = home.cli(&["recover"]);
    assert!(out.status.success(), "{out:?}");
    let rt = refine_supervisor::store::registry::Runtime::open_existing(home.path(), home.port)
        .expect("runtime");
    let rid = refine_protocol::RegistrationId::parse(&id).expect("id");
    let record = rt.read_result(rid).expect("result").expect("a result");
    let u = record.usage.expect("the result record carries the usage");
    assert_eq!(u.user_us, usage["user_us"].as_u64().unwrap());
    assert_eq!(u.system_us, usage["system_us"].as_u64().unwrap());
}

/// The service counts what its launches' trees cost (F2 with H4), from their receipts.
#[test]
fn the_metrics_count_the_trees_cpu() {
    let home = Home::new();
    let addr = free_loopback_addr();
    let svc = Serving::start(&home, &["--metrics", &addr]);
    let burn = bin("burn");
    let out = home.cli(&["run", "--detach", "--", burn.to_str().unwrap(), "200"]);
    assert!(out.status.success(), "{out:?}");
    let mut text = String::new();
    let counted = refine_tests::wait_until(cli_support::DEADLINE, || {
        text = scrape(&addr);
        let cpu: f64 = text
            .lines()
            .filter(|l| l.starts_with("refine_tree_cpu_seconds_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        cpu >= 0.2
    });
    drop(svc);
    assert!(counted, "{text}");
}

#[test]
fn a_scope_that_did_nothing_reports_little() {
    // Negative control: the figures are the tree's, not a constant.
    let home = Home::new();
    let (_, id) = home.run_ok(&["true"]);
    home.wait_state(&id, "exited");
    let usage = &show(&home, &id)["receipt"]["usage"];
    assert!(cpu_us(usage) < 300_000, "{usage}");
}

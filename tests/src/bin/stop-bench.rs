//! `stop-bench [--iterations N] [--sessions S] [--groups G] [--leaves L]`: the stop benchmark.
//! Each iteration launches `tree-builder` behind the real guardian (default: 10 sessions x 3
//! groups x (leader + 2 leaves) = 100 processes below the workload), waits until every process
//! reported ready, then times `stop::stop` (no grace) until the guardian's receipt verified.
//! Prints each phase's median and the total's median, min and max.

use std::path::Path;
use std::time::Duration;

use refine_supervisor::end::stop::{self, StopOptions, StopOutcome};
use refine_supervisor::store::registry::Runtime;
use refine_tests::stopkit::{self, BenchArgs};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let (iterations, sessions, groups, leaves) = BenchArgs::parse_over(20, 10, 3, 2);
    let tree_builder = BenchArgs::tree_builder();
    let home = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::open(home.path(), 7300).expect("runtime");
    let (s, g, l) = (sessions.to_string(), groups.to_string(), leaves.to_string());
    let tree = ["--sessions", &s, "--groups", &g, "--leaves", &l];
    let nodes = sessions * (1 + groups * (1 + leaves));

    let mut total = Vec::new();
    let mut quiesce = Vec::new();
    let mut kill = Vec::new();
    let mut rounds = Vec::new();
    for i in 0..iterations {
        let mut scope = stopkit::launch_guardian(&rt, Path::new(&tree_builder), &tree);
        assert_eq!(scope.wait_ready(), nodes);
        let seen = scope.members().len();
        let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
        assert_eq!(report.outcome, StopOutcome::Stopped);
        assert!(report.assessment.receipt().is_some());
        scope.reap();
        if i == 0 {
            println!(
                "tree: {} processes below the workload over {sessions} sessions; seen {seen}, killed {}",
                nodes, report.killed
            );
        }
        total.push(report.timings.total);
        quiesce.push(report.timings.quiesce);
        kill.push(report.timings.kill_to_exit);
        rounds.push(report.timings.rounds);
    }
    rounds.sort();
    println!("iterations: {iterations}");
    println!(
        "quiesce (SIGSTOP + stable re-scan), median: {}",
        ms(median(quiesce))
    );
    println!(
        "SIGKILL to guardian exit, median:          {}",
        ms(median(kill))
    );
    println!(
        "scan rounds, median:                       {}",
        rounds[rounds.len() / 2]
    );
    let min = *total.iter().min().expect("samples");
    let max = *total.iter().max().expect("samples");
    println!(
        "stop to verified receipt: median {}  min {}  max {}  (target < 100 ms, budget 2 s)",
        ms(median(total)),
        ms(min),
        ms(max)
    );
}

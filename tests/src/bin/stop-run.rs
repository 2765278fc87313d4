//! `stop-run HOME PORT ID [BUDGET_SECS]`: one stop from a separate process (for the
//! overlapping-stops test, and the large-tree test under a low descriptor limit).
//! Prints `outcome=<outcome> state=<assessment> receipt=<written_at_ns|none>`.

use std::path::Path;

use refine_protocol::RegistrationId;
use refine_supervisor::end::stop::{self, StopOptions, StopOutcome};
use refine_supervisor::store::registry::Runtime;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (home, port, id, budget) = match args.as_slice() {
        [home, port, id] => (home, port, id, None),
        [home, port, id, secs] => (home, port, id, Some(secs.parse().expect("budget seconds"))),
        _ => {
            eprintln!("usage: stop-run HOME PORT ID [BUDGET_SECS]");
            std::process::exit(2);
        }
    };
    let opts = StopOptions {
        budget: budget.map_or(stop::DEFAULT_BUDGET, std::time::Duration::from_secs),
        ..StopOptions::default()
    };
    let rt = Runtime::open_existing(Path::new(home), port.parse().expect("port")).expect("runtime");
    let id = RegistrationId::parse(id).expect("id");
    let reg = rt.read_registration(id).expect("registration");
    match stop::stop(&rt, &reg, &opts) {
        Ok(report) => {
            let outcome = match report.outcome {
                StopOutcome::AlreadyExited => "already_exited",
                StopOutcome::Stopped => "stopped",
                StopOutcome::KilledUnverified => "killed_unverified",
                StopOutcome::NotSignalled => "not_signalled",
            };
            let receipt = report
                .assessment
                .receipt()
                .map(|r| r.written_at_ns.to_string())
                .unwrap_or_else(|| "none".into());
            println!(
                "outcome={outcome} state={} receipt={receipt}",
                report.assessment.name()
            );
        }
        Err(e) => {
            eprintln!("stop failed: {e}: {e:?}");
            std::process::exit(1);
        }
    }
}

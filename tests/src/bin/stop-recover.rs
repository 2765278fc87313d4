//! `stop-recover HOME PORT`: one recovery run from a fresh process. Prints one line per
//! registration: `<id> <action> [<stop outcome>]`.

use std::path::Path;

use refine_supervisor::end::recover::{recover, RecoverOptions, RecoveryAction};
use refine_supervisor::store::registry::Runtime;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [home, port] = args.as_slice() else {
        eprintln!("usage: stop-recover HOME PORT");
        std::process::exit(2);
    };
    let rt = Runtime::open_existing(Path::new(home), port.parse().expect("port")).expect("runtime");
    let report = recover(&rt, &RecoverOptions::default()).expect("recover");
    for e in &report.entries {
        let (action, detail) = match &e.action {
            RecoveryAction::Stopped { report } => ("stopped", format!("{:?}", report.outcome)),
            RecoveryAction::Released { assessment } => ("released", assessment.name().into()),
            RecoveryAction::Kept { reason, .. } => ("kept", format!("{reason:?}")),
            RecoveryAction::Owned => ("owned", String::new()),
            RecoveryAction::Adopted => ("adopted", String::new()),
            RecoveryAction::StopFailed { error, .. } => ("stop_failed", format!("{error:?}")),
            RecoveryAction::Corrupt { error } => ("corrupt", format!("{error}")),
        };
        println!("{} {action} {detail}", e.id);
    }
}

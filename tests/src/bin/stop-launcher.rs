//! `stop-launcher HOME PORT TREE_BUILDER`: a launcher process for the recovery test. Starts three
//! managed workloads through `refine_supervisor::launch::launch_registered`, holding each
//! registration's lock as a live launcher does:
//!
//! 1. `exits`: exits normally (waits for its scope's receipt),
//! 2. `detached`: exits, leaving a detached session behind,
//! 3. `ignorer`: keeps running, and ignores SIGTERM (as do its leaves).
//!
//! The launches ask for no parent-death signal, as the service's do: killed, this launcher leaves
//! them running for recovery to find.
//!
//! Prints `launched <name> <id>` for each and `ready` once all are up, then waits to be killed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::Duration;

use refine_supervisor::launch::guardian::GuardianEvent;
use refine_supervisor::launch::launch_registered_into;
use refine_supervisor::store::registry::Runtime;
use refine_tests::{stopkit, words};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [home, port, tree_builder] = args.as_slice() else {
        eprintln!("usage: stop-launcher HOME PORT TREE_BUILDER");
        std::process::exit(2);
    };
    let rt = Runtime::open(Path::new(home), port.parse().expect("port")).expect("runtime");
    let workloads: [(&str, &[&str]); 3] = [
        ("exits", &["--sessions", "0", "--then", "exit"]),
        (
            "detached",
            &words("--sessions 1 --groups 1 --leaves 2 --orphan --then exit"),
        ),
        (
            "ignorer",
            &words("--sessions 1 --groups 2 --leaves 2 --ignorers 4 --ignore-term"),
        ),
    ];
    let mut held = Vec::new();
    for (name, tree_args) in workloads {
        let id = rt.new_id().expect("id");
        let (lock, pending) = rt.begin_registration(id).expect("registration lock");
        let (reader, writer) = std::io::pipe().expect("pipe");
        let mut argv = vec![tree_builder.into()];
        argv.extend(tree_args.iter().map(std::ffi::OsString::from));
        let mut req = stopkit::request(argv, writer.into());
        // As the service's launches: they outlive a lost launcher until recovery (A4-A5). With
        // a parent-death signal, the guardians would end the scopes themselves (W16).
        req.guardian.pdeath_signal = None;
        let (_reg, mut link) = launch_registered_into(&rt, pending, id, req).expect("launch");
        let mut lines = BufReader::new(reader);
        let mut line = String::new();
        while !line.starts_with("ready") {
            line.clear();
            if lines.read_line(&mut line).expect("read") == 0 {
                panic!("{name}: no ready line");
            }
        }
        if name == "exits" {
            loop {
                match link
                    .next_event(Some(Duration::from_secs(30)))
                    .expect("event")
                {
                    Some(GuardianEvent::ScopeExited(_)) => break,
                    Some(_) => {}
                    None => panic!("exits: no receipt"),
                }
            }
        }
        println!("launched {name} {id}");
        held.push((lock, link, lines));
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

//! `gen-history HOME PORT COUNT [AGE_SECS]`: writes COUNT registrations of ended history into
//! `HOME/run/PORT` through the library, as launches leave them (record, proof file with its real
//! device and inode, verified receipt, stdout/stderr, launch result, lock file; settled, so no
//! open-index marker), each ended AGE_SECS ago (default 3600). Not durable: run `sync` after it.
//! Prints the id of the last one written, for `show`.

use std::path::Path;
use std::time::Duration;

use refine_supervisor::store::registry::Runtime;
use refine_tests::history::{ago, fabricate, Fabricate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (home, port, count, age) = match args.as_slice() {
        [h, p, c] => (h, p, c, "3600"),
        [h, p, c, a] => (h, p, c, a.as_str()),
        _ => {
            eprintln!("usage: gen-history HOME PORT COUNT [AGE_SECS]");
            std::process::exit(2);
        }
    };
    let rt = Runtime::open(Path::new(home), port.parse().expect("port")).expect("runtime");
    let count: usize = count.parse().expect("count");
    let f = Fabricate::exited(ago(Duration::from_secs(age.parse().expect("age"))));
    let mut last = None;
    for _ in 0..count {
        last = Some(fabricate(&rt, f).id);
    }
    if let Some(id) = last {
        println!("{id}");
    }
}

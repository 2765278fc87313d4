//! Benchmark harness behind `scripts/bench-capture` and `scripts/bench-launch` (not a test).
//!
//! - `cap-bench capture GUARDIAN WORKDIR BYTES ROUNDS`: a producer (`cap-producer fill BYTES`,
//!   zeros written from memory) writes through a pipe into `cat > FILE`, and the same producer
//!   runs as a managed workload whose stdout the engine captures into its artifact; both files
//!   live under WORKDIR (same filesystem). Each run starts after a `sync`, and the two take
//!   turns going first; medians, their ratio and the median of the rounds' ratios are printed.
//!   Beside them, in the same rounds: the guardian's own capture (a launch that outlives its
//!   launcher, L1: the guardian splices the pipe into the artifact) and the disk's physical
//!   limit, a plain `splice` of the producer's pipe into a file with no engine at all
//!   (`cap-bench splice-sink FILE`).
//! - `cap-bench splice-sink FILE`: stdin (a pipe) spliced into FILE until end of file.
//! - `cap-bench launch GUARDIAN WORKDIR RUNS`: managed `/bin/true` end to end (registration
//!   fsync, handshake, capture, receipt) against a plain fork+exec+wait of `/bin/true`,
//!   interleaved; medians, p90 and the ratio are printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use refine_protocol::record::Kind;
use refine_supervisor::launch::env_policy::LoginEnv;
use refine_supervisor::launch::{LaunchOutcome, LaunchRequest, ScopeState, Supervisor};
use refine_supervisor::store::registry::{Runtime, Stream};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("splice-sink") && args.len() == 3 {
        splice_sink(Path::new(&args[2]));
        return;
    }
    let usage =
        "usage: cap-bench capture GUARDIAN WORKDIR BYTES ROUNDS | launch GUARDIAN WORKDIR RUNS";
    if args.len() < 4 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let guardian = PathBuf::from(&args[2]);
    let work = PathBuf::from(&args[3]);
    match args[1].as_str() {
        "capture" => {
            let bytes: u64 = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
            let rounds: usize = args.get(5).and_then(|a| a.parse().ok()).unwrap_or(3);
            capture(&guardian, &work, bytes, rounds);
        }
        "launch" => {
            let runs: usize = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
            launch(&guardian, &work, runs);
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

fn supervisor(guardian: &Path, home: &Path) -> Supervisor {
    std::fs::create_dir_all(home).expect("create home");
    let rt = Runtime::open(home, 7499).expect("runtime");
    Supervisor::new(rt)
        .with_guardian_exe(guardian.to_owned())
        .with_login_env(Arc::new(LoginEnv::fixed(None)))
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn capture(guardian: &Path, work: &Path, bytes: u64, rounds: usize) {
    let sup = supervisor(guardian, &work.join("home"));
    // The producer writes from memory, as a program's output is made: read from /dev/zero
    // (`head -c N /dev/zero`), each byte would cost it a second copy, and the producer would
    // be the slowest of the three and hide the consumers' difference.
    let exe = std::env::current_exe().expect("current_exe");
    let producer_bin = exe.with_file_name("cap-producer");
    let producer = format!("exec '{}' fill {bytes}", producer_bin.display());
    let cat_file = work.join("cat.out");
    let sink_file = work.join("splice.out");
    // cat, the engine's relay, the guardian's capture, the plain splice.
    let names = ["cat", "engine", "guardian", "splice"];
    let mut times: [Vec<Duration>; 4] = Default::default();
    let mut ratios: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        // Each timed run starts from the same disk state: what the previous run left dirty is
        // written back first (untimed), and the order rotates by round, so that none pays for
        // another's writeback or finds a cache another warmed.
        let mut took = [Duration::ZERO; 4];
        for turn in 0..4 {
            let which = (turn + round) % 4;
            rustix::fs::sync();
            took[which] = match which {
                0 => cat_run(&producer, &cat_file, bytes),
                1 => engine_run(&sup, &producer, bytes, false),
                2 => engine_run(&sup, &producer, bytes, true),
                _ => splice_run(&producer, &sink_file, bytes),
            };
        }
        let line: Vec<String> = (0..4)
            .map(|i| {
                format!(
                    "{} {:>7.1} MiB/s ({:.2}x)",
                    names[i],
                    mib_s(bytes, took[i]),
                    took[0].as_secs_f64() / took[i].as_secs_f64()
                )
            })
            .collect();
        println!("round {round}: {}", line.join("   "));
        for i in 0..4 {
            ratios[i].push(took[0].as_secs_f64() / took[i].as_secs_f64());
            times[i].push(took[i]);
        }
    }
    println!();
    println!(
        "bytes per run          {bytes} ({:.2} GiB)",
        bytes as f64 / (1u64 << 30) as f64
    );
    let c = median(&mut times[0]);
    println!("cat (median)           {:>8.1} MiB/s", mib_s(bytes, c));
    for i in 1..4 {
        let m = median(&mut times[i]);
        let r = &mut ratios[i];
        r.sort_by(f64::total_cmp);
        println!(
            "{:<9} (median)     {:>8.1} MiB/s   {:.2}x cat; per round (median) {:.2}x (lowest {:.2}x, highest {:.2}x)",
            names[i],
            mib_s(bytes, m),
            c.as_secs_f64() / m.as_secs_f64(),
            r[r.len() / 2],
            r[0],
            r[r.len() - 1]
        );
    }
    println!("target (F5): engine and guardian >= 1.5x cat; splice is the disk's limit here");
}

/// `PRODUCER | cap-bench splice-sink FILE`: the physical limit, no engine.
fn splice_run(producer: &str, file: &Path, bytes: u64) -> Duration {
    let exe = std::env::current_exe().expect("current_exe");
    let t = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{producer} | '{}' splice-sink '{}'",
            exe.display(),
            file.display()
        ))
        .stdin(Stdio::null())
        .status()
        .expect("run the splice pipeline");
    let took = t.elapsed();
    assert!(status.success());
    assert_eq!(std::fs::metadata(file).expect("splice file").len(), bytes);
    std::fs::remove_file(file).expect("remove splice file");
    took
}

/// Stdin spliced into `file` until end of file.
fn splice_sink(file: &Path) {
    let out = std::fs::File::create(file).expect("create the splice file");
    let stdin = rustix::stdio::stdin();
    // The pipe the guardian's capture gets (1 MiB): the same bytes per move.
    let _ = rustix::pipe::fcntl_setpipe_size(stdin, 1 << 20);
    loop {
        match rustix::pipe::splice(
            stdin,
            None,
            &out,
            None,
            1 << 20,
            rustix::pipe::SpliceFlags::MOVE,
        ) {
            Ok(0) => return,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => panic!("splice: {e}"),
        }
    }
}

/// `PRODUCER | cat > FILE`: its time, then the file goes.
fn cat_run(producer: &str, cat_file: &Path, bytes: u64) -> Duration {
    let t = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{producer} | cat > '{}'", cat_file.display()))
        .stdin(Stdio::null())
        .status()
        .expect("run cat pipeline");
    let took = t.elapsed();
    assert!(status.success());
    assert_eq!(std::fs::metadata(cat_file).expect("cat file").len(), bytes);
    std::fs::remove_file(cat_file).expect("remove cat file");
    took
}

/// The producer as a managed workload, its stdout captured whole: its time, then the
/// artifact goes.
fn engine_run(sup: &Supervisor, producer: &str, bytes: u64, guardian: bool) -> Duration {
    let mut req = LaunchRequest::new(Kind::Command, ["sh", "-c", producer]);
    if guardian {
        // L1: a launch that outlives its launcher: its guardian captures the output.
        req.pdeath_signal = None;
    }
    req.label = "bench-capture".into();
    // Throughput of every byte into the artifact: no log cap (the default 1 GiB would cut a
    // 2 GiB run short).
    req.log_cap = None;
    let t = Instant::now();
    let r = sup.run(req).expect("managed launch");
    let took = t.elapsed();
    assert_eq!(r.outcome, LaunchOutcome::Completed);
    let out = r.capture.stream(Stream::Stdout).expect("stdout");
    assert_eq!(out.artifact_bytes, bytes, "{:?}", out.state);
    std::fs::remove_file(&out.artifact).expect("remove artifact");
    took
}

fn mib_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / d.as_secs_f64()
}

fn launch(guardian: &Path, work: &Path, runs: usize) {
    let sup = supervisor(guardian, &work.join("home"));
    let mut managed = Vec::with_capacity(runs);
    let mut plain = Vec::with_capacity(runs);
    let mut not_exited = 0usize;
    // Warm-up: page cache, first-touch of the runtime directories.
    for _ in 0..5 {
        let _ = sup.run(LaunchRequest::new(Kind::Command, ["/bin/true"]));
        let _ = Command::new("/bin/true").status();
    }
    for _ in 0..runs {
        let t = Instant::now();
        let status = Command::new("/bin/true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("fork+exec");
        plain.push(t.elapsed());
        assert!(status.success());

        let t = Instant::now();
        let r = sup
            .run(LaunchRequest::new(Kind::Command, ["/bin/true"]))
            .expect("managed launch");
        managed.push(t.elapsed());
        assert_eq!(r.outcome, LaunchOutcome::Completed);
        if !matches!(r.scope, ScopeState::Exited(_)) {
            not_exited += 1;
        }
    }
    let (pm, mm) = (median(&mut plain), median(&mut managed));
    println!("runs                               {runs}");
    println!(
        "plain fork+exec+wait /bin/true     median {:>9.3} ms   p90 {:>9.3} ms",
        ms(pm),
        ms(pct(&mut plain, 90))
    );
    println!(
        "managed /bin/true (end to end)     median {:>9.3} ms   p90 {:>9.3} ms",
        ms(mm),
        ms(pct(&mut managed, 90))
    );
    println!(
        "ratio managed / plain              {:.1}x   (target: managed median < 5 ms)",
        mm.as_secs_f64() / pm.as_secs_f64()
    );
    println!("results returned before the receipt: {not_exited} of {runs}");
    // The floor on this disk: one durable write (temp, fsync, rename, fsync dir) of a
    // registration-sized record in the same directory; a launch makes one, and the guardian
    // adds an fdatasync of the receipt.
    let dir = sup.runtime().dir().join("registrations");
    let mut writes = Vec::with_capacity(50);
    for i in 0..50 {
        let path = dir.join(format!("bench-{i}"));
        let t = Instant::now();
        refine_supervisor::store::durable::write_atomic(&path, &[0u8; 600], 0o600).expect("write");
        writes.push(t.elapsed());
        let _ = std::fs::remove_file(&path);
    }
    println!(
        "one durable write (same directory) median {:>9.3} ms",
        ms(median(&mut writes))
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

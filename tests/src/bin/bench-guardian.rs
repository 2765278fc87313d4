//! Benchmark harness behind `scripts/bench-guardian` (not a test): one long-lived launcher process
//! launching `/bin/true` many times, interleaved, through each wrapper; then footprint and receipt
//! latency. Prints one table. Usage: `bench-guardian GUARDIAN_EXE WORKDIR ITERATIONS`.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio as PStdio};
use std::time::{Duration, Instant};

use refine_protocol::{RegistrationId, RuntimeId};
use refine_supervisor::launch::guardian::{self, GuardianEvent, GuardianLink, LaunchConfig, Stdio};
use rustix::process::{kill_process, Pid, Signal};

struct Peer {
    name: &'static str,
    argv: Vec<&'static str>,
}

fn peers() -> Vec<Peer> {
    let all = [
        Peer {
            name: "tini -s",
            argv: vec!["/usr/bin/tini", "-s", "--"],
        },
        Peer {
            name: "tini-static -s",
            argv: vec!["/usr/bin/tini-static", "-s", "--"],
        },
        Peer {
            name: "catatonit",
            argv: vec!["/usr/bin/catatonit", "--"],
        },
        Peer {
            name: "dumb-init",
            argv: vec!["/usr/bin/dumb-init"],
        },
    ];
    all.into_iter()
        .filter(|p| Path::new(p.argv[0]).exists())
        .collect()
}

fn guardian_launch(exe: &Path, dir: &Path, n: u64, argv: &[&str], stdio: Stdio) -> GuardianLink {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&n.to_le_bytes());
    let proof = dir.join(format!("proof-{n}"));
    let _ = std::fs::remove_file(&proof);
    guardian::spawn(LaunchConfig {
        registration: RegistrationId(id),
        runtime: RuntimeId([7; 16]),
        proof_path: proof,
        env: vec![OsString::from("PATH=/usr/bin:/bin")],
        start_timeout: Duration::from_secs(30),
        guardian_exe: Some(exe.to_owned()),
        ..LaunchConfig::new(argv.iter().map(OsString::from).collect(), stdio)
    })
    .expect("guardian spawn")
}

/// Launches `/bin/true` through the guardian; returns, in ms from the call, when the hello, the
/// started, workload-exited and scope-exited frames arrived and when the guardian was reaped.
fn run_guardian_true(exe: &Path, dir: &Path, n: u64) -> [f64; 5] {
    let t = Instant::now();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut link = guardian_launch(exe, dir, n, &["/bin/true"], Stdio::Inherit);
    let mut at = [ms(t), 0.0, 0.0, 0.0, 0.0];
    link.start().expect("start");
    loop {
        match link.next_event(None).expect("event") {
            Some(GuardianEvent::Started) => at[1] = ms(t),
            Some(GuardianEvent::WorkloadExited { .. }) => at[2] = ms(t),
            Some(GuardianEvent::ScopeExited(_)) => break,
            Some(GuardianEvent::ChannelClosed) => panic!("guardian closed without receipt"),
            _ => {}
        }
    }
    at[3] = ms(t);
    link.wait_guardian().expect("reap guardian");
    at[4] = ms(t);
    at
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn smaps(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("Rss:"), field("Private_Dirty:"))
}

fn has_child(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| !s.trim().is_empty())
        .unwrap_or(false)
}

fn wait_for(mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < end, "timed out");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let exe = PathBuf::from(&args[1]);
    let dir = PathBuf::from(&args[2]);
    let iters: usize = args[3].parse().expect("iterations");
    let peers = peers();

    // Launch overhead, interleaved rounds.
    let mut direct = Vec::new();
    let mut guard = Vec::new();
    let mut phases: [Vec<f64>; 5] = Default::default();
    let mut peer_times: Vec<Vec<f64>> = peers.iter().map(|_| Vec::new()).collect();
    for round in 0..iters + 20 {
        let t = Instant::now();
        Command::new("/bin/true").status().expect("true");
        let d = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let at = run_guardian_true(&exe, &dir, round as u64);
        let g = t.elapsed().as_secs_f64() * 1e3;
        // Harness bookkeeping, outside the timed launch: the peers create no file to remove.
        let _ = std::fs::remove_file(dir.join(format!("proof-{round}")));
        let mut ps = Vec::new();
        for p in &peers {
            let t = Instant::now();
            let st = Command::new(p.argv[0])
                .args(&p.argv[1..])
                .arg("/bin/true")
                .stderr(PStdio::null())
                .status()
                .expect("peer");
            assert!(st.success(), "{} failed", p.name);
            ps.push(t.elapsed().as_secs_f64() * 1e3);
        }
        if round >= 20 {
            // The first rounds warm caches and are not counted.
            direct.push(d);
            guard.push(g);
            for (v, x) in phases.iter_mut().zip(at) {
                v.push(x);
            }
            for (v, x) in peer_times.iter_mut().zip(ps) {
                v.push(x);
            }
        }
    }
    let base = median(&mut direct);
    let g = median(&mut guard);
    let peer_medians: Vec<f64> = peer_times.iter_mut().map(|v| median(v)).collect();
    let tini_static_overhead = peers
        .iter()
        .zip(&peer_medians)
        .find(|(p, _)| p.name == "tini-static -s")
        .map(|(_, m)| m - base);

    // Footprint while holding a sleeping workload.
    let mut link = guardian_launch(&exe, &dir, 1 << 40, &["/bin/sleep", "1000"], Stdio::Inherit);
    link.start().expect("start");
    assert_eq!(
        link.next_event(Some(Duration::from_secs(10)))
            .expect("event"),
        Some(GuardianEvent::Started)
    );
    let gpid = link.guardian_pid();
    wait_for(|| has_child(gpid));
    let guardian_mem = smaps(gpid);
    link.signal(9).expect("signal");
    while !matches!(
        link.next_event(None).expect("event"),
        Some(GuardianEvent::ScopeExited(_))
    ) {}
    link.wait_guardian().expect("reap");
    let mut peer_mem = Vec::new();
    for p in &peers {
        let mut child = Command::new(p.argv[0])
            .args(&p.argv[1..])
            .args(["/bin/sleep", "1000"])
            .stderr(PStdio::null())
            .spawn()
            .expect("peer");
        let pid = child.id();
        wait_for(|| has_child(pid));
        peer_mem.push(smaps(pid));
        // Our own unreaped child: its pid cannot have been reused.
        let _ = kill_process(Pid::from_raw(pid as i32).expect("pid"), Signal::TERM);
        child.wait().expect("reap peer");
    }

    // Receipt latency: release the last process (cat reading a pipe we hold), time to ScopeExited
    // (sent after the receipt was fdatasync'ed), and the guardian's own reap-to-written interval.
    let mut outside = Vec::new();
    let mut inside = Vec::new();
    for n in 0..50u64 {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
        let null: OwnedFd = File::options()
            .write(true)
            .open("/dev/null")
            .expect("null")
            .into();
        let null2 = null.try_clone().expect("dup");
        let mut link = guardian_launch(
            &exe,
            &dir,
            (1 << 41) + n,
            &["/bin/cat"],
            Stdio::Fds([r, null, null2]),
        );
        link.start().expect("start");
        assert_eq!(
            link.next_event(Some(Duration::from_secs(10)))
                .expect("event"),
            Some(GuardianEvent::Started)
        );
        let t = Instant::now();
        drop(w);
        let receipt = loop {
            match link.next_event(None).expect("event") {
                Some(GuardianEvent::ScopeExited(r)) => break r,
                Some(GuardianEvent::ChannelClosed) => panic!("no receipt"),
                _ => {}
            }
        };
        outside.push(t.elapsed().as_secs_f64() * 1e3);
        inside.push(
            receipt
                .written_at_ns
                .saturating_sub(receipt.workload_exited_at_ns) as f64
                / 1e6,
        );
        link.wait_guardian().expect("reap");
        let _ = std::fs::remove_file(dir.join(format!("proof-{}", (1u64 << 41) + n)));
    }

    let size = |p: &str| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "launch overhead: /bin/true x {iters} per wrapper, interleaved, medians (ms)"
    );
    let _ = writeln!(
        out,
        "{:<18} {:>9} {:>10} {:>16}",
        "wrapper", "median", "overhead", "vs tini-static"
    );
    let ratio = |o: f64| {
        tini_static_overhead
            .map(|t| format!("{:.2}x", o / t))
            .unwrap_or_else(|| "-".into())
    };
    let _ = writeln!(
        out,
        "{:<18} {:>9.3} {:>10} {:>16}",
        "fork+exec", base, "-", "-"
    );
    let _ = writeln!(
        out,
        "{:<18} {:>9.3} {:>10.3} {:>16}",
        "refine-guardian",
        g,
        g - base,
        ratio(g - base)
    );
    for (p, m) in peers.iter().zip(&peer_medians) {
        let _ = writeln!(
            out,
            "{:<18} {:>9.3} {:>10.3} {:>16}",
            p.name,
            m,
            m - base,
            ratio(m - base)
        );
    }
    let at: Vec<String> = phases
        .iter_mut()
        .map(|v| format!("{:.3}", median(v)))
        .collect();
    let _ = writeln!(
        out,
        "guardian phases (ms from the call, medians): hello {}, started {}, workload exited {}, receipt {}, reaped {}",
        at[0], at[1], at[2], at[3], at[4]
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "footprint while holding a sleeping workload");
    let _ = writeln!(
        out,
        "{:<18} {:>12} {:>10} {:>18}",
        "wrapper", "binary (B)", "RSS (kB)", "Private_Dirty (kB)"
    );
    let _ = writeln!(
        out,
        "{:<18} {:>12} {:>10} {:>18}",
        "refine-guardian",
        size(exe.to_str().unwrap_or_default()),
        guardian_mem.0,
        guardian_mem.1
    );
    for (p, m) in peers.iter().zip(&peer_mem) {
        let _ = writeln!(
            out,
            "{:<18} {:>12} {:>10} {:>18}",
            p.name,
            size(p.argv[0]),
            m.0,
            m.1
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "receipt latency (median of 50): last exit -> receipt frame (after fdatasync) {:.3} ms; guardian reap -> receipt assembled {:.3} ms",
        median(&mut outside),
        median(&mut inside)
    );
}

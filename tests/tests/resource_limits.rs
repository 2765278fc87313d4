//! H8 (issue 43, item 3): `--memory-max`, `--cpus`, `--pids-max` through the scope's cgroups,
//! on the unified hierarchy where the controller is there, else on its v1 hierarchy (this host:
//! a hybrid one whose `memory`, `pids` and `cpu` are v1). Each case skips, with the reason
//! printed, where its controller can be used on neither (not root, no hierarchy).

use refine_tests::cli_support;

use std::path::Path;
use std::time::Duration;

use cli_support::*;
use serde_json::Value;

/// The reason a controller cannot carry a limit here, or `None` where it can: the launch of a
/// `true` with the limit is the probe (the product's own check refuses it in one line).
fn unavailable(home: &Home, flag: &str, value: &str) -> Option<String> {
    let out = home.cli(&["run", flag, value, "--", "true"]);
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).trim().to_owned())
}

fn newest(home: &Home) -> Value {
    let ps = home.json(&["ps", "-a", "--json"]);
    let id = ps["registrations"][0]["id"].as_str().unwrap().to_owned();
    home.json(&["show", "--json", &id])
}

fn placements(doc: &Value) -> Vec<String> {
    doc["record"]["limits"]["placements"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| p["dir"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_workload_past_its_memory_max_ends_oom() {
    let home = Home::new();
    if let Some(why) = unavailable(&home, "--memory-max", "32M") {
        println!("skipped: {why}");
        return;
    }
    // 64 MB written (not only reserved) under a 32 MiB limit.
    let argv = [
        "run",
        "--memory-max",
        "32M",
        "--",
        "python3",
        "-c",
        "b = b'x' * (64 << 20); print('survived')",
    ];
    let out = home.cli(&argv);
    assert_eq!(out.status.code(), Some(137), "{}", describe(&argv, &out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("survived"));
    let doc = newest(&home);
    let result = &doc["result"];
    assert_eq!(result["reason"], "oom", "{result:#}");
    assert_eq!(doc["state"], "exited", "{doc:#}");
    assert_eq!(doc["record"]["limits"]["memory_max_bytes"], 32 << 20);
    let peak = result["limit_usage"]["memory_peak_bytes"].as_u64().unwrap();
    assert!(peak <= 32 << 20, "peak {peak} past the limit");
    assert!(result["limit_usage"]["oom_kills"].as_u64().unwrap() >= 1);
    // The limit's directories went with the scope.
    for dir in placements(&doc) {
        if !doc["record"]["limits"]["placements"][0]["unified"]
            .as_bool()
            .unwrap()
        {
            assert!(!Path::new(&dir).exists(), "{dir} left behind");
        }
    }
    let shown = String::from_utf8_lossy(&home.cli(&["show", doc["id"].as_str().unwrap()]).stdout)
        .into_owned();
    assert!(shown.contains("out of memory (oom)"), "{shown}");
    assert!(shown.contains("Limits: memory 32.0 MiB"), "{shown}");
    // The negative control: the same program without the limit completes.
    let bare = [&["run"][..], &argv[3..]].concat();
    let free = home.cli(&bare);
    assert!(free.status.success(), "{}", describe(&bare, &free));
    assert!(String::from_utf8_lossy(&free.stdout).contains("survived"));
}

#[test]
fn a_fork_bomb_is_held_at_its_pids_max_and_stopped_with_proof() {
    let home = Home::new();
    if let Some(why) = unavailable(&home, "--pids-max", "20") {
        println!("skipped: {why}");
        return;
    }
    let _svc = Serving::start(&home, &[]);
    // A hundred sleeps asked for; the tree never holds more than 20 processes.
    let script = "i=0; while [ $i -lt 100 ]; do sleep 300 & i=$((i+1)); done; echo forked; wait";
    let id = cli_support::detach_with(
        &home,
        &["--pids-max", "20", "--label", "bomb"],
        &["sh", "-c", script],
    );
    let dir = {
        let doc = home.json(&["show", "--json", &id]);
        placements(&doc)
            .into_iter()
            .next()
            .expect("a pids placement")
    };
    let current = |d: &str| {
        std::fs::read_to_string(Path::new(d).join("pids.current"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    // The forks run into the limit: wait until the kernel has refused one, then the tree
    // holds at most 20.
    let refused = |d: &str| {
        std::fs::read_to_string(Path::new(d).join("pids.events"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("max ")?.trim().parse::<u64>().ok())
            })
    };
    let held = refine_tests::wait_until(DEADLINE, || refused(&dir).is_some_and(|n| n > 0));
    assert!(held, "no fork refused; pids.current {:?}", current(&dir));
    let now = current(&dir).expect("pids.current");
    assert!((10..=20).contains(&now), "pids.current {now}");
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    home.wait_ended(&id);
    let doc = home.json(&["show", "--json", &id]);
    assert_eq!(doc["state"], "exited", "{doc:#}");
    // Exited is the receipt's word: every process of the tree was reaped.
    assert!(doc["receipt"]["reaped"].as_u64().unwrap() >= 10, "{doc:#}");
    let refused = doc["result"]["limit_usage"]["pids_refused"].as_u64();
    assert!(refused.is_some_and(|n| n > 0), "{:#}", doc["result"]);
    if let Some(peak) = doc["result"]["limit_usage"]["pids_peak"].as_u64() {
        assert!(peak <= 20, "pids peak {peak}");
    }
}

#[test]
fn a_busy_loop_under_half_a_core_reads_about_half_a_core() {
    let home = Home::new();
    if let Some(why) = unavailable(&home, "--cpus", "0.5") {
        println!("skipped: {why}");
        return;
    }
    // Two seconds of wall time spinning; at most half of it on a CPU. The spin says what
    // share of a core it got and the quota its own cgroup carries (v1 `cpu.cfs_quota_us` or
    // v2 `cpu.max`), read from inside the scope.
    let spin = r#"
import os, time
def quota():
    for line in open('/proc/self/cgroup'):
        _, ctl, path = line.rstrip('\n').split(':', 2)
        if 'cpu' in ctl.split(','):
            for root in os.listdir('/sys/fs/cgroup'):
                p = '/sys/fs/cgroup/%s%s/cpu.cfs_quota_us' % (root, path)
                if 'cpu' in root.split(',') and os.path.exists(p):
                    return open(p).read().split()[0]
        if ctl == '':
            for root in ('/sys/fs/cgroup', '/sys/fs/cgroup/unified'):
                p = root + path + '/cpu.max'
                if os.path.exists(p) and open(p).read().split()[0] != 'max':
                    return open(p).read().split()[0]
    return 'none'
began, cpu0 = time.monotonic(), time.process_time()
end = began + 2
while time.monotonic() < end: pass
share = (time.process_time() - cpu0) / (time.monotonic() - began)
print('quota=%s share=%.3f' % (quota(), share))
"#;
    let argv = ["run", "--cpus", "0.5", "--", "python3", "-c", spin];
    let started = std::time::Instant::now();
    let out = home.cli(&argv);
    let wall = started.elapsed();
    assert!(out.status.success(), "{}", describe(&argv, &out));
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    println!("cpus 0.5: {said}");
    // The limit is on the scope: 50 ms of each 100 ms period.
    assert!(said.starts_with("quota=50000 "), "{said}");
    let share: f64 = said.rsplit_once("share=").unwrap().1.parse().unwrap();
    let doc = newest(&home);
    let usage = &doc["result"]["usage"];
    let cpu = Duration::from_micros(
        usage["user_us"].as_u64().unwrap() + usage["system_us"].as_u64().unwrap(),
    );
    println!("cpus 0.5: {cpu:?} of CPU in {wall:?}");
    // Generous: half a core over the spin, plus what python's start takes.
    assert!(share < 0.6, "{said}");
    assert!(
        cpu.as_secs_f64() < 0.7 * wall.as_secs_f64(),
        "{cpu:?} in {wall:?}"
    );
    // The result reads the throttled time. None only where the spin never asked for more than
    // its quota: a loaded machine that gave it under half a core.
    let throttled = doc["result"]["limit_usage"]["throttled_us"].as_u64();
    assert!(throttled.is_some(), "{:#}", doc["result"]);
    if throttled == Some(0) {
        assert!(
            share < 0.51,
            "{said}, yet no throttled time: {:#}",
            doc["result"]
        );
        println!("not throttled: the machine gave the spin {share} of a core");
    }
}

#[test]
fn a_limit_is_refused_in_one_line_when_it_cannot_be_applied() {
    let home = Home::new();
    for (flag, value) in [("--cpus", "0"), ("--cpus", "nan"), ("--memory-max", "10")] {
        let out = home.cli(&["run", flag, value, "--", "true"]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.starts_with("refine-supervisor: error: invalid value"),
            "{said}"
        );
    }
    // A controller that is nowhere: in a mount namespace of its own whose cgroup mounts are
    // gone (root only), the launch is refused in one line before anything runs.
    let cmd = home.command(&["run", "--memory-max", "32M", "--", "true"]);
    let mut hidden = std::process::Command::new("unshare");
    hidden
        .args(["-m", "sh", "-c"])
        .arg("umount -l /sys/fs/cgroup/unified 2>/dev/null; umount -l /sys/fs/cgroup/memory || exit 77; exec \"$@\"")
        .arg("sh")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = hidden.output().unwrap();
    if out.status.code() == Some(77) || String::from_utf8_lossy(&out.stderr).contains("unshare:") {
        println!("skipped: cannot hide the memory hierarchy here (needs root and unshare -m)");
        return;
    }
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("--memory-max cannot be applied on this host"),
        "{said}"
    );
    let records = std::fs::read_dir(home.run_dir().join("registrations"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(records, 0, "a refused launch registered something");
}

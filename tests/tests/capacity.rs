//! Capacity admission through the CLI (SPEC C1–C3), with host figures injected through the test
//! seam (`REFINE_CAPACITY_MEMORY`, `REFINE_CAPACITY_CORES`). The complete-stable-sample rule is
//! pure policy and is covered by `refine-supervisor`'s unit tests (`capacity::tests`).

use refine_tests::cli_support;

use cli_support::*;

const GIB: u64 = 1024 * 1024 * 1024;

fn capacity(home: &Home, mem: &str, cores: &str) -> serde_json::Value {
    let args = ["capacity", "--json"];
    let out = home
        .command(&args)
        .env("REFINE_CAPACITY_MEMORY", mem)
        .env("REFINE_CAPACITY_CORES", cores)
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{}", describe(&args, &out));
    parse(&args, &out)
}

#[test]
fn small_memory_gives_floor_derived_slots() {
    let home = Home::new();
    // 10 GiB available, 70 % = 7 GiB, 2 GiB floor per workload: 3 slots (64 cores would allow 44).
    let c = capacity(&home, &(10 * GIB).to_string(), "64");
    assert_eq!(c["available_memory"], 10 * GIB);
    assert_eq!(c["limit_percent"], 70);
    assert_eq!(c["reservation_bytes"], 2 * GIB);
    assert_eq!(c["reservation_source"], "floor");
    assert_eq!(c["memory_slots"], 3);
    assert_eq!(c["cpu_slots"], 44);
    assert_eq!(c["slots"], 3);
    assert_eq!(
        (c["live"].as_u64(), c["unverified"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(c["free"], 3);
}

#[test]
fn tiny_memory_still_gives_one_slot() {
    let home = Home::new();
    let c = capacity(&home, &(GIB / 2).to_string(), "64");
    assert_eq!(c["memory_slots"], 0);
    assert_eq!(c["slots"], 1);
}

#[test]
fn unavailable_memory_telemetry_gives_one_slot() {
    let home = Home::new();
    let c = capacity(&home, "unavailable", "64");
    assert!(c["available_memory"].is_null());
    assert_eq!(c["slots"], 1);
}

#[test]
fn cores_limit_slots_and_percent_is_configurable() {
    let home = Home::new();
    let args = ["capacity", "--json", "--limit-percent", "50"];
    let out = home
        .command(&args)
        .env("REFINE_CAPACITY_MEMORY", (1000 * GIB).to_string())
        .env("REFINE_CAPACITY_CORES", "8")
        .output()
        .expect("spawn");
    let c = parse(&args, &out);
    assert_eq!(
        (c["cpu_slots"].as_u64(), c["slots"].as_u64()),
        (Some(4), Some(4))
    );
    // A usage error: clap's whole message, naming the flag and the range, exit 2.
    let bad = home.cli(&["capacity", "--limit-percent", "0"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--limit-percent") && err.contains("1..=100"),
        "{err}"
    );
}

#[test]
fn human_output_names_every_figure() {
    let home = Home::new();
    let out = home
        .command(&["capacity"])
        .env("REFINE_CAPACITY_MEMORY", (10 * GIB).to_string())
        .env("REFINE_CAPACITY_CORES", "64")
        .output()
        .expect("spawn");
    let text = String::from_utf8_lossy(&out.stdout);
    for word in words("cores 'available memory' limit reservation slots live unverified free") {
        assert!(text.contains(word), "{word} missing:\n{text}");
    }
}

#[test]
fn agent_launch_refuses_or_waits_when_no_slot_is_free() {
    let home = Home::new();
    let one_slot = |args: &[&str]| {
        let mut c = home.command(args);
        c.env("REFINE_CAPACITY_MEMORY", GIB.to_string())
            .env("REFINE_CAPACITY_CORES", "64");
        output_of(c)
    };
    // The first agent leaves a descendant that holds the scope (and its slot).
    let args = words("run --json --kind agent -- sh -c 'sleep 600 & echo holding'");
    let out = one_slot(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
    let id = parse(&args, &out)["id"].as_str().unwrap().to_owned();
    assert_eq!(home.state(&id), "live");
    let c = capacity(&home, &GIB.to_string(), "64");
    assert_eq!(
        (c["slots"].as_u64(), c["live"].as_u64(), c["free"].as_u64()),
        (Some(1), Some(1), Some(0))
    );

    let args = ["run", "--kind", "agent", "--", "true"];
    let err = assert_one_line_error(&args, &one_slot(&args));
    assert!(err.contains("no capacity slot"), "{err}");
    let args = words("run --kind agent --wait-for-slot 300ms -- true");
    let err = assert_one_line_error(&args, &one_slot(&args));
    assert!(err.contains("no capacity slot"), "{err}");
    // Other kinds are not held back by agent admission.
    let args = ["run", "--kind", "command", "--", "true"];
    assert!(one_slot(&args).status.success());

    assert!(home.cli(&["stop", &id]).status.success());
    let args = ["run", "--kind", "agent", "--", "true"];
    let out = one_slot(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
}

/// The longest wait for a slot the command line takes (`3650d`, the bound of every duration)
/// is a wait, neither a panic nor an overflow of the clock: in the foreground and through the
/// service each waiter waits while the host is full and is admitted once the slot is freed.
/// (Without `--wait-for-slot` one check decides: see above.)
#[test]
fn the_longest_slot_wait_waits_and_is_admitted_once_a_slot_frees() {
    let home = Home::new();
    let one_slot_env = [
        ("REFINE_CAPACITY_MEMORY", GIB.to_string()),
        ("REFINE_CAPACITY_CORES", "64".to_owned()),
    ];
    let one_slot = |args: &[&str]| {
        let mut c = home.command(args);
        c.envs(one_slot_env.iter().map(|(k, v)| (k, v)));
        c
    };
    let svc_env: Vec<(&str, &str)> = one_slot_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let _svc = Serving::start_with_env(&home, &[], &svc_env);
    let args = words("run --json --kind agent -- sh -c 'sleep 600 & echo holding'");
    let out = output_of(one_slot(&args));
    assert!(out.status.success(), "{}", describe(&args, &out));
    let holder = parse(&args, &out)["id"].as_str().unwrap().to_owned();
    assert_eq!(home.state(&holder), "live");

    let spawn = |args: &[&str]| {
        one_slot(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a waiter")
    };
    let foreground = words("run --kind agent --label fg-waiter --wait-for-slot 3650d -- true");
    let detached =
        words("run --detach --kind agent --label bg-waiter --wait-for-slot 3650d -- true");
    let mut waiters = [spawn(&foreground), spawn(&detached)];
    // Time must pass: a wait that overflowed or panicked would have ended by now.
    std::thread::sleep(std::time::Duration::from_secs(2));
    for (w, args) in waiters.iter_mut().zip([&foreground, &detached]) {
        assert!(
            w.try_wait().unwrap().is_none(),
            "{args:?} ended while no slot was free"
        );
    }
    assert!(home.cli(&["stop", &holder]).status.success());
    for (w, args) in waiters.iter_mut().zip([&foreground, &detached]) {
        let st = wait_bounded(w, DEADLINE, "a waiter for a slot");
        let mut err = String::new();
        use std::io::Read as _;
        let _ = w.stderr.take().unwrap().read_to_string(&mut err);
        assert!(st.success(), "{args:?}: {st}: {err}");
    }
    for label in ["fg-waiter", "bg-waiter"] {
        let id = home.wait_labelled(label);
        home.wait_ended(&id);
    }
}

//! `run --unique` (SPEC O13, s6-style one instance): a launch that asks for it is refused while
//! another scope with its label is live or unverified, checked under the admission lock until
//! its own registration is durable, so two such launches never both start; the refusal is one
//! line naming the holder. The service's launch request takes the same as `"unique": true`.

use refine_tests::cli_support;

use std::process::{Child, Stdio};

use cli_support::*;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `run RUN_OPTS -- sh -c 'echo ready; exec sleep 600'` in the foreground, until it printed
/// `ready`: the run process.
fn hold(home: &Home, opts: &[&str]) -> Child {
    let mut args = vec!["run"];
    args.extend_from_slice(opts);
    args.extend(["--", "sh", "-c", "echo ready; exec sleep 600"]);
    let (child, line) =
        refine_tests::spawn_first_line(home.command(&args).stderr(Stdio::null()), "run");
    assert_eq!(line.trim(), "ready", "{args:?}");
    child
}

/// The ids of the registrations with `label`, from `ps --all --json`.
fn ids_with_label(home: &Home, label: &str) -> Vec<String> {
    home.json(&["ps", "--all", "--json"])["registrations"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["label"] == label)
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect()
}

#[test]
fn a_unique_launch_is_refused_while_its_label_is_live_or_unverified() {
    let home = Home::new();
    let mut holder = Runs(vec![(
        hold(&home, &["--label", "nightly", "--unique"]),
        None,
    )]);
    let held = ids_with_label(&home, "nightly");
    assert_eq!(held.len(), 1, "{held:?}");
    let holder_id = held[0].clone();

    // Refused: one line that names the label, the holder and its state; nothing registered.
    let args = ["run", "--label", "nightly", "--unique", "--", "true"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    let line = assert_one_line_error(&args, &out);
    assert!(
        line.contains("nightly") && line.contains(&holder_id) && line.contains("live"),
        "{line}"
    );
    assert_eq!(
        ids_with_label(&home, "nightly"),
        held,
        "a refused launch registers nothing"
    );

    // Without --unique a label is only a name: the launch goes ahead.
    let (out, _) = home.run_json(&["true"]);
    assert!(out.status.success());
    let args = ["run", "--label", "nightly", "--", "true"];
    home.cli_ok(&args);

    // Once the holder is proven exited the label is free again.
    let stop = home.cli(&["stop", &holder_id]);
    assert!(
        stop.status.success(),
        "{}",
        describe(&["stop", &holder_id], &stop)
    );
    let _ = holder.0[0].0.wait();
    let args = words("run --label nightly --unique --json -- true");
    let out = home.cli_ok(&args);
    let done = parse(&args, &out)["id"].as_str().expect("id").to_owned();

    // An unverified scope holds its label too: nothing proves it ended.
    home.make_unverified(&done);
    let gc = home.json(&["gc", "--json"]);
    assert_eq!(gc["reindexed"][0], done.as_str(), "{gc}");
    let args = ["run", "--label", "nightly", "--unique", "--", "true"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    let line = assert_one_line_error(&args, &out);
    assert!(
        line.contains(&done) && line.contains("unverified"),
        "{line}"
    );
}

#[test]
fn unique_needs_a_label() {
    let home = Home::new();
    let args = ["run", "--unique", "--", "true"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    assert!(
        text(&out.stderr).contains("--label"),
        "{}",
        text(&out.stderr)
    );
}

/// `run` processes killed and reaped on drop (a foreground run's guardian then kills its scope:
/// nothing outlives a failed test).
struct Runs(Vec<(Child, Option<std::process::ExitStatus>)>);

impl Drop for Runs {
    fn drop(&mut self) {
        for (c, _) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Several `--unique` launches of one label at once: exactly one starts, every other is
/// refused naming it.
#[test]
fn concurrent_unique_launches_start_exactly_one() {
    let home = Home::new();
    const N: usize = 4;
    let mut runs = Runs(
        (0..N)
            .map(|_| {
                let child = home
                    .command(&["run", "--label", "race", "--unique", "--", "sleep", "600"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn run");
                (child, None)
            })
            .collect(),
    );
    // Every refused one exits 1; the admitted one runs until stopped.
    let settled = refine_tests::wait_until(DEADLINE, || {
        for (c, status) in runs.0.iter_mut() {
            if status.is_none() {
                *status = c.try_wait().expect("try_wait");
            }
        }
        runs.0.iter().filter(|(_, s)| s.is_some()).count() >= N - 1
    });
    let ids = ids_with_label(&home, "race");
    let statuses: Vec<_> = runs.0.iter().map(|(_, s)| *s).collect();
    assert!(
        settled,
        "not N-1 refusals: {statuses:?}, registered {ids:?}"
    );
    assert_eq!(
        ids.len(),
        1,
        "exactly one registered: {ids:?} ({statuses:?})"
    );
    for s in statuses.iter().flatten() {
        assert_eq!(s.code(), Some(1), "a refusal exits 1: {statuses:?}");
    }
    let out = home.cli(&["stop", &ids[0]]);
    assert!(
        out.status.success(),
        "{}",
        describe(&["stop", &ids[0]], &out)
    );
    for (c, _) in &mut runs.0 {
        let _ = c.wait();
    }
}

#[test]
fn the_service_refuses_a_second_unique_launch() {
    let (home, _svc) = Home::with_service(&[]);
    let args = words("run --detach --label svc --unique -- sleep 600");
    let out = home.cli_ok(&args);
    let first = text(&out.stdout).trim().to_owned();
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    let line = assert_one_line_error(&args, &out);
    assert!(line.contains(&first) && line.contains("svc"), "{line}");
    assert_eq!(ids_with_label(&home, "svc"), std::slice::from_ref(&first));
    let out = home.cli(&["stop", &first]);
    assert!(
        out.status.success(),
        "{}",
        describe(&["stop", &first], &out)
    );
}

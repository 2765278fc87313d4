//! The operator's view (SPEC O5–O11), driven as a user types it: ids by prefix and label,
//! `show` of a live scope, `ps` filters, `logs -n/--since/-f`, `wait`, `recover --dry-run`,
//! durations, error texts, the home, completions, `RUST_LOG`. Human output is checked by
//! content, never by exact layout.

use refine_tests::cli_support;

use std::fs;
use std::process::Stdio;

use cli_support::*;
use refine_tests::wait_until;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `run --label LABEL -- ARGV` to its end; the id from `ps` (newest first).
fn run_labelled(home: &Home, label: &str, argv: &[&str]) -> String {
    let mut args = vec!["run", "--label", label, "--json", "--"];
    args.extend_from_slice(argv);
    let out = home.cli(&args);
    parse(&args, &out)["id"].as_str().expect("id").to_owned()
}

/// A failed command's stderr, which must be one line.
fn one_line_error(home: &Home, args: &[&str]) -> String {
    assert_one_line_error(args, &home.cli(args))
}

#[test]
fn ids_by_unique_prefix_and_label_ambiguous_and_unknown() {
    let home = Home::new();
    let solo = run_labelled(&home, "solo", &["sh", "-c", "echo hi"]);
    let twin_a = run_labelled(&home, "twin", &["true"]);
    let twin_b = run_labelled(&home, "twin", &["true"]);

    // A unique prefix and a label work wherever an id is taken.
    for t in [&solo[..8], "solo"] {
        let doc = home.json(&["show", t, "--json"]);
        assert_eq!(doc["id"], solo.as_str(), "{t}: {doc}");
        let args = ["logs", t];
        let out = home.cli(&args);
        assert_eq!(text(&out.stdout), "hi\n", "{}", describe(&args, &out));
        let args = ["receipt", t];
        assert!(home.cli(&args).status.success(), "receipt {t}");
        let args = ["wait", t];
        home.cli_ok(&args);
    }

    // A label used twice: reading commands take the newest (O12).
    for cmd in ["show", "receipt"] {
        let doc = home.json(&[cmd, "twin", "--json"]);
        assert_eq!(doc["id"], twin_b.as_str(), "{cmd} twin: {doc}");
    }
    assert_ne!(twin_a, twin_b);

    // Unknown: one line, for ids, prefixes and labels alike; too short a prefix is no prefix.
    let unknown_prefix = if solo.starts_with("ffff") {
        "eeee0"
    } else {
        "ffff0"
    };
    for t in [unknown_prefix, "no-such-label", &solo[..3]] {
        for cmd in ["show", "stop", "logs", "wait"] {
            let err = one_line_error(&home, &[cmd, t]);
            assert!(err.contains("no registration matches"), "{cmd} {t}: {err}");
        }
    }
}

/// `run --label LABEL` of a workload that leaves a `sleep` holding its scope: live once `run`
/// returns.
fn run_live(home: &Home, label: &str) -> String {
    let id = run_labelled(
        home,
        label,
        &["sh", "-c", "sleep 600 </dev/null >/dev/null 2>&1 &"],
    );
    assert_eq!(home.state(&id), "live");
    id
}

/// O12: a full id; else a label (readers take the newest registration with it, `stop` the one
/// live one and refuses several); else a 4+ hex prefix. A label that is also another
/// registration's id prefix is the label for readers and ambiguous for `stop`.
#[test]
fn names_resolve_full_id_then_label_then_prefix() {
    let home = Home::new();
    // The operator tour (supervisor/README.md): `run --label demo` twice, then `show demo`.
    let first = run_labelled(&home, "demo", &["sh", "-c", "echo started"]);
    let second = run_labelled(&home, "demo", &["sh", "-c", "echo again"]);
    let args = ["show", "demo"];
    let out = home.cli_ok(&args);
    assert!(text(&out.stdout).contains(&second), "{}", text(&out.stdout));
    let args = ["logs", "demo"];
    assert_eq!(text(&home.cli(&args).stdout), "again\n");
    assert_eq!(home.json(&["show", &first, "--json"])["id"], first.as_str());

    // stop LABEL: the one live registration with it, not the newest exited one.
    let live = run_live(&home, "svc");
    let _newer = run_labelled(&home, "svc", &["true"]);
    let args = ["stop", "svc"];
    let out = home.cli_ok(&args);
    assert!(text(&out.stdout).contains(&live), "{}", text(&out.stdout));
    assert_eq!(home.state(&live), "exited");

    // Several live with the label: refused with the candidates, nothing stopped.
    let a = run_live(&home, "pair");
    let b = run_live(&home, "pair");
    let args = ["stop", "pair"];
    let out = home.cli(&args);
    assert!(!out.status.success(), "{}", describe(&args, &out));
    let err = text(&out.stderr);
    assert!(err.contains("ambiguous"), "{err}");
    for id in [&a, &b] {
        let line = err
            .lines()
            .find(|l| l.contains(id.as_str()))
            .unwrap_or_else(|| panic!("{id} not listed: {err}"));
        assert!(line.contains("pair") && line.contains("live"), "{line}");
        assert!(line.contains(':'), "start time missing: {line}");
    }
    assert_eq!(home.state(&a), "live");
    assert_eq!(home.state(&b), "live");
    // Readers still take the newest.
    assert_eq!(home.json(&["show", "pair", "--json"])["id"], b.as_str());

    // A label of hex digits that is another registration's id prefix: the label for readers,
    // ambiguous for stop (which stops nothing).
    let hex = a[..6].to_owned();
    let labelled = run_live(&home, &hex);
    let doc = home.json(&["show", &hex, "--json"]);
    assert_eq!(
        doc["id"],
        labelled.as_str(),
        "the label, not the prefix: {doc}"
    );
    let args = ["stop", &hex];
    let out = home.cli(&args);
    assert!(!out.status.success(), "{}", describe(&args, &out));
    let err = text(&out.stderr);
    assert!(err.contains("ambiguous"), "{err}");
    assert!(err.contains(&a) && err.contains(&labelled), "{err}");
    assert_eq!(
        home.state(&a),
        "live",
        "stop of a shadowed prefix stopped nothing"
    );
    assert_eq!(home.state(&labelled), "live");
    // A prefix still works where no label shadows it.
    let out = home.cli(&["stop", &b[..8]]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    for id in [&a, &labelled] {
        let out = home.cli(&["stop", id]);
        assert!(out.status.success(), "{}", describe(&["stop"], &out));
    }
}

#[test]
fn show_of_a_live_scope_lists_its_detached_descendant() {
    let home = Home::new();
    let args = words("run --label holder -- sh -c 'sleep 600 & echo child $!; echo done'");
    let out = home.cli_ok(&args);
    let child: u32 = text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .and_then(|p| p.trim().parse().ok())
        .expect("child pid");
    let id = home.ps()[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(home.state(&id), "live");

    let args = ["show", "holder"];
    let out = home.cli_ok(&args);
    let view = text(&out.stdout);
    // Headline, state, command, processes (the descendant by pid and program), output.
    for want in [
        id.as_str(),
        "holder",
        "command",
        // The workload has exited; its descendant holds the scope (issue 44: as `ps` says).
        "State: residue",
        "sleep 600 & echo child",
        "Processes",
        &format!("{child} "),
        "sleep",
        "exit 0",
        "Last 2 lines of stdout",
        "done",
    ] {
        assert!(view.contains(want), "{want:?} missing:\n{view}");
    }
    let row = view
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{child} ")))
        .expect("process row");
    assert!(row.contains("sleep") && row.contains("600"), "{row}");
    // --json keeps its keys and adds the processes.
    let doc = show(&home, &id);
    for k in words("id state reason assessment record result receipt artifacts processes") {
        assert!(doc.get(k).is_some(), "{k} missing: {doc}");
    }
    assert!(
        doc["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pid"] == child && p["program"] == "sleep"),
        "{doc}"
    );

    // Stopped: the receipt in one line, no processes.
    let args = ["stop", &id[..6]];
    let out = home.cli_ok(&args);
    assert!(
        text(&out.stdout).contains("verified"),
        "{}",
        describe(&args, &out)
    );
    assert_eq!(text(&out.stdout).trim_end().lines().count(), 1);
    let view = text(&home.cli(&["show", &id, "-n", "1"]).stdout);
    assert!(view.contains("exited since"), "{view}");
    let receipt = view
        .lines()
        .find(|l| l.contains("Receipt:"))
        .unwrap_or_else(|| panic!("{view}"));
    assert!(
        receipt.contains("verified") && receipt.contains("reaped") && receipt.contains("written"),
        "{receipt}"
    );
    assert!(
        view.contains("Last 1 line of stdout") && !view.contains(&format!("child {child}")),
        "{view}"
    );
    assert!(!view.contains("Processes"), "{view}");
}

#[test]
fn ps_filters_quiet_newest_first_and_width() {
    let home = Home::new();
    let first = run_labelled(&home, "one", &["true"]);
    let quality = {
        let args = ["run", "--kind", "quality", "--json", "--", "true"];
        parse(&args, &home.cli(&args))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let long = "x".repeat(200);
    let live_args = ["sh", "-c", &format!("sleep 600 & echo {long}")];
    let live = run_labelled(&home, "bg", &live_args);

    let ids = |args: &[&str]| -> Vec<String> {
        let out = home.cli(args);
        assert!(out.status.success(), "{}", describe(args, &out));
        text(&out.stdout).lines().map(str::to_owned).collect()
    };
    assert_eq!(ids(&["ps", "-q"]), vec![live.clone()]);
    assert_eq!(
        ids(&["ps", "-q", "--all"]),
        vec![live.clone(), quality.clone(), first.clone()],
        "newest first"
    );
    assert_eq!(
        ids(&["ps", "-q", "--state", "exited"]),
        vec![quality.clone(), first.clone()]
    );
    assert_eq!(
        ids(&["ps", "-q", "--all", "--kind", "quality"]),
        vec![quality.clone()]
    );
    assert_eq!(
        ids(&["ps", "-q", "--all", "--label", "one"]),
        vec![first.clone()]
    );
    assert!(ids(&["ps", "-q", "--state", "unverified"]).is_empty());

    // The table has a command column and fits the width; --no-trunc shows everything.
    let mut c = home.command(&["ps", "--all"]);
    c.env("COLUMNS", "72");
    let out = output_of(c);
    let table = text(&out.stdout);
    assert!(table.lines().next().unwrap().contains("COMMAND"), "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");
    for l in table.lines() {
        assert!(l.chars().count() <= 72, "too wide: {l}");
    }
    assert!(
        table.contains(&live[..12]) && table.contains("residue"),
        "{table}"
    );
    let mut c = home.command(&["ps", "--no-trunc"]);
    c.env("COLUMNS", "72");
    let full = text(&output_of(c).stdout);
    assert!(full.contains(&long) && full.contains(&live), "{full}");
    assert!(home.cli(&["stop", &live]).status.success());
}

#[test]
fn logs_tail_since_all_and_follow() {
    let home = Home::new();
    let id = run_labelled(
        &home,
        "lines",
        &words("sh -c 'for i in $(seq 1 20); do echo $i; done; echo oops >&2'"),
    );
    let logs = |args: &[&str]| {
        let out = home.cli(args);
        assert!(out.status.success(), "{}", describe(args, &out));
        out
    };
    assert_eq!(
        text(&logs(&["logs", "lines", "-n", "3"]).stdout),
        "18\n19\n20\n"
    );
    assert_eq!(text(&logs(&["logs", &id, "--tail", "0"]).stdout), "");
    let both = logs(&["logs", &id, "--all", "-n", "1"]);
    assert_eq!(text(&both.stdout), "20\n");
    assert_eq!(text(&both.stderr), "oops\n");
    assert_eq!(text(&logs(&["logs", &id, "--stderr"]).stdout), "oops\n");
    // A foreground run's output has no time index (its launcher captured it): --since and
    // --until are refused in one line, not answered with another question's answer (all of an
    // artifact written since). A detached scope's are answered: `output_survives.rs`.
    for flag in ["--since", "--until"] {
        let args = ["logs", &id, flag, "1h"];
        let out = home.cli(&args);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
        assert!(out.stdout.is_empty(), "{}", describe(&args, &out));
        let line = assert_one_line_error(&args, &out);
        assert!(line.contains(flag) && line.contains("time"), "{line}");
    }

    // -f -n 1: the last line, then what comes, and it ends when the scope has exited.
    let gate = home.path().join("gate");
    let script = format!(
        "echo old; echo ready; while [ ! -e {} ]; do sleep 0.05; done; echo new",
        gate.display()
    );
    let (mut run, live) = home.run_until_ready(&["sh", "-c", &script]);
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut follow = home
        .command(&["logs", "-f", "-n", "1", &live])
        .stdout(out.reopen().unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(DEADLINE, || {
        fs::read_to_string(out.path()).unwrap_or_default() == "ready\n"
    }));
    fs::write(&gate, "").unwrap();
    let mut status = None;
    assert!(wait_until(DEADLINE, || {
        status = follow.try_wait().unwrap();
        status.is_some()
    }));
    assert!(status.unwrap().success());
    assert_eq!(fs::read_to_string(out.path()).unwrap(), "ready\nnew\n");
    run.wait().unwrap();
}

/// `logs ID` prints both streams, as `docker logs` does: stdout to stdout, stderr to stderr
/// (a command that failed on stderr shows it); `--stdout` and `--stderr` take one each.
#[test]
fn logs_prints_both_streams_by_default() {
    let home = Home::new();
    let id = run_labelled(
        &home,
        "failed",
        &["sh", "-c", "echo out; echo bad >&2; exit 1"],
    );
    let only_err = run_labelled(
        &home,
        "quiet",
        &["sh", "-c", "echo 22 bytes of complaint >&2"],
    );
    let out = home.cli(&["logs", &id]);
    assert!(out.status.success(), "{}", describe(&["logs"], &out));
    assert_eq!(text(&out.stdout), "out\n");
    assert_eq!(text(&out.stderr), "bad\n");
    let out = home.cli(&["logs", &only_err]);
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "22 bytes of complaint\n",
        "no 'no output' note"
    );
    let out = home.cli(&["logs", &id, "--stdout"]);
    assert_eq!(
        (text(&out.stdout), text(&out.stderr)),
        ("out\n".into(), "".into())
    );
    let out = home.cli(&["logs", &id, "--stderr"]);
    assert_eq!(
        (text(&out.stdout), text(&out.stderr)),
        ("bad\n".into(), "".into())
    );
}

/// On a terminal, what the workload wrote to stderr is marked (in colour) so that it can be
/// told from stdout on the same screen; off a terminal the bytes are the artifact's.
#[test]
fn logs_marks_stderr_on_a_terminal() {
    use std::io::Read;
    let home = Home::new();
    let id = run_labelled(&home, "marked", &["sh", "-c", "echo out; echo bad >&2"]);
    let (master, slave) = refine_tests::open_pty();
    let out = home
        .command(&["logs", &id])
        .env_remove("NO_COLOR")
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .output()
        .expect("logs");
    assert!(out.status.success());
    let mut shown = Vec::new();
    let mut master = fs::File::from(master);
    let mut buf = [0u8; 4096];
    // Everything `logs` wrote is in the terminal's buffer by now (it has exited).
    rustix::io::ioctl_fionbio(&master, true).expect("nonblocking");
    while let Ok(n @ 1..) = master.read(&mut buf) {
        shown.extend_from_slice(&buf[..n]);
    }
    let shown = text(&shown);
    assert!(shown.contains("out\r\n"), "{shown:?}");
    assert!(
        shown.contains("\x1b[31mbad\r\n\x1b[0m") || shown.contains("\x1b[31mbad\r\n"),
        "stderr not marked: {shown:?}"
    );
    assert!(!shown.contains("\x1b[31mout"), "{shown:?}");
}

/// `residue` is a state: a live scope whose workload has ended while what it left still runs.
/// `ps` shows it, `--state residue` lists it (and `--state live` does not), and `show` names it.
#[test]
fn residue_is_a_state_that_filters_and_that_show_names() {
    let home = Home::new();
    let left = run_labelled(&home, "left", &["sh", "-c", "sleep 600 & exit 0"]);
    let (mut run, running) = home.run_until_ready(&["sh", "-c", "echo ready; exec sleep 600"]);
    let ids = |state: &str| {
        let out = home.cli(&["ps", "--state", state, "-q"]);
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (residue, live) = (ids("residue"), ids("live"));
    let shown = text(&home.cli(&["show", &left]).stdout);
    // Stopped before any assertion, so that a failure leaves nothing running.
    for id in [&left, &running] {
        assert!(home.cli(&["stop", id]).status.success());
    }
    run.wait().expect("run ends with its scope");
    assert_eq!(residue, (Some(0), format!("{left}\n"), String::new()));
    assert_eq!(live, (Some(0), format!("{running}\n"), String::new()));
    let state = shown
        .lines()
        .find(|l| l.trim_start().starts_with("State:"))
        .unwrap_or_default();
    assert!(state.contains("residue"), "{shown}");
}

#[test]
fn wait_for_several_ids_prints_and_exits_with_the_status() {
    let home = Home::new();
    let three = run_labelled(&home, "three", &["sh", "-c", "exit 3"]);
    let killed = run_labelled(&home, "killed", &["sh", "-c", "kill -9 $$"]);
    let args = ["wait", &three, "killed"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(137), "{}", describe(&args, &out));
    assert_eq!(text(&out.stdout), "3\n137\n");
    let args = ["wait", &killed[..10], "three"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&args, &out));

    // A live scope: --timeout gives up (124, naming it); without, wait blocks until it ends.
    let live = run_labelled(&home, "bg", &["sh", "-c", "sleep 600 & exit 4"]);
    let args = ["wait", "--timeout", "300ms", "bg", "three"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(124), "{}", describe(&args, &out));
    assert!(
        text(&out.stderr).contains(&live),
        "{}",
        describe(&args, &out)
    );
    let done = tempfile::NamedTempFile::new().unwrap();
    let mut waiter = home
        .command(&["wait", "bg"])
        .stdout(done.reopen().unwrap())
        .spawn()
        .unwrap();
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "wait returned while live"
    );
    assert!(home.cli(&["stop", &live]).status.success());
    let status = waiter.wait().unwrap();
    assert_eq!(status.code(), Some(4));
    assert_eq!(fs::read_to_string(done.path()).unwrap(), "4\n");
}

#[test]
fn recover_dry_run_changes_nothing() {
    let home = Home::new();
    // Its launcher left it running (no parent-death signal, as the service's launches).
    let (_, id) = launch(&home, "leave", &["sh", "-c", "sleep 600 & wait"]);
    assert_eq!(home.state(&id), "live");
    let [guardian, _] = witnesses(&home, &id);

    let before = snapshot(&home.run_dir());
    let doc = home.json(&["recover", "--dry-run", "--json"]);
    assert_eq!(doc["dry_run"], true, "{doc}");
    assert_eq!(doc["registrations"][0]["action"], "would_stop", "{doc}");
    let args = ["recover", "--dry-run"];
    let out = home.cli_ok(&args);
    let human = text(&out.stdout);
    assert!(
        human.contains("would stop") && human.contains(&id),
        "{human}"
    );
    assert!(human.contains("dry run"), "{human}");
    assert_eq!(
        snapshot(&home.run_dir()),
        before,
        "a dry run wrote or removed files"
    );
    // Nothing was stopped: the guardian and the workload hold the scope.
    assert!(alive(guardian.0, guardian.1));
    assert_eq!(home.state(&id), "live");

    let out = home.cli(&["recover"]);
    let human = text(&out.stdout);
    assert!(human.contains("stopped") && human.contains(&id), "{human}");
    assert_eq!(home.state(&id), "exited");
}

#[test]
fn durations_read_like_humantime() {
    let home = Home::new();
    let args = ["run", "--json", "--timeout", "1.5s", "--", "sleep", "60"];
    let doc = parse(&args, &home.cli(&args));
    assert_eq!(doc["outcome"], "timed_out", "{doc}");
    for d in ["1h30m", "500ms", "5", "7d", "0s", "1.5h"] {
        let args = ["gc", "--older-than", d, "--dry-run"];
        home.cli_ok(&args);
    }
    let args = ["gc", "--older-than", "5x"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    assert!(
        text(&out.stderr).contains("--older-than"),
        "{}",
        describe(&args, &out)
    );
}

#[test]
fn errors_name_the_missing_argument_suggest_and_say_each_cause_once() {
    let home = Home::new();
    let args = ["show"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("<ID>"),
        "{}",
        describe(&args, &out)
    );
    let args = ["ps", "--jsno"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--json"),
        "{}",
        describe(&args, &out)
    );

    let missing = home.path().join("nowhere").join("proof");
    let err = one_line_error(&home, &["receipt", missing.to_str().unwrap()]);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let garbage = home.path().join("garbage");
    fs::write(&garbage, [0x5a_u8; 128]).unwrap();
    let err = one_line_error(&home, &["receipt", garbage.to_str().unwrap()]);
    assert!(err.contains("magic"), "{err}");
    assert_eq!(err.matches("magic").count(), 1, "{err}");
}

#[test]
fn home_from_flag_or_env_is_created_by_run_and_said() {
    let home = Home::new();
    let fresh = home.path().join("a").join("fresh");
    let f = fresh.as_os_str();
    let out = output_of({
        let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
        c.arg("--home").arg(f).args(["run", "--", "true"]);
        c
    });
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    assert!(fresh.is_dir());
    assert!(
        text(&out.stderr).contains(fresh.to_str().unwrap()),
        "{}",
        text(&out.stderr)
    );

    let by_env = home.path().join("by-env");
    let out = output_of({
        let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
        c.env("REFINE_HOME", &by_env).args(["run", "--", "true"]);
        c
    });
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    assert!(by_env
        .join("run")
        .join("7411")
        .join("registrations")
        .is_dir());
    // Said once, only when created.
    let out = output_of({
        let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
        c.env("REFINE_HOME", &by_env).args(["ps", "-q", "--all"]);
        c
    });
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 1);
}

/// D7: every reader (and every command but `run` and `serve`) on a home that does not exist
/// says so in one line naming it, exits non-zero, and creates nothing.
#[test]
fn readers_on_a_missing_home_say_so_in_one_line_and_create_nothing() {
    let parent = tempfile::tempdir().expect("tempdir");
    let missing = parent.path().join("typo").join("home");
    let m = missing.to_str().unwrap();
    let checkout = parent.path().to_str().unwrap().to_owned();
    let id = "0123456789abcdef0123456789abcdef";
    let commands: [&[&str]; 13] = [
        &["ps"],
        &["ps", "--all", "--json"],
        &["show", id],
        &["logs", "demo"],
        &["stop", id],
        &["wait", id],
        &["receipt", id],
        &["recover", "--dry-run"],
        &["recover"],
        &["gc"],
        &["capacity"],
        &["holders", &checkout],
        &["reap", "--checkout", &checkout],
    ];
    for args in commands {
        for by_env in [false, true] {
            let out = output_of({
                let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
                if by_env {
                    c.env("REFINE_HOME", m);
                } else {
                    c.args(["--home", m]);
                }
                c.args(args).stdin(Stdio::null());
                c
            });
            let err = assert_one_line_error(args, &out);
            assert!(err.contains(m), "{args:?}: the line names the home: {err}");
            assert!(err.contains("does not exist"), "{args:?}: {err}");
            assert!(
                !parent.path().join("typo").exists(),
                "{args:?} created {}",
                missing.display()
            );
        }
    }
}

/// X4: the home is created 0700 whatever the umask (its missing parents too), and so are
/// `run/` and `run/P`.
#[test]
fn the_home_is_created_private_under_umask_000() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().expect("tempdir");
    let home = parent.path().join("made").join("home");
    let out = output_of({
        let mut c = std::process::Command::new("sh");
        c.arg("-c")
            .arg("umask 000; exec \"$@\"")
            .arg("sh")
            .arg(refine_tests::bin("refine-supervisor"))
            .arg("--home")
            .arg(&home)
            .args(["run", "--", "true"])
            .stdin(Stdio::null());
        c
    });
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    for d in [
        parent.path().join("made"),
        home.clone(),
        home.join("run"),
        home.join("run/7411"),
    ] {
        let mode = fs::metadata(&d).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{} is {mode:04o}", d.display());
    }
}

/// X4: a relative `--home` or `REFINE_HOME` is made absolute before anything is recorded: the
/// registration reads `exited` from any other directory, with absolute paths in its record.
#[test]
fn a_relative_home_is_recorded_absolute() {
    let work = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let abs = work.path().join("hrel");
    for by_env in [false, true] {
        let out = output_of({
            let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
            if by_env {
                c.env("REFINE_HOME", "hrel");
            } else {
                c.args(["--home", "hrel"]);
            }
            c.args(["run", "--json", "--", "true"])
                .current_dir(work.path())
                .stdin(Stdio::null());
            c
        });
        assert!(out.status.success(), "{}", describe(&["run"], &out));
        let id = parse(&["run"], &out)["id"].as_str().unwrap().to_owned();
        let show = output_of({
            let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
            c.arg("--home")
                .arg(&abs)
                .args(["show", &id, "--json"])
                .current_dir(elsewhere.path())
                .stdin(Stdio::null());
            c
        });
        assert!(show.status.success(), "{}", describe(&["show"], &show));
        let doc = parse(&["show"], &show);
        assert_eq!(doc["state"], "exited", "from another directory: {doc}");
        for p in [
            &doc["record"]["proof"]["path"],
            &doc["record"]["stdout"],
            &doc["record"]["stderr"],
        ] {
            let p = p.as_str().unwrap_or_default();
            assert!(p.starts_with(abs.to_str().unwrap()), "{p:?}: {doc}");
        }
    }
}

/// X4: the home, `home/run` and every ancestor are checked like sshd's StrictModes. A `run/`
/// another user could have put there (the rename attack: `mv run run.hidden; mkdir run`), a
/// `run/` or an ancestor that group or others may write, a home another user owns: refused in
/// one line naming it, by readers and by `run` (which then runs nothing).
#[test]
fn a_home_path_another_user_could_replace_is_refused_in_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let set_mode = |p: &std::path::Path, m: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap()
    };
    let home = Home::new();
    let args = ["run", "--json", "--", "true"];
    assert!(home.cli(&args).status.success());
    let run = home.path().join("run");
    let marker = home.path().join("ran");
    let marker_cmd = format!("touch '{}'", marker.display());
    let run_marker = ["run", "--", "sh", "-c", &marker_cmd];

    let refused = |what: &std::path::Path| {
        for args in [&["ps", "--all"][..], &run_marker[..]] {
            let err = one_line_error(&home, args);
            assert!(
                err.contains(what.to_str().unwrap()) && err.contains("refusing"),
                "{args:?} names {}: {err}",
                what.display()
            );
        }
        assert!(!marker.exists(), "run ran its workload on an unsafe home");
    };

    // run/ writable by others.
    set_mode(&run, 0o777);
    refused(&run);
    set_mode(&run, 0o700);
    assert!(home.cli(&["ps", "--all"]).status.success());

    // An ancestor of the home writable by group (not sticky).
    let outer = tempfile::tempdir().expect("tempdir");
    let nested = Home {
        dir: tempfile::tempdir_in(outer.path()).expect("tempdir"),
        port: 7411,
    };
    assert!(nested.cli(&["run", "--", "true"]).status.success());
    set_mode(outer.path(), 0o770);
    let err = one_line_error(&nested, &["ps", "--all"]);
    assert!(err.contains(outer.path().to_str().unwrap()), "{err}");
    set_mode(outer.path(), 0o700);
    assert!(nested.cli(&["ps", "--all"]).status.success());

    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped the ownership cases: chown needs root");
        return;
    }
    // The rename attack: run/ moved away and replaced by one another user made.
    fs::rename(&run, home.path().join("run.hidden")).unwrap();
    fs::create_dir(&run).unwrap();
    set_mode(&run, 0o700);
    std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
    refused(&run);
    fs::remove_dir(&run).unwrap();
    fs::rename(home.path().join("run.hidden"), &run).unwrap();
    assert!(home.cli(&["ps", "--all"]).status.success());
    // A home another user owns: root may read it (`ps`, see
    // root_reads_a_home_owned_by_another_user) but runs nothing there.
    std::os::unix::fs::chown(home.path(), Some(65534), None).unwrap();
    let err = one_line_error(&home, &run_marker);
    assert!(
        err.contains(home.path().to_str().unwrap()) && err.contains("refusing"),
        "run names {}: {err}",
        home.path().display()
    );
    assert!(
        !marker.exists(),
        "run ran its workload on another user's home"
    );
    assert!(home.cli(&["ps", "--all"]).status.success());
    std::os::unix::fs::chown(home.path(), Some(0), None).unwrap();
}

/// X4 before anything is created: a home that does not exist yet, below a folder that group may
/// write, is refused by `run` in one line naming that folder, and none of the home's folders is
/// made (creating them first would hand the attacker a home to rename away).
#[test]
fn a_new_home_under_an_unsafe_folder_is_refused_before_it_is_created() {
    use std::os::unix::fs::PermissionsExt;
    let outer = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(outer.path(), fs::Permissions::from_mode(0o770)).unwrap();
    let parent = outer.path().join("new");
    let target = parent.join("home");
    let mut c = std::process::Command::new(refine_tests::bin("refine-supervisor"));
    c.arg("--home")
        .arg(&target)
        .args(["run", "--", "true"])
        .stdin(Stdio::null());
    let out = output_of(c);
    let err = assert_one_line_error(&["run"], &out);
    assert!(
        err.contains(outer.path().to_str().unwrap()) && err.contains("refusing"),
        "{err}"
    );
    assert!(!parent.exists(), "the home's folders were created: {err}");
}

/// X4 for the program that writes the evidence: a guardian executable another user could
/// replace (itself, or a folder above it, writable by group or others) is refused in one line
/// naming it, and nothing runs; the same copy in a private folder works (the control).
#[test]
fn a_guardian_another_user_could_replace_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let set_mode = |p: &std::path::Path, m: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap()
    };
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let guardian = dir.path().join("refine-guardian");
    // Copied by `cp`: a child another test forks while this process held the copy open for
    // writing would make its exec fail with ETXTBSY.
    let copied = std::process::Command::new("cp")
        .arg(refine_tests::bin("refine-guardian"))
        .arg(&guardian)
        .status()
        .expect("run cp");
    assert!(copied.success(), "cp the guardian: {copied}");
    let marker = home.path().join("ran");
    let touch = format!("touch '{}'", marker.display());
    let args = ["run", "--", "sh", "-c", &touch];
    let launch = || {
        let mut c = home.command(&args);
        c.env("REFINE_GUARDIAN", &guardian);
        output_of(c)
    };
    for (folder, file, named) in [
        (0o770, 0o755, dir.path().to_path_buf()),
        (0o755, 0o777, guardian.clone()),
    ] {
        set_mode(dir.path(), folder);
        set_mode(&guardian, file);
        let out = launch();
        let err = assert_one_line_error(&args, &out);
        assert!(
            err.contains("refusing the guardian") && err.contains(named.to_str().unwrap()),
            "{err}"
        );
        assert!(!marker.exists(), "the workload ran: {err}");
    }
    set_mode(dir.path(), 0o700);
    set_mode(&guardian, 0o755);
    let out = launch();
    assert!(out.status.success(), "{}", describe(&args, &out));
    assert!(marker.exists());
}

#[test]
fn completions_man_page_and_rust_log() {
    let home = Home::new();
    for (shell, marker) in [
        ("bash", "complete"),
        ("zsh", "#compdef"),
        ("fish", "complete -c"),
    ] {
        let args = ["completions", shell];
        let out = home.cli_ok(&args);
        let script = text(&out.stdout);
        assert!(
            script.contains(marker) && script.contains("refine-supervisor"),
            "{shell}"
        );
        assert!(
            script.contains("recover") && script.contains("dry-run"),
            "{shell}"
        );
    }
    let out = home.cli(&["man"]);
    assert!(out.status.success());
    let page = text(&out.stdout);
    assert!(
        page.contains(".TH") && page.contains("refine-supervisor"),
        "{page}"
    );

    let quiet = home.cli(&["ps"]);
    assert!(quiet.stderr.is_empty(), "{}", text(&quiet.stderr));
    let mut c = home.command(&["ps"]);
    c.env("RUST_LOG", "debug");
    let out = output_of(c);
    assert!(out.status.success());
    assert!(text(&out.stderr).contains("DEBUG"), "{}", text(&out.stderr));
}

/// Runs `serve ARGS` with `RUST_LOG` (or without) and no `--log-file`, until it listens,
/// then ends it with SIGTERM; returns what it wrote to stderr (a file: not a terminal).
fn serve_once(home: &Home, args: &[&str], rust_log: Option<&str>) -> String {
    let sock = home.run_dir().join("supervisor.sock");
    // A stale socket of an earlier run must not look like this one listening.
    let _ = fs::remove_file(&sock);
    let err_path = home.path().join("serve.stderr");
    let err = fs::File::create(&err_path).unwrap();
    let mut cmd = home.command(&[&["serve"], args].concat());
    cmd.env_remove("RUST_LOG").env_remove("REFINE_LOG_FILE");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let mut serve = cmd
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("spawn serve");
    let up = wait_until(DEADLINE, || {
        std::os::unix::net::UnixStream::connect(&sock).is_ok()
    });
    // Ended through a pidfd: it is our own unreaped child, so the pid is still its own.
    let pid = rustix::process::Pid::from_raw(serve.id() as i32).expect("pid");
    let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap();
    rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::TERM).unwrap();
    let status = serve.wait().unwrap();
    let log = fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        up && status.success(),
        "serve did not come up or end well ({status}): {log}"
    );
    log
}

#[test]
fn serve_logs_json_lines_filtered_by_rust_log() {
    let home = Home::new();
    let log = serve_once(&home, &["--log-format", "json"], None);
    assert!(log.lines().count() >= 2, "{log}");
    for line in log.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
    assert!(
        log.contains("\"level\":\"INFO\""),
        "default filter is info: {log}"
    );
    let quiet = serve_once(&home, &[], Some("warn"));
    assert!(!quiet.contains("INFO"), "RUST_LOG=warn: {quiet}");
}

#[test]
fn serve_logs_to_stderr_one_plain_line_per_event() {
    let home = Home::new();
    let log = serve_once(&home, &[], Some("debug"));
    assert!(
        log.contains("service starting") && log.contains("service stopped"),
        "stderr: {log}"
    );
    assert!(!log.contains('\u{1b}'), "colour codes into a file: {log:?}");
    // The recovery at start is fields on its line, not an embedded JSON document.
    for line in log.lines().filter(|l| l.contains("recovery")) {
        assert!(!line.contains('{'), "embedded document: {line}");
    }
    assert!(
        !home.run_dir().join("service.log").exists(),
        "no log file without --log-file"
    );
    // The CLI's RUST_LOG trace into a pipe has no colour either.
    let mut c = home.command(&["ps"]);
    c.env("RUST_LOG", "debug");
    let out = output_of(c);
    assert!(
        out.status.success() && text(&out.stderr).contains("DEBUG"),
        "{out:?}"
    );
    assert!(!out.stderr.contains(&0x1b), "{:?}", text(&out.stderr));
}

#[test]
fn serve_log_file_takes_the_log_private_and_bad_paths_in_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let file = home.path().join("logs-dir").join("svc.log");
    let file_arg = file.display().to_string();
    let err = serve_once(&home, &["--log-file", &file_arg], None);
    assert!(!err.contains("service starting"), "went to stderr: {err}");
    let log = fs::read_to_string(&file).unwrap();
    assert!(log.contains("service starting"), "{log}");
    let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "log file mode");
    // A path that names no file is one line, not an abort.
    let args = ["serve", "--log-file", "/"];
    let mut c = home.command(&args);
    c.env_remove("REFINE_LOG_FILE");
    let out = output_of(c);
    assert!(!out.status.success(), "{}", describe(&args, &out));
    assert_one_line_error(&args, &out);
}

/// `ARGS` of the CLI on a real pseudo-terminal of `cols` columns (`script` allocates it, `stty`
/// sets its window size with TIOCSWINSZ before the CLI starts); the terminal's output, `\r\n`
/// made `\n`.
fn on_terminal(home: &Home, cols: u16, args: &[&str]) -> String {
    let mut line = format!(
        "stty cols {cols} rows 50 && exec '{}' --home '{}' --port {}",
        refine_tests::bin("refine-supervisor").display(),
        home.path().display(),
        home.port
    );
    for a in args {
        line.push_str(&format!(" '{a}'"));
    }
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &line, "/dev/null"])
        .env_remove("COLUMNS")
        .stdin(Stdio::null());
    let out = output_of(c);
    assert!(out.status.success(), "script -c {line}: {out:?}");
    text(&out.stdout).replace("\r\n", "\n")
}

#[test]
fn ps_on_an_80_column_terminal_cuts_only_the_command() {
    let home = Home::new();
    // A launch that never starts, a residue (the workload exited 0, a descendant holds the
    // scope), an unlabelled one and a wide label (10 columns: what 80 columns keep whole beside
    // 5-digit pids and 8 columns of command).
    let args = words("run --label nosuchprog --json -- /nonexistent/program");
    let _ = home.cli(&args);
    let residue = run_live(&home, "ビルド-dev");
    let plain = {
        let args = ["run", "--json", "--", "sh", "-c", "echo unlabelled"];
        parse(&args, &home.cli(&args))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let table = on_terminal(&home, 80, &["ps", "-a"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    let head = lines[0];
    for col in ["ID", "STATE", "STATUS", "LABEL", "COMMAND"] {
        assert!(head.contains(col), "{col} missing: {table}");
    }
    for l in &lines {
        // Display width: each of ビルド's characters takes two columns.
        let width: usize = l
            .chars()
            .map(|c| {
                if ('\u{3040}'..='\u{30ff}').contains(&c) {
                    2
                } else {
                    1
                }
            })
            .sum();
        assert!(width <= 80, "wider than 80 columns ({width}): {l}\n{table}");
    }
    assert!(table.contains("ビルド-dev"), "label cut: {table}");
    assert!(table.contains("nosuchprog"), "label cut: {table}");
    let residue_row = lines
        .iter()
        .find(|l| l.starts_with(&residue[..12]))
        .unwrap();
    // A live scope whose workload exited 0 reads as what it is, not `live` beside `exit 0`.
    assert!(
        residue_row.contains("residue") && residue_row.contains("exit 0"),
        "{table}"
    );
    assert!(residue_row.contains("sh -c"), "command gone: {table}");
    assert!(!table.contains("never started, spawn failed"), "{table}");
    assert!(table.contains("spawn failed"), "{table}");
    // One word for "no label" in ps, the ambiguity list and show.
    let no_label: Vec<&&str> = lines.iter().filter(|l| l.contains("(none)")).collect();
    assert_eq!(no_label.len(), 1, "{table}");
    let shown = text(&home.cli(&["show", &plain]).stdout);
    assert!(shown.lines().next().unwrap().contains("(none)"), "{shown}");
    assert!(home.cli(&["stop", &residue]).status.success());
}

#[test]
fn stop_show_and_wait_take_several_ids_and_wait_has_json() {
    let home = Home::new();
    let a = run_live(&home, "many-a");
    let b = run_live(&home, "many-b");
    // show of two: both, one after the other; --json of two is an array.
    let args = ["show", "many-a", &b];
    let out = home.cli_ok(&args);
    let shown = text(&out.stdout);
    assert!(shown.contains(&a) && shown.contains(&b), "{shown}");
    let docs = home.json(&["show", "--json", &a, &b]);
    assert_eq!(docs[0]["id"], a.as_str(), "{docs}");
    assert_eq!(docs[1]["id"], b.as_str(), "{docs}");

    // stop of two and an unknown one: both stopped, the unknown one a line of its own, exit 1.
    let args = ["stop", &a, "no-such-label", &b];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(
        text(&out.stdout).lines().count(),
        2,
        "{}",
        describe(&args, &out)
    );
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no-such-label"), "{err}");
    assert_eq!(home.state(&a), "exited");
    assert_eq!(home.state(&b), "exited");

    // wait --json: one document, each scope with its state and the code run would exit with.
    let three = run_labelled(&home, "three", &["sh", "-c", "exit 3"]);
    let args = ["wait", "--json", &three, &a];
    let (out, doc) = home.cli_doc(&args);
    assert_eq!(doc["scopes"][0]["id"], three.as_str(), "{doc}");
    assert_eq!(doc["scopes"][0]["exit_code"], 3, "{doc}");
    assert_eq!(doc["scopes"][1]["state"], "exited", "{doc}");
    assert_eq!(doc["timed_out"], false, "{doc}");
    // The residue's own workload (sh) had exited 0 before its leftover was stopped; as in the
    // text form, the exit is the last scope's.
    assert_eq!(doc["scopes"][1]["exit_code"], 0, "{doc}");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
}

#[test]
fn short_flags_docker_users_type() {
    let home = Home::new();
    let dir = home.path().join("work");
    fs::create_dir(&dir).unwrap();
    let dir_arg = dir.display().to_string();
    let args = [
        "run",
        "-e",
        "GREETING=hi",
        "-w",
        &dir_arg,
        "--",
        "sh",
        "-c",
        "echo $GREETING; pwd",
    ];
    let out = home.cli_ok(&args);
    assert_eq!(text(&out.stdout), format!("hi\n{dir_arg}\n"));
    let args = ["run", "-t", "--", "sh", "-c", "test -t 1 && echo tty"];
    let out = home.cli(&args);
    assert_eq!(text(&out.stdout).trim(), "tty", "{}", describe(&args, &out));
    let live = run_live(&home, "short");
    let args = ["stop", "-t", "5", "short"];
    home.cli_ok(&args);
    assert_eq!(home.state(&live), "exited");
    let help = text(&home.cli(&["run", "--help"]).stdout);
    assert!(help.contains("-d, --detach"), "{help}");
}

#[test]
fn logs_of_retired_output_says_so_in_one_line() {
    let home = Home::new();
    let id = run_labelled(&home, "gone", &["sh", "-c", "echo hi"]);
    fs::remove_file(home.run_dir().join("logs").join(format!("{id}.stdout"))).unwrap();
    // A missing artifact reads as "no output" (F3: a silent stream has none), in one line.
    let args = ["logs", "gone"];
    let out = home.cli_ok(&args);
    let err = text(&out.stderr);
    assert!(
        err.contains("no output") && err.contains("retired"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!err.contains("os error"), "{err}");
}

/// A stop line names the scope by its id and its label (what the operator typed, as `podman
/// stop NAME` echoes the name), for one id and for several.
#[test]
fn stop_lines_name_the_label_too() {
    let home = Home::new();
    let a = run_live(&home, "named-a");
    let out = home.cli(&["stop", "named-a"]);
    let line = text(&out.stdout);
    assert!(line.starts_with(&format!("{a} (named-a): ")), "{line}");
    let b = run_live(&home, "named-b");
    let c = run_live(&home, "named-c");
    let out = home.cli(&["stop", "named-b", &c[..8]]);
    let lines = text(&out.stdout);
    for (id, label) in [(&b, "named-b"), (&c, "named-c")] {
        assert!(
            lines
                .lines()
                .any(|l| l.starts_with(&format!("{id} ({label}): "))),
            "{lines}"
        );
    }
}

#[test]
fn durations_sizes_and_errors_read_humanely() {
    let home = Home::new();
    // stop: the time in words, JSON timings as integer microseconds.
    let live = run_live(&home, "humane-a");
    let out = home.cli(&["stop", &live]);
    let line = text(&out.stdout);
    assert!(
        out.status.success() && line.contains("killed in "),
        "{line}"
    );
    assert!(!line.contains(" ms)"), "{line}");
    let live = run_live(&home, "humane-b");
    let doc = home.json(&["stop", "--json", &live]);
    for phase in ["grace", "fence_wait", "quiesce", "kill_to_exit", "total"] {
        assert!(doc["timings_us"][phase].is_u64(), "{phase}: {doc}");
    }
    assert!(doc.get("timings_ms").is_none(), "{doc}");
    // gc: ages and limits as people write them (a scope with output: a silent one has no
    // artifact to age, F3).
    run_labelled(&home, "humane-out", &["sh", "-c", "echo hi"]);
    let out = home.cli(&words("gc --dry-run --older-than 1h30m --forget-after 30d"));
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("older than 30d"), "{said}");
    // What gc keeps is only counted in text (D5); `--json` says why, as a typed reason with
    // the limit in seconds beside it (no human units in JSON).
    let doc = home.json(&words(
        "gc --dry-run --json --older-than 1h30m --forget-after 30d",
    ));
    let why = doc.to_string();
    assert_eq!(doc["older_than_secs"], 5400, "{why}");
    let young = doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .any(|e| e["reason"]["kind"] == "young" && e["age_secs"].is_u64());
    assert!(young, "{why}");
    for said in [&said, &why] {
        assert!(
            !said.contains("30days") && !said.contains("5400s"),
            "{said}"
        );
    }
    // wait --timeout: the limit as given, not a float of nanoseconds.
    let _bg = run_live(&home, "humane-c");
    let args = ["wait", "--timeout", "200ms", "humane-c"];
    let err = text(&home.cli(&args).stderr);
    assert!(err.contains("timed out after 200ms"), "{err}");
    assert!(home.cli(&["stop", "humane-c"]).status.success());
}

/// Root may inspect a home of another user (the service's, say, under `DynamicUser=`): `ps`
/// and `show` read it, where before they refused with "owned by uid 999, neither this user nor
/// root".
#[test]
fn root_reads_a_home_owned_by_another_user() {
    if skip_unless_root("needs root (to give the home to another uid)") {
        return;
    }
    let home = Home::new();
    let id = run_labelled(&home, "theirs", &["sh", "-c", "echo hi"]);
    let chown = std::process::Command::new("chown")
        .args(["-R", "999:999"])
        .arg(home.path())
        .status()
        .expect("chown");
    assert!(chown.success());
    for args in [vec!["ps", "-a", "-q"], vec!["show", id.as_str()]] {
        let out = home.cli_ok(&args);
        assert!(text(&out.stdout).contains(&id), "{}", describe(&args, &out));
    }
}

//! Privilege separation (SPEC X1): `run --user` runs the workload under another uid, gid and
//! supplementary groups while the guardian, the proof file and `run/P` stay the supervisor's;
//! `run/P` is private whatever the umask, and a `run/P` that others could write is refused.
//!
//! Root only (another uid, `chown`): each test prints a skip reason otherwise; CI runs as root.

use refine_tests::cli_support;
use refine_tests::passwd_ids;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;

const NOBODY: &str = "nobody";

macro_rules! root_only {
    () => {
        if refine_tests::skip_unless_root_and_nobody("another uid, chown") {
            return;
        }
    };
}

/// A home another user can traverse (0755, as a checkout is), so that only the modes under
/// `run/` keep a workload of another uid out.
fn open_home() -> Home {
    let home = Home::new();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    home
}

/// Copies a test helper where any user may execute it (the target dir may be private).
fn public_tool(name: &str, src: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dst = dir.path().join(name);
    refine_tests::install_executable(&dst, &std::fs::read(src).unwrap());
    (dir, dst)
}

/// The workload under `--user nobody` can reach none of its evidence: its proof file, its
/// record and its guardian's descriptors are all refused (EACCES/EPERM); it runs with nobody's
/// ids while its guardian stays root; its receipt verifies with the workload's own status.
#[test]
fn a_workload_under_another_user_cannot_reach_its_evidence() {
    root_only!();
    let (uid, gid) = passwd_ids(NOBODY).unwrap();
    let home = open_home();
    let (_tools, probe) = public_tool("priv-probe", Path::new(env!("CARGO_BIN_EXE_priv-probe")));
    let run_dir = home.run_dir();
    let args = [
        "run",
        "--json",
        "--user",
        NOBODY,
        "--cwd",
        "/",
        "--",
        probe.to_str().unwrap(),
        run_dir.to_str().unwrap(),
        "7",
    ];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(7), "{}", describe(&args, &out));
    let doc = parse(&args, &out);
    assert_eq!(doc["outcome"], "completed", "{doc}");
    assert_eq!(doc["exit_code"], 7, "{doc}");
    let id = doc["id"].as_str().unwrap().to_owned();
    let report =
        std::fs::read_to_string(run_dir.join("logs").join(format!("{id}.stdout"))).unwrap();

    let mut attempts = 0;
    for line in report.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[0] {
            "open" => panic!("the workload reached its evidence: {line}\n{report}"),
            "denied" => {
                attempts += 1;
                let errno: i32 = f[3].parse().unwrap();
                assert!(
                    errno == libc::EACCES || errno == libc::EPERM,
                    "refused with errno {errno}, not EACCES/EPERM: {line}\n{report}"
                );
            }
            "ids" => {
                assert_eq!(f[1], uid.to_string(), "uid: {report}");
                assert_eq!(f[2], gid.to_string(), "gid: {report}");
                let groups: Vec<&str> =
                    f.get(3).map(|g| g.split(',').collect()).unwrap_or_default();
                assert!(!groups.contains(&"0"), "root's group kept: {report}");
            }
            "guardian-uid" => assert_eq!(f[1], "0", "the guardian left root: {report}"),
            _ => {}
        }
    }
    assert_eq!(attempts, 4 + 1 + 64, "{report}");

    // The receipt verifies and carries the workload's own status.
    let verdict = home.receipt(&id);
    assert_eq!(verdict["verified"], true, "{verdict}");
    assert_eq!(verdict["receipt"]["exit_code"], 7, "{verdict}");

    // Evidence stays the supervisor's.
    for p in [
        run_dir.join("proofs").join(&id),
        run_dir.join("registrations").join(&id),
    ] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o600), "{}", p.display());
    }
    let m = std::fs::metadata(&run_dir).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o700));
}

/// `id -u` inside prints nobody's uid; `USER:GROUP` and numeric ids work too.
#[test]
fn id_inside_prints_the_users_ids() {
    root_only!();
    let (uid, gid) = passwd_ids(NOBODY).unwrap();
    let home = Home::new();
    let id_of = |user: &str, flag: &str| {
        let args = ["run", "--user", user, "--cwd", "/", "--", "id", flag];
        let out = home.cli_ok(&args);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(id_of(NOBODY, "-u"), uid.to_string());
    assert_eq!(id_of(NOBODY, "-g"), gid.to_string());
    assert_eq!(id_of(&uid.to_string(), "-u"), uid.to_string());
    // An explicit group, by number: the primary gid is that one (the root group is refused,
    // isolation.rs).
    assert_eq!(id_of(&format!("{NOBODY}:65533"), "-g"), "65533");
    assert_eq!(id_of(&format!("{uid}:{gid}"), "-g"), gid.to_string());

    // An unknown user is one line, and nothing runs.
    let args = ["run", "--user", "no-such-user-x1", "--", "true"];
    let err = home.one_line_error(&args);
    assert!(err.contains("no-such-user-x1"), "{err}");
}

/// A supervisor without root (or CAP_SETUID/CAP_SETGID) refuses `--user` with one line.
#[test]
fn run_user_needs_privilege() {
    root_only!();
    let (uid, gid) = passwd_ids(NOBODY).unwrap();
    let home = open_home();
    // nobody's own home, so that only --user can be refused.
    rustix::fs::chown(
        home.path(),
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    )
    .unwrap();
    let (_tools, sup) = public_tool("refine-supervisor", &refine_tests::bin("refine-supervisor"));
    let args = ["run", "--user", "root", "--", "true"];
    let mut c = Command::new(&sup);
    c.arg("--home")
        .arg(home.path())
        .args(args)
        .env("REFINE_GUARDIAN", refine_tests::bin("refine-guardian"))
        .uid(uid)
        .gid(gid);
    let out = output_of(c);
    let err = assert_one_line_error(&args, &out);
    assert!(err.contains("--user") && err.contains("root"), "{err}");
    assert!(
        !home.run_dir().join("registrations").exists() || {
            std::fs::read_dir(home.run_dir().join("registrations"))
                .unwrap()
                .count()
                == 0
        }
    );
}

/// A `run/P` (or one of its folders) that another user owns or that group or others may
/// write is refused by every command, with one line, and nothing is deleted.
#[test]
fn an_unsafe_runtime_is_refused_and_kept() {
    root_only!();
    let home = Home::new();
    let (_, id) = home.run_ok(&["true"]);
    let run_dir = home.run_dir();
    let before = snapshot(&run_dir);
    let commands: Vec<Vec<&str>> = vec![
        vec!["ps"],
        vec!["show", &id],
        vec!["receipt", &id],
        vec!["gc", "--older-than", "0s"],
        vec!["recover"],
        vec!["stop", &id],
        vec!["run", "--", "true"],
    ];
    let refused = |why: &str| {
        for args in &commands {
            let out = home.cli(args);
            let err = assert_one_line_error(args, &out);
            assert!(
                err.contains(why) && err.contains(&*run_dir.to_string_lossy()),
                "{why}: {}",
                describe(args, &out)
            );
        }
        assert_eq!(snapshot(&run_dir), before, "evidence changed");
    };
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };

    chmod(&run_dir, 0o770);
    refused("writable by group or others");
    chmod(&run_dir, 0o700);
    chmod(&run_dir.join("logs"), 0o777);
    refused("writable by group or others");
    chmod(&run_dir.join("logs"), 0o700);

    let (uid, gid) = passwd_ids(NOBODY).unwrap();
    let owner = |u: u32, g: u32| {
        rustix::fs::chown(
            &run_dir,
            Some(rustix::fs::Uid::from_raw(u)),
            Some(rustix::fs::Gid::from_raw(g)),
        )
        .unwrap()
    };
    owner(uid, gid);
    refused("owned by uid");
    owner(0, 0);
    // Safe again: every command works.
    let out = home.cli(&["receipt", &id]);
    assert!(out.status.success(), "{}", describe(&["receipt"], &out));
}

/// Under umask 000, every folder the supervisor creates under `run/` is 0700 and every file
/// 0600: `run`, a stop, `gc` and the service (its log, lock and socket). The service's launch
/// API carries `--user` as `run` does.
#[test]
fn the_runtime_is_private_whatever_the_umask() {
    root_only!();
    let home = Home::new();
    let under_umask = |args: &[&str]| {
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg("umask 000; exec \"$@\"")
            .arg("sh")
            .arg(refine_tests::bin("refine-supervisor"))
            .arg("--home")
            .arg(home.path())
            .args(args)
            .stdin(std::process::Stdio::piped());
        c
    };
    let out = output_of(under_umask(&words(
        "run --json -- sh -c 'echo out; echo err >&2'",
    )));
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let id = parse(&["run"], &out)["id"].as_str().unwrap().to_owned();
    let out = output_of(under_umask(&["stop", &id]));
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    let out = output_of(under_umask(&["gc", "--older-than", "0s"]));
    assert!(out.status.success(), "{}", describe(&["gc"], &out));
    // The service: its log, its lock and its socket.
    let mut svc = under_umask(&["serve", "--maintenance-every", "200ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sock = home.run_dir().join("supervisor.sock");
    let up = refine_tests::wait_until(DEADLINE, || {
        std::os::unix::net::UnixStream::connect(&sock).is_ok()
    });
    // The service API carries --user too.
    let out = output_of(under_umask(&[
        "run", "--detach", "--user", NOBODY, "--cwd", "/", "--", "id", "-u",
    ]));
    let detached = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if up && out.status.success() {
        home.wait_state(&detached, "exited");
    }
    let fd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(svc.id() as i32).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .unwrap();
    rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::TERM).unwrap();
    let _ = svc.wait();
    assert!(up, "serve did not come up");
    assert!(
        out.status.success(),
        "{}",
        describe(&["run", "--detach"], &out)
    );
    let printed = std::fs::read_to_string(
        home.run_dir()
            .join("logs")
            .join(format!("{detached}.stdout")),
    )
    .unwrap();
    assert_eq!(printed.trim(), passwd_ids(NOBODY).unwrap().0.to_string());

    let mut stack = vec![home.path().join("run")];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        let m = std::fs::symlink_metadata(&d).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o700, "folder {}", d.display());
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            seen += 1;
            if m.is_dir() {
                stack.push(p);
            } else {
                assert_eq!(m.mode() & 0o7777, 0o600, "file {}", p.display());
            }
        }
    }
    assert!(seen > 10, "too few entries checked: {seen}");
}

/// A credential change that fails is reported like an exec failure, with its errno, and the
/// workload never runs: in a user namespace whose `setgroups` is denied (`unshare -r`), the
/// supervisor has CAP_SETUID/CAP_SETGID there, but the child's `setgroups` fails with EPERM.
#[test]
fn a_failed_credential_change_is_a_spawn_failure_with_its_errno() {
    root_only!();
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot create a user namespace with `unshare --user --map-root-user`");
        return;
    }
    let home = Home::new();
    // Root is refused (X3): any other uid; `setgroups` fails first.
    let args = words("run --json --user 65534:65534 -- touch ran");
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-root-user"])
        .arg(refine_tests::bin("refine-supervisor"))
        .arg("--home")
        .arg(home.path())
        .args(&args)
        .current_dir(home.path())
        .env("REFINE_GUARDIAN", refine_tests::bin("refine-guardian"));
    let out = output_of(c);
    assert_eq!(out.status.code(), Some(126), "{}", describe(&args, &out));
    let doc = parse(&args, &out);
    assert_eq!(doc["outcome"], "spawn_failed", "{doc}");
    assert_eq!(doc["errno"], libc::EPERM, "{doc}");
    assert_eq!(doc["status"], "never_started", "{doc}");
    assert!(!home.path().join("ran").exists(), "the workload ran");
    let id = doc["id"].as_str().unwrap();
    let out = home.cli(&["receipt", id]);
    assert!(out.status.success(), "{}", describe(&["receipt", id], &out));
}

/// On a terminal, the workload under `--user` owns its terminal (as `login` and `sshd` give it):
/// it can reopen it by name (`/dev/tty` and `ttyname`, what prompts and pagers do).
#[test]
fn a_terminal_launch_under_another_user_owns_its_terminal() {
    root_only!();
    let home = Home::new();
    let args = [
        "run",
        "--pty",
        "--user",
        NOBODY,
        "--cwd",
        "/",
        "--",
        "sh",
        "-c",
        ": > \"$(tty)\" && echo reopened",
    ];
    let out = home.cli_ok(&args);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("reopened"),
        "{}",
        describe(&args, &out)
    );
}

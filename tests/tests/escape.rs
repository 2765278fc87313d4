//! X7 Two witnesses, against the real kernel: a descendant that leaves the subreaper's reach by
//! joining a PID namespace made outside the scope (`setns`, here `nsenter -p`).
//!
//! The kernel reparents an orphan to a subreaper only within the orphan's own PID namespace: a
//! process forked into a namespace the workload joined goes to that namespace's init, and the
//! guardian sees `ECHILD` while it runs. Two mechanisms close that:
//! - by default the workload runs under a seccomp filter that refuses `setns` into a PID or user
//!   namespace (`EPERM`), on both stop paths: nothing escapes;
//! - with `run --allow-setns` on the cgroup path, the cgroup is the second witness: the guardian
//!   writes its receipt only once `cgroup.events` says `populated 0`, so the scope stays `live`
//!   while the escapee runs and is `exited`, with its receipt, once the escapee is gone.
//!
//! Each case starts the outside namespace itself (`unshare -pf --mount-proc sleep 300`, or as
//! `nobody` inside a user namespace of its own) and kills its init on every exit through
//! [`Outside`]'s drop: the init's death kills every process of its namespace, escapees included.
//! Needs root, `unshare`, `nsenter` and `setpriv`; skips with the reason otherwise.

use refine_tests::cli_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use cli_support::{alive, describe, output_of, words, Home, DEADLINE};
use refine_tests::wait_until;

/// A PID namespace made outside any scope, with its init (`sleep 300`) as seen from here.
struct Outside {
    unshare: Child,
    init: u32,
}

impl Outside {
    /// `unshare -pf --mount-proc sleep 300`, as root (`as_nobody`: as uid 65534 through
    /// `setpriv`, in a user namespace of its own, `unshare -Urpf`).
    fn start(as_nobody: bool) -> Outside {
        let mut cmd = if as_nobody {
            let mut c = Command::new("setpriv");
            c.args(words(
                "--reuid=65534 --regid=65534 --clear-groups -- unshare -Urpf",
            ));
            c
        } else {
            let mut c = Command::new("unshare");
            c.arg("-pf");
            c
        };
        cmd.args(["--mount-proc", "sleep", "300"])
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let mut unshare = cmd.spawn().expect("spawn unshare");
        // setpriv execs unshare in place: the namespace's init is the child of this pid.
        let parent = unshare.id();
        let mut init = None;
        let found = wait_until(DEADLINE, || {
            init = children(parent)
                .into_iter()
                .find(|&c| comm(c).as_deref() == Some("sleep"));
            init.is_some()
        });
        if !found {
            let _ = unshare.kill();
            let _ = unshare.wait();
            panic!("unshare started no namespace init");
        }
        Outside {
            unshare,
            init: init.expect("init"),
        }
    }

    /// The processes the namespace's init adopted: what escaped into it.
    fn escapees(&self) -> Vec<u32> {
        children(self.init)
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        // SIGKILL of the init ends every process of its namespace (escapees too); then unshare
        // exits and is reaped here.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.init as i32).expect("pid"),
            rustix::process::Signal::KILL,
        );
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// The direct children of `pid` (every thread's `children` list).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Whether the case cannot run here (not root, or a namespace tool missing): then it has
/// printed `skipped: WHY`.
fn skipped() -> bool {
    if refine_tests::skip_unless_root("needs root") {
        return true;
    }
    for tool in ["unshare", "nsenter", "setpriv"] {
        let found = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
            .iter()
            .any(|d| Path::new(d).join(tool).exists());
        if !found {
            eprintln!("skipped: no {tool}");
            return true;
        }
    }
    false
}

/// The workload: join `init`'s PID namespace (and user namespace, `user`) and leave a
/// `sleep 30` there, then exit 0.
fn escape_script(init: u32, user: bool) -> String {
    let join = if user {
        format!("nsenter -t {init} -U -p --preserve-credentials")
    } else {
        format!("nsenter -t {init} -p")
    };
    format!("{join} -- sh -c 'sleep 30 </dev/null >/dev/null 2>&1 & exit 0'")
}

/// `run [--user nobody] [EXTRA...] --json -- sh -c SCRIPT` with the cgroup path on or off.
fn run_command(home: &Home, script: &str, user: bool, extra: &[&str], cgroup: bool) -> Command {
    // X7's own witnesses are tested here: without a Landlock domain (X11), which would refuse
    // the join earlier, at `/proc/PID/ns` of a process outside the scope.
    let mut args = vec!["run", "--json", "--protect", "none"];
    if user {
        args.extend(["--user", "nobody", "--cwd", "/"]);
    }
    args.extend_from_slice(extra);
    args.extend(["--", "sh", "-c", script]);
    let mut cmd = home.command(&args);
    if cgroup {
        cmd.env_remove("REFINE_CGROUP");
    } else {
        cmd.env("REFINE_CGROUP", "off");
    }
    cmd
}

/// A case's setting: a home, the outside namespace (user-owned with `user`) and the script that
/// joins it; `None`, with the skip reason printed, where the case cannot run here.
fn prepared(user: bool) -> Option<(Home, Outside, String)> {
    if skipped() {
        return None;
    }
    let home = Home::new();
    let outside = Outside::start(user);
    let script = escape_script(outside.init, user);
    Some((home, outside, script))
}

/// The default: the filter refuses the join (nsenter fails with EPERM, the workload's status is
/// nsenter's 1), nothing reaches the outside namespace, and the scope is proven `exited`.
fn refused_by_default(user: bool, cgroup: bool) {
    let Some((home, outside, script)) = prepared(user) else {
        return;
    };
    let out = output_of(run_command(&home, &script, user, &[], cgroup));
    let what = describe(&["run", "--", "sh", "-c", &script], &out);
    let doc = cli_support::json_of(&out.stdout);
    // `run --json` keeps the workload's stderr in its artifact.
    let stderr = doc["stderr"]["path"]
        .as_str()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    assert!(
        outside.escapees().is_empty(),
        "a process escaped into the outside namespace: {:?}; {what}",
        outside.escapees()
    );
    assert!(
        stderr.contains("Operation not permitted"),
        "nsenter was not refused: {stderr}; {what}"
    );
    assert_eq!(out.status.code(), Some(1), "{what}");
    let id = doc["id"].as_str().expect("id").to_owned();
    assert_eq!(home.state(&id), "exited", "{what}");
}

#[test]
fn setns_into_an_outside_pid_namespace_is_refused_on_the_cgroup_path() {
    refused_by_default(false, true);
}

#[test]
fn setns_into_an_outside_pid_namespace_is_refused_on_the_proc_path() {
    refused_by_default(false, false);
}

#[test]
fn setns_into_a_user_owned_namespace_is_refused_for_another_user() {
    refused_by_default(true, true);
}

#[test]
fn setns_into_a_user_owned_namespace_is_refused_on_the_proc_path() {
    refused_by_default(true, false);
}

/// With the opt-out on the cgroup path: the escapee runs in the outside namespace (the filter is
/// off) but stays in the scope's cgroup, so the guardian does not write its receipt and the
/// scope reads `live`; once the escapee is killed, the receipt lands and the scope is `exited`.
fn allowed_escape_keeps_the_scope_live(user: bool) {
    let Some((home, outside, script)) = prepared(user) else {
        return;
    };
    let mut run = run_command(&home, &script, user, &["--allow-setns"], true)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run");
    let mut escapee = None;
    let escaped = wait_until(DEADLINE, || {
        escapee = outside.escapees().first().copied();
        escapee.is_some() || run.try_wait().ok().flatten().is_some()
    });
    if escapee.is_none() {
        let out = run.wait_with_output().expect("run");
        panic!("nothing escaped (escaped={escaped}): {out:?}");
    }
    let escapee = escapee.expect("escapee");
    // The workload's own process (sh) has ended and the guardian has no child left: on the old
    // code this is where the receipt was written.
    let rows = home.ps();
    let id = rows
        .first()
        .and_then(|r| r["id"].as_str())
        .expect("the registration")
        .to_owned();
    let [(gpid, _), (wpid, wstart)] = cli_support::witnesses(&home, &id);
    assert!(
        wait_until(DEADLINE, || !alive(wpid, wstart)
            && children(gpid as u32).is_empty()),
        "the workload did not end"
    );
    let show = cli_support::show(&home, &id);
    assert_eq!(
        home.state(&id),
        "live",
        "the scope is not live while its escapee {escapee} runs: {show}"
    );
    let proof = show["record"]["proof_path"].as_str().map(str::to_owned);
    if let Some(proof) = proof {
        let bytes = std::fs::read(&proof).unwrap_or_default();
        assert!(
            refine_protocol::is_unwritten(&bytes),
            "a receipt was written while {escapee} runs"
        );
    }
    assert!(
        run.try_wait().expect("try_wait").is_none(),
        "run returned while {escapee} runs"
    );
    // The escapee is killed (by pid: it is this namespace's grandchild, and the init's child
    // holds it as a zombie until the init reaps it, so the pid is not reused meanwhile).
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(escapee as i32).expect("pid"),
        rustix::process::Signal::KILL,
    );
    let out = run.wait_with_output().expect("run");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(home.state(&id), "exited");
    let proof = cli_support::show(&home, &id);
    assert_eq!(proof["record"]["allow_setns"], true, "{proof}");
}

#[test]
fn an_allowed_escape_keeps_a_root_scope_live_until_the_escapee_ends() {
    allowed_escape_keeps_the_scope_live(false);
}

#[test]
fn an_allowed_escape_keeps_a_nobody_scope_live_until_the_escapee_ends() {
    allowed_escape_keeps_the_scope_live(true);
}

/// A process that is killed and reaped on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The assessment's own second witness: a verified receipt whose scope's cgroup still has a
/// member is `live` (as a guardian without the wait, or one whose scope gained a member after
/// its receipt, would leave it); once the member is gone, the same receipt is `exited`. The
/// receipt is made by a detached launch whose service is stopped (SIGSTOP) so that nobody
/// removes the cgroup after it; a `sleep` of this test is then moved into that cgroup.
#[test]
fn a_verified_receipt_with_a_populated_cgroup_is_live() {
    if skipped() {
        return;
    }
    let home = Home::new();
    let mut serve = home.command(&["serve"]);
    serve
        .env_remove("REFINE_CGROUP")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let serve = Reaped(serve.spawn().expect("spawn serve"));
    let sock = home.run_dir().join("supervisor.sock");
    assert!(
        wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(&sock)
            .is_ok()),
        "serve did not come up"
    );
    let mut run = home.command(&["run", "--detach", "--", "true"]);
    run.env_remove("REFINE_CGROUP");
    let out = output_of(run);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let pid = rustix::process::Pid::from_child(&serve.0);
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP serve");
    assert!(
        wait_until(DEADLINE, || home.cli(&["receipt", &id]).status.success()),
        "no receipt for {id}"
    );
    drop(serve);
    let show = cli_support::show(&home, &id);
    let Some(dir) = show["record"]["cgroup"]["path"].as_str().map(str::to_owned) else {
        eprintln!("skipped: the scope got no cgroup: {show}");
        return;
    };
    if !Path::new(&dir).exists() {
        eprintln!("skipped: the cgroup {dir} was removed already");
        return;
    }
    assert_eq!(home.state(&id), "exited");
    let member = Reaped(refine_tests::spawn_quiet(
        Command::new("sleep").arg("300"),
        "sleep",
    ));
    std::fs::write(
        Path::new(&dir).join("cgroup.procs"),
        member.0.id().to_string(),
    )
    .expect("move the sleep into the scope's cgroup");
    let state = home.state(&id);
    drop(member);
    let after = home.state(&id);
    let _ = std::fs::remove_dir(&dir);
    assert_eq!(
        state, "live",
        "a populated cgroup did not keep the scope live"
    );
    assert_eq!(
        after, "exited",
        "the emptied cgroup did not let the receipt prove it"
    );
}

/// W16 on the cgroup path: a foreground `run --allow-setns` whose workload left a member in an
/// outside PID namespace (out of the guardian's tree, still in the scope's cgroup) is SIGKILLed.
/// The guardian ends the scope: the workload gets its parent-death signal, and once `waitpid`
/// says `ECHILD` with the cgroup still populated, it writes `cgroup.kill`; the escapee dies, the
/// receipt comes, and the scope is `exited`. On the old code the escapee ran on and kept the
/// scope `live`.
#[test]
fn a_sigkilled_run_ends_its_escapee_through_the_cgroup() {
    if skipped() {
        return;
    }
    let home = Home::new();
    let outside = Outside::start(false);
    let script = format!(
        "nsenter -t {} -p -- sh -c 'sleep 31928 </dev/null >/dev/null 2>&1 & exit 0'; \
         exec sleep 31929",
        outside.init
    );
    let mut run = Reaped(
        run_command(&home, &script, false, &["--allow-setns"], true)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn run"),
    );
    let mut escapee = None;
    let escaped = wait_until(DEADLINE, || {
        escapee = outside.escapees().first().copied();
        escapee.is_some() || run.0.try_wait().ok().flatten().is_some()
    });
    let escapee = escapee.unwrap_or_else(|| panic!("nothing escaped (escaped={escaped})"));
    let id = home
        .ps()
        .first()
        .and_then(|r| r["id"].as_str())
        .expect("the registration")
        .to_owned();
    let show = cli_support::show(&home, &id);
    if show["record"]["cgroup"]["path"].as_str().is_none() {
        eprintln!("skipped: the scope got no cgroup: {show}");
        return;
    }
    let [(gpid, gstart), _] = cli_support::witnesses(&home, &id);
    let guardian = cli_support::pidfd(gpid as u32);
    assert!(alive(gpid, gstart), "the guardian runs");
    let member = cli_support::pidfd(escapee);
    run.0.kill().expect("SIGKILL run");
    run.0.wait().expect("reap run");
    assert!(
        cli_support::exited_within(&member, DEADLINE),
        "the escapee {escapee} outlived its SIGKILLed run: {}",
        cli_support::show(&home, &id)
    );
    assert!(
        cli_support::exited_within(&guardian, DEADLINE),
        "the guardian did not end the scope"
    );
    assert_eq!(home.state(&id), "exited");
    assert_eq!(home.json(&["receipt", &id, "--json"])["verified"], true);
}

//! Stops that cannot hang and cannot hit a bystander (SPEC X8, X9), driven through the CLI as
//! an operator would, on both stop paths where the case applies.
//!
//! The FUSE cases need `/dev/fuse` and Debian's `bindfs` (installed here with apt-get when
//! missing and this is root); they skip with the reason otherwise. Every process and mount a case
//! makes is ended by a guard, also when an assertion fails.

use refine_tests::cli_support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use cli_support::*;
use refine_tests::wait_until;

/// Whether this host gives scopes a cgroup of their own (else the cgroup cases skip).
fn cgroup_path_available() -> bool {
    refine_supervisor::kernel::cgroup::configure(refine_supervisor::kernel::cgroup::Setting::Auto);
    match refine_supervisor::kernel::cgroup::base() {
        Ok(_) => true,
        Err(why) => {
            eprintln!("skipped (cgroup path): {why}");
            false
        }
    }
}

/// `bindfs`, installed once when missing; `None` with the reason printed when there is no
/// `/dev/fuse` or it cannot be had.
fn bindfs() -> Option<&'static Path> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        if !Path::new("/dev/fuse").exists() {
            return Err("no /dev/fuse".into());
        }
        let bin = PathBuf::from("/usr/bin/bindfs");
        if bin.exists() {
            return Ok(bin);
        }
        if !rustix::process::geteuid().is_root() {
            return Err("bindfs is missing and this is not root".into());
        }
        let installed = Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends", "bindfs"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if installed && bin.exists() {
            Ok(bin)
        } else {
            Err("bindfs is missing and apt-get could not install it".into())
        }
    });
    match found {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// A FUSE mount point of one case: every process whose command line or executable names it is
/// killed on drop (resumed first, in case a stop left it stopped), then it is unmounted.
struct FuseMount {
    dir: PathBuf,
}

impl FuseMount {
    fn new(home: &Home) -> FuseMount {
        let dir = home.path().join("fb");
        std::fs::create_dir(&dir).expect("mount point");
        FuseMount { dir }
    }

    fn path(&self) -> &str {
        self.dir.to_str().expect("utf-8 temp path")
    }

    /// Pids of the processes that name this mount (command line or executable).
    fn users(&self) -> Vec<i32> {
        let needle = self.path().as_bytes().to_vec();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            let names = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle.as_slice());
            if names(&cmdline) || names(exe.as_os_str().as_encoded_bytes()) {
                out.push(pid);
            }
        }
        out
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        for pid in self.users() {
            // SAFETY: plain kill(2) of a process this case started (it names the case's own
            // temporary mount point).
            unsafe {
                libc::kill(pid, libc::SIGCONT);
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let _ = wait_until(DEADLINE, || self.users().is_empty());
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .stderr(Stdio::null())
            .status();
    }
}

/// The workload pid of `id` (ps's `pid`).
fn workload_pid(home: &Home, id: &str) -> u32 {
    home.row(id)["pid"].as_u64().expect("pid") as u32
}

/// `stop ID --json` on `path`, which must return within `bound`; its output.
fn stop_within(
    home: &Home,
    path: StopPath,
    id: &str,
    bound: Duration,
) -> (std::process::ExitStatus, String, String) {
    let (mut child, out, err) =
        spawn_collected(&mut on(home, path, &["stop", id, "--json"]), "stop");
    let status = wait_bounded(&mut child, bound, "stop");
    let out = String::from_utf8_lossy(&out.join().expect("stdout")).into_owned();
    let err = String::from_utf8_lossy(&err.join().expect("stderr")).into_owned();
    (status, out, err)
}

/// X9: a program executed from a FUSE mount whose daemon runs inside the scope. The stop
/// freezes (or SIGSTOPs) the daemon; a step that then touches the program's file (the nested
/// guardian check's `stat` of `/proc/PID/exe`) would wait on the frozen daemon for ever.
#[test]
fn a_program_served_by_fuse_inside_the_scope_is_stopped_with_proof_on_both_paths() {
    let Some(bindfs) = bindfs() else { return };
    for path in [StopPath::Cgroup, StopPath::Procfs] {
        let home = Home::new();
        let mount = FuseMount::new(&home);
        let fb = mount.path();
        let script = format!(
            "{} -f /usr/bin {fb} & until mountpoint -q {fb}; do sleep 0.02; done; echo ready; exec {fb}/sleep 100",
            bindfs.display()
        );
        let (mut run, id) = home.run_until_ready_with(on(&home, path, &[]), &["sh", "-c", &script]);
        let pid = workload_pid(&home, &id);
        let served = wait_until(DEADLINE, || {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.starts_with(&mount.dir))
        });
        assert!(served, "{path:?}: the workload never ran from {fb}");
        let (status, out, err) = stop_within(&home, path, &id, Duration::from_secs(20));
        assert!(
            status.success(),
            "{path:?}: stop failed: {status}\nstdout: {out}\nstderr: {err}"
        );
        let doc = json_of(out.as_bytes());
        assert_eq!(doc["outcome"], "stopped", "{path:?}: {doc}");
        assert_eq!(doc["state"], "exited", "{path:?}: {doc}");
        let _ = wait_bounded(&mut run, DEADLINE, "run after the stop");
        assert!(
            wait_until(DEADLINE, || mount.users().is_empty()),
            "{path:?}: left running: {:?}",
            mount.users()
        );
    }
}

/// X9: a member waiting in a FUSE request whose daemon (inside the scope) does not answer
/// cannot be frozen (the kernel waits killably, not freezably). The freeze never completes; the
/// stop must fall back to `cgroup.kill`, which ends it at once, and let the proof decide.
#[test]
fn a_member_in_an_unanswered_fuse_request_is_ended_through_cgroup_kill() {
    let Some(bindfs) = bindfs() else { return };
    if !cgroup_path_available() {
        return;
    }
    let home = Home::new();
    let mount = FuseMount::new(&home);
    let fb = mount.path();
    let fifo = home.path().join("go");
    let daemon_pid = home.path().join("daemon.pid");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success()));
    let script = format!(
        "{} -f /usr/bin {fb} & echo $! > {}; until mountpoint -q {fb}; do sleep 0.02; done; echo ready; read x < {}; exec cat {fb}/true",
        bindfs.display(),
        daemon_pid.display(),
        fifo.display()
    );
    let (mut run, id) =
        home.run_until_ready_with(on(&home, StopPath::Cgroup, &[]), &["sh", "-c", &script]);
    let pid = workload_pid(&home, &id);
    let daemon: i32 = std::fs::read_to_string(&daemon_pid)
        .expect("daemon pid")
        .trim()
        .parse()
        .expect("a pid");
    // The daemon stops answering (stopped from outside, as a hung server would be), then the
    // workload asks it something.
    // SAFETY: plain kill(2) of the FUSE daemon this case started.
    assert_eq!(unsafe { libc::kill(daemon, libc::SIGSTOP) }, 0);
    assert!(wait_until(DEADLINE, || {
        std::fs::read_to_string(format!("/proc/{daemon}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('T')))
    }));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut f| f.write_all(b"go\n"))
        .expect("release the workload");
    let waiting = wait_until(DEADLINE, || {
        std::fs::read_to_string(format!("/proc/{pid}/wchan"))
            .is_ok_and(|w| w.contains("request_wait_answer") || w.contains("fuse"))
    });
    assert!(
        waiting,
        "the workload never waited on the daemon: wchan {:?}",
        std::fs::read_to_string(format!("/proc/{pid}/wchan"))
    );
    let (status, out, err) = stop_within(&home, StopPath::Cgroup, &id, Duration::from_secs(20));
    assert!(
        status.success(),
        "stop failed: {status}\nstdout: {out}\nstderr: {err}"
    );
    let doc = json_of(out.as_bytes());
    assert_eq!(doc["outcome"], "stopped", "{doc}");
    assert_eq!(doc["state"], "exited", "{doc}");
    let _ = wait_bounded(&mut run, DEADLINE, "run after the stop");
}

/// A child killed (and reaped) on drop unless it has exited: the PID namespace of the X8 case
/// (`unshare --kill-child`: its init, and with it every process in the namespace, dies too).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The X8 case's driver, run as the init of a PID namespace of its own, where it can choose the
/// next pid (`ns_last_pid`). The scope is a `zombie-leader` (its leader thread gone, the
/// process alive: `cgroup.kill` passes over it, T5), so after the kill the stop reads it from
/// `cgroup.procs` as a bare pid and opens a pidfd for it; `strace` holds every pidfd_open
/// after the guardian's at its entry. There the driver ends the member, waits until its pid is
/// free, and starts a bystander on exactly that pid, outside the scope. Prints `z=`, `b=` and
/// whether the bystander survived the stop.
const REUSE_DRIVER: &str = r#"
set -u
S="$1"; H="$2"; ZL="$3"; OUT="$4"
bounded() { i=0; until eval "$1"; do i=$((i+1)); [ $i -gt 3000 ] && { echo "timeout: $1"; exit 3; }; sleep 0.01; done; }
"$S" --home "$H" run -- "$ZL" > "$OUT/run.out" 2>&1 &
bounded 'grep -q "ready 1" "$OUT/run.out" 2>/dev/null'
ID=$("$S" --home "$H" ps --json | sed -n 's/.*"id": *"\([0-9a-f]\{32\}\)".*/\1/p' | head -1)
Z=$("$S" --home "$H" ps --json | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' | head -1)
strace -qq -o /dev/null -e trace=pidfd_open -e inject=pidfd_open:delay_enter=3000000:when=2+ \
    "$S" --home "$H" stop "$ID" --json > "$OUT/stop.out" 2> "$OUT/stop.err" &
STRACE=$!
at_z() { for f in /proc/[0-9]*/syscall; do read -r nr a0 rest < "$f" 2>/dev/null || continue; [ "$nr" = 434 ] && [ $((a0)) = "$Z" ] && return 0; done; return 1; }
bounded at_z
kill -9 "$Z"
bounded '[ ! -e /proc/$Z ]'
# Another task of the namespace (a thread of the stop, say) may take the pid first: retry
# while the stop's pidfd_open is held (3 s), each time from Z - 1 again.
n=0
while :; do
    echo $((Z - 1)) > /proc/sys/kernel/ns_last_pid
    sleep 77 &
    B=$!
    [ "$B" = "$Z" ] && break
    kill "$B" 2>/dev/null; wait "$B" 2>/dev/null
    n=$((n + 1)); [ $n -ge 100 ] && break
done
# When another task kept the pid the whole time, name it: the test then tries again.
[ "$B" = "$Z" ] || echo "thief=$(tr -c '[:alnum:]_.-' _ < /proc/$Z/comm 2>/dev/null)"
echo "z=$Z b=$B"
wait "$STRACE"
echo "stop rc=$?"
if kill -0 "$B" 2>/dev/null; then echo "bystander survived"; else echo "bystander killed"; fi
kill "$B" 2>/dev/null
wait
"#;

/// X8: on the cgroup path every signal goes through a pidfd whose process was checked to be a
/// member after the pidfd was opened. The stop's pidfd_open for a member read from
/// `cgroup.procs` is held at its entry; meanwhile the member ends and a bystander started
/// outside the scope takes its pid. The bystander must survive.
#[test]
fn a_pid_taken_by_a_bystander_between_cgroup_procs_and_pidfd_open_is_not_signalled() {
    if refine_tests::skip_unless_root("a PID namespace and ns_last_pid need root") {
        return;
    }
    for tool in ["strace", "unshare"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            eprintln!("skipped: no {tool}");
            return;
        }
    }
    if !cgroup_path_available() {
        return;
    }
    // Whether the bystander gets the pid depends on no other task of the namespace taking it
    // first; when one does (a thread started at that moment), the scenario runs again.
    let mut attempts = 0;
    let (out, context, stop_out) = loop {
        attempts += 1;
        let (out, context, stop_out) = reuse_attempt();
        if bystander_took_the_pid(&out) || attempts == 3 {
            break (out, context, stop_out);
        }
        eprintln!("attempt {attempts}: another task kept the member's pid; again\n{out}");
    };
    assert!(
        bystander_took_the_pid(&out),
        "the bystander did not take the member's pid in {attempts} attempts: {context}"
    );
    assert!(out.contains("bystander survived"), "{context}");
    assert!(out.contains("stop rc=0"), "{context}");
    let doc = json_of(stop_out.as_bytes());
    assert_eq!(doc["state"], "exited", "{context}");
}

/// Whether the driver's `z=PID b=PID` line names one pid twice.
fn bystander_took_the_pid(out: &str) -> bool {
    let field = |key: &str| out.split_whitespace().find_map(|w| w.strip_prefix(key));
    field("z=").is_some() && field("z=") == field("b=")
}

/// One run of [`REUSE_DRIVER`] in a PID namespace of its own: the driver's stdout, a context for
/// failure messages, and the stop's JSON.
fn reuse_attempt() -> (String, String, String) {
    let home = Home::new();
    let out_dir = home.path().join("out");
    std::fs::create_dir(&out_dir).expect("out dir");
    let mut cmd = Command::new("unshare");
    cmd.args(words("--pid --fork --mount-proc --kill-child sh -c"))
        .arg(REUSE_DRIVER)
        .arg("driver")
        .arg(refine_tests::bin("refine-supervisor"))
        .arg(home.path())
        .arg(env!("CARGO_BIN_EXE_zombie-leader"))
        .arg(&out_dir)
        .env_remove("REFINE_CGROUP")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut ns = Reaped(cmd.spawn().expect("spawn unshare"));
    let out = collect(ns.0.stdout.take().expect("stdout"));
    let err = collect(ns.0.stderr.take().expect("stderr"));
    let status = wait_bounded(&mut ns.0, Duration::from_secs(90), "the X8 driver");
    let out = String::from_utf8_lossy(&out.join().expect("stdout")).into_owned();
    let err = String::from_utf8_lossy(&err.join().expect("stderr")).into_owned();
    let read = |name: &str| std::fs::read_to_string(out_dir.join(name)).unwrap_or_default();
    let context = format!(
        "driver {status}\nstdout:\n{out}\nstderr:\n{err}\nstop stdout:\n{}\nstop stderr:\n{}",
        read("stop.out"),
        read("stop.err")
    );
    (out, context, read("stop.out"))
}

/// Issue 38 (smaller): `stop`'s "N killed" counts every path it took. A member that moved
/// itself out of the scope's cgroup (root may) keeps the guardian from its receipt after
/// `cgroup.kill`; the `/proc` path then kills it. The count is the cgroup's members and that
/// one, not the last path's alone.
#[test]
fn the_killed_count_sums_the_cgroup_kill_and_the_proc_path() {
    if !rustix::process::geteuid().is_root() || !cgroup_path_available() {
        eprintln!("skipped: moving a member out of the cgroup needs root and the cgroup path");
        return;
    }
    let base = refine_supervisor::kernel::cgroup::base().expect("base");
    // The cgroup2 mount's root: base is <mount><own>/refine.
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        })
        .expect("own cgroup");
    let mut root = base.parent().expect("below own").to_path_buf();
    for _ in Path::new(own.trim_start_matches('/')).components() {
        root.pop();
    }
    let procs = root.join("cgroup.procs");
    let home = Home::new();
    let script = format!(
        "sleep 300 & sleep 300 & sh -c 'echo $$ > {}; exec sleep 300' & echo ready; wait",
        procs.display()
    );
    let (mut run, id) =
        home.run_until_ready_with(on(&home, StopPath::Cgroup, &[]), &["sh", "-c", &script]);
    // The mover has left: the cgroup holds the workload and its two sleeps.
    let cgroup = show(&home, &id)["record"]["cgroup"]["path"]
        .as_str()
        .expect("the scope's cgroup")
        .to_owned();
    let members = || {
        std::fs::read_to_string(Path::new(&cgroup).join("cgroup.procs"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let outside = || {
        show(&home, &id)["processes"]
            .as_array()
            .map_or(0, |a| a.len())
    };
    assert!(
        wait_until(DEADLINE, || members() == 3 && outside() == 4),
        "the mover never left the cgroup: {} members, {} processes",
        members(),
        outside()
    );
    let (status, out, err) = stop_within(&home, StopPath::Cgroup, &id, Duration::from_secs(20));
    assert!(status.success(), "stop failed: {status}\n{out}\n{err}");
    let doc = json_of(out.as_bytes());
    assert_eq!(doc["state"], "exited", "{doc}");
    assert_eq!(
        doc["killed"], 4,
        "three by cgroup.kill, one through /proc: {doc}"
    );
    let _ = wait_bounded(&mut run, DEADLINE, "run after the stop");
}

//! Drives the built `refine-supervisor` with `--home <tempdir>` as a user would, and reads its
//! `--json` documents: the CLI, service, capacity and retention tests share it.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{bin, wait_until};
pub use crate::{skip_unless_root, words};
use serde_json::Value;

/// Generous: the machine is shared and has two cores.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// `run`'s duration flags, each taking one value: what the parse-time bound tests cover.
pub const RUN_DURATION_FLAGS: [&str; 5] = [
    "--timeout",
    "--idle-timeout",
    "--kill-after",
    "--wait-for-slot",
    "--stop-grace",
];

/// `serve`'s duration flags, each taking one value.
pub const SERVE_DURATION_FLAGS: [&str; 5] = [
    "--shutdown-grace",
    "--maintenance-every",
    "--retain",
    "--forget-after",
    "--stall-period",
];

pub struct Home {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

impl Home {
    pub fn new() -> Self {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
            port: 7411,
        }
    }

    /// A fresh home with `serve FLAGS` running for it. Bind both (`let (home, _svc) = ...`): the
    /// service is stopped when its [`Serving`] is dropped, before the home goes.
    pub fn with_service(flags: &[&str]) -> (Home, Serving) {
        let home = Home::new();
        let svc = Serving::start(&home, flags);
        (home, svc)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn run_dir(&self) -> PathBuf {
        self.path().join("run").join(self.port.to_string())
    }

    /// Takes this runtime's stop fence (as a stop in another process would) until the returned
    /// fence is dropped; the runtime must exist.
    pub fn hold_stop_fence(&self) -> refine_supervisor::store::fence::Fence {
        refine_supervisor::store::fence::acquire(
            &self.run_dir().join("locks").join("stop.lock"),
            DEADLINE,
        )
        .expect("the stop fence")
    }

    /// `refine-supervisor --home H --port P ARGS...`, not yet started. A `serve` logs to
    /// `run/P/service.log` (`REFINE_LOG_FILE`, as `--log-file`), where the tests read it.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin("refine-supervisor"));
        c.env("REFINE_LOG_FILE", self.run_dir().join("service.log"))
            .arg("--home")
            .arg(self.path())
            .arg("--port")
            .arg(self.port.to_string())
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// Runs to completion and returns the output (through files: the command's end is its
    /// exit; that pipes reach end of file too is tested on its own in `cli.rs`).
    pub fn cli(&self, args: &[&str]) -> Output {
        output_of(self.command(args))
    }

    /// Starts `refine-supervisor ARGS` with its stdout to `stdout` and its stderr to the test's
    /// own (where a failing case shows it).
    pub fn spawn_cli(&self, args: &[&str], stdout: Stdio) -> Child {
        self.command(args)
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn refine-supervisor")
    }

    /// `run -- sh -c SCRIPT` started as [`Home::spawn_cli`] starts it.
    pub fn spawn_sh(&self, script: &str, stdout: Stdio) -> Child {
        self.spawn_cli(&["run", "--", "sh", "-c", script], stdout)
    }

    /// Runs ARGS, which must fail with one line on stderr ([`assert_one_line_error`]): that line.
    pub fn one_line_error(&self, args: &[&str]) -> String {
        assert_one_line_error(args, &self.cli(args))
    }

    /// `show ID` as a person reads it (required to succeed).
    pub fn show_text(&self, id: &str) -> String {
        String::from_utf8_lossy(&self.cli_ok(&["show", id]).stdout).into_owned()
    }

    /// Requires that `show ID` says `phrase`, and returns what it said.
    pub fn assert_show_says(&self, id: &str, phrase: &str) -> String {
        let text = self.show_text(id);
        assert!(text.contains(phrase), "show {id} lacks {phrase:?}:\n{text}");
        text
    }

    /// Runs to completion and requires success (else fails with [`describe`]'s account).
    pub fn cli_ok(&self, args: &[&str]) -> Output {
        let out = self.cli(args);
        assert!(out.status.success(), "{}", describe(args, &out));
        out
    }

    /// Runs to completion; the output and its stdout parsed as one JSON document (whatever the
    /// exit status: the caller asserts it).
    pub fn cli_doc(&self, args: &[&str]) -> (Output, Value) {
        let out = self.cli(args);
        let doc = parse(args, &out);
        (out, doc)
    }

    /// Runs, requires success, and parses stdout as one JSON document.
    pub fn json(&self, args: &[&str]) -> Value {
        parse(args, &self.cli_ok(args))
    }

    /// `ps --all --json` rows.
    pub fn ps(&self) -> Vec<Value> {
        self.json(&["ps", "--all", "--json"])["registrations"]
            .as_array()
            .expect("registrations array")
            .clone()
    }

    pub fn row(&self, id: &str) -> Value {
        self.ps()
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in ps"))
    }

    /// Waits until `id` is exited, damages its receipt in place (it no longer decodes) and
    /// requires that `id` now reads `unverified`.
    pub fn make_unverified(&self, id: &str) {
        self.wait_state(id, "exited");
        let proof = self.run_dir().join("proofs").join(id);
        crate::overwrite_in_place(&proof, b"not a receipt, but not zeros either");
        assert_eq!(self.state(id), "unverified");
    }

    pub fn state(&self, id: &str) -> String {
        self.row(id)["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `run --json -- ARGV` and its result document.
    pub fn run_json(&self, argv: &[&str]) -> (Output, Value) {
        let mut args = vec!["run", "--json", "--"];
        args.extend_from_slice(argv);
        let out = self.cli(&args);
        let doc = parse(&args, &out);
        (out, doc)
    }

    /// [`Home::run_json`] required to succeed: its result document and the registration id.
    pub fn run_ok(&self, argv: &[&str]) -> (Value, String) {
        let (out, doc) = self.run_json(argv);
        assert!(out.status.success(), "{}", describe(&["run"], &out));
        let id = doc["id"].as_str().expect("id in run --json").to_owned();
        (doc, id)
    }

    /// Starts `run -- ARGV` streaming, waits until its stdout printed `ready`, and returns the
    /// child (the run process) with the registration id found in `ps`.
    pub fn run_until_ready(&self, argv: &[&str]) -> (Child, String) {
        self.run_until_ready_with(self.command(&[]), argv)
    }

    /// [`Home::run_until_ready`] through `base` (a [`Home::command`] with no arguments yet, its
    /// environment set by the caller: `REFINE_CGROUP=off` for the `/proc` stop path).
    pub fn run_until_ready_with(&self, base: Command, argv: &[&str]) -> (Child, String) {
        self.run_until_ready_opts(base, &[], argv)
    }

    /// [`Home::run_until_ready_with`] for `run OPTS -- ARGV`.
    pub fn run_until_ready_opts(
        &self,
        mut base: Command,
        opts: &[&str],
        argv: &[&str],
    ) -> (Child, String) {
        let before: Vec<String> = self.ps().iter().map(|r| r["id"].to_string()).collect();
        let mut args = vec!["run"];
        args.extend_from_slice(opts);
        args.push("--");
        args.extend_from_slice(argv);
        let mut child = base
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn run");
        let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
        crate::read_until(&mut reader, "run", "the workload's ready", |l| l == "ready");
        // Keep draining so the workload never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        let rows = self.ps();
        let id = rows
            .iter()
            .map(|r| r["id"].to_string())
            .find(|i| !before.contains(i))
            .expect("a new registration");
        (child, id.trim_matches('"').to_owned())
    }

    /// Waits until `id` is in `state`.
    /// `wait ID`: the scope has ended and its launcher has its output (its artifacts are whole).
    pub fn wait_ended(&self, id: &str) {
        let bound = format!("{}s", DEADLINE.as_secs());
        let args = ["wait", "--timeout", &bound, id];
        let out = self.cli(&args);
        assert_ne!(out.status.code(), Some(124), "{}", describe(&args, &out));
    }

    pub fn wait_state(&self, id: &str, state: &str) {
        let mut last = String::new();
        let ok = wait_until(DEADLINE, || {
            last = self.state(id);
            last == state
        });
        assert!(ok, "{id} stayed {last}, expected {state}: {}", self.row(id));
    }

    /// `receipt ID --json`, required to succeed: the verdict.
    pub fn receipt(&self, id: &str) -> Value {
        let args = ["receipt", id, "--json"];
        let out = self.cli(&args);
        assert!(out.status.success(), "{}", describe(&args, &out));
        parse(&args, &out)
    }

    /// Waits (bounded) until `ps` shows `rows` registrations and none of them `live`: the rows.
    /// Whatever is left is stopped before the test fails (and before this returns).
    pub fn wait_settled(&self, rows: usize) -> Vec<Value> {
        let mut got = Vec::new();
        let settled = wait_until(DEADLINE, || {
            got = self.ps();
            got.len() == rows && got.iter().all(|r| r["state"] != "live")
        });
        for r in &got {
            let _ = self.cli(&["stop", r["id"].as_str().unwrap_or_default()]);
        }
        assert!(settled, "{got:#?}");
        got
    }

    /// Waits (bounded) until `ps` lists a registration labelled `label`: its id.
    pub fn wait_labelled(&self, label: &str) -> String {
        let mut id = String::new();
        let listed = wait_until(DEADLINE, || {
            id = self
                .ps()
                .into_iter()
                .find(|r| r["label"] == label)
                .and_then(|r| r["id"].as_str().map(str::to_owned))
                .unwrap_or_default();
            !id.is_empty()
        });
        assert!(listed, "{label} never listed");
        id
    }

    /// The guardian's witness (pid, start time) of `id`, as `show` gives it.
    pub fn guardian_of(&self, id: &str) -> refine_protocol::ProcessWitness {
        let [(pid, start_time), _] = witnesses(self, id);
        refine_protocol::ProcessWitness {
            pid: pid as u32,
            start_time,
        }
    }
}

/// Waits (bounded) for `child` to exit; one that has not by then is killed and reaped, and the
/// test fails saying `what` never returned.
pub fn assert_returns(child: &mut Child, bound: Duration, what: &str) {
    let ended = wait_until(bound, || child.try_wait().expect("try_wait").is_some());
    if !ended {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(ended, "{what} never returned");
}

/// Runs `cmd` to its exit with stdout/stderr captured through files.
pub fn output_of(mut cmd: Command) -> Output {
    let out = tempfile::tempfile().expect("tempfile");
    let err = tempfile::tempfile().expect("tempfile");
    let status = cmd
        .stdout(out.try_clone().expect("dup"))
        .stderr(err.try_clone().expect("dup"))
        .status()
        .expect("spawn refine-supervisor");
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut v = Vec::new();
        f.rewind().expect("rewind");
        f.read_to_end(&mut v).expect("read output");
        v
    };
    Output {
        status,
        stdout: read(out),
        stderr: read(err),
    }
}

pub fn parse(args: &[&str], out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", describe(args, out)))
}

pub fn describe(args: &[&str], out: &Output) -> String {
    format!(
        "refine-supervisor {args:?}: {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts a failed command: non-zero exit, exactly one line on stderr.
pub fn assert_one_line_error(args: &[&str], out: &Output) -> String {
    assert!(!out.status.success(), "{}", describe(args, out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "{}", describe(args, out));
    // `op: cause: cause`: each link of the chain once.
    let links: Vec<&str> = err.trim_end().split(": ").collect();
    for (i, link) in links.iter().enumerate() {
        assert!(
            !links[..i].contains(link),
            "{link:?} said twice: {}",
            describe(args, out)
        );
    }
    err
}

/// Every file under `dir` with its (dev, ino), recursively, sorted.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                stack.push(p);
            } else {
                out.push((p, m.dev(), m.ino()));
            }
        }
    }
    out.sort();
    out
}

/// Start time (stat field 22) of a live pid.
pub fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let close = stat.rfind(')').expect("stat");
    stat[close + 1..]
        .split_ascii_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .expect("start time")
}

/// `run --detach -- ARGV` through the service; requires success and returns the printed id.
pub fn detach(home: &Home, argv: &[&str]) -> String {
    detach_with(home, &[], argv)
}

/// `run --detach OPTS -- ARGV`, required to succeed: the id it printed.
pub fn detach_with(home: &Home, opts: &[&str], argv: &[&str]) -> String {
    let mut args = vec!["run", "--detach"];
    args.extend_from_slice(opts);
    args.push("--");
    args.extend_from_slice(argv);
    let out = home.cli(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Whether a process with this pid and start time (field 22) is still there and not a zombie.
pub fn alive(pid: u64, start_time: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let fields: Vec<&str> = stat[close + 1..].split_ascii_whitespace().collect();
    fields.first().is_some_and(|s| *s != "Z" && *s != "X")
        && fields.get(19).and_then(|s| s.parse::<u64>().ok()) == Some(start_time)
}

/// Makes a FIFO at `path`: a workload that waits on it is released by the test's write (an
/// event, not a sleep).
pub fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// Signals the process `(pid, start_time)` through a pidfd, after checking (with the pidfd
/// holding it) that the pid still names that process. Returns whether it was signalled.
pub fn kill_witness(pid: u64, start_time: u64, sig: rustix::process::Signal) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) else {
        return false;
    };
    if !alive(pid, start_time) {
        return false;
    }
    rustix::process::pidfd_send_signal(&fd, sig).is_ok()
}

/// The `show --json` document of `id`.
pub fn show(home: &Home, id: &str) -> Value {
    home.json(&["show", id, "--json"])
}

/// (pid, start_time) of the guardian and the workload, from the record.
pub fn witnesses(home: &Home, id: &str) -> [(u64, u64); 2] {
    let s = show(home, id);
    let w = |k: &str| {
        (
            s["record"][k]["pid"].as_u64().expect("pid"),
            s["record"][k]["start_time"].as_u64().expect("start_time"),
        )
    };
    [w("guardian"), w("workload")]
}

/// Starts `run -- ARGV` (its result is not awaited) and returns the new id once it is listed.
pub fn run_returning(home: &Home, argv: &[&str]) -> (Output, String) {
    let (out, doc) = home.run_json(argv);
    let id = doc["id"].as_str().expect("id in run --json").to_owned();
    (out, id)
}

/// Makes a real managed scope with the `cli-launch` helper (`wait`, `hold` or `leave`, see its
/// docs) and returns the helper process and the registration id. For `wait` and `leave` the
/// helper has exited when this returns.
pub fn launch(home: &Home, mode: &str, argv: &[&str]) -> (Child, String) {
    let mut cmd = Command::new(bin("cli-launch"));
    cmd.arg(home.path())
        .arg(home.port.to_string())
        .arg(mode)
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let (mut child, line) = crate::spawn_first_line(&mut cmd, "cli-launch");
    let id = line.trim().to_owned();
    assert_eq!(id.len(), 32, "cli-launch printed {line:?}");
    if mode != "hold" {
        let status = child.wait().expect("wait cli-launch");
        assert!(status.success(), "cli-launch {mode}: {status}");
    }
    (child, id)
}

/// A running `refine-supervisor serve` for a [`Home`], up once its socket accepts; SIGKILLed
/// and reaped on drop unless it has exited.
pub struct Serving {
    pub child: Child,
}

impl Serving {
    /// `serve FLAGS...`, waited for until its socket accepts.
    pub fn start(home: &Home, flags: &[&str]) -> Serving {
        Serving::start_with_env(home, flags, &[])
    }

    /// [`Serving::start`] with extra environment variables for the service.
    pub fn start_with_env(home: &Home, flags: &[&str], env: &[(&str, &str)]) -> Serving {
        let mut args = vec!["serve"];
        args.extend_from_slice(flags);
        let child = home
            .command(&args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let sock = home.run_dir().join("supervisor.sock");
        let svc = Serving { child };
        assert!(
            wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(&sock)
                .is_ok()),
            "serve did not come up"
        );
        svc
    }

    fn pidfd(&self) -> std::os::fd::OwnedFd {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("pid");
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .expect("pidfd_open serve")
    }

    pub fn signal(&self, sig: rustix::process::Signal) {
        rustix::process::pidfd_send_signal(self.pidfd(), sig).expect("signal serve");
    }

    /// Waits (bounded, on its pidfd) for the service to exit and reaps it.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let fd = self.pidfd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let limit = rustix::time::Timespec {
            tv_sec: 60,
            tv_nsec: 0,
        };
        let ready = rustix::event::poll(&mut fds, Some(&limit)).expect("poll serve's pidfd");
        assert_eq!(ready, 1, "serve did not exit");
        self.child.wait().expect("reap serve")
    }

    /// The service's threads (`Threads:` in its /proc status).
    pub fn threads(&self) -> usize {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read the service's status")
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("a Threads line")
    }

    /// The service's open descriptors.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .expect("read the service's fd table")
            .count()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A loopback address no one listens on now (for `serve --metrics`).
pub fn free_loopback_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    l.local_addr().expect("addr").to_string()
}

/// `GET /metrics` over a plain TCP connection; empty on any failure.
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut c) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = c.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// Driving `run` as a wrapper (wrapper.rs, wrapper_signals.rs).

/// Waits for `child` at most `bound` (its exit observed on a pidfd); kills it (and says so)
/// when it is still running.
pub fn wait_bounded(child: &mut Child, bound: Duration, what: &str) -> ExitStatus {
    let fd = pidfd(child.id());
    if !exited_within(&fd, bound) {
        let _ = child.kill();
        let st = child.wait().expect("wait");
        panic!("{what}: still running after {bound:?} (killed: {st})");
    }
    child.wait().expect("wait")
}

pub fn pidfd(pid: u32) -> OwnedFd {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd_open")
}

/// Whether the process of `fd` has exited within `bound` (a pidfd polls readable then).
pub fn exited_within(fd: &OwnedFd, bound: Duration) -> bool {
    let end = Instant::now() + bound;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let limit = rustix::time::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&limit)) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => panic!("poll pidfd: {e}"),
        }
    }
}

/// A pipe's collector: [`collect`]'s thread, joined for the bytes.
pub type Collected = std::thread::JoinHandle<Vec<u8>>;

/// Starts `cmd` with stdout and stderr piped, each collected on a thread: the child and the
/// collectors of its stdout and stderr.
pub fn spawn_collected(cmd: &mut Command, what: &str) -> (Child, Collected, Collected) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let out = collect(child.stdout.take().expect("stdout"));
    let err = collect(child.stderr.take().expect("stderr"));
    (child, out, err)
}

/// Reads a child's pipe to its end on a thread.
pub fn collect(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

pub fn signal(child: &Child, sig: i32) {
    // SAFETY: plain kill(2) on the pid of a child this test spawned and has not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill {sig}");
}

pub fn json_of(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// Waits (bounded) for a `run --json` child to exit, then parses the document its stdout
/// reader (`out`, from [`collect`]) gathered: the status and the document.
pub fn finished_document(
    child: &mut Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    what: &str,
) -> (ExitStatus, Value) {
    let st = wait_bounded(child, DEADLINE, what);
    (st, json_of(&out.join().unwrap()))
}

/// [`finished_document`] after sending `sig` to the child.
pub fn signalled_document(
    child: &mut Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    sig: i32,
    what: &str,
) -> (ExitStatus, Value) {
    signal(child, sig);
    finished_document(child, out, what)
}

/// `run --json -- sh` with `trap` lines installed, started and ready (its ready file exists).
pub fn trapping_run(
    home: &Home,
    extra: &[&str],
    traps: &str,
) -> (Child, std::thread::JoinHandle<Vec<u8>>) {
    let ready = home.path().join("ready");
    let _ = std::fs::remove_file(&ready);
    let script = format!(
        "{traps}; : > '{}'; while :; do sleep 0.05; done",
        ready.display()
    );
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", &script]);
    let mut child = home.spawn_cli(&args, Stdio::piped());
    let out = collect(child.stdout.take().expect("stdout"));
    let ok = wait_until(DEADLINE, || {
        ready.exists() || child.try_wait().ok().flatten().is_some()
    });
    assert!(ok && ready.exists(), "the workload never got ready");
    (child, out)
}

/// `run --json -- sh -c 'sleep 300 & wait'` in the background: the running `run`, its stdout
/// being collected, and the background sleep's pid once the shell has written it.
pub fn run_with_background_sleep(
    home: &Home,
) -> (std::process::Child, std::thread::JoinHandle<Vec<u8>>, u32) {
    let pidfile = home.path().join("bg.pid");
    let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let mut child = home
        .command(&["run", "--json", "--", "sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn run");
    let out = collect(child.stdout.take().expect("stdout"));
    let mut pid = None;
    let ok = crate::wait_until(DEADLINE, || {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        pid.is_some() || child.try_wait().ok().flatten().is_some()
    });
    assert!(
        ok && pid.is_some(),
        "no background pid in {}",
        pidfile.display()
    );
    (child, out, pid.unwrap())
}

/// Which stop path the supervisor takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopPath {
    /// The scope's own cgroup (where this host gives one: root on cgroup v2).
    Cgroup,
    /// `REFINE_CGROUP=off`: the `/proc` quiesce.
    Procfs,
}

/// `refine-supervisor ARGS` for `home` on `path`.
pub fn on(home: &Home, path: StopPath, args: &[&str]) -> Command {
    let mut c = home.command(args);
    match path {
        StopPath::Cgroup => c.env_remove("REFINE_CGROUP"),
        StopPath::Procfs => c.env("REFINE_CGROUP", "off"),
    };
    c
}

/// A new [`Home`], a `serve` (no flags) for it, and one connection to its socket. Bind all three
/// (`let (home, _svc, mut conn) = served();`): they drop in reverse, the home last.
pub fn served() -> (Home, Serving, Conn) {
    let (home, svc) = Home::with_service(&[]);
    let conn = Conn::open(&home);
    (home, svc, conn)
}

/// One connection to the service's socket: requests written as lines, replies read as lines.
pub struct Conn {
    pub rd: BufReader<UnixStream>,
    pub wr: UnixStream,
}

impl Conn {
    pub fn open(home: &Home) -> Conn {
        let s = UnixStream::connect(home.run_dir().join("supervisor.sock")).unwrap();
        Conn {
            wr: s.try_clone().unwrap(),
            rd: BufReader::new(s),
        }
    }

    pub fn send(&mut self, req: Value) {
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.wr.write_all(&line).unwrap();
    }

    /// Writes `req` and reads its reply's line.
    pub fn call(&mut self, req: Value) -> Value {
        self.send(req.clone());
        let mut reply = String::new();
        self.rd.read_line(&mut reply).unwrap();
        assert!(!reply.is_empty(), "no reply to {req} (connection closed)");
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
    }

    pub fn reply(&mut self) -> Value {
        let mut reply = String::new();
        self.rd.read_line(&mut reply).unwrap();
        assert!(!reply.is_empty(), "connection closed");
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
    }

    /// An `events` request without `follow`: its events and the cursor of its end.
    pub fn events(&mut self, since: Option<&str>) -> (Vec<Value>, String) {
        let mut req = serde_json::json!({"v": 1, "op": "events"});
        if let Some(c) = since {
            req["since"] = serde_json::json!(c);
        }
        self.send(req);
        let mut got = Vec::new();
        loop {
            let r = self.reply();
            assert_eq!(r["ok"], true, "{r}");
            if let Some(end) = r["result"].get("events_end") {
                return (got, end["cursor"].as_str().unwrap().to_owned());
            }
            got.push(r["result"]["event"].clone());
        }
    }
}

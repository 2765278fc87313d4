//! Shared pieces of the stop, assessment and recovery tests and their helper programs: launching
//! a scope (a guardian in front of a `tree-builder` tree), building its registration, and checking
//! that processes are gone.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use refine_protocol::frame::Hello;
use refine_protocol::record::{Kind, Limits, Registration, ScopePolicy};
use refine_protocol::{BootId, ProcessWitness, ProofIdentity, RegistrationId};
use refine_supervisor::guardian::{
    launch_registered, GuardianLink, RegisteredLaunch, Stdio as GuardianStdio,
};
use refine_supervisor::procfs;
use refine_supervisor::registry::Runtime;
use refine_supervisor::tree::{self, Member, Roots};

/// A generous bound for anything that must happen "soon" on a loaded 2-core machine.
pub const GENEROUS: Duration = Duration::from_secs(30);

/// A scope launched for a test: the guardian is this test's child (reaped by pid in `reap`).
pub struct Launched {
    pub guardian: Child,
    pub reg: Registration,
    pub lines: BufReader<ChildStdout>,
    /// The `ready N` count, once read.
    pub ready: Option<u32>,
}

impl Launched {
    /// Reads lines until `ready N`; returns N.
    pub fn wait_ready(&mut self) -> u32 {
        if let Some(n) = self.ready {
            return n;
        }
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.lines.read_line(&mut line).expect("read");
            assert!(n > 0, "tree-builder closed its output before `ready`");
            if let Some(rest) = line.trim().strip_prefix("ready ") {
                let n = rest.parse().expect("ready count");
                self.ready = Some(n);
                return n;
            }
        }
    }

    /// Reaps the guardian (this test's own child, by pid).
    pub fn reap(&mut self) -> std::process::ExitStatus {
        self.guardian.wait().expect("wait guardian")
    }

    /// Every live member of the scope now.
    pub fn members(&self) -> Vec<Member> {
        scan(&self.reg)
    }
}

/// The live members of `reg`'s scope (below its guardian, or carrying its marker).
pub fn scan(reg: &Registration) -> Vec<Member> {
    let roots = Roots {
        guardian: Some(reg.hello.guardian),
        members: Vec::new(),
        owner: Some(reg.id),
    };
    let boot = procfs::boot_id().expect("boot id");
    tree::discover(&roots, boot)
        .expect("discover")
        .live()
        .copied()
        .collect()
}

/// A registration record for the identities a guardian reported.
pub fn registration(rt: &Runtime, id: RegistrationId, hello: Hello, proof: &Path) -> Registration {
    Registration {
        id,
        runtime: rt.id(),
        kind: Kind::Command,
        label: "stop-test".into(),
        owner: "tests".into(),
        purpose: BTreeMap::new(),
        argv: Vec::new(),
        cwd: "/".into(),
        stdout_path: rt
            .log_path(id, refine_supervisor::registry::Stream::Stdout)
            .display()
            .to_string(),
        stderr_path: rt
            .log_path(id, refine_supervisor::registry::Stream::Stderr)
            .display()
            .to_string(),
        stdin_path: None,
        pty: false,
        limits: Limits::default(),
        scope_policy: ScopePolicy::Keep,
        started_at_unix_ms: 0,
        hello,
        proof_path: proof.display().to_string(),
    }
}

/// A scope behind the real `refine-guardian`, launched through
/// `refine_supervisor::guardian::launch_registered` (registration durable before *start*).
pub struct GuardianScope {
    pub link: GuardianLink,
    pub reg: Registration,
    pub lines: BufReader<std::io::PipeReader>,
    pub ready: Option<u32>,
}

impl GuardianScope {
    /// Reads the workload's output until `ready N`; returns N.
    pub fn wait_ready(&mut self) -> u32 {
        if let Some(n) = self.ready {
            return n;
        }
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.lines.read_line(&mut line).expect("read");
            assert!(n > 0, "tree-builder closed its output before `ready`");
            if let Some(rest) = line.trim().strip_prefix("ready ") {
                let n = rest.parse().expect("ready count");
                self.ready = Some(n);
                return n;
            }
        }
    }

    /// Reaps the guardian (this process's child, by pid).
    pub fn reap(&mut self) -> std::process::ExitStatus {
        self.link.wait_guardian().expect("wait guardian")
    }

    pub fn members(&self) -> Vec<Member> {
        scan(&self.reg)
    }
}

/// The launch request for `argv` with stdout to `out`, stdin `/dev/null`, stderr inherited.
pub fn request(argv: Vec<OsString>, out: OwnedFd) -> RegisteredLaunch {
    let null: OwnedFd = std::fs::File::open("/dev/null").expect("/dev/null").into();
    let err = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .expect("dup stderr");
    RegisteredLaunch {
        kind: Kind::Command,
        label: "stop-test".into(),
        owner: "tests".into(),
        purpose: BTreeMap::new(),
        argv,
        env: std::env::vars_os().collect(),
        cwd: None,
        stdio: GuardianStdio::Fds([null, out, err]),
        pty: false,
        new_session: false,
        limits: Limits::default(),
        scope_policy: ScopePolicy::Keep,
        pdeath_signal: 0,
        start_timeout: Duration::from_secs(30),
        guardian_exe: None,
    }
}

/// Launches `tree-builder TREE_ARGS` behind the real guardian and returns once it started.
pub fn launch_guardian(rt: &Runtime, tree_builder: &Path, tree_args: &[&str]) -> GuardianScope {
    let (reader, writer) = std::io::pipe().expect("pipe");
    let mut argv: Vec<OsString> = vec![tree_builder.into()];
    argv.extend(tree_args.iter().map(OsString::from));
    let id = rt.new_id().expect("id");
    let (reg, link) =
        launch_registered(rt, id, request(argv, writer.into())).expect("launch through guardian");
    GuardianScope {
        link,
        reg,
        lines: BufReader::new(reader),
        ready: None,
    }
}

/// Launches `tree-builder` behind the stand-in guardian (`tree-builder --stand-in-guardian`),
/// registers it durably, and returns once the `hello` line arrived.
pub fn launch_stand_in(rt: &Runtime, tree_builder: &Path, tree_args: &[&str]) -> Launched {
    let id = rt.new_id().expect("id");
    let proof = rt.proof_path(id);
    let mut child = Command::new(tree_builder)
        .arg("--stand-in-guardian")
        .arg("--proof")
        .arg(&proof)
        .arg("--registration")
        .arg(id.to_string())
        .arg("--runtime")
        .arg(rt.id().to_string())
        .args(tree_args)
        .env(procfs::OWNER_VAR, id.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn tree-builder");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut ready = None;
    let hello = loop {
        line.clear();
        let n = lines.read_line(&mut line).expect("read");
        assert!(n > 0, "stand-in guardian closed its output before hello");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"hello") => break parse_hello(&words[1..]),
            Some(&"ready") => ready = words.get(1).and_then(|w| w.parse().ok()),
            _ => {}
        }
    };
    let mut reg = registration(rt, id, hello, &proof);
    reg.argv = vec![tree_builder.display().to_string()];
    rt.write_registration(&reg).expect("write registration");
    Launched {
        guardian: child,
        reg,
        lines,
        ready,
    }
}

fn parse_hello(w: &[&str]) -> Hello {
    let n = |i: usize| -> u64 { w[i].parse().expect("hello field") };
    Hello {
        guardian: ProcessWitness {
            pid: n(0) as u32,
            start_time: n(1),
        },
        workload: ProcessWitness {
            pid: n(2) as u32,
            start_time: n(3),
        },
        workload_pgid: n(4) as u32,
        workload_sid: n(5) as u32,
        proof: ProofIdentity {
            dev: n(6),
            ino: n(7),
        },
        boot_id: BootId::parse(w[8]).expect("boot id"),
    }
}

/// Whether the witnessed process still exists (alive, or a zombie not yet reaped).
pub fn exists(w: &ProcessWitness) -> bool {
    procfs::stat_of(w).expect("stat").is_some()
}

/// Whether the witnessed process exists and has not exited.
pub fn running(w: &ProcessWitness) -> bool {
    procfs::stat_of(w)
        .expect("stat")
        .is_some_and(|s| !s.state.is_exited())
}

/// The witnesses of `members` still in existence, with their `/proc` state, for messages.
pub fn survivors(members: &[Member]) -> Vec<String> {
    members
        .iter()
        .filter_map(|m| {
            procfs::stat_of(&m.witness)
                .expect("stat")
                .map(|s| format!("{:?} state {:?} ppid {}", m.witness, s.state, s.ppid))
        })
        .collect()
}

pub fn home() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn runtime(home: &Path) -> Runtime {
    Runtime::open(home, 7000).expect("runtime")
}

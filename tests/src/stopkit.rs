//! Shared pieces of the stop, assessment and recovery tests and their helper programs: launching
//! a scope (the real guardian in front of a `tree-builder` tree, registered durably before
//! *start*), scanning it, and checking that processes are gone.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::BufReader;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

pub use crate::words;
use refine_protocol::record::{Kind, Limits, Registration, ScopePolicy};
use refine_protocol::ProcessWitness;
use refine_supervisor::kernel::tree::{self, Member, Roots};
use refine_supervisor::launch::env_policy::to_entries;
use refine_supervisor::launch::guardian::{GuardianLink, LaunchConfig, Stdio as GuardianStdio};
use refine_supervisor::launch::{launch_registered, RegisteredLaunch};
use refine_supervisor::store::registry::Runtime;
use refine_supervisor::{end::assess, end::stop, kernel::procfs};

/// A generous bound for anything that must happen "soon" on a loaded 2-core machine.
pub const GENEROUS: Duration = Duration::from_secs(30);

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

/// A scope behind the real `refine-guardian`, launched through
/// `refine_supervisor::launch::launch_registered` (registration durable before *start*).
pub struct GuardianScope {
    pub runtime: Runtime,
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
        let line = crate::read_until(&mut self.lines, "tree-builder", "`ready N`", |l| {
            l.starts_with("ready ")
        });
        let n = line["ready ".len()..].parse().expect("ready count");
        self.ready = Some(n);
        n
    }

    /// Reaps the guardian (this process's child, by pid).
    pub fn reap(&mut self) -> std::process::ExitStatus {
        self.link.wait_guardian().expect("wait guardian")
    }

    pub fn members(&self) -> Vec<Member> {
        scan(&self.reg)
    }
}

impl Drop for GuardianScope {
    /// A test that failed half-way must not leave its tree running: stop what is still live.
    fn drop(&mut self) {
        if assess::assess(&self.runtime, &self.reg, &assess::KERNEL_BOOT).is_live() {
            let _ = stop::stop(&self.runtime, &self.reg, &stop::StopOptions::default());
        }
        // As the launcher: the scope's empty cgroup (F4) goes once it ended.
        let _ = refine_supervisor::kernel::cgroup::finish(&self.reg);
    }
}

/// The launch request for `argv` with stdout to `out`, stdin `/dev/null`, stderr inherited.
pub fn request(argv: Vec<OsString>, out: OwnedFd) -> RegisteredLaunch {
    let null: OwnedFd = std::fs::File::open("/dev/null").expect("/dev/null").into();
    let err = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .expect("dup stderr");
    registered(
        "stop-test",
        LaunchConfig {
            env: to_entries(&std::env::vars_os().collect()),
            start_timeout: Duration::from_secs(30),
            ..LaunchConfig::new(argv, GuardianStdio::Fds([null, out, err]))
        },
    )
}

/// A foreground-less command launch labelled `label`, owned by `tests`, with no purpose, limits,
/// resources, readiness or protection, kept on service loss per the default: the one place the
/// tests spell every field of [`RegisteredLaunch`] (change a field there with struct update
/// syntax, `RegisteredLaunch { limits, ..registered(label, guardian) }`).
pub fn registered(label: &str, guardian: LaunchConfig) -> RegisteredLaunch {
    RegisteredLaunch {
        kind: Kind::Command,
        label: label.into(),
        owner: "tests".into(),
        purpose: BTreeMap::new(),
        guardian,
        stdin_path: None,
        pty: false,
        limits: Limits::default(),
        scope_policy: ScopePolicy::Keep,
        on_service_loss: None,
        foreground: None,
        resources: Default::default(),
        readiness: None,
        health: None,
        protection: None,
        sandbox: None,
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
        runtime: rt.clone(),
        link,
        reg,
        lines: BufReader::new(reader),
        ready: None,
    }
}

/// [`launch_guardian`] of `tree_builder` with its arguments written as one line
/// (`--sessions 2 --groups 2`, split at white space).
pub fn launch_tree(rt: &Runtime, tree_builder: &str, tree_args: &str) -> GuardianScope {
    launch_guardian(rt, Path::new(tree_builder), &words(tree_args))
}

/// A fresh [`home_and_runtime`] with [`launch_tree`]'s scope in it, ready (`ready N` read): keep
/// all three (the scope is dropped first, the home last).
pub fn ready_tree(
    tree_builder: &str,
    tree_args: &str,
) -> (tempfile::TempDir, Runtime, GuardianScope) {
    let (home, rt) = home_and_runtime();
    let mut scope = launch_tree(&rt, tree_builder, tree_args);
    scope.wait_ready();
    (home, rt, scope)
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

/// A fresh [`home`] and the [`runtime`] in it (the home is removed when dropped: keep it).
pub fn home_and_runtime() -> (tempfile::TempDir, Runtime) {
    let home = home();
    let rt = runtime(home.path());
    (home, rt)
}

/// The tree benchmarks' command line: `[--iterations N] [--sessions S] [--groups G]
/// [--leaves L]`, over the given defaults.
#[derive(Debug, Clone, Copy)]
pub struct BenchArgs {
    pub iterations: usize,
    pub sessions: u32,
    pub groups: u32,
    pub leaves: u32,
}

impl BenchArgs {
    /// [`BenchArgs::parse`] over these defaults, as `(iterations, sessions, groups, leaves)`.
    pub fn parse_over(
        iterations: usize,
        sessions: u32,
        groups: u32,
        leaves: u32,
    ) -> (usize, u32, u32, u32) {
        let a = BenchArgs {
            iterations,
            sessions,
            groups,
            leaves,
        }
        .parse();
        (a.iterations, a.sessions, a.groups, a.leaves)
    }

    /// Parses this process's arguments over `self` (the defaults); panics on a bad one.
    pub fn parse(mut self) -> BenchArgs {
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            let v: u32 = args.next().and_then(|v| v.parse().ok()).expect("number");
            match a.as_str() {
                "--iterations" => self.iterations = v as usize,
                "--sessions" => self.sessions = v,
                "--groups" => self.groups = v,
                "--leaves" => self.leaves = v,
                other => panic!("unknown argument {other}"),
            }
        }
        self
    }

    /// `tree-builder`, beside the running benchmark.
    pub fn tree_builder() -> std::path::PathBuf {
        let exe = std::env::current_exe().expect("current_exe");
        crate::built(
            exe.with_file_name("tree-builder"),
            "build the test binaries",
        )
    }
}

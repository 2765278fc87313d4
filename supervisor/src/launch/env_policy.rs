//! Environment policy (SPEC S8): which environment each kind of managed launch gets.
//!
//! - `quality`: the daemon's environment, with only `PATH`, `PATHEXT`, `DOTNET_ROOT`,
//!   `DOTNET_ROOT_X64` and `DOTNET_ROOT_X86` taken from the login-shell environment.
//! - `agent`: the captured host-shell (login) environment.
//! - `command`, `terminal`: the daemon's environment.
//! - agents, quality and managed git commands: inherited git redirection (`GIT_DIR`,
//!   `GIT_INDEX_FILE`, `GIT_CONFIG*`, ...) removed.
//! - explicit per-launch overrides last (they survive the git filter), then
//!   `REFINE_OWNER=<registration id>` on every managed launch, as an extra witness that
//!   descendants carry even when they escape the tree.
//!
//! The login environment comes from `$SHELL -l -c` printing its environment NUL-separated after a
//! marker, read with a time bound; any failure leaves the environment unchanged (`None`), and
//! [`LoginEnv`] captures it once and caches the answer.
//!
//! # Caveats
//! A login shell that prints to stdout in its profile is fine (everything before the marker is
//! ignored). A profile that forks a long-lived process holding stdout cannot hold the capture
//! past its bound; the shell's process group is killed when the bound passes.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use refine_protocol::{Kind, RegistrationId};
use rustix::event::{PollFd, PollFlags, Timespec};

/// An environment: names to values (ordered, so launches are reproducible).
pub type EnvMap = BTreeMap<OsString, OsString>;

/// The owner marker every managed descendant carries.
pub const OWNER_VAR: &str = "REFINE_OWNER";

/// The only variables a `quality` launch takes from the login shell.
pub(crate) const QUALITY_OVERLAY: [&str; 5] = [
    "PATH",
    "PATHEXT",
    "DOTNET_ROOT",
    "DOTNET_ROOT_X64",
    "DOTNET_ROOT_X86",
];

/// Git's repository-redirection variables (exact names); any `GIT_CONFIG*` is also one.
const GIT_REDIRECTION: [&str; 14] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_SUPER_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_REPLACE_REF_BASE",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_CEILING_DIRECTORIES",
];

/// Whether `name` redirects git to another repository, index, object store or configuration.
pub(crate) fn is_git_redirection(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b.starts_with(b"GIT_CONFIG")
        || b == b"GIT_DISCOVERY_ACROSS_FILESYSTEM"
        || GIT_REDIRECTION.iter().any(|g| g.as_bytes() == b)
}

/// One explicit per-launch change: set (`Some`) or remove (`None`).
pub type Override = (OsString, Option<OsString>);

/// What a launch's environment is built from.
#[derive(Debug, Clone, Copy)]
pub struct EnvInputs<'a> {
    pub kind: Kind,
    /// The supervisor's (daemon's) own environment.
    pub daemon: &'a EnvMap,
    /// The captured login-shell environment; `None` when capture failed (nothing changes then).
    pub login: Option<&'a EnvMap>,
    /// A `command` that is a managed git command: git redirection is removed for it too.
    pub managed_git: bool,
    /// Start from nothing instead of the daemon's or login environment (a host's
    /// `Command::env_clear`); the overrides and the owner marker are still applied.
    pub clear: bool,
    pub overrides: &'a [Override],
    pub owner: RegistrationId,
}

/// Builds the workload's complete environment (pure).
pub fn build(inputs: EnvInputs<'_>) -> EnvMap {
    let mut env = match (inputs.kind, inputs.login) {
        _ if inputs.clear => EnvMap::new(),
        (Kind::Agent, Some(login)) => login.clone(),
        _ => inputs.daemon.clone(),
    };
    if let (Kind::Quality, Some(login), false) = (inputs.kind, inputs.login, inputs.clear) {
        for name in QUALITY_OVERLAY {
            if let Some(v) = login.get(OsStr::new(name)) {
                env.insert(name.into(), v.clone());
            }
        }
    }
    let strip_git = matches!(inputs.kind, Kind::Agent | Kind::Quality) || inputs.managed_git;
    if strip_git {
        env.retain(|k, _| !is_git_redirection(k));
    }
    for (k, v) in inputs.overrides {
        match v {
            Some(v) => env.insert(k.clone(), v.clone()),
            None => env.remove(k),
        };
    }
    env.insert(OWNER_VAR.into(), inputs.owner.to_string().into());
    env
}

/// `KEY=VALUE` entries, as the guardian's launch spec wants them.
pub fn to_entries(env: &EnvMap) -> Vec<OsString> {
    env.iter()
        .map(|(k, v)| {
            let mut e = OsString::with_capacity(k.len() + 1 + v.len());
            e.push(k);
            e.push("=");
            e.push(v);
            e
        })
        .collect()
}

/// This process's environment.
pub(crate) fn daemon_env() -> EnvMap {
    std::env::vars_os().collect()
}

/// Parses `KEY=VALUE\0...` (entries without `=` or with an empty name are skipped).
pub(crate) fn parse_nul_env(bytes: &[u8]) -> EnvMap {
    bytes
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            if eq == 0 {
                return None;
            }
            Some((
                OsString::from_vec(entry[..eq].to_vec()),
                OsString::from_vec(entry[eq + 1..].to_vec()),
            ))
        })
        .collect()
}

/// Marker printed before the environment, so profile chatter on stdout is ignored.
const MARKER: &[u8] = b"\0--refine-login-env--\0";
/// Output past this is not an environment.
const MAX_ENV_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LoginEnvError {
    #[error("no login shell: $SHELL is not set")]
    NoShell,
    #[error("cannot run login shell {shell}")]
    Spawn {
        shell: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("login shell {shell} did not print its environment within {bound:?}")]
    Timeout { shell: PathBuf, bound: Duration },
    #[error("login shell {shell} printed no environment (exit status {status:?})")]
    NoOutput { shell: PathBuf, status: Option<i32> },
    #[error("login shell {shell} printed more than {MAX_ENV_BYTES} bytes")]
    Oversized { shell: PathBuf },
    #[error("reading the login shell's output failed")]
    Read(#[source] io::Error),
}

/// Runs `shell -l -c` to print its environment, bounded by `bound`.
pub fn capture_login_env(shell: &Path, bound: Duration) -> Result<EnvMap, LoginEnvError> {
    let mut child = Command::new(shell)
        .arg("-l")
        .arg("-c")
        .arg(r"printf '\000--refine-login-env--\000'; exec env -0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Its own group, so that the bound can end everything the profile started with it.
        .process_group(0)
        .spawn()
        .map_err(|source| LoginEnvError::Spawn {
            shell: shell.to_owned(),
            source,
        })?;
    let Some(mut out) = child.stdout.take() else {
        return Err(LoginEnvError::NoOutput {
            shell: shell.to_owned(),
            status: None,
        });
    };
    let end = Instant::now() + bound;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let read = loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(LoginEnvError::Timeout {
                shell: shell.to_owned(),
                bound,
            });
        }
        let mut fds = [PollFd::new(&out, PollFlags::IN)];
        let ts = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: left.subsec_nanos() as i64,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(e) => break Err(LoginEnvError::Read(e.into())),
        }
        match out.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() > MAX_ENV_BYTES {
                    break Err(LoginEnvError::Oversized {
                        shell: shell.to_owned(),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(LoginEnvError::Read(e)),
        }
    };
    drop(out);
    if read.is_err() {
        // Our own unreaped child leads its group, so the group id is live and > 1.
        if let Some(pgid) = rustix::process::Pid::from_raw(child.id() as i32) {
            if pgid.as_raw_nonzero().get() > 1 {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            }
        }
    }
    // Reaps only this direct child, by pid.
    let status = child.wait().ok().and_then(|s| s.code());
    read?;
    let Some(at) = find(&bytes, MARKER) else {
        return Err(LoginEnvError::NoOutput {
            shell: shell.to_owned(),
            status,
        });
    };
    let env = parse_nul_env(&bytes[at + MARKER.len()..]);
    if env.is_empty() {
        return Err(LoginEnvError::NoOutput {
            shell: shell.to_owned(),
            status,
        });
    }
    Ok(env)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Default bound on the login-shell capture.
pub const LOGIN_CAPTURE_BOUND: Duration = Duration::from_secs(5);

/// The login-shell environment, captured once (per service start) and cached; a failure is
/// cached too (as `None`: environments stay unchanged).
#[derive(Debug)]
pub struct LoginEnv {
    shell: Option<PathBuf>,
    bound: Duration,
    cell: OnceLock<Option<EnvMap>>,
}

impl LoginEnv {
    /// `$SHELL`, bounded by [`LOGIN_CAPTURE_BOUND`].
    pub fn from_env() -> Self {
        LoginEnv::new(
            std::env::var_os("SHELL").map(PathBuf::from),
            LOGIN_CAPTURE_BOUND,
        )
    }

    pub fn new(shell: Option<PathBuf>, bound: Duration) -> Self {
        LoginEnv {
            shell,
            bound,
            cell: OnceLock::new(),
        }
    }

    /// A fixed login environment (tests, or a caller that captured it already).
    pub fn fixed(env: Option<EnvMap>) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(env);
        LoginEnv {
            shell: None,
            bound: LOGIN_CAPTURE_BOUND,
            cell,
        }
    }

    /// The captured environment, capturing it on first use.
    pub fn get(&self) -> Option<&EnvMap> {
        self.cell
            .get_or_init(|| {
                let shell = self.shell.as_deref()?;
                match capture_login_env(shell, self.bound) {
                    Ok(env) => Some(env),
                    Err(e) => {
                        tracing::warn!(error = %e, "login-shell environment not captured; environments stay unchanged");
                        None
                    }
                }
            })
            .as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> EnvMap {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn get<'a>(env: &'a EnvMap, k: &str) -> Option<&'a str> {
        env.get(OsStr::new(k)).and_then(|v| v.to_str())
    }

    const OWNER: RegistrationId = RegistrationId([0xab; 16]);

    fn inputs<'a>(
        kind: Kind,
        daemon: &'a EnvMap,
        login: Option<&'a EnvMap>,
        overrides: &'a [Override],
    ) -> EnvInputs<'a> {
        EnvInputs {
            kind,
            daemon,
            login,
            managed_git: false,
            clear: false,
            overrides,
            owner: OWNER,
        }
    }

    #[test]
    fn quality_takes_only_the_overlay_from_login() {
        let daemon = map(&[
            ("PATH", "/daemon"),
            ("HOME", "/root"),
            ("GIT_DIR", "/x/.git"),
        ]);
        let login = map(&[
            ("PATH", "/login"),
            ("DOTNET_ROOT", "/dotnet"),
            ("ONLY_LOGIN", "1"),
            ("HOME", "/elsewhere"),
        ]);
        let env = build(inputs(Kind::Quality, &daemon, Some(&login), &[]));
        assert_eq!(get(&env, "PATH"), Some("/login"));
        assert_eq!(get(&env, "DOTNET_ROOT"), Some("/dotnet"));
        assert_eq!(get(&env, "HOME"), Some("/root"));
        assert_eq!(get(&env, "ONLY_LOGIN"), None);
        assert_eq!(get(&env, "GIT_DIR"), None);
        assert_eq!(get(&env, OWNER_VAR), Some(&*OWNER.to_string()));
    }

    #[test]
    fn login_failure_leaves_environment_unchanged() {
        let daemon = map(&[("PATH", "/daemon"), ("A", "1")]);
        for kind in [Kind::Quality, Kind::Agent, Kind::Command] {
            let env = build(inputs(kind, &daemon, None, &[]));
            assert_eq!(get(&env, "PATH"), Some("/daemon"));
            assert_eq!(get(&env, "A"), Some("1"));
        }
    }

    #[test]
    fn agent_gets_host_shell_env_without_git_redirection() {
        let daemon = map(&[("DAEMON_ONLY", "1")]);
        let login = map(&[
            ("SHELL_VAR", "x"),
            ("GIT_INDEX_FILE", "/i"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_AUTHOR_NAME", "kept"),
        ]);
        let env = build(inputs(Kind::Agent, &daemon, Some(&login), &[]));
        assert_eq!(get(&env, "SHELL_VAR"), Some("x"));
        assert_eq!(get(&env, "DAEMON_ONLY"), None);
        assert_eq!(get(&env, "GIT_INDEX_FILE"), None);
        assert_eq!(get(&env, "GIT_CONFIG_COUNT"), None);
        assert_eq!(get(&env, "GIT_AUTHOR_NAME"), Some("kept"));
    }

    #[test]
    fn explicit_overrides_survive_and_come_last() {
        let daemon = map(&[("GIT_DIR", "/inherited"), ("DROP", "1"), ("PATH", "/d")]);
        let overrides = [
            (OsString::from("GIT_DIR"), Some(OsString::from("/explicit"))),
            (OsString::from("DROP"), None),
            (OsString::from("PATH"), Some(OsString::from("/o"))),
        ];
        let login = map(&[("PATH", "/login")]);
        let env = build(inputs(Kind::Quality, &daemon, Some(&login), &overrides));
        assert_eq!(get(&env, "GIT_DIR"), Some("/explicit"));
        assert_eq!(get(&env, "DROP"), None);
        assert_eq!(get(&env, "PATH"), Some("/o"));
    }

    #[test]
    fn command_keeps_git_unless_managed_git() {
        let daemon = map(&[("GIT_DIR", "/g"), ("GIT_WORK_TREE", "/w")]);
        let env = build(inputs(Kind::Command, &daemon, None, &[]));
        assert_eq!(get(&env, "GIT_DIR"), Some("/g"));
        let mut git = inputs(Kind::Command, &daemon, None, &[]);
        git.managed_git = true;
        let env = build(git);
        assert_eq!(get(&env, "GIT_DIR"), None);
        assert_eq!(get(&env, "GIT_WORK_TREE"), None);
    }

    #[test]
    fn owner_marker_cannot_be_overridden_away() {
        let daemon = map(&[(OWNER_VAR, "forged")]);
        let overrides = [(OsString::from(OWNER_VAR), None)];
        let env = build(inputs(Kind::Terminal, &daemon, None, &overrides));
        assert_eq!(get(&env, OWNER_VAR), Some(&*OWNER.to_string()));
    }

    #[test]
    fn git_redirection_names() {
        for n in [
            "GIT_DIR",
            "GIT_CONFIG",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_KEY_0",
            "GIT_NAMESPACE",
        ] {
            assert!(is_git_redirection(OsStr::new(n)), "{n}");
        }
        for n in ["GIT_AUTHOR_NAME", "GIT_SSH_COMMAND", "GITHUB_TOKEN", "PATH"] {
            assert!(!is_git_redirection(OsStr::new(n)), "{n}");
        }
    }

    #[test]
    fn parse_skips_malformed_entries() {
        let env = parse_nul_env(b"A=1\0=bad\0noeq\0B=x=y\0\0");
        assert_eq!(env, map(&[("A", "1"), ("B", "x=y")]));
    }
}

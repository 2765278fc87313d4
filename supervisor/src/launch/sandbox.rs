//! X12: sandboxes for agents (`run --sandbox read-only | workspace-write[=PATH,...]`,
//! `--network none`), in the same Landlock domain as X11's evidence protection
//! ([`crate::launch::protect`] builds the one ruleset from both).
//!
//! - `read-only`: reads everywhere; writes (make, remove, rename, link, truncate, write) only
//!   beneath a private temporary directory made for the launch (mode 0700, set as `TMPDIR`) and
//!   to the terminal and null-like devices ([`DEVICES`]);
//! - `workspace-write`: the same plus the working directory and each named path (absolute or
//!   relative to the working directory; a missing one is refused);
//! - `--network none`: TCP bind and connect are handled with no port rule (Landlock ABI 4).
//!
//! No writable root ever reaches the home's `run/`: a root inside it is refused, and a root
//! above it (the home, `/`) is granted on the entries beside the way down to `run/`, as X11
//! does. A request this kernel cannot honour (no Landlock, an ABI older than 3 for the files
//! or 4 for the network) is refused before anything is created, never weakened.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use refine_protocol::record::{NetworkAsk, Sandbox, SandboxMode};

/// The devices a sandboxed workload may write (files; `/dev/pts` a directory).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/urandom",
    "/dev/random",
    "/dev/pts",
];

/// The Landlock ABI the file-system part needs (`TRUNCATE`: without it a truncation outside
/// the workspace would pass).
pub const FS_ABI: u32 = 3;
/// The Landlock ABI the network part needs (TCP bind and connect).
pub const NET_ABI: u32 = 4;

/// What a launch asks for (the library's form of [`refine_protocol::record::SandboxAsk`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxRequest {
    pub mode: SandboxMode,
    /// With `workspace-write`: more writable paths (relative ones to the working directory).
    pub paths: Vec<PathBuf>,
    pub network: NetworkAsk,
}

impl SandboxRequest {
    /// From the socket API's form.
    pub fn from_ask(ask: &refine_protocol::record::SandboxAsk) -> SandboxRequest {
        SandboxRequest {
            mode: ask.mode,
            paths: ask.paths.iter().map(PathBuf::from).collect(),
            network: ask.network,
        }
    }
}

/// A sandbox this launch cannot have: refused before anything is created.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("--sandbox needs Landlock ABI {FS_ABI} or later and this kernel has {}: refused rather than run unsandboxed", abi_words(*.0))]
    FsUnavailable(u32),
    #[error("--network none needs Landlock ABI {NET_ABI} or later and this kernel has {}: refused rather than run with the network", abi_words(*.0))]
    NetUnavailable(u32),
    #[error("sandbox path {}", path.display())]
    Path {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("sandbox path {} is inside the home's run/ (the evidence), which is never writable", .0.display())]
    InsideRun(PathBuf),
    #[error("named sandbox paths need --sandbox workspace-write")]
    PathsWithoutWorkspace,
    #[error("cannot make the sandbox's temporary directory {}", path.display())]
    Tmpdir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn abi_words(abi: u32) -> String {
    match abi {
        0 => "none".to_owned(),
        n => format!("ABI {n}"),
    }
}

/// A checked sandbox: what the ruleset grants.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: SandboxMode,
    pub network: NetworkAsk,
    /// The workspace's writable roots, canonical.
    pub writable: Vec<PathBuf>,
    /// The private temporary directory, once [`Plan::make_tmpdir`] made it.
    pub tmpdir: Option<PathBuf>,
}

/// Checks `req` against this kernel (`abi`: [`crate::kernel::landlock::abi`], 0 for none):
/// `None` when nothing is asked. `cwd`: the workload's working directory (`None`: this
/// process's); `home`: the supervisor's home (its `run/` is never writable).
pub fn plan(
    req: &SandboxRequest,
    cwd: Option<&Path>,
    home: &Path,
    abi: u32,
) -> Result<Option<Plan>, SandboxError> {
    if req.mode != SandboxMode::WorkspaceWrite && !req.paths.is_empty() {
        return Err(SandboxError::PathsWithoutWorkspace);
    }
    if req.mode == SandboxMode::None && req.network == NetworkAsk::All {
        return Ok(None);
    }
    if req.mode != SandboxMode::None && abi < FS_ABI {
        return Err(SandboxError::FsUnavailable(abi));
    }
    if req.network == NetworkAsk::None && abi < NET_ABI {
        return Err(SandboxError::NetUnavailable(abi));
    }
    let mut writable = Vec::new();
    if req.mode == SandboxMode::WorkspaceWrite {
        let here = match cwd {
            Some(c) => c.to_owned(),
            None => std::env::current_dir().map_err(|source| SandboxError::Path {
                path: PathBuf::from("."),
                source,
            })?,
        };
        let run = fs::canonicalize(home)
            .unwrap_or_else(|_| home.to_owned())
            .join("run");
        for p in std::iter::once(&here).chain(&req.paths) {
            let path = here.join(p);
            let canon =
                fs::canonicalize(&path).map_err(|source| SandboxError::Path { path, source })?;
            if canon.starts_with(&run) {
                return Err(SandboxError::InsideRun(canon));
            }
            if !writable.contains(&canon) {
                writable.push(canon);
            }
        }
    }
    Ok(Some(Plan {
        mode: req.mode,
        network: req.network,
        writable,
        tmpdir: None,
    }))
}

impl Plan {
    /// Whether the file-system part is asked (not only the network).
    pub fn fs(&self) -> bool {
        self.mode != SandboxMode::None
    }

    /// Makes the private temporary directory of launch `id` (mode 0700) beneath this
    /// process's temporary directory, for a file-system sandbox.
    pub fn make_tmpdir(&mut self, id: refine_protocol::RegistrationId) -> Result<(), SandboxError> {
        if !self.fs() {
            return Ok(());
        }
        let base = fs::canonicalize(std::env::temp_dir()).unwrap_or_else(|_| "/tmp".into());
        let path = base.join(format!("refine-sandbox-{id}"));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|source| SandboxError::Tmpdir {
                path: path.clone(),
                source,
            })?;
        self.tmpdir = Some(path);
        Ok(())
    }

    /// `TMPDIR=...` for the workload's environment.
    pub fn env_entry(&self) -> Option<OsString> {
        let dir = self.tmpdir.as_ref()?;
        let mut entry = OsString::from("TMPDIR=");
        entry.push(dir);
        Some(entry)
    }

    /// What the record keeps.
    pub fn record(&self) -> Sandbox {
        Sandbox {
            mode: self.mode,
            network: self.network,
            writable: self
                .writable
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            tmpdir: self
                .tmpdir
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        }
    }

    /// Every root the workload may write beneath: the workspace's, then the temporary directory.
    pub fn write_roots(&self) -> impl Iterator<Item = &Path> {
        self.writable
            .iter()
            .chain(self.tmpdir.iter())
            .map(PathBuf::as_path)
    }
}

/// The receipt hook of a sandboxed launch: the private temporary directory is removed when the
/// receipt comes (no process of the scope is left to use it), then `inner` runs.
pub fn removing_tmpdir(
    inner: Option<crate::launch::ReceiptHook>,
    tmpdir: Option<PathBuf>,
) -> Option<crate::launch::ReceiptHook> {
    let Some(dir) = tmpdir else {
        return inner;
    };
    Some(std::sync::Arc::new(move |reg, receipt, usage| {
        // `remove_dir_all` does not follow the symbolic links a workload left there.
        let _ = fs::remove_dir_all(&dir);
        if let Some(hook) = &inner {
            hook(reg, receipt, usage);
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(mode: SandboxMode, network: NetworkAsk) -> SandboxRequest {
        SandboxRequest {
            mode,
            paths: Vec::new(),
            network,
        }
    }

    #[test]
    fn a_kernel_too_old_refuses_rather_than_weakens() {
        let home = Path::new("/nonexistent-home");
        let e = plan(&ask(SandboxMode::ReadOnly, NetworkAsk::All), None, home, 2)
            .expect_err("ABI 2 has no TRUNCATE");
        assert!(matches!(e, SandboxError::FsUnavailable(2)), "{e}");
        let e = plan(&ask(SandboxMode::None, NetworkAsk::None), None, home, 3)
            .expect_err("ABI 3 has no TCP rights");
        assert!(matches!(e, SandboxError::NetUnavailable(3)), "{e}");
        assert!(e.to_string().contains("ABI 3"), "{e}");
        let e = plan(&ask(SandboxMode::ReadOnly, NetworkAsk::All), None, home, 0)
            .expect_err("no Landlock");
        assert!(e.to_string().contains("has none"), "{e}");
        assert!(
            plan(&ask(SandboxMode::None, NetworkAsk::All), None, home, 0)
                .expect("nothing asked")
                .is_none()
        );
    }

    #[test]
    fn a_root_inside_run_and_paths_without_a_workspace_are_refused() {
        let home = tempfile::tempdir().expect("home");
        let run = home.path().join("run");
        fs::create_dir_all(run.join("7411")).expect("run");
        let e = plan(
            &ask(SandboxMode::WorkspaceWrite, NetworkAsk::All),
            Some(&run.join("7411")),
            home.path(),
            7,
        )
        .expect_err("inside run/");
        assert!(matches!(e, SandboxError::InsideRun(_)), "{e}");
        let mut r = ask(SandboxMode::ReadOnly, NetworkAsk::All);
        r.paths.push("x".into());
        let e = plan(&r, None, home.path(), 7).expect_err("paths need a workspace");
        assert!(matches!(e, SandboxError::PathsWithoutWorkspace), "{e}");
    }
}

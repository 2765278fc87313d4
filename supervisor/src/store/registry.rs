//! The runtime directory: `<home>/run/P` holds everything port P owns, and nothing else.
//!
//! ```text
//! run/.gitignore              ignore marker, written only if no ignore file exists there
//! run/P/runtime-id            this runtime's identity (receipts of another runtime never verify)
//! run/P/registrations/ID      durable registration record (protocol::record), then the launch's
//!                             result record appended (display only); the registration's lock
//! run/P/proofs/ID             proof file: created by the guardian, the receipt lands in it
//! run/P/logs/ID.stdout|.stderr|.stdin, ID.capture   artifacts (created by their first byte)
//!                             and capture receipt
//! run/P/locks/stop.lock       runtime fence serializing tree stops
//! run/P/locks/service.lock    held by the port's one service
//! run/P/open/ID               open index: a second name (hard link) of the record of every
//!                             registration not yet proven exited
//! run/P/supervisor.sock       service socket
//! run/P/service.log           the service's log
//! ```
//!
//! The home is derived from the running executable ([`default_home`]), never from the caller's
//! cwd, `$HOME` or XDG; `--home` overrides it.
//!
//! # The open index (`open/`)
//! `open/` says where to look for scopes that may still be running, so that `ps`, the service's
//! maintenance pass and recovery cost O(open registrations), not O(history). It never decides a
//! state: the one assessment ([`crate::end::assess`]) does, every time. The rules:
//!
//! - A record is written whole into a nameless file (`O_TMPFILE`), linked as `open/ID` and only
//!   then as `registrations/ID`, and synced once ([`Runtime::commit_registration`]). A crash in
//!   between leaves a marker without a record, which is re-checked and dropped once the launch's
//!   start timeout has passed ([`crate::end::open_index`]). A record therefore never exists without
//!   its marker until the marker is removed on purpose.
//!
//! # One file per registration (F3)
//! The record is also the registration's lock (`flock` on any of its names: `registrations/ID`,
//! `open/ID`, the forget intent; one inode, never replaced while the registration exists: R2),
//! and the launch's result record is appended to it (not synced: display only). The launcher
//! locks the nameless file before it has a name, so it holds the lock from before the record
//! exists until the receipt. Runtimes written by earlier binaries may still hold `locks/ID.lock`
//! and `logs/ID.result` files: forgetting removes them with their registration.
//! - The marker is removed only under the registration's lock, after the assessment said
//!   `exited` ([`crate::end::open_index::settle`]). If that removal is lost in a crash the marker
//!   comes back and the registration is simply assessed again: safe, at worst work.
//! - A record without a marker was proven exited once. Commands that show only what may be open
//!   do not read it; `ps --all` and `show` still assess it from current evidence.
//! - A runtime created before the index existed has no `open/`: [`Runtime::open`] builds it once
//!   (a marker for every record, in a temporary folder renamed into place with
//!   `RENAME_NOREPLACE`, so two concurrent migrations agree on one index), and the next passes
//!   settle what has exited. [`Runtime::open_ids`] of a runtime without `open/` lists every
//!   record.
//!
//! `run/`, `run/P` and its folders are created 0700 and its files 0600, whatever the umask
//! ([`durable`]). Opening a runtime refuses a `run/P` (or a folder of it) that is not a plain
//! folder of this user, or that group or others may write ([`RegistryError::Unsafe`]): another
//! user could replace records, proofs or locks there (X1). The home, `run/` and every folder
//! above them (as written and as resolved) are checked like sshd's StrictModes
//! ([`check_home`], [`RegistryError::UnsafePath`]): owned by this user or root, writable by no
//! one else unless sticky, so nobody else can rename `run/` away and put another in its place
//! (X4). A relative home is made absolute before anything is recorded under it.
//!
//! # Caveats
//! Nothing here deletes a record or a proof: retention removes only artifacts, after assessment;
//! forgetting ([`crate::history::forget`]) removes whole exited registrations in its own documented order.
//! All binaries writing to one runtime must know the index: a record written by an older binary
//! after the migration has no marker until a `gc` pass re-indexes it
//! ([`crate::end::open_index::reindex`]).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::record::{LaunchResultRecord, Registration, StallRecord, StopRequest};
use refine_protocol::{DecodeError, EncodeError, RegistrationId, RuntimeId};

use crate::store::durable;
use crate::store::fence::{self, Fence, FenceError};

mod home;
mod paths;
mod records;

use home::{
    absolute_home, check_chain_trusting, check_private, check_private_trusting, check_strict,
    check_strict_trusting, root_also_trusts,
};
pub use home::{check_home, check_new_home, check_trusted_executable, create_home, default_home};
pub use paths::Paths;
use records::create_marker;
pub use records::{read_bounded, PendingRecord};

/// The port used when none is given.
pub const DEFAULT_PORT: u16 = 7411;

/// One of a registration's output artifacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
    Stdin,
}

impl Stream {
    pub const fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Stdin => "stdin",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("home {} does not exist (only run and serve create a home)", .0.display())]
    MissingHome(PathBuf),
    #[error("cannot create the home {}", .path.display())]
    CreateHome {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("runtime {0} does not exist (nothing was ever launched on this port)")]
    MissingRuntime(PathBuf),
    #[error("no registration {0} (unknown here, or forgotten after it exited)")]
    NotFound(RegistrationId),
    #[error("corrupt {what} {path}")]
    Corrupt {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: DecodeError,
    },
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("registration {0}: its lock is not held by the caller")]
    NotLocked(RegistrationId),
    /// `run/P` or one of its folders is not this user's alone (X1): nothing is read or written.
    #[error("refusing {}: {why}; run/P and its folders must be this user's alone (chown, chmod 0700)", .path.display())]
    Unsafe { path: PathBuf, why: String },
    /// The home, `run/` or one of their ancestors could be replaced by another user (X4, sshd's
    /// StrictModes): nothing is read or written.
    #[error("refusing the home {}: {} is {why}; the home, run/ and every folder above them must be owned by this user or root and writable by no one else (sticky folders such as /tmp excepted)", .home.display(), .path.display())]
    UnsafePath {
        home: PathBuf,
        path: PathBuf,
        why: String,
    },
    /// The guardian executable, or a folder above it, could be replaced by another user (X4 for
    /// the program that writes the evidence): nothing is launched.
    #[error("refusing the guardian {}: {} is {why}; it and every folder above it must be owned by this user or root and writable by no one else (sticky folders excepted)", .exe.display(), .path.display())]
    UnsafeExecutable {
        exe: PathBuf,
        path: PathBuf,
        why: String,
    },
    /// The record would not be readable back (larger than the record limit): nothing is written.
    #[error("{what} refused")]
    Refused {
        what: &'static str,
        #[source]
        source: EncodeError,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RegistryError + 'a {
    move |source| RegistryError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// `run/P` of one home and port.
#[derive(Debug, Clone)]
pub struct Runtime {
    paths: Paths,
    id: RuntimeId,
    /// Whether this handle writes lifecycle events (V2); off for H7's probe scopes.
    events: bool,
    /// Whether registrations are synced to disk; off for H7's probe scopes
    /// ([`Runtime::without_sync`]).
    synced: bool,
    /// Whether launches through this handle get a cgroup of their own (F4); off for H7's
    /// probe scopes ([`Runtime::without_cgroup`]).
    cgroups: bool,
}

/// A runtime is where its files are: every path of [`Paths`] is one of the runtime's.
impl std::ops::Deref for Runtime {
    type Target = Paths;
    fn deref(&self) -> &Paths {
        &self.paths
    }
}

const SUBDIRS: [&str; 4] = ["registrations", "proofs", "logs", "locks"];

impl Runtime {
    /// Opens `run/P`, creating it (and its runtime id) if needed.
    pub fn open(home: &Path, port: u16) -> Result<Self, RegistryError> {
        let home = &absolute_home(home)?;
        check_home(home)?;
        let run = home.join("run");
        durable::create_private_dir(&run).map_err(io_err("create", &run))?;
        check_strict(home, &run)?;
        write_ignore_marker(&run)?;
        let dir = run.join(port.to_string());
        durable::create_private_dir(&dir).map_err(io_err("create", &dir))?;
        check_private(&dir)?;
        for sub in SUBDIRS {
            let p = dir.join(sub);
            durable::create_private_dir(&p).map_err(io_err("create", &p))?;
            check_private(&p)?;
        }
        let id_path = dir.join("runtime-id");
        let id = match read_runtime_id(&id_path)? {
            Some(id) => id,
            None => {
                let id = RuntimeId(random16()?);
                // Link (not rename) into place: if two processes race, the first link wins and
                // both re-read the file, so they agree on one id.
                let tmp = dir.join(format!(".runtime-id-{}", std::process::id()));
                durable::write_atomic(&tmp, format!("{id}\n").as_bytes(), durable::FILE_MODE)
                    .map_err(io_err("write", &tmp))?;
                // Losing the race (EEXIST) is fine: the winner's id is read back below.
                let _ = fs::hard_link(&tmp, &id_path);
                let _ = fs::remove_file(&tmp);
                durable::sync_dir(&dir).map_err(io_err("sync", &dir))?;
                read_runtime_id(&id_path)?
                    .ok_or_else(|| RegistryError::MissingRuntime(dir.clone()))?
            }
        };
        let rt = Runtime {
            paths: Paths {
                home: home.to_owned(),
                port,
                dir,
            },
            id,
            events: true,
            synced: true,
            cgroups: true,
        };
        rt.ensure_open_index()?;
        Ok(rt)
    }

    /// Builds `open/` once for a runtime that has none (see the module docs): a marker for every
    /// record, in a temporary folder that is fsynced and renamed into place without replacing an
    /// index another process built meanwhile. Idempotent; a no-op when `open/` exists.
    pub fn ensure_open_index(&self) -> Result<(), RegistryError> {
        let open = self.open_dir();
        if open.is_dir() {
            return Ok(());
        }
        let tmp = self.dir.join(format!(
            ".open-building-{}-{}",
            std::process::id(),
            random16().map(|r| u32::from_le_bytes([r[0], r[1], r[2], r[3]]))?
        ));
        let built = (|| {
            durable::create_private_dir(&tmp).map_err(io_err("create", &tmp))?;
            for id in self.list_ids()? {
                let marker = tmp.join(id.to_string());
                create_marker(&marker)?;
            }
            durable::sync_dir(&tmp).map_err(io_err("sync", &tmp))?;
            match rustix::fs::renameat_with(
                rustix::fs::CWD,
                &tmp,
                rustix::fs::CWD,
                &open,
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => durable::sync_dir(&self.dir).map_err(io_err("sync", &self.dir)),
                // Another process built the index first: theirs is as good as ours.
                Err(rustix::io::Errno::EXIST) | Err(rustix::io::Errno::NOTEMPTY) => Ok(()),
                Err(e) => Err(io_err("rename", &open)(e.into())),
            }
        })();
        if tmp.exists() {
            let _ = fs::remove_dir_all(&tmp);
        }
        built
    }

    /// Opens an existing `run/P` without creating anything (operator commands).
    ///
    /// Root may open a home of another user (to inspect the service's, say): the home's owner
    /// is then trusted as well as root, as that user controls its own home anyway. What root
    /// writes there (a `stop`'s records) is root's; the service reads those as root's files.
    pub fn open_existing(home: &Path, port: u16) -> Result<Self, RegistryError> {
        let home = &absolute_home(home)?;
        let also = root_also_trusts(home);
        if !home.is_dir() {
            return Err(RegistryError::MissingHome(home.to_owned()));
        }
        check_chain_trusting(home, home, also)?;
        let run = home.join("run");
        if run.symlink_metadata().is_ok() {
            check_strict_trusting(home, &run, also)?;
        }
        let dir = run.join(port.to_string());
        if dir.symlink_metadata().is_ok() {
            check_private_trusting(&dir, also)?;
            for sub in SUBDIRS {
                if dir.join(sub).symlink_metadata().is_ok() {
                    check_private_trusting(&dir.join(sub), also)?;
                }
            }
        }
        let id_path = dir.join("runtime-id");
        let id =
            read_runtime_id(&id_path)?.ok_or_else(|| RegistryError::MissingRuntime(dir.clone()))?;
        Ok(Runtime {
            paths: Paths {
                home: home.to_owned(),
                port,
                dir,
            },
            id,
            events: true,
            synced: true,
            cgroups: true,
        })
    }

    pub fn id(&self) -> RuntimeId {
        self.id
    }

    /// The same runtime, writing no lifecycle events (H7's probe scopes: a probe a second
    /// would flood the journal, and push the events of real scopes out of it).
    pub fn without_events(&self) -> Runtime {
        Runtime {
            events: false,
            ..self.clone()
        }
    }

    /// The same runtime, its registrations written but not synced (H7's probe scopes: a
    /// power loss ends a probe with everything else, so a record that did not reach the disk
    /// leaves nothing running to recover, and a probe a second must not cost three `fsync`s).
    pub fn without_sync(&self) -> Runtime {
        Runtime {
            synced: false,
            ..self.clone()
        }
    }

    /// The same runtime, its launches without a cgroup of their own (H7's probe scopes: the
    /// guardian's subreaper and the tree stop are a probe's proof and stop path, as on a host
    /// without cgroups; making and removing a directory a probe is a cost without a use).
    pub fn without_cgroup(&self) -> Runtime {
        Runtime {
            cgroups: false,
            ..self.clone()
        }
    }

    /// Whether this handle syncs what it writes ([`Runtime::without_sync`]).
    pub fn syncs(&self) -> bool {
        self.synced
    }

    /// Whether launches through this handle get a cgroup of their own.
    pub fn makes_cgroups(&self) -> bool {
        self.cgroups
    }

    /// Whether lifecycle events are written through this handle.
    pub fn writes_events(&self) -> bool {
        self.events
    }

    /// The registration's lock (its record, by any of its names), waiting at most `wait`;
    /// [`RegistryError::NotFound`] when the registration has no record (nor marker, nor intent).
    pub fn lock(&self, id: RegistrationId, wait: Duration) -> Result<Fence, RegistryError> {
        match fence::acquire_existing(&self.lock_names(id), wait) {
            Err(FenceError::Open { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Err(RegistryError::NotFound(id))
            }
            r => Ok(r?),
        }
    }

    /// The registration's lock if it is free now (`None` while its owner holds it).
    pub(crate) fn try_lock(&self, id: RegistrationId) -> Result<Option<Fence>, RegistryError> {
        match self.lock(id, Duration::ZERO) {
            Ok(f) => Ok(Some(f)),
            Err(RegistryError::Fence(FenceError::Timeout { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether the registration's launcher has let go of it: the launcher holds its lock from
    /// the launch until the scope has ended and its result is recorded, the output captured to
    /// the end; one that died let go with it. Another command holding the lock for a moment
    /// reads as busy too; a registration without a record has no one to wait for.
    pub fn let_go(&self, id: RegistrationId) -> bool {
        !matches!(self.try_lock(id), Ok(None))
    }

    /// The runtime stop fence, waiting at most `wait`.
    pub fn stop_fence(&self, wait: Duration) -> Result<Fence, RegistryError> {
        Ok(fence::acquire(&self.stop_fence_path(), wait)?)
    }
}

fn read_runtime_id(path: &Path) -> Result<Option<RuntimeId>, RegistryError> {
    match read_bounded(path, 256) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            RuntimeId::parse(text.trim())
                .map(Some)
                .ok_or_else(|| RegistryError::Corrupt {
                    what: "runtime id",
                    path: path.to_owned(),
                    source: DecodeError::InvalidField {
                        field: "runtime id",
                    },
                })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RegistryError::Io {
            op: "read",
            path: path.to_owned(),
            source: e,
        }),
    }
}

/// `run/.gitignore` with `*`, only where no ignore file exists (R3).
fn write_ignore_marker(run: &Path) -> Result<(), RegistryError> {
    let marker = run.join(".gitignore");
    if marker.exists() || run.join(".ignore").exists() {
        return Ok(());
    }
    match durable::open_private(fs::OpenOptions::new().write(true).create_new(true), &marker) {
        Ok(mut f) => {
            use std::io::Write;
            f.write_all(b"# runtime-local state of refine-supervisor\n*\n")
                .map_err(io_err("write", &marker))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(RegistryError::Io {
            op: "create",
            path: marker,
            source: e,
        }),
    }
}

/// 16 random bytes from the kernel's pool (`getrandom`, one system call; `/dev/urandom` where
/// the call is missing).
fn random16() -> Result<[u8; 16], RegistryError> {
    let mut out = [0u8; 16];
    let mut filled = 0;
    while filled < out.len() {
        match rustix::rand::getrandom(&mut out[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) if n > 0 => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            _ => return random16_from_device(),
        }
    }
    Ok(out)
}

fn random16_from_device() -> Result<[u8; 16], RegistryError> {
    let path = Path::new("/dev/urandom");
    let mut out = [0u8; 16];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(io_err("read", path))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_runtime_id_are_stable() {
        let home = tempfile::tempdir().unwrap();
        let a = Runtime::open(home.path(), 5).unwrap();
        let b = Runtime::open(home.path(), 5).unwrap();
        assert_eq!(a.id(), b.id());
        assert!(home.path().join("run/.gitignore").exists());
        for sub in SUBDIRS {
            assert!(a.dir().join(sub).is_dir());
        }
        assert_eq!(Runtime::open_existing(home.path(), 5).unwrap().id(), a.id());
        assert!(matches!(
            Runtime::open_existing(home.path(), 6),
            Err(RegistryError::MissingRuntime(_))
        ));
        assert!(matches!(
            Runtime::open(&home.path().join("nope"), 5),
            Err(RegistryError::MissingHome(_))
        ));
    }

    #[test]
    fn existing_ignore_file_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(home.path().join("run")).unwrap();
        fs::write(home.path().join("run/.gitignore"), b"mine\n").unwrap();
        Runtime::open(home.path(), 1).unwrap();
        assert_eq!(
            fs::read(home.path().join("run/.gitignore")).unwrap(),
            b"mine\n"
        );
    }

    #[test]
    fn corrupt_and_missing_records_are_typed() {
        let home = tempfile::tempdir().unwrap();
        let rt = Runtime::open(home.path(), 1).unwrap();
        let id = rt.new_id().unwrap();
        assert!(matches!(
            rt.read_registration(id),
            Err(RegistryError::NotFound(_))
        ));
        fs::write(rt.record_path(id), b"garbage").unwrap();
        assert!(matches!(
            rt.read_registration(id),
            Err(RegistryError::Corrupt { .. })
        ));
        assert_eq!(rt.list_ids().unwrap(), [id]);
    }
}

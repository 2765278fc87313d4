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

/// The first word of a stop request kept in a symbolic link's target.
const STOP_LINK_TAG: &str = "stop-request-1";

/// A stop request written on a full disk ([`Runtime::write_stop_request`]): the link's target is
/// `stop-request-1 CAUSE REQUESTED_AT_NS PID`, at most 60 bytes (ext4 keeps such a target in
/// the inode); the id and runtime are the path's.
fn stop_request_in_link(
    target: &Path,
    id: RegistrationId,
    runtime: RuntimeId,
) -> Option<StopRequest> {
    let text = target.to_str()?;
    let mut words = text.split(' ');
    if words.next()? != STOP_LINK_TAG {
        return None;
    }
    let cause: refine_protocol::StopCause =
        serde_json::from_value(serde_json::Value::String(words.next()?.to_owned())).ok()?;
    let requested_at_unix_ns = words.next()?.parse().ok()?;
    let requester_pid = words.next()?.parse().ok()?;
    words.next().is_none().then_some(StopRequest {
        id,
        runtime,
        cause,
        requested_at_unix_ns,
        requester_pid,
    })
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
    home: PathBuf,
    port: u16,
    dir: PathBuf,
    id: RuntimeId,
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
            home: home.to_owned(),
            port,
            dir,
            id,
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
            home: home.to_owned(),
            port,
            dir,
            id,
        })
    }

    pub fn home(&self) -> &Path {
        &self.home
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn id(&self) -> RuntimeId {
        self.id
    }

    pub fn record_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("registrations").join(id.to_string())
    }
    pub fn proof_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("proofs").join(id.to_string())
    }
    pub fn log_path(&self, id: RegistrationId, stream: Stream) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{id}.{}", stream.name()))
    }
    /// L1, L2: the time index the guardian keeps beside a stream's artifact.
    pub fn index_path(&self, id: RegistrationId, stream: Stream) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{id}.{}-index", stream.name()))
    }
    pub fn capture_receipt_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.capture"))
    }
    /// Where a stop that is not the launching engine's own records its cause (beside the
    /// capture receipt: evidence about the run, kept by retention).
    pub(crate) fn stop_request_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.stop"))
    }
    /// Where binaries before F3 kept the launching engine's result (now appended to the record).
    pub(crate) fn result_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.result"))
    }
    /// The stall watch's status of a live scope (written by the service, H3).
    /// H6: where a scope with readiness stands (its launcher writes it).
    pub(crate) fn ready_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.ready"))
    }
    /// H7: where a scope with a health check stands (its prober writes it).
    pub(crate) fn health_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.health"))
    }
    pub(crate) fn stall_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("logs").join(format!("{id}.stall"))
    }
    /// The registration's lock: the record itself (see the module docs).
    pub fn lock_path(&self, id: RegistrationId) -> PathBuf {
        self.record_path(id)
    }
    /// Where binaries before F3 kept a separate lock file per registration.
    pub(crate) fn legacy_lock_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("locks").join(format!("{id}.lock"))
    }
    /// Every name the registration's lock (its record's inode) may have.
    fn lock_names(&self, id: RegistrationId) -> [PathBuf; 3] {
        [
            self.record_path(id),
            self.open_marker_path(id),
            self.forget_intent_path(id),
        ]
    }
    pub(crate) fn stop_fence_path(&self) -> PathBuf {
        self.dir.join("locks").join("stop.lock")
    }
    /// The stop lease of `id` (issue 38 item 7): present while a stop holding the runtime's
    /// stop fence quiesces the scope; one found by the fence's next holder was left by a stop
    /// that died ([`crate::end::stop::complete_abandoned`]).
    pub(crate) fn stop_lease_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("locks").join(format!("{id}.stopping"))
    }
    /// The ids with a stop lease: one `readdir` of `locks/`, which holds only the runtime's
    /// fences and these (and legacy lock files of binaries before F3).
    pub(crate) fn stop_leases(&self) -> Vec<RegistrationId> {
        let Ok(rd) = fs::read_dir(self.dir.join("locks")) else {
            return Vec::new();
        };
        let mut ids: Vec<RegistrationId> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                RegistrationId::parse(name.to_str()?.strip_suffix(".stopping")?)
            })
            .collect();
        ids.sort();
        ids
    }
    /// Removes the stop request of `id` if it is the one this process recorded at or after
    /// `since_unix_ns` (a stop that sent no signal withdraws its own request, no other).
    pub(crate) fn withdraw_stop_request(&self, id: RegistrationId, since_unix_ns: u64) {
        if let Ok(Some(req)) = self.read_stop_request(id) {
            if req.requester_pid == std::process::id() && req.requested_at_unix_ns >= since_unix_ns
            {
                let _ = fs::remove_file(self.stop_request_path(id));
            }
        }
    }
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("supervisor.sock")
    }
    /// Every file that belongs to registration `id`, whether it exists or not: the record
    /// first, the lock file last (the order forgetting removes them in, [`crate::history::forget`]).
    pub fn registration_files(&self, id: RegistrationId) -> [PathBuf; 12] {
        [
            self.record_path(id),
            self.proof_path(id),
            self.log_path(id, Stream::Stdout),
            self.log_path(id, Stream::Stderr),
            self.log_path(id, Stream::Stdin),
            self.capture_receipt_path(id),
            self.result_path(id),
            self.stop_request_path(id),
            self.stall_path(id),
            self.ready_path(id),
            self.health_path(id),
            self.legacy_lock_path(id),
        ]
    }
    /// Where forgetting moves a record while it removes the rest of the registration
    /// ([`crate::history::forget`]): not an id, so no listing or lookup finds it.
    pub fn forget_intent_path(&self, id: RegistrationId) -> PathBuf {
        self.dir.join("registrations").join(format!(".forget-{id}"))
    }
    /// The open index (see the module docs).
    pub fn open_dir(&self) -> PathBuf {
        self.dir.join("open")
    }
    /// The open-index marker of `id`.
    pub fn open_marker_path(&self, id: RegistrationId) -> PathBuf {
        self.open_dir().join(id.to_string())
    }
    /// The lock the port's one service holds while it runs.
    pub fn service_lock_path(&self) -> PathBuf {
        self.dir.join("locks").join("service.lock")
    }
    /// The service's log.
    pub fn service_log_path(&self) -> PathBuf {
        self.dir.join("service.log")
    }

    /// A fresh random registration id.
    pub fn new_id(&self) -> Result<RegistrationId, RegistryError> {
        Ok(RegistrationId(random16()?))
    }

    /// Starts registration `id`: a nameless record file in `registrations/`, already locked (the
    /// returned fence is the registration's lock, held from before the record exists).
    pub fn begin_registration(
        &self,
        id: RegistrationId,
    ) -> Result<(Fence, PendingRecord), RegistryError> {
        let dir = self.dir.join("registrations");
        let (file, named) = match durable::open_nameless(&dir) {
            Ok(f) => (f, None),
            // No O_TMPFILE here: a named temporary, renamed into place at commit.
            Err(e) if durable::nameless_unsupported(&e) => {
                let tmp = dir.join(format!(".tmp-{id}-{}", std::process::id()));
                let f = durable::open_private(
                    fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create_new(true),
                    &tmp,
                )
                .map_err(io_err("create", &tmp))?;
                (f, Some(tmp))
            }
            Err(e) => return Err(io_err("create", &dir)(e)),
        };
        let dup = file.try_clone().map_err(io_err("duplicate", &dir))?;
        let fence = fence::adopt(file, &self.record_path(id))?;
        Ok((
            fence,
            PendingRecord {
                id,
                file: dup,
                named,
            },
        ))
    }

    /// Writes `reg` into `pending` and makes it durable under its names: the whole record is
    /// written, linked as `open/ID` (the marker), then as `registrations/ID`, then synced once
    /// (see [`durable::sync_linked`] for why one `fsync` covers the names).
    pub fn commit_registration(
        &self,
        pending: PendingRecord,
        reg: &Registration,
    ) -> Result<(), RegistryError> {
        let path = self.record_path(reg.id);
        if pending.id != reg.id {
            return Err(RegistryError::NotLocked(reg.id));
        }
        let bytes = reg.encode().map_err(|source| RegistryError::Refused {
            what: "registration record",
            source,
        })?;
        let marker = self.open_marker_path(reg.id);
        let result = (|| {
            use std::os::unix::fs::FileExt;
            pending
                .file
                .write_all_at(&bytes, 0)
                .map_err(io_err("write", &path))?;
            match &pending.named {
                None => durable::link_nameless(&pending.file, &marker),
                Some(tmp) => fs::hard_link(tmp, &marker),
            }
            .or_else(|e| match e.kind() {
                // A marker from `reindex` or an earlier attempt of this id: kept.
                io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(io_err("link", &marker))?;
            match &pending.named {
                None => durable::link_nameless(&pending.file, &path),
                Some(tmp) => rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    tmp,
                    rustix::fs::CWD,
                    &path,
                    rustix::fs::RenameFlags::NOREPLACE,
                )
                .map_err(io::Error::from),
            }
            .map_err(io_err("link", &path))?;
            durable::sync_linked(
                &pending.file,
                &[&self.open_dir(), &self.dir.join("registrations")],
            )
            .map_err(io_err("sync", &path))
        })();
        if result.is_err() {
            // No record: the marker would only wait out the start timeout.
            let _ = fs::remove_file(&marker);
            if let Some(tmp) = &pending.named {
                let _ = fs::remove_file(tmp);
            }
        }
        result
    }

    /// Writes the record durably ([`Runtime::begin_registration`], then
    /// [`Runtime::commit_registration`]), for callers that hold no lock across the launch.
    pub fn write_registration(&self, reg: &Registration) -> Result<(), RegistryError> {
        let (_lock, pending) = self.begin_registration(reg.id)?;
        self.commit_registration(pending, reg)
    }

    /// Ids with an open-index marker, sorted: the registrations not yet proven exited (and
    /// markers whose record is not written yet or is gone). Without an index (a runtime no
    /// binary with the index has opened for writing yet) every record is listed.
    pub fn open_ids(&self) -> Result<Vec<RegistrationId>, RegistryError> {
        let dir = self.open_dir();
        match fs::read_dir(&dir) {
            Ok(rd) => Ok(sorted_ids(rd)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.list_ids(),
            Err(e) => Err(io_err("list", &dir)(e)),
        }
    }

    /// Creates the open-index marker of `id` durably (an existing one is kept): a second name
    /// of its record, or an empty file when there is no record.
    pub fn add_open_marker(&self, id: RegistrationId) -> Result<(), RegistryError> {
        let marker = self.open_marker_path(id);
        match fs::hard_link(self.record_path(id), &marker) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => create_marker(&marker)?,
            Err(e) => return Err(io_err("link", &marker)(e)),
        }
        let open = self.open_dir();
        durable::sync_dir(&open).map_err(io_err("sync", &open))
    }

    /// Whether `id` has an open-index marker.
    pub fn is_open(&self, id: RegistrationId) -> bool {
        self.open_marker_path(id).exists() || !self.open_dir().exists()
    }

    /// Removes the open-index marker of `id`. `held` must be the registration's own lock: the
    /// caller has just assessed the registration `exited` under it (or found no record, see
    /// [`crate::end::open_index`]). Not fsynced: a marker that comes back after a crash is only
    /// assessed again. Returns whether a marker was removed.
    pub fn remove_open_marker(
        &self,
        id: RegistrationId,
        held: &Fence,
    ) -> Result<bool, RegistryError> {
        if !self.lock_names(id).iter().any(|n| n == held.path()) {
            return Err(RegistryError::NotLocked(id));
        }
        let marker = self.open_marker_path(id);
        match fs::remove_file(&marker) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err("remove", &marker)(e)),
        }
    }

    /// Records `req` unless a request for the same registration is already recorded (the first
    /// one is kept: its time precedes the exit it caused). The file appears whole (written and
    /// synced under a temporary name, then linked into place) or not at all.
    pub(crate) fn write_stop_request(&self, req: &StopRequest) -> Result<(), RegistryError> {
        let path = self.stop_request_path(req.id);
        let tmp = path.with_extension(format!("stop.{}.tmp", std::process::id()));
        let bytes = req.encode().map_err(|source| RegistryError::Refused {
            what: "stop request",
            source,
        })?;
        if let Err(e) = durable::write_atomic(&tmp, &bytes, 0o600) {
            // A full disk (or quota) refuses the file's data block: the request goes into a
            // symbolic link's target instead, which fits in the inode (see
            // [`stop_request_in_link`]), so the engine still reports the stop's cause.
            if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) {
                return self.write_stop_request_link(req, &path);
            }
            return Err(io_err("write", &tmp)(e));
        }
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io_err("link", &path)(e)),
        }
    }

    /// [`Runtime::write_stop_request`] for a disk with no block left: the request as the target
    /// of a symbolic link (an inline, "fast" link on ext4 and tmpfs: no data block), synced with
    /// its directory.
    fn write_stop_request_link(&self, req: &StopRequest, path: &Path) -> Result<(), RegistryError> {
        let cause = refine_protocol::docs::variant_name(&req.cause).unwrap_or_default();
        let target = format!(
            "{STOP_LINK_TAG} {cause} {} {}",
            req.requested_at_unix_ns, req.requester_pid
        );
        match std::os::unix::fs::symlink(&target, path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(io_err("link", path)(e)),
        }
        if let Some(dir) = path.parent() {
            durable::sync_dir(dir).map_err(io_err("sync", dir))?;
        }
        Ok(())
    }

    /// Records the engine's result: appended to the registration record (after the
    /// registration's own envelope, which it never touches), not fsynced (display only: after a
    /// crash it may be missing or torn, which reads as no result, and nothing depends on it).
    pub fn write_result(&self, rec: &LaunchResultRecord) -> Result<(), RegistryError> {
        use std::os::unix::fs::FileExt;
        let bytes = rec.encode().map_err(|source| RegistryError::Refused {
            what: "launch result",
            source,
        })?;
        let path = self.record_path(rec.id);
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => RegistryError::NotFound(rec.id),
                _ => io_err("open", &path)(e),
            })?;
        let mut head = [0u8; refine_protocol::record::ENVELOPE_LEN];
        f.read_exact_at(&mut head, 0)
            .map_err(io_err("read", &path))?;
        let at =
            refine_protocol::record::envelope_size(&head).ok_or_else(|| RegistryError::Corrupt {
                what: "registration record",
                path: path.clone(),
                source: DecodeError::InvalidField { field: "length" },
            })? as u64;
        f.write_all_at(&bytes, at).map_err(io_err("write", &path))?;
        f.set_len(at + bytes.len() as u64)
            .map_err(io_err("truncate", &path))
    }

    /// Adds the tree's usage (H4, from the receipt) to the launch's result record when the
    /// receipt came after the result (a descendant held the scope past the workload's exit).
    /// Display only, like the result itself: best effort, logged on failure.
    pub(crate) fn complete_result_usage(
        &self,
        id: RegistrationId,
        usage: Option<refine_protocol::TreeUsage>,
        cgroup_usage: Option<refine_protocol::CgroupUsage>,
        limit_usage: Option<refine_protocol::record::LimitUsage>,
    ) {
        let Ok(Some(mut result)) = self.read_result(id) else {
            return;
        };
        let limit_usage = limit_usage.or(result.limit_usage);
        let cgroup_usage = cgroup_usage.or(result.cgroup_usage);
        // F4: where the scope had a cgroup, its CPU times are the kernel's count of every
        // member's (a child the kernel reaped itself is in no one's `RUSAGE_CHILDREN`); the
        // receipt's count never replaces them.
        let usage = crate::kernel::cgroup::with_usage(usage.or(result.usage), cgroup_usage);
        if (result.usage, result.cgroup_usage, result.limit_usage)
            == (usage, cgroup_usage, limit_usage)
        {
            return;
        }
        (result.usage, result.cgroup_usage, result.limit_usage) =
            (usage, cgroup_usage, limit_usage);
        if let Err(e) = self.write_result(&result) {
            tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot record the tree's usage");
        }
    }

    /// The engine's recorded result of `id`, if any.
    pub fn read_result(
        &self,
        id: RegistrationId,
    ) -> Result<Option<LaunchResultRecord>, RegistryError> {
        let path = self.record_path(id);
        let bytes = match read_bounded(&path, 2 * refine_protocol::record::MAX_RECORD) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let (_, tail) = split_record(&bytes);
        if tail.is_empty() {
            // Written by a binary before F3 beside the record, or none yet.
            return self.read_side_record(
                &self.result_path(id),
                "launch result",
                LaunchResultRecord::decode,
                |r| (r.id, r.runtime),
                id,
            );
        }
        // Damaged or foreign (a crash while it was written, tampering): shown, never trusted.
        let corrupt = |source| RegistryError::Corrupt {
            what: "launch result",
            path: path.clone(),
            source,
        };
        let rec = LaunchResultRecord::decode(tail).map_err(corrupt)?;
        if (rec.id, rec.runtime) != (id, self.id) {
            return Err(corrupt(DecodeError::InvalidField {
                field: "id or runtime",
            }));
        }
        Ok(Some(rec))
    }

    /// Records the stall watch's status of a scope, like [`Runtime::write_result`] (display
    /// only: not fsynced).
    pub fn write_stall(&self, rec: &StallRecord) -> Result<(), RegistryError> {
        let bytes = rec.encode().map_err(|source| RegistryError::Refused {
            what: "stall record",
            source,
        })?;
        write_replacing(&self.stall_path(rec.id), "stall", &bytes)
    }

    /// H6: records where a scope with readiness stands (replaced whole; display and waiting
    /// only, not synced).
    pub fn write_ready(
        &self,
        rec: &refine_protocol::record::ReadyRecord,
    ) -> Result<(), RegistryError> {
        let bytes = rec.encode().map_err(|source| RegistryError::Refused {
            what: "ready record",
            source,
        })?;
        write_replacing(&self.ready_path(rec.id), "ready", &bytes)
    }

    /// H6: where `id` stands, as its launcher last recorded it, if it did.
    pub fn read_ready(
        &self,
        id: RegistrationId,
    ) -> Result<Option<refine_protocol::record::ReadyRecord>, RegistryError> {
        self.read_side_record(
            &self.ready_path(id),
            "ready record",
            refine_protocol::record::ReadyRecord::decode,
            |r| (r.id, r.runtime),
            id,
        )
    }

    /// H7: records where a scope with a health check stands (replaced whole).
    pub fn write_health(
        &self,
        rec: &refine_protocol::record::HealthRecord,
    ) -> Result<(), RegistryError> {
        let bytes = rec.encode().map_err(|source| RegistryError::Refused {
            what: "health record",
            source,
        })?;
        write_replacing(&self.health_path(rec.id), "health", &bytes)
    }

    /// H7: where `id`'s health stands, as its prober last recorded it, if it did.
    pub fn read_health(
        &self,
        id: RegistrationId,
    ) -> Result<Option<refine_protocol::record::HealthRecord>, RegistryError> {
        self.read_side_record(
            &self.health_path(id),
            "health record",
            refine_protocol::record::HealthRecord::decode,
            |r| (r.id, r.runtime),
            id,
        )
    }

    /// The stall watch's last recorded status of `id`, if any.
    pub fn read_stall(&self, id: RegistrationId) -> Result<Option<StallRecord>, RegistryError> {
        self.read_side_record(
            &self.stall_path(id),
            "stall record",
            StallRecord::decode,
            |r| (r.id, r.runtime),
            id,
        )
    }

    /// The recorded stop request of `id`, if any.
    pub(crate) fn read_stop_request(
        &self,
        id: RegistrationId,
    ) -> Result<Option<StopRequest>, RegistryError> {
        let path = self.stop_request_path(id);
        if let Ok(target) = fs::read_link(&path) {
            return stop_request_in_link(&target, id, self.id)
                .map(Some)
                .ok_or_else(|| RegistryError::Corrupt {
                    what: "stop request",
                    path: path.clone(),
                    source: DecodeError::InvalidField {
                        field: "link target",
                    },
                });
        }
        self.read_side_record(
            &path,
            "stop request",
            StopRequest::decode,
            |r| (r.id, r.runtime),
            id,
        )
    }

    /// A record kept beside a registration (stop request, launch result): none if absent;
    /// [`RegistryError::Corrupt`] if it does not decode or names another registration or runtime.
    fn read_side_record<T>(
        &self,
        path: &Path,
        what: &'static str,
        decode: fn(&[u8]) -> Result<T, DecodeError>,
        owner: fn(&T) -> (RegistrationId, RuntimeId),
        id: RegistrationId,
    ) -> Result<Option<T>, RegistryError> {
        let bytes = match read_bounded(path, refine_protocol::record::MAX_RECORD) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", path)(e)),
        };
        let corrupt = |source| RegistryError::Corrupt {
            what,
            path: path.to_owned(),
            source,
        };
        let rec = decode(&bytes).map_err(corrupt)?;
        if owner(&rec) != (id, self.id) {
            return Err(corrupt(DecodeError::InvalidField {
                field: "id or runtime",
            }));
        }
        Ok(Some(rec))
    }

    /// Reads and decodes a record; a damaged one is [`RegistryError::Corrupt`], never guessed at.
    pub fn read_registration(&self, id: RegistrationId) -> Result<Registration, RegistryError> {
        let path = self.record_path(id);
        let bytes = read_bounded(&path, 2 * refine_protocol::record::MAX_RECORD).map_err(|e| {
            match e.kind() {
                io::ErrorKind::NotFound => RegistryError::NotFound(id),
                _ => RegistryError::Io {
                    op: "read",
                    path: path.clone(),
                    source: e,
                },
            }
        })?;
        let reg = Registration::decode(split_record(&bytes).0).map_err(|source| {
            RegistryError::Corrupt {
                what: "registration record",
                path: path.clone(),
                source,
            }
        })?;
        if reg.id != id {
            return Err(RegistryError::Corrupt {
                what: "registration record (id differs from file name)",
                path,
                source: DecodeError::InvalidField { field: "id" },
            });
        }
        Ok(reg)
    }

    /// Every registration id with a record file, sorted.
    pub fn list_ids(&self) -> Result<Vec<RegistrationId>, RegistryError> {
        let dir = self.dir.join("registrations");
        Ok(sorted_ids(
            fs::read_dir(&dir).map_err(io_err("list", &dir))?,
        ))
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

/// A registration being written: its nameless (or temporary) file, locked by the fence
/// [`Runtime::begin_registration`] returned with it.
#[derive(Debug)]
pub struct PendingRecord {
    id: RegistrationId,
    file: fs::File,
    /// The temporary name where `O_TMPFILE` is not supported.
    named: Option<PathBuf>,
}

/// A record file's registration envelope and what follows it (the launch result, if any). A file
/// whose first envelope's length cannot be read is all registration (the decoder says why).
fn split_record(bytes: &[u8]) -> (&[u8], &[u8]) {
    match refine_protocol::record::envelope_size(bytes) {
        Some(n) if n <= bytes.len() => bytes.split_at(n),
        _ => (bytes, &[]),
    }
}

/// The entries of a folder that are named by a registration id, sorted.
fn sorted_ids(rd: fs::ReadDir) -> Vec<RegistrationId> {
    let mut ids: Vec<RegistrationId> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(RegistrationId::parse))
        .collect();
    ids.sort();
    ids
}

/// Creates an empty marker file (an existing one is kept as it is).
fn create_marker(path: &Path) -> Result<(), RegistryError> {
    durable::open_private(
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false),
        path,
    )
    .map(drop)
    .map_err(io_err("create", path))
}

/// Writes `bytes` whole under a temporary name beside `path` and renames it into place (readers
/// see the old or the new file, never a part); not fsynced.
fn write_replacing(path: &Path, ext: &str, bytes: &[u8]) -> Result<(), RegistryError> {
    let tmp = path.with_extension(format!("{ext}.{}.tmp", std::process::id()));
    durable::open_private(
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
        &tmp,
    )
    .and_then(|mut f| io::Write::write_all(&mut f, bytes))
    .map_err(io_err("write", &tmp))?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err("rename", path)(e)
    })
}

/// Reads at most `max` bytes; a larger file is an error rather than an unbounded allocation.
pub fn read_bounded(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    let f = fs::File::open(path)?;
    // Room for a typical record up front, so it takes one read plus the end-of-file read and no
    // `stat` (`ps --all` reads a few files per registration of the whole history).
    let mut buf = Vec::with_capacity((max + 1).min(8 * 1024));
    f.take(max as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(buf)
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

/// `home` made absolute against the current directory (lexically, as the caller wrote it), so
/// that every path recorded under it reads the same from any directory (X4).
fn absolute_home(home: &Path) -> Result<PathBuf, RegistryError> {
    std::path::absolute(home).map_err(io_err("resolve", home))
}

/// The home must be a folder, and it and every folder above it (as written, and as resolved
/// through symbolic links) must pass [`check_strict`]: nobody but this user and root could
/// rename or replace anything on the way to `run/` (X4).
pub fn check_home(home: &Path) -> Result<(), RegistryError> {
    if !home.is_dir() {
        return Err(RegistryError::MissingHome(home.to_owned()));
    }
    check_chain(home, home)
}

/// Makes a missing home (and the folders above it), 0700 whatever the umask, after
/// [`check_new_home`]: `Ok(true)` when it was made, `Ok(false)` when it existed. The CLI's `run`
/// and `serve` and [`crate::Supervisor::open`] create a home through it; nothing else does (D7).
pub fn create_home(home: &Path) -> Result<bool, RegistryError> {
    let home = &absolute_home(home)?;
    if home.is_dir() {
        return Ok(false);
    }
    check_new_home(home)?;
    durable::create_private_dirs(home).map_err(|source| RegistryError::CreateHome {
        path: home.to_owned(),
        source,
    })?;
    Ok(true)
}

/// [`check_home`] for a home about to be created: its deepest existing ancestor and every
/// folder above that must pass [`check_strict`] before any folder of the home is made, so a
/// refused home leaves nothing behind (X4). `home` must be absolute.
pub fn check_new_home(home: &Path) -> Result<(), RegistryError> {
    let existing = home
        .ancestors()
        .find(|p| p.symlink_metadata().is_ok())
        .unwrap_or(Path::new("/"));
    if !existing.is_dir() {
        // Nothing can be made under a file: the creation fails and says so.
        return Ok(());
    }
    check_chain(home, existing)
}

/// `from` and every folder above it, as written and as resolved, pass [`check_strict`].
fn check_chain(home: &Path, from: &Path) -> Result<(), RegistryError> {
    check_chain_trusting(home, from, None)
}

/// [`check_chain`], trusting the owner `also` too.
fn check_chain_trusting(home: &Path, from: &Path, also: Option<u32>) -> Result<(), RegistryError> {
    let real = fs::canonicalize(from).map_err(io_err("resolve", from))?;
    for chain in [from, real.as_path()] {
        for p in chain.ancestors() {
            check_strict_trusting(home, p, also)?;
        }
    }
    Ok(())
}

/// sshd's StrictModes for one entry on the way to `run/P`: owned by this process's effective
/// uid or by root, and (unless it is a symbolic link, whose mode means nothing, or a sticky
/// folder such as `/tmp`) writable by neither group nor others.
fn check_strict(home: &Path, path: &Path) -> Result<(), RegistryError> {
    check_strict_trusting(home, path, None)
}

/// For root only: the owner of `home`, when it is another user (see [`Runtime::open_existing`]).
fn root_also_trusts(home: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let owner = home.metadata().ok()?.uid();
    (me == 0 && owner != 0).then_some(owner)
}

/// [`check_strict`], trusting the owner `also` too.
fn check_strict_trusting(home: &Path, path: &Path, also: Option<u32>) -> Result<(), RegistryError> {
    let meta = path.symlink_metadata().map_err(io_err("inspect", path))?;
    let meta_owner = {
        use std::os::unix::fs::MetadataExt;
        meta.uid()
    };
    if also == Some(meta_owner) {
        // Trusted as its owner: the mode must still keep everyone else out.
        return match untrusted_mode(&meta, true) {
            None => Ok(()),
            Some(why) => Err(RegistryError::UnsafePath {
                home: home.to_owned(),
                path: path.to_owned(),
                why,
            }),
        };
    }
    match untrusted_because(&meta, true) {
        None => Ok(()),
        Some(why) => Err(RegistryError::UnsafePath {
            home: home.to_owned(),
            path: path.to_owned(),
            why,
        }),
    }
}

/// Why another user could replace the entry `meta` describes (a folder, or with `folder`
/// false a regular file), or `None` when only this user and root could.
fn untrusted_because(meta: &fs::Metadata, folder: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        Some(format!(
            "owned by uid {}, neither this user (uid {me}) nor root",
            meta.uid()
        ))
    } else {
        untrusted_mode(meta, folder)
    }
}

/// [`untrusted_because`] without the owner: why the entry's type or mode lets another user
/// replace it.
fn untrusted_mode(meta: &fs::Metadata, folder: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o7777;
    if meta.file_type().is_symlink() {
        None
    } else if folder && !meta.is_dir() {
        Some("not a folder".to_owned())
    } else if !folder && !meta.is_file() {
        Some("not a regular file".to_owned())
    } else if mode & 0o022 != 0 && (!folder || mode & 0o1000 == 0) {
        Some(format!("writable by group or others (mode {mode:04o})"))
    } else {
        None
    }
}

/// X4 for the guardian: the executable itself (resolved) and every folder above it, as written
/// and as resolved, owned by this user or root and writable by no one else, so no other user
/// could swap the program that writes the evidence.
pub fn check_trusted_executable(exe: &Path) -> Result<(), RegistryError> {
    let refuse = |path: &Path, why: String| RegistryError::UnsafeExecutable {
        exe: exe.to_owned(),
        path: path.to_owned(),
        why,
    };
    let real = fs::canonicalize(exe).map_err(io_err("resolve", exe))?;
    let meta = real.metadata().map_err(io_err("inspect", &real))?;
    if let Some(why) = untrusted_because(&meta, false) {
        return Err(refuse(&real, why));
    }
    let written = exe.parent().unwrap_or(Path::new("/"));
    let written = std::path::absolute(written).map_err(io_err("resolve", written))?;
    let real_dir = real.parent().unwrap_or(Path::new("/"));
    for chain in [written.as_path(), real_dir] {
        for p in chain.ancestors() {
            let meta = p.symlink_metadata().map_err(io_err("inspect", p))?;
            if let Some(why) = untrusted_because(&meta, true) {
                return Err(refuse(p, why));
            }
        }
    }
    Ok(())
}

/// Refuses `path` unless it is a folder (not a link) owned by this process's effective uid that
/// neither group nor others may write.
fn check_private(path: &Path) -> Result<(), RegistryError> {
    check_private_trusting(path, None)
}

/// [`check_private`], accepting the owner `also` too.
fn check_private_trusting(path: &Path, also: Option<u32>) -> Result<(), RegistryError> {
    use std::os::unix::fs::MetadataExt;
    let meta = path.symlink_metadata().map_err(io_err("inspect", path))?;
    let me = rustix::process::geteuid().as_raw();
    let why = if !meta.is_dir() {
        "not a folder (a link or a file)".to_owned()
    } else if meta.uid() != me && Some(meta.uid()) != also {
        format!("owned by uid {}, not by this user (uid {me})", meta.uid())
    } else if meta.mode() & 0o022 != 0 {
        format!(
            "writable by group or others (mode {:04o})",
            meta.mode() & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(RegistryError::Unsafe {
        path: path.to_owned(),
        why,
    })
}

fn random16() -> Result<[u8; 16], RegistryError> {
    let path = Path::new("/dev/urandom");
    let mut out = [0u8; 16];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(io_err("read", path))?;
    Ok(out)
}

/// The product home, derived from the running executable: an installed
/// `<home>/bin/refine-supervisor`, or the Cargo workspace whose `target/` holds it.
pub fn default_home() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent();
    while let Some(d) = dir {
        if d.file_name().is_some_and(|n| n == "target") {
            if let Some(ws) = d.parent() {
                return Ok(ws.to_owned());
            }
        }
        if d.file_name().is_some_and(|n| n == "bin") {
            if let Some(home) = d.parent() {
                return Ok(home.to_owned());
            }
        }
        dir = d.parent();
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("cannot derive a home from {}", exe.display()),
    ))
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

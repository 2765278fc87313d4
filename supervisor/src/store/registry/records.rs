//! The record files of a runtime: registrations (written whole, then named), the open index's
//! markers, the launch's result appended to its record, the side records (stop request, stall,
//! readiness), and the stop leases.

use super::*;

/// The first word of a stop request kept in a symbolic link's target.
const STOP_LINK_TAG: &str = "stop-request-1";

impl Runtime {
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
            if !self.synced {
                return Ok(());
            }
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
    pub(super) fn write_stop_request_link(
        &self,
        req: &StopRequest,
        path: &Path,
    ) -> Result<(), RegistryError> {
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

    /// H7: records where a scope with a health check stands, rewritten in place under the
    /// file's lock ([`write_in_place`]: a probe a second must not create and delete a file a
    /// second); not synced (display and waiting only).
    pub fn write_health(
        &self,
        rec: &refine_protocol::record::HealthRecord,
    ) -> Result<(), RegistryError> {
        let bytes = rec.encode().map_err(|source| RegistryError::Refused {
            what: "health record",
            source,
        })?;
        write_in_place(&self.health_path(rec.id), &bytes)
    }

    /// H7: where `id`'s health stands, as its prober last recorded it, if it did.
    pub fn read_health(
        &self,
        id: RegistrationId,
    ) -> Result<Option<refine_protocol::record::HealthRecord>, RegistryError> {
        let path = self.health_path(id);
        let bytes = match read_locked(&path, refine_protocol::record::MAX_RECORD) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        self.decode_side_record(
            &path,
            &bytes,
            "health record",
            refine_protocol::record::HealthRecord::decode,
            |r| (r.id, r.runtime),
            id,
        )
        .map(Some)
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
        let link = fs::read_link(&path);
        // No file at all (the common case): one lookup, not two.
        if matches!(&link, Err(e) if e.kind() == io::ErrorKind::NotFound) {
            return Ok(None);
        }
        if let Ok(target) = link {
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
    pub(super) fn read_side_record<T>(
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
        self.decode_side_record(path, &bytes, what, decode, owner, id)
            .map(Some)
    }

    /// A side record's bytes decoded, and checked to be `id`'s of this runtime.
    fn decode_side_record<T>(
        &self,
        path: &Path,
        bytes: &[u8],
        what: &'static str,
        decode: fn(&[u8]) -> Result<T, DecodeError>,
        owner: fn(&T) -> (RegistrationId, RuntimeId),
        id: RegistrationId,
    ) -> Result<T, RegistryError> {
        let corrupt = |source| RegistryError::Corrupt {
            what,
            path: path.to_owned(),
            source,
        };
        let rec = decode(bytes).map_err(corrupt)?;
        if owner(&rec) != (id, self.id) {
            return Err(corrupt(DecodeError::InvalidField {
                field: "id or runtime",
            }));
        }
        Ok(rec)
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

/// A stop request written on a full disk ([`Runtime::write_stop_request`]): the link's target is
/// `stop-request-1 CAUSE REQUESTED_AT_NS PID`, at most 60 bytes (ext4 keeps such a target in
/// the inode); the id and runtime are the path's.
pub(super) fn stop_request_in_link(
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

/// A record file's registration envelope and what follows it (the launch result, if any). A file
/// whose first envelope's length cannot be read is all registration (the decoder says why).
pub(super) fn split_record(bytes: &[u8]) -> (&[u8], &[u8]) {
    match refine_protocol::record::envelope_size(bytes) {
        Some(n) if n <= bytes.len() => bytes.split_at(n),
        _ => (bytes, &[]),
    }
}

/// The entries of a folder that are named by a registration id, sorted.
pub(super) fn sorted_ids(rd: fs::ReadDir) -> Vec<RegistrationId> {
    let mut ids: Vec<RegistrationId> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(RegistrationId::parse))
        .collect();
    ids.sort();
    ids
}

/// Creates an empty marker file (an existing one is kept as it is).
pub(super) fn create_marker(path: &Path) -> Result<(), RegistryError> {
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
pub(super) fn write_replacing(path: &Path, ext: &str, bytes: &[u8]) -> Result<(), RegistryError> {
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

/// Rewrites `path` in place (created the first time): the whole of `bytes` from offset 0, then
/// the file cut to their length, under an exclusive `flock` that [`read_locked`] readers wait
/// for, so that a reader sees the old or the new content, never a part. No file is created or
/// deleted after the first write (a temporary renamed over the record would be one of each per
/// write: on ext4 without a journal, every new inode then scans the recently deleted ones).
/// Not synced.
pub(super) fn write_in_place(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    use std::os::unix::fs::FileExt;
    let f = durable::open_private(
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false),
        path,
    )
    .map_err(io_err("open", path))?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io_err("lock", path)(e.into()))?;
    f.write_all_at(bytes, 0)
        .and_then(|()| f.set_len(bytes.len() as u64))
        .map_err(io_err("write", path))
}

/// [`read_bounded`] under a shared `flock` (the writer's is exclusive: [`write_in_place`]).
pub fn read_locked(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    let f = fs::File::open(path)?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockShared)?;
    read_to_bound(&f, max)
}

/// Reads at most `max` bytes; a larger file is an error rather than an unbounded allocation.
pub fn read_bounded(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    read_to_bound(&fs::File::open(path)?, max)
}

/// All of `f` from where it stands, at most `max` bytes ([`read_bounded`], [`read_locked`]).
fn read_to_bound(f: &fs::File, max: usize) -> io::Result<Vec<u8>> {
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

//! Log retention (SPEC R1–R4): removes the stdout/stderr/stdin artifacts and the capture receipt
//! (it holds output prefixes) of scopes that are proven exited and older than the limit, and
//! nothing else.
//!
//! For each registration, under its registration lock (`locks/ID.lock`), retention re-reads the
//! record (it must decode intact), re-runs the one assessment (it must say `exited`, i.e. a receipt
//! that verifies, A2/A3), and checks the age: the time since the later of the receipt's write time
//! and the artifacts' last modification must be at least the limit (default 7 days). Only then are
//! the artifact files under `run/P/logs/` unlinked.
//!
//! Kept, always: records, proofs, launch results, stop requests and lock files (a lock file keeps its inode so
//! waiters and newcomers agree on the lock, R2); the artifacts of live, unverified, corrupt,
//! unreadable or record-less registrations; anything whose lock is busy.
//!
//! # Caveats
//! An artifact whose record is missing is never deleted: without a record nothing proves that
//! its scope has ended. `--dry-run` runs every check (and takes every lock) but unlinks nothing.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use refine_protocol::{Receipt, Registration, RegistrationId};

use crate::history::{lock_unless_kept, Locked};
use crate::store::registry::{RegistryError, Runtime, Stream};

/// Default age limit: 7 days.
pub(crate) const DEFAULT_LIMIT: Duration = Duration::from_secs(7 * 24 * 3600);

const STREAMS: [Stream; 3] = [Stream::Stdout, Stream::Stderr, Stream::Stdin];

/// The file-name extensions of everything retention retires (`logs/ID.EXT`).
const RETIRED: [&str; 6] = [
    "stdout",
    "stderr",
    "stdin",
    "capture",
    "stdout-index",
    "stderr-index",
];

/// The paths retention may retire for `id`: the output artifacts and the capture receipt.
fn retired_paths(rt: &Runtime, id: RegistrationId) -> impl Iterator<Item = PathBuf> + '_ {
    STREAMS
        .iter()
        .map(move |&s| rt.log_path(id, s))
        .chain(std::iter::once(rt.capture_receipt_path(id)))
        .chain([Stream::Stdout, Stream::Stderr].map(|s| rt.index_path(id, s)))
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub older_than: Duration,
    pub dry_run: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            older_than: DEFAULT_LIMIT,
            dry_run: false,
        }
    }
}

/// What one registration's evidence says about its scope, as far as retention cares.
#[derive(Debug, Clone)]
pub enum Evidence {
    /// A verified receipt (A2) or a finished earlier boot (A3, no receipt).
    Exited(Option<Receipt>),
    /// `live` or `unverified`, with the assessment's reason.
    NotExited {
        state: refine_protocol::docs::State,
        reason: Option<refine_protocol::docs::ScopeReason>,
    },
}

/// What retention did with a registration's artifacts: the contract's closed enum.
pub use refine_protocol::docs::RetentionAction as Action;

/// Why retention kept or deleted artifacts: the contract's tagged enum, worded by views.
pub use refine_protocol::docs::RetentionReason as Reason;

#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub action: Action,
    /// Why it was kept, or deleted.
    pub reason: Reason,
    pub files: Vec<PathBuf>,
    pub bytes: u64,
    /// How old the evidence is, when it was measured (for a view to print in its own words).
    pub age_secs: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub older_than_secs: u64,
    pub dry_run: bool,
    pub deleted_files: usize,
    pub deleted_bytes: u64,
    pub entries: Vec<Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("cannot list {path}")]
    List {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One retention pass over `run/P`, with `assess` as the source of exit evidence (production
/// passes the shared assessment; it is called under the registration lock, and before it for a
/// registration whose lock is held, only to keep a scope that is not exited without waiting).
pub fn retire(
    rt: &Runtime,
    opts: Options,
    assess: &dyn Fn(&Runtime, &Registration) -> Evidence,
) -> Result<Report, RetentionError> {
    let mut report = Report {
        older_than_secs: opts.older_than.as_secs(),
        dry_run: opts.dry_run,
        ..Report::default()
    };
    let records: BTreeSet<RegistrationId> = rt.list_ids()?.into_iter().collect();
    for &id in &records {
        let entry = retire_one(rt, id, opts, assess);
        if entry.action == Action::Deleted {
            report.deleted_files += entry.files.len();
            report.deleted_bytes += entry.bytes;
        }
        report.entries.push(entry);
    }
    // Artifacts without a record: nothing proves their scope ended; keep and report them.
    for id in artifact_ids(rt)?.difference(&records) {
        let files = existing_artifacts(rt, *id);
        report.entries.push(Entry {
            id: id.to_string(),
            action: Action::Kept,
            reason: Reason::MissingRecord,
            bytes: files.iter().map(|(_, n)| n).sum(),
            files: files.into_iter().map(|(p, _)| p).collect(),
            age_secs: None,
        });
    }
    Ok(report)
}

fn retire_one(
    rt: &Runtime,
    id: RegistrationId,
    opts: Options,
    assess: &dyn Fn(&Runtime, &Registration) -> Evidence,
) -> Entry {
    let files = existing_artifacts(rt, id);
    let mut entry = Entry {
        id: id.to_string(),
        action: Action::Kept,
        reason: Reason::ExitedPastLimit,
        bytes: files.iter().map(|(_, n)| n).sum(),
        files: files.iter().map(|(p, _)| p.clone()).collect(),
        age_secs: None,
    };
    if files.is_empty() {
        entry.action = Action::Empty;
        entry.reason = Reason::NoArtifacts;
        return entry;
    }
    // A first look without the lock: an artifact written within the limit is young whatever
    // the scope's state (its age only grows until it is written again), so the lock and the
    // assessment are spent only on candidates (the service runs this over the whole history).
    let now = SystemTime::now();
    let young = files.iter().find_map(|(p, _)| {
        let t = fs::metadata(p).and_then(|m| m.modified()).ok()?;
        let age = now.duration_since(t).unwrap_or(Duration::ZERO);
        (age < opts.older_than).then_some(age)
    });
    if let Some(age) = young {
        entry.age_secs = Some(age.as_secs());
        entry.reason = Reason::Young;
        return entry;
    }
    let kept = |reg: &Registration| match assess(rt, reg) {
        Evidence::NotExited { state, reason } => Some(Reason::NotExited { state, reason }),
        _ => None,
    };
    // Everything below is re-checked under the registration lock (R1).
    let _lock = match lock_unless_kept(rt, id, kept) {
        Ok(Locked::Held(l)) => l,
        Ok(Locked::Kept(why)) => {
            entry.reason = why;
            return entry;
        }
        Err(e) => {
            entry.reason = Reason::LockBusy {
                error: crate::error::error_chain(&e),
            };
            return entry;
        }
    };
    let reg = match rt.read_registration(id) {
        Ok(r) => r,
        Err(e) => {
            entry.reason = Reason::RecordNotIntact {
                error: crate::error::error_chain(&e),
            };
            return entry;
        }
    };
    let receipt = match assess(rt, &reg) {
        Evidence::Exited(r) => r,
        Evidence::NotExited { state, reason } => {
            entry.reason = Reason::NotExited { state, reason };
            return entry;
        }
    };
    // Age: since the later of the receipt and the last write to any artifact.
    let mut newest = receipt
        .map(|r| UNIX_EPOCH + Duration::from_nanos(r.written_at_ns))
        .unwrap_or(UNIX_EPOCH);
    for (p, _) in &files {
        match fs::metadata(p).and_then(|m| m.modified()) {
            Ok(t) => newest = newest.max(t),
            Err(e) => {
                entry.reason = Reason::StatFailed {
                    path: p.clone(),
                    error: e.to_string(),
                };
                return entry;
            }
        }
    }
    let age = SystemTime::now()
        .duration_since(newest)
        .unwrap_or(Duration::ZERO);
    entry.age_secs = Some(age.as_secs());
    if age < opts.older_than {
        entry.reason = Reason::ExitedYoung;
        return entry;
    }
    if opts.dry_run {
        entry.action = Action::WouldDelete;
        entry.reason = Reason::ExitedPastLimit;
        return entry;
    }
    let mut removed = Vec::new();
    let mut bytes = 0;
    for (p, n) in files {
        match fs::remove_file(&p) {
            Ok(()) => {
                removed.push(p);
                bytes += n;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                entry.reason = Reason::RemoveFailed {
                    path: p.clone(),
                    error: e.to_string(),
                };
            }
        }
    }
    if !removed.is_empty() {
        if let Err(e) = crate::store::durable::sync_dir(&rt.dir().join("logs")) {
            entry.reason = Reason::SyncFailed {
                error: e.to_string(),
            };
        }
    }
    entry.action = Action::Deleted;
    entry.files = removed;
    entry.bytes = bytes;
    entry
}

/// The artifact files of `id` that exist, with their sizes. Only the runtime's own log paths.
fn existing_artifacts(rt: &Runtime, id: RegistrationId) -> Vec<(PathBuf, u64)> {
    retired_paths(rt, id)
        .filter_map(|p| {
            let m = fs::symlink_metadata(&p).ok()?;
            m.is_file().then_some((p, m.len()))
        })
        .collect()
}

/// Ids that have at least one artifact file in `logs/`.
fn artifact_ids(rt: &Runtime) -> Result<BTreeSet<RegistrationId>, RetentionError> {
    let dir = rt.dir().join("logs");
    let rd = fs::read_dir(&dir).map_err(|source| RetentionError::List {
        path: dir.clone(),
        source,
    })?;
    Ok(rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            let (stem, ext) = name.split_once('.')?;
            RETIRED
                .contains(&ext)
                .then(|| RegistrationId::parse(stem))?
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::MetadataExt;

    use refine_protocol::{
        BootId, Hello, Kind, Limits, ProcessWitness, ProofIdentity, ScopePolicy,
    };

    use super::*;
    use crate::history::LOCK_WAIT;

    fn register(rt: &Runtime) -> Registration {
        let id = rt.new_id().unwrap();
        let reg = Registration {
            id,
            runtime: rt.id(),
            kind: Kind::Command,
            label: String::new(),
            owner: String::new(),
            purpose: BTreeMap::new(),
            argv: vec!["true".into()],
            argv_bytes: None,
            cwd: "/".into(),
            stdout_path: rt.log_path(id, Stream::Stdout).display().to_string(),
            stderr_path: rt.log_path(id, Stream::Stderr).display().to_string(),
            stdin_path: None,
            pty: false,
            limits: Limits::default(),
            scope_policy: ScopePolicy::Keep,
            started_at_unix_ms: 0,
            hello: Hello {
                guardian: ProcessWitness::default(),
                boot_id: BootId::default(),
                workload: ProcessWitness::default(),
                workload_pgid: 0,
                workload_sid: 0,
                proof: ProofIdentity::default(),
                cgroup: Default::default(),
                provenance: None,
            },
            proof_path: rt.proof_path(id).display().to_string(),
            cgroup: None,
            allow_setns: None,
            supervisor_provenance: None,
            guardian_provenance: None,
            on_service_loss: None,
            resources: None,
            readiness: None,
            protection: None,
            health: None,
            sandbox: None,
        };
        rt.write_registration(&reg).unwrap();
        fs::write(rt.log_path(id, Stream::Stdout), b"out").unwrap();
        fs::write(rt.log_path(id, Stream::Stderr), b"err!").unwrap();
        fs::write(rt.capture_receipt_path(id), b"prefixes").unwrap();
        fs::write(rt.proof_path(id), b"proof").unwrap();
        // Create the lock file the way every consumer does.
        drop(rt.lock(id, LOCK_WAIT).unwrap());
        reg
    }

    fn ino(p: &std::path::Path) -> u64 {
        fs::metadata(p).unwrap().ino()
    }

    #[test]
    fn deletes_only_artifacts_of_exited_scopes() {
        let home = tempfile::tempdir().unwrap();
        let rt = Runtime::open(home.path(), 1).unwrap();
        let exited = register(&rt);
        let live = register(&rt);
        let unverified = register(&rt);
        let corrupt = register(&rt);
        fs::write(rt.record_path(corrupt.id), b"not a record").unwrap();
        let orphan = rt.new_id().unwrap();
        fs::write(rt.log_path(orphan, Stream::Stdout), b"no record").unwrap();
        let lock_inodes: Vec<u64> = [exited.id, live.id, unverified.id]
            .iter()
            .map(|&i| ino(&rt.lock_path(i)))
            .collect();

        let assess = |_: &Runtime, reg: &Registration| {
            if reg.id == exited.id || reg.id == corrupt.id {
                Evidence::Exited(None)
            } else if reg.id == live.id {
                Evidence::NotExited {
                    state: refine_protocol::docs::State::Live,
                    reason: None,
                }
            } else {
                Evidence::NotExited {
                    state: refine_protocol::docs::State::Unverified,
                    reason: None,
                }
            }
        };
        let dry = retire(
            &rt,
            Options {
                older_than: Duration::ZERO,
                dry_run: true,
            },
            &assess,
        )
        .unwrap();
        assert_eq!(dry.deleted_files, 0);
        assert!(rt.log_path(exited.id, Stream::Stdout).exists());
        let e = dry
            .entries
            .iter()
            .find(|e| e.id == exited.id.to_string())
            .unwrap();
        assert_eq!(e.action, Action::WouldDelete);

        // Too young: kept.
        let young = retire(&rt, Options::default(), &assess).unwrap();
        assert_eq!(young.deleted_files, 0);

        let r = retire(
            &rt,
            Options {
                older_than: Duration::ZERO,
                dry_run: false,
            },
            &assess,
        )
        .unwrap();
        // stdout, stderr and the capture receipt (it holds output prefixes, R4).
        assert_eq!((r.deleted_files, r.deleted_bytes), (3, 15));
        assert!(!rt.log_path(exited.id, Stream::Stdout).exists());
        assert!(!rt.log_path(exited.id, Stream::Stderr).exists());
        assert!(!rt.capture_receipt_path(exited.id).exists());
        // Records, proofs and locks stay; lock inodes are unchanged.
        assert!(rt.record_path(exited.id).exists());
        assert!(rt.proof_path(exited.id).exists());
        for reg in [&live, &unverified, &corrupt] {
            assert!(rt.log_path(reg.id, Stream::Stdout).exists());
            assert!(rt.log_path(reg.id, Stream::Stderr).exists());
            assert!(rt.capture_receipt_path(reg.id).exists());
        }
        assert!(rt.log_path(orphan, Stream::Stdout).exists());
        let kept = |id: RegistrationId| {
            r.entries
                .iter()
                .find(|e| e.id == id.to_string())
                .unwrap()
                .clone()
        };
        assert!(matches!(
            kept(corrupt.id).reason,
            Reason::RecordNotIntact { .. }
        ));
        assert_eq!(kept(orphan).reason, Reason::MissingRecord);
        assert!(matches!(
            kept(unverified.id).reason,
            Reason::NotExited {
                state: refine_protocol::docs::State::Unverified,
                ..
            }
        ));
        let after: Vec<u64> = [exited.id, live.id, unverified.id]
            .iter()
            .map(|&i| ino(&rt.lock_path(i)))
            .collect();
        assert_eq!(lock_inodes, after);
    }

    #[test]
    fn a_held_lock_keeps_the_artifacts() {
        let home = tempfile::tempdir().unwrap();
        let rt = Runtime::open(home.path(), 1).unwrap();
        let reg = register(&rt);
        let held = rt.lock(reg.id, LOCK_WAIT).unwrap();
        let r = retire(
            &rt,
            Options {
                older_than: Duration::ZERO,
                dry_run: false,
            },
            &|_, _| Evidence::Exited(None),
        )
        .unwrap();
        assert_eq!(r.deleted_files, 0);
        assert!(matches!(r.entries[0].reason, Reason::LockBusy { .. }));
        drop(held);
        assert!(rt.log_path(reg.id, Stream::Stdout).exists());
    }
}

//! Forgetting (SPEC R4): after a long horizon (default 30 days) a whole exited registration —
//! record, proof, stdout/stderr/stdin, capture receipt, launch result, stop request, open-index
//! marker and lock — is removed, so the runtime folder stays bounded however long the node runs.
//!
//! Only what the one assessment calls `exited` (a verified receipt, or an ended earlier boot),
//! re-checked under the registration's lock, and older than the horizon (measured from the later
//! of the receipt's write time and the last change to any of its files) is forgotten. Live,
//! unverified and corrupt registrations never are.
//!
//! # The order, and why
//! Under the registration's lock (`locks/ID.lock`):
//!
//! 1. the open-index marker is removed (an exited registration has none once settled);
//! 2. the record is **renamed** to `registrations/.forget-ID` (the intent), and
//!    `registrations/` is fsynced. From this instant the registration is forgotten for every
//!    reader: a lookup finds no record and says "unknown or forgotten"; no reader can find the
//!    record without its proof, which is what would read `unverified`. The intent is not an id,
//!    so no listing sees it;
//! 3. the proof, artifacts, result and stop records are unlinked, then the lock file, while the
//!    lock is still held. The lock file's inode was stable for as long as the record existed
//!    (R2): a waiter blocked on it acquires the old inode once we release it, a newcomer creates
//!    a fresh one, and both read "no record" — forgotten, never live;
//! 4. `proofs/`, `logs/`, `locks/` are fsynced, the lock is released, and only then the intent
//!    is unlinked (and `registrations/` fsynced).
//!
//! A crash before 2 leaves the registration whole. A crash after 2 leaves the intent, and every
//! pass first finishes the intents it finds (steps 3–4): nothing is left behind for ever, and
//! because the intent goes last, no proof or artifact outlives the record's intent unnoticed.
//! Steps 2–4 are batched (one fsync per folder per batch, not per registration).
//!
//! # Caveats
//! A concurrent lockless reader (`ps --all`) that read the record just before step 2 may find
//! the proof gone and momentarily report `unverified`; `ps` re-checks such rows. A consumer that
//! takes the lock of an id just forgotten recreates an empty lock file for it (harmless; never
//! read as evidence).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use refine_protocol::{Receipt, Registration, RegistrationId};

use crate::end::assess::{self, BootSource};
use crate::history::{lock_unless_kept, Locked, LOCK_WAIT};
use crate::store::durable;
use crate::store::fence::Fence;
use crate::store::registry::{RegistryError, Runtime};

/// Default horizon: 30 days.
pub(crate) const DEFAULT_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

/// Registrations removed per batch (each holds its lock until the batch is durable).
const BATCH: usize = 128;

#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The horizon: exited registrations older than this are forgotten.
    pub after: Duration,
    /// Check everything, remove nothing.
    pub dry_run: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            after: DEFAULT_AFTER,
            dry_run: false,
        }
    }
}

/// What forgetting did with a registration: the contract's closed enum.
pub use refine_protocol::docs::ForgetAction as Action;

/// Why forgetting kept or forgot a registration: the contract's tagged enum, worded by views.
pub use refine_protocol::docs::ForgetReason as Reason;

#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub action: Action,
    pub reason: Reason,
    /// For a registration forgotten (or that would be): how long nothing of it changed, for a
    /// view to print in its own words.
    pub unchanged_secs: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub forget_after_secs: u64,
    pub dry_run: bool,
    /// Registrations removed by this pass.
    pub forgotten: usize,
    /// Removals an earlier, interrupted pass had started and this one finished.
    pub resumed: usize,
    /// Registrations younger than the horizon (not listed in `entries`).
    pub young: usize,
    /// Registrations past the horizon by their files' age: forgotten, or kept and why.
    pub entries: Vec<Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ForgetError + 'a {
    move |source| ForgetError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// One forgetting pass over `run/P` (see the module docs). O(history): it runs in `gc` and in
/// the service's retention pass, never in `ps`.
pub fn forget(rt: &Runtime, opts: Options, boot: &dyn BootSource) -> Result<Report, ForgetError> {
    let mut report = Report {
        forget_after_secs: opts.after.as_secs(),
        dry_run: opts.dry_run,
        ..Report::default()
    };
    let mut batch: Vec<(RegistrationId, Fence, String)> = Vec::new();
    if !opts.dry_run {
        // Finish what an interrupted pass started: the intent is its durable note.
        for id in intents(rt)? {
            if let Ok(lock) = rt.lock(id, LOCK_WAIT) {
                batch.push((id, lock, String::new()));
            }
            if batch.len() >= BATCH {
                report.resumed += finish(rt, &mut batch, &mut report.entries)?;
            }
        }
        report.resumed += finish(rt, &mut batch, &mut report.entries)?;
    }
    let now = SystemTime::now();
    for id in rt.list_ids()? {
        // Cheap first look (no lock): a record or proof changed within the horizon is young.
        if age(now, newest_mtime(rt, id, None, false)) < opts.after {
            report.young += 1;
            continue;
        }
        match candidate(rt, id, opts, boot, now) {
            Candidate::Young => report.young += 1,
            Candidate::Gone => {}
            Candidate::Keep(reason) => report.entries.push(Entry {
                id: id.to_string(),
                action: Action::Kept,
                reason,
                unchanged_secs: None,
            }),
            Candidate::Would(reason, unchanged) => report.entries.push(Entry {
                id: id.to_string(),
                action: Action::WouldForget,
                reason,
                unchanged_secs: Some(unchanged.as_secs()),
            }),
            Candidate::Take(lock, reason, unchanged, label) => {
                report.entries.push(Entry {
                    id: id.to_string(),
                    action: Action::Forgotten,
                    reason,
                    unchanged_secs: Some(unchanged.as_secs()),
                });
                batch.push((id, lock, label));
                if batch.len() >= BATCH {
                    report.forgotten += finish(rt, &mut batch, &mut report.entries)?;
                }
            }
        }
    }
    report.forgotten += finish(rt, &mut batch, &mut report.entries)?;
    Ok(report)
}

enum Candidate {
    Young,
    /// No record any more (forgotten concurrently).
    Gone,
    Keep(Reason),
    Would(Reason, Duration),
    /// Steps 1–2 are done; the lock is held for the batch.
    Take(Fence, Reason, Duration, String),
}

/// Steps 1–2 for one registration, after every check under its lock.
fn candidate(
    rt: &Runtime,
    id: RegistrationId,
    opts: Options,
    boot: &dyn BootSource,
    now: SystemTime,
) -> Candidate {
    let kept = |reg: &Registration| not_exited(&assess::assess(rt, reg, boot));
    let lock = match lock_unless_kept(rt, id, kept) {
        Ok(Locked::Held(l)) => l,
        Ok(Locked::Kept(why)) => return Candidate::Keep(why),
        Err(RegistryError::NotFound(_)) => return Candidate::Gone,
        Err(e) => {
            return Candidate::Keep(Reason::LockBusy {
                error: crate::error::error_chain(&e),
            })
        }
    };
    let reg = match rt.read_registration(id) {
        Ok(r) => r,
        Err(RegistryError::NotFound(_)) => return Candidate::Gone,
        Err(e) => {
            return Candidate::Keep(Reason::RecordNotIntact {
                error: crate::error::error_chain(&e),
            })
        }
    };
    let a = assess::assess(rt, &reg, boot);
    if let Some(why) = not_exited(&a) {
        return Candidate::Keep(why);
    }
    let age = age(now, newest_mtime(rt, id, a.receipt(), true));
    if age < opts.after {
        return Candidate::Young;
    }
    let reason = Reason::ExitedPastHorizon;
    if opts.dry_run {
        return Candidate::Would(reason, age);
    }
    if let Err(e) = rt.remove_open_marker(id, &lock) {
        return Candidate::Keep(Reason::MarkerNotRemoved {
            error: crate::error::error_chain(&e),
        });
    }
    if let Err(e) = fs::rename(rt.record_path(id), rt.forget_intent_path(id)) {
        return Candidate::Keep(Reason::RecordNotMoved {
            error: e.to_string(),
        });
    }
    Candidate::Take(lock, reason, age, reg.label)
}

/// Why an assessment keeps a registration: only what it calls `exited` is forgotten.
fn not_exited(a: &assess::Assessment) -> Option<Reason> {
    let reason = match a {
        assess::Assessment::Exited { .. } => return None,
        assess::Assessment::Live => None,
        assess::Assessment::Unverified { reason } => {
            Some(refine_protocol::docs::ScopeReason::Unverified {
                failed: reason.doc(),
            })
        }
    };
    Some(Reason::NotExited {
        state: a.state(),
        reason,
    })
}

/// H7's probe scopes: forgets each of `ids`, whose receipts the caller holds (a probe's
/// launch result carried it: the scope is proven ended), in [`forget`]'s order under each
/// one's lock (marker, record renamed to the intent, the rest, the intent), without its
/// assessment, horizon, folder syncs or `collected` events: a power loss can bring a probe's
/// exited record back, for retention to collect. "The rest" is what a probe scope can have
/// ([`Runtime::probe_files`]), not every kind of file. An id whose lock is busy is left to
/// retention.
pub fn forget_proven(rt: &Runtime, ids: &[RegistrationId]) {
    for &id in ids {
        let Ok(lock) = rt.lock(id, Duration::ZERO) else {
            continue;
        };
        if rt.remove_open_marker(id, &lock).is_err() {
            continue;
        }
        let intent = rt.forget_intent_path(id);
        if fs::rename(rt.record_path(id), &intent).is_err() {
            continue;
        }
        let failed = remove_files(rt.probe_files(id));
        drop(lock);
        // A removal that failed leaves the intent: the next pass of retention finishes it.
        if failed.is_none() {
            let _ = fs::remove_file(&intent);
        }
    }
}

/// Steps 2 (durability) to 4 for a batch whose records are already intents; returns how many
/// were removed completely (a failure is noted in the registration's entry, and its intent
/// stays for the next pass).
fn finish(
    rt: &Runtime,
    batch: &mut Vec<(RegistrationId, Fence, String)>,
    entries: &mut [Entry],
) -> Result<usize, ForgetError> {
    if batch.is_empty() {
        return Ok(0);
    }
    let records = rt.dir().join("registrations");
    durable::sync_dir(&records).map_err(io_err("sync", &records))?;
    let mut done = Vec::with_capacity(batch.len());
    for (id, _lock, label) in batch.iter() {
        match remove_rest(rt, *id) {
            // The intent stays: the next pass tries again.
            Some(reason) => {
                let id = id.to_string();
                if let Some(entry) = entries.iter_mut().rev().find(|e| e.id == id) {
                    entry.action = Action::Kept;
                    entry.reason = reason;
                }
            }
            None => {
                done.push(*id);
                let ev = crate::store::journal::event(
                    refine_protocol::docs::EventKind::Collected,
                    *id,
                    label,
                );
                crate::store::journal::record(rt, &ev);
            }
        }
    }
    for sub in ["proofs", "logs", "locks"] {
        let dir = rt.dir().join(sub);
        durable::sync_dir(&dir).map_err(io_err("sync", &dir))?;
    }
    batch.clear();
    for id in &done {
        let intent = rt.forget_intent_path(*id);
        match fs::remove_file(&intent) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove", &intent)(e)),
        }
    }
    durable::sync_dir(&records).map_err(io_err("sync", &records))?;
    Ok(done.len())
}

/// Step 3 for `id`: removes every file of it but the record (already the intent), the lock
/// file last; one that is not there is fine. Every removal is tried; the last failure is the
/// reason the intent stays.
fn remove_rest(rt: &Runtime, id: RegistrationId) -> Option<Reason> {
    remove_files(files(rt, id))
}

/// Removes each of `paths` (one already gone is fine); the last failure, if any.
fn remove_files(paths: impl IntoIterator<Item = PathBuf>) -> Option<Reason> {
    let mut failed = None;
    for p in paths {
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                failed = Some(Reason::RemoveFailed {
                    error: e.to_string(),
                    path: p,
                })
            }
        }
    }
    failed
}

/// Everything of `id` that step 3 removes (all but the record), the lock file last.
fn files(rt: &Runtime, id: RegistrationId) -> impl Iterator<Item = PathBuf> {
    rt.registration_files(id).into_iter().skip(1)
}

/// Ids with a `.forget-ID` intent left by an interrupted pass.
fn intents(rt: &Runtime) -> Result<Vec<RegistrationId>, ForgetError> {
    let dir = rt.dir().join("registrations");
    let rd = fs::read_dir(&dir).map_err(io_err("list", &dir))?;
    Ok(rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix(".forget-")
                .and_then(RegistrationId::parse)
        })
        .collect())
}

/// The latest of the receipt's write time and the modification time of the record and of every
/// file step 3 would remove (the lock file aside: taking a lock does not change it); with `all`
/// false (the first, lockless look) only the record and the proof.
fn newest_mtime(
    rt: &Runtime,
    id: RegistrationId,
    receipt: Option<&Receipt>,
    all: bool,
) -> SystemTime {
    let mut newest = receipt
        .map(|r| UNIX_EPOCH + Duration::from_nanos(r.written_at_ns))
        .unwrap_or(UNIX_EPOCH);
    // Record, proof, artifacts, result and stop request: all but the lock file.
    for p in rt
        .registration_files(id)
        .into_iter()
        .take(if all { 8 } else { 2 })
    {
        if let Ok(t) = fs::metadata(&p).and_then(|m| m.modified()) {
            newest = newest.max(t);
        }
    }
    newest
}

fn age(now: SystemTime, then: SystemTime) -> Duration {
    now.duration_since(then).unwrap_or(Duration::ZERO)
}

//! Files under `run/P` that no record covers (SPEC D5): what aborted launches leave (a launch
//! cut off before its record was written: `proofs/ID`, `logs/ID.*`, `locks/ID.lock`), status
//! files that outlived their registration (`logs/ID.stall`), and the temporary files of
//! interrupted replacements (`.tmp-NAME-PID-N`, `NAME.PID.tmp`). `gc` collects them here.
//!
//! A file is collected only when nothing can still be using it:
//! - every file of the id is older than [`SAFETY_AGE`] (a launch writes its record within its
//!   start timeout of creating them; a replacement renames its temporary file in milliseconds);
//! - the id's registration lock is taken (a launch holds it from before its first file until
//!   it ends), and under it the record is looked for again: a registered id keeps its files.
//!
//! Without a record the id's lock file is removed last, while held, as forgetting does.
//! `--dry-run` takes the same locks and removes nothing.
//!
//! Outside `run/P`, the cgroup directory of an ended scope (F4) whose launcher died between
//! the receipt and its removal is collected too: a registration that is not in the open index
//! (settled: proven exited) and whose cgroup still exists, under its lock; its accounting goes
//! into the result record first. A cgroup with members stays (the kernel refuses, `EBUSY`).
//! So is an empty cgroup below this runtime's parent (`<base>/<runtime>/ID`) that no record
//! names and that is older than [`SAFETY_AGE`] (an aborted launch's): a pending launch writes
//! its record within that of its `mkdir`. Cgroups of other runtimes are never looked at.
//!
//! # Caveats
//! The open-index markers (`open/`) are not handled here: [`crate::end::open_index`] drops a marker
//! without a record on its own schedule. A file of another name that is not an id's (a stray
//! `notes.txt`) is left alone: nothing here removes what it cannot attribute.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use refine_protocol::RegistrationId;

use crate::history::retention::RetentionError;
use crate::history::LOCK_WAIT;
use crate::store::registry::Runtime;

/// Files younger than this are never collected: the guardian's start timeout plus a margin
/// ([`crate::end::open_index::UNWRITTEN_AFTER`]), the longest a launch takes to register.
pub const SAFETY_AGE: Duration = crate::end::open_index::UNWRITTEN_AFTER;

/// The folders of `run/P` whose files belong to registrations.
const FOLDERS: [&str; 4] = ["registrations", "proofs", "logs", "locks"];

/// What `gc` did with a stray file: the contract's closed enum.
pub use refine_protocol::docs::StrayAction as Action;

/// Why a file is (or would be) collected, or kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// No record names its id (an aborted launch, or a registration forgotten before this file
    /// was known to forgetting).
    NoRecord,
    /// A temporary file of a replacement that never finished.
    Temporary,
    /// Younger than the safety age: a launch or a replacement may still be writing it.
    Young { age: Duration, limit: Duration },
    /// The id's registration lock is held: something still uses it.
    Locked,
    /// The removal failed (the error, as text).
    Failed { error: String },
    /// The cgroup directory of a scope that ended (F4), left by a launcher that died between
    /// the receipt and its removal.
    EndedScopeCgroup,
    /// A cgroup directory below this runtime's parent that no record names (its launcher
    /// died between the `mkdir` and the record).
    UnnamedCgroup,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    /// The registration the file is named for, when its name says.
    pub id: Option<String>,
    pub bytes: u64,
    pub action: Action,
    pub reason: Reason,
}

/// One file found, before the decision.
struct Found {
    path: PathBuf,
    bytes: u64,
    modified: SystemTime,
    temporary: bool,
}

/// The id a file in `folder` is named for, and whether it is a temporary file.
fn classify(folder: &str, name: &str) -> Option<(Option<RegistrationId>, bool)> {
    let id_prefix = |s: &str| s.get(..32).and_then(RegistrationId::parse);
    if let Some(rest) = name.strip_prefix(".tmp-") {
        return Some((id_prefix(rest), true));
    }
    if name.ends_with(".tmp") {
        return Some((id_prefix(name), true));
    }
    let id = match folder {
        "registrations" | "proofs" => RegistrationId::parse(name)?,
        "logs" => RegistrationId::parse(name.split_once('.')?.0)?,
        "locks" => RegistrationId::parse(name.strip_suffix(".lock")?)?,
        _ => return None,
    };
    Some((Some(id), false))
}

/// Finds (and unless `dry_run`, removes) every file under `run/P` no record covers.
pub fn collect(rt: &Runtime, dry_run: bool) -> Result<Vec<Entry>, RetentionError> {
    collect_at(rt, dry_run, SAFETY_AGE)
}

/// [`collect`] with another safety age (tests).
pub(crate) fn collect_at(
    rt: &Runtime,
    dry_run: bool,
    safety: Duration,
) -> Result<Vec<Entry>, RetentionError> {
    let records: BTreeSet<RegistrationId> = rt.list_ids()?.into_iter().collect();
    let mut groups: BTreeMap<Option<RegistrationId>, Vec<Found>> = BTreeMap::new();
    for folder in FOLDERS {
        let dir = rt.dir().join(folder);
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(RetentionError::List { path: dir, source }),
        };
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name();
            let Some((id, temporary)) = name.to_str().and_then(|n| classify(folder, n)) else {
                continue;
            };
            // A forget intent (`.forget-ID`) is forgetting's to finish.
            let covered =
                |id: &RegistrationId| records.contains(id) || rt.forget_intent_path(*id).exists();
            if !temporary && id.as_ref().is_some_and(covered) {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            groups.entry(id).or_default().push(Found {
                path: e.path(),
                bytes: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                temporary,
            });
        }
    }
    let now = SystemTime::now();
    let mut out = Vec::new();
    for (id, files) in groups {
        out.extend(decide(rt, id, files, dry_run, safety, now));
    }
    out.extend(ended_cgroups(rt, &records, dry_run)?);
    out.extend(unnamed_cgroups(rt, dry_run, safety, now));
    Ok(out)
}

/// The cgroups below this runtime's parent ([`crate::kernel::cgroup::runtime_parent`]) that no
/// record names: a launcher killed between the cgroup's `mkdir` and its record left them. One
/// is removed when it is older than `safety` (a launch registers within that of its `mkdir`)
/// and its record is still not there when it is removed; the kernel refuses one with members
/// or cgroups below it (`EBUSY`), which then stays.
fn unnamed_cgroups(rt: &Runtime, dry_run: bool, safety: Duration, now: SystemTime) -> Vec<Entry> {
    let Some(parent) = crate::kernel::cgroup::runtime_parent(rt.id()) else {
        return Vec::new();
    };
    let Ok(rd) = fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(id) = name.to_str().and_then(RegistrationId::parse) else {
            continue;
        };
        // A cgroup's interface files are not directories; a record names the rest.
        let Ok(meta) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !meta.is_dir() || rt.record_path(id).exists() {
            continue;
        }
        let path = e.path();
        let entry = |action, reason| Entry {
            path: path.clone(),
            id: Some(id.to_string()),
            bytes: 0,
            action,
            reason,
        };
        let age = now
            .duration_since(meta.modified().unwrap_or(now))
            .unwrap_or(Duration::ZERO);
        if age < safety {
            out.push(entry(Action::Kept, Reason::Young { age, limit: safety }));
            continue;
        }
        if dry_run {
            out.push(entry(Action::WouldRemove, Reason::UnnamedCgroup));
            continue;
        }
        // Its launch may have registered meanwhile: looked for again, just before.
        if rt.record_path(id).exists() {
            continue;
        }
        out.push(match fs::remove_dir(&path) {
            Ok(()) => entry(Action::Removed, Reason::UnnamedCgroup),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => entry(
                Action::Kept,
                Reason::Failed {
                    error: e.to_string(),
                },
            ),
        });
    }
    out
}

/// The cgroups of settled registrations (not in the open index: proven exited) that still
/// exist, each removed under its registration's lock, its accounting kept in the result first.
fn ended_cgroups(
    rt: &Runtime,
    records: &BTreeSet<RegistrationId>,
    dry_run: bool,
) -> Result<Vec<Entry>, RetentionError> {
    let open: BTreeSet<RegistrationId> = rt.open_ids()?.into_iter().collect();
    let mut out = Vec::new();
    for &id in records.difference(&open) {
        let Ok(reg) = rt.read_registration(id) else {
            continue;
        };
        let Some(cg) = reg.cgroup.as_ref().filter(|c| c.holds_scope()) else {
            continue;
        };
        let path = PathBuf::from(&cg.path);
        if !path.is_dir() {
            continue;
        }
        let entry = |action, reason| Entry {
            path: path.clone(),
            id: Some(id.to_string()),
            bytes: 0,
            action,
            reason,
        };
        let Ok(Some(lock)) = rt.try_lock(id) else {
            out.push(entry(Action::Kept, Reason::Locked));
            continue;
        };
        if dry_run {
            out.push(entry(Action::WouldRemove, Reason::EndedScopeCgroup));
            continue;
        }
        let usage = crate::kernel::cgroup::usage(&path);
        out.push(match crate::kernel::cgroup::remove(&path) {
            Ok(()) => {
                crate::end::assess::complete_result_usage(rt, id, None, usage, None);
                entry(Action::Removed, Reason::EndedScopeCgroup)
            }
            Err(e) => entry(
                Action::Kept,
                Reason::Failed {
                    error: e.to_string(),
                },
            ),
        });
        drop(lock);
    }
    Ok(out)
}

fn entry(f: &Found, id: Option<RegistrationId>, action: Action, reason: Reason) -> Entry {
    Entry {
        path: f.path.clone(),
        id: id.map(|i| i.to_string()),
        bytes: f.bytes,
        action,
        reason,
    }
}

/// One id's files: every check, then (unless a dry run) the removal under its lock.
fn decide(
    rt: &Runtime,
    id: Option<RegistrationId>,
    files: Vec<Found>,
    dry_run: bool,
    safety: Duration,
    now: SystemTime,
) -> Vec<Entry> {
    let age = |f: &Found| now.duration_since(f.modified).unwrap_or(Duration::ZERO);
    let why = |f: &Found| {
        if f.temporary {
            Reason::Temporary
        } else {
            Reason::NoRecord
        }
    };
    // A temporary file is judged by its own age; an id's other files go together: one young
    // file keeps them all (its launch may still be writing).
    let young_of_id = files
        .iter()
        .filter(|f| !f.temporary)
        .map(age)
        .filter(|a| *a < safety)
        .min();
    let (young, files): (Vec<Found>, Vec<Found>) = files.into_iter().partition(|f| {
        if f.temporary {
            age(f) < safety
        } else {
            young_of_id.is_some()
        }
    });
    let mut out: Vec<Entry> = young
        .iter()
        .map(|f| {
            let reason = Reason::Young {
                age: if f.temporary {
                    age(f)
                } else {
                    young_of_id.unwrap_or_default()
                },
                limit: safety,
            };
            entry(f, id, Action::Kept, reason)
        })
        .collect();
    if files.is_empty() {
        return out;
    }
    let Some(id) = id else {
        // A temporary file named for no registration: its age is all there is to check.
        out.extend(files.iter().map(|f| remove(f, None, dry_run, why(f))));
        return out;
    };
    let lock_path = rt.lock_path(id);
    // Without a lock file nothing holds the lock (a launch creates it before its first file,
    // and these are older than the safety age): none is created, a dry run leaves no trace.
    let lock = if lock_path.exists() {
        match rt.lock(id, LOCK_WAIT) {
            Ok(l) => Some(l),
            Err(_) => {
                out.extend(
                    files
                        .iter()
                        .map(|f| entry(f, Some(id), Action::Kept, Reason::Locked)),
                );
                return out;
            }
        }
    } else {
        None
    };
    let registered = rt.record_path(id).exists();
    out.extend(
        files
            .iter()
            .filter(|f| f.temporary || !registered)
            .filter(|f| f.path != lock_path)
            .map(|f| remove(f, Some(id), dry_run, why(f))),
    );
    if !registered && young_of_id.is_none() {
        // The lock file last, while held.
        if lock.is_some() && !dry_run {
            let _ = fs::remove_file(&lock_path);
        }
        if files.iter().any(|f| f.path == lock_path) {
            out.push(Entry {
                path: lock_path,
                id: Some(id.to_string()),
                bytes: 0,
                action: if dry_run {
                    Action::WouldRemove
                } else {
                    Action::Removed
                },
                reason: Reason::NoRecord,
            });
        }
    }
    drop(lock);
    if !dry_run {
        for folder in FOLDERS {
            let _ = crate::store::durable::sync_dir(&rt.dir().join(folder));
        }
    }
    out
}

fn remove(f: &Found, id: Option<RegistrationId>, dry_run: bool, reason: Reason) -> Entry {
    if dry_run {
        return entry(f, id, Action::WouldRemove, reason);
    }
    match fs::remove_file(&f.path) {
        Ok(()) => entry(f, id, Action::Removed, reason),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => entry(f, id, Action::Removed, reason),
        Err(e) => entry(
            f,
            id,
            Action::Kept,
            Reason::Failed {
                error: e.to_string(),
            },
        ),
    }
}

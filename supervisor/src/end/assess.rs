//! The one assessment (SPEC A1–A3): is a registration's scope `live`, `exited` or `unverified`?
//!
//! Recomputed from current evidence on every call; nothing is cached, and no earlier answer
//! authorizes anything. The checks, in order:
//!
//! 1. **Receipt** (A2): the proof file at the registered path must be the registered
//!    `(st_dev, st_ino)`, hold exactly one receipt that decodes (magic, version, length, CRC-32),
//!    and every bound field must equal the registration: registration id, runtime id, boot id,
//!    guardian witness, workload witness, proof identity. A verified receipt is `exited` once its
//!    writer is gone (A6): the guardian writes it only after `waitpid` said `ECHILD`, then exits;
//!    while the witnessed guardian still runs (same boot), the scope is `live` whatever the file
//!    says, since a workload of the same uid can write a receipt that verifies.
//!    X7 Two witnesses: where the scope has a cgroup of its own and its directory is still
//!    there, a verified receipt is `exited` only while that cgroup reports `populated 0`; a
//!    member (a process that left the guardian's reach through another PID namespace, or one a
//!    guardian without that wait did not see) keeps the scope `live`.
//! 2. **Boot** (A3): the registration's boot id is compared with the current one
//!    ([`BootSource`], injectable for tests). Same boot: a guardian that is alive (pid with the
//!    recorded start time, not a zombie) is `live`; a gone guardian without a verified receipt is
//!    `unverified`. An earlier boot whose witnesses all carry that same boot id is `exited` (that
//!    kernel lifetime ended, and every process of it with it); missing or mixed boot ids are
//!    `unverified`.
//!
//! # Caveats
//! `live` is a snapshot: the scope may end right after. `unverified` keeps capacity and evidence
//! (A4); it is never turned into `exited` by anything but new evidence. An empty proof file is
//! normal while the guardian runs (it writes the receipt at the end).

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use refine_protocol::docs::{State, UnverifiedCheck};
use refine_protocol::receipt::RECEIPT_LEN;
use refine_protocol::record::Registration;
use refine_protocol::{BootId, DecodeError, ProofIdentity, Receipt, RegistrationId};

use crate::kernel::procfs::{self, ProcfsError};
use crate::store::registry::Runtime;

/// Where the current boot id comes from. Production: [`KernelBoot`]; tests inject [`FixedBoot`]
/// (an earlier boot cannot be produced otherwise).
pub trait BootSource {
    fn boot_id(&self) -> Result<BootId, ProcfsError>;
}

/// Reads `/proc/sys/kernel/random/boot_id`.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelBoot;

impl BootSource for KernelBoot {
    fn boot_id(&self) -> Result<BootId, ProcfsError> {
        procfs::boot_id()
    }
}

/// A fixed boot id (tests).
#[derive(Debug, Clone, Copy)]
pub struct FixedBoot(pub BootId);

impl BootSource for FixedBoot {
    fn boot_id(&self) -> Result<BootId, ProcfsError> {
        Ok(self.0)
    }
}

/// The production boot source, for defaults.
pub static KERNEL_BOOT: KernelBoot = KernelBoot;

/// A receipt field bound to the registration (the protocol's, as documents carry it).
pub use refine_protocol::docs::BoundField;

/// Why a scope is `unverified`: the check that failed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnverifiedReason {
    /// No file at the registered proof path.
    ProofMissing,
    /// The proof file could not be read (errno).
    ProofUnreadable { errno: Option<i32> },
    /// The file at the proof path is not the registered inode (replaced or copied).
    ProofReplaced {
        registered: ProofIdentity,
        found: ProofIdentity,
    },
    /// The proof file holds bytes that are not a valid receipt.
    ReceiptCorrupt {
        #[serde(serialize_with = "display")]
        error: DecodeError,
    },
    /// A valid receipt, but a bound field differs from the registration.
    FieldMismatch { field: BoundField },
    /// Same boot, the guardian is gone, and no receipt was written.
    GuardianGoneWithoutReceipt,
    /// The registration carries no boot id (all zero).
    BootIdMissing,
    /// The current boot id cannot be read.
    CurrentBootUnknown,
    /// Earlier-boot evidence whose boot ids disagree (registration vs receipt).
    MixedBootIds { registration: BootId, other: BootId },
}

impl UnverifiedReason {
    /// The check that failed, as the contract names it (the reason without its fields).
    pub fn check(&self) -> UnverifiedCheck {
        match self {
            UnverifiedReason::ProofMissing => UnverifiedCheck::ProofMissing,
            UnverifiedReason::ProofUnreadable { .. } => UnverifiedCheck::ProofUnreadable,
            UnverifiedReason::ProofReplaced { .. } => UnverifiedCheck::ProofReplaced,
            UnverifiedReason::ReceiptCorrupt { .. } => UnverifiedCheck::ReceiptCorrupt,
            UnverifiedReason::FieldMismatch { .. } => UnverifiedCheck::FieldMismatch,
            UnverifiedReason::GuardianGoneWithoutReceipt => {
                UnverifiedCheck::GuardianGoneWithoutReceipt
            }
            UnverifiedReason::BootIdMissing => UnverifiedCheck::BootIdMissing,
            UnverifiedReason::CurrentBootUnknown => UnverifiedCheck::CurrentBootUnknown,
            UnverifiedReason::MixedBootIds { .. } => UnverifiedCheck::MixedBootIds,
        }
    }

    /// The check that failed, by name.
    pub fn name(&self) -> &'static str {
        self.check().name()
    }

    /// The reason as the documents carry it.
    pub fn doc(&self) -> refine_protocol::docs::UnverifiedReason {
        use refine_protocol::docs::{ProofInode, UnverifiedReason as D};
        let inode = |p: &ProofIdentity| ProofInode {
            dev: p.dev,
            ino: p.ino,
        };
        match self {
            UnverifiedReason::ProofMissing => D::ProofMissing,
            UnverifiedReason::ProofUnreadable { errno } => D::ProofUnreadable { errno: *errno },
            UnverifiedReason::ProofReplaced { registered, found } => D::ProofReplaced {
                registered: inode(registered),
                found: inode(found),
            },
            UnverifiedReason::ReceiptCorrupt { error } => D::ReceiptCorrupt {
                error: error.to_string(),
            },
            UnverifiedReason::FieldMismatch { field } => D::FieldMismatch { field: *field },
            UnverifiedReason::GuardianGoneWithoutReceipt => D::GuardianGoneWithoutReceipt,
            UnverifiedReason::BootIdMissing => D::BootIdMissing,
            UnverifiedReason::CurrentBootUnknown => D::CurrentBootUnknown,
            UnverifiedReason::MixedBootIds {
                registration,
                other,
            } => D::MixedBootIds {
                registration: registration.to_string(),
                other: other.to_string(),
            },
        }
    }
}

fn display<S: serde::Serializer>(e: &DecodeError, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(e)
}

/// How an `exited` scope was proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitProof {
    /// The guardian's verified receipt.
    Receipt(Receipt),
    /// Guardian and all witnesses belong to this earlier boot, which has ended.
    EarlierBoot { boot_id: BootId },
}

/// The answer (A1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assessment {
    Live,
    Exited { proof: ExitProof },
    Unverified { reason: UnverifiedReason },
}

impl Assessment {
    pub fn is_live(&self) -> bool {
        matches!(self, Assessment::Live)
    }
    pub fn is_exited(&self) -> bool {
        matches!(self, Assessment::Exited { .. })
    }
    /// The verified receipt, if the scope was proven exited by one.
    pub fn receipt(&self) -> Option<&Receipt> {
        match self {
            Assessment::Exited {
                proof: ExitProof::Receipt(r),
            } => Some(r),
            _ => None,
        }
    }
    /// The scope's state, as every document names it.
    pub fn state(&self) -> State {
        match self {
            Assessment::Live => State::Live,
            Assessment::Exited { .. } => State::Exited,
            Assessment::Unverified { .. } => State::Unverified,
        }
    }

    /// The state's name (`live`, `exited`, `unverified`).
    pub fn name(&self) -> &'static str {
        self.state().name()
    }
}

/// What the proof file says, before liveness and boot are considered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProofState {
    /// The registered inode, with no receipt yet (empty, or the guardian's zero reservation).
    Empty,
    Verified(Receipt),
    Failed(UnverifiedReason),
}

/// Checks the proof file of `reg` (A2).
///
/// One open and one `fstat` of the descriptor decide the identity, so the inode read is the
/// inode checked: `O_NOFOLLOW` (a symlink at the proof path is not the registered file) and
/// `O_NONBLOCK` (a FIFO put in its place cannot hold the open). The guardian reserves the
/// receipt's bytes and overwrites them in place, so the length `fstat` reports is read at once.
pub fn check_proof(runtime: &Runtime, reg: &Registration) -> ProofState {
    let path = Path::new(&reg.proof_path);
    let registered = reg.proof();
    let unreadable = |e: io::Error| {
        ProofState::Failed(if e.kind() == io::ErrorKind::NotFound {
            UnverifiedReason::ProofMissing
        } else {
            UnverifiedReason::ProofUnreadable {
                errno: e.raw_os_error(),
            }
        })
    };
    let identity = |m: &fs::Metadata| ProofIdentity {
        dev: m.dev(),
        ino: m.ino(),
    };
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            // A symbolic link where the proof file was registered.
            return match fs::symlink_metadata(path) {
                Ok(m) => ProofState::Failed(UnverifiedReason::ProofReplaced {
                    registered,
                    found: identity(&m),
                }),
                Err(e) => unreadable(e),
            };
        }
        Err(e) => return unreadable(e),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return unreadable(e),
    };
    let found = identity(&meta);
    if !meta.file_type().is_file() || found != registered {
        return ProofState::Failed(UnverifiedReason::ProofReplaced { registered, found });
    }
    // One byte more than a receipt, if there is one: a longer file is not a receipt.
    let mut buf = vec![0u8; (meta.len() as usize).min(RECEIPT_LEN + 1)];
    let mut filled = 0;
    while filled < buf.len() {
        match (&file).read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return unreadable(e),
        }
    }
    buf.truncate(filled);
    if refine_protocol::is_unwritten(&buf) {
        return ProofState::Empty;
    }
    let receipt = match Receipt::decode(&buf) {
        Ok(r) => r,
        Err(error) => return ProofState::Failed(UnverifiedReason::ReceiptCorrupt { error }),
    };
    match mismatch(runtime, reg, &receipt) {
        Some(field) => ProofState::Failed(UnverifiedReason::FieldMismatch { field }),
        None => ProofState::Verified(receipt),
    }
}

/// The first bound field of `r` that differs from the registration.
fn mismatch(runtime: &Runtime, reg: &Registration, r: &Receipt) -> Option<BoundField> {
    let h = &reg.hello;
    if r.registration != reg.id {
        Some(BoundField::Registration)
    } else if r.runtime != reg.runtime || r.runtime != runtime.id() {
        Some(BoundField::Runtime)
    } else if r.boot_id != h.boot_id {
        Some(BoundField::BootId)
    } else if r.guardian != h.guardian {
        Some(BoundField::Guardian)
    } else if r.workload != h.workload {
        Some(BoundField::Workload)
    } else if r.proof != h.proof {
        Some(BoundField::Proof)
    } else {
        None
    }
}

/// Whether the registration's guardian is alive now (same pid and start time, not exited).
pub fn guardian_alive(reg: &Registration) -> Result<bool, ProcfsError> {
    Ok(procfs::stat_of(&reg.hello.guardian)?.is_some_and(|s| !s.state.is_exited()))
}

/// Whether the scope's own cgroup (one the workload was forked into) still has a member, or
/// cannot be read; `false` without one or once its directory is gone.
fn cgroup_populated(reg: &Registration) -> bool {
    reg.cgroup
        .as_ref()
        .filter(|c| c.holds_scope())
        .is_some_and(|c| crate::kernel::cgroup::populated(Path::new(&c.path)).unwrap_or(true))
}

/// Assesses `reg` from current evidence (A1–A3).
pub fn assess(runtime: &Runtime, reg: &Registration, boot: &dyn BootSource) -> Assessment {
    let proof = check_proof(runtime, reg);
    let registered_boot = reg.boot_id();
    let current = boot.boot_id();
    if let ProofState::Verified(receipt) = proof {
        // A6: a receipt is final only once its writer is gone. The guardian writes it last and
        // then exits; while the witnessed guardian (pid and start time) still runs, a verified
        // receipt may be a forgery by a workload of the same uid.
        let same_boot = current.as_ref().is_ok_and(|c| *c == registered_boot);
        if same_boot && guardian_alive(reg).unwrap_or(true) {
            return Assessment::Live;
        }
        // X7: the cgroup is the second witness (an unreadable one proves nothing empty).
        if same_boot && cgroup_populated(reg) {
            return Assessment::Live;
        }
        return Assessment::Exited {
            proof: ExitProof::Receipt(receipt),
        };
    }
    let unverified = |reason| Assessment::Unverified { reason };
    if registered_boot == BootId::default() {
        return unverified(UnverifiedReason::BootIdMissing);
    }
    let Ok(current) = current else {
        return unverified(UnverifiedReason::CurrentBootUnknown);
    };
    if current == registered_boot {
        return match guardian_alive(reg) {
            Ok(true) => Assessment::Live,
            // An unreadable /proc cannot prove the guardian gone: not live, not exited.
            Err(_) => unverified(UnverifiedReason::CurrentBootUnknown),
            Ok(false) => match proof {
                ProofState::Failed(reason) => unverified(reason),
                _ => unverified(UnverifiedReason::GuardianGoneWithoutReceipt),
            },
        };
    }
    // An earlier boot: every witness must carry that same boot id.
    if let Some(other) = foreign_receipt_boot(reg) {
        if other != registered_boot {
            return unverified(UnverifiedReason::MixedBootIds {
                registration: registered_boot,
                other,
            });
        }
    }
    Assessment::Exited {
        proof: ExitProof::EarlierBoot {
            boot_id: registered_boot,
        },
    }
}

/// The boot id of whatever decodable receipt sits at the proof path (verified or not).
fn foreign_receipt_boot(reg: &Registration) -> Option<BootId> {
    let bytes =
        crate::store::registry::read_bounded(Path::new(&reg.proof_path), RECEIPT_LEN + 1).ok()?;
    Receipt::decode(&bytes).ok().map(|r| r.boot_id)
}

/// Why a receipt file read on its own (not through a registration) is not a receipt.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptFileError {
    #[error("no receipt at {path}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} holds no receipt yet: its guardian has not proven the scope empty")]
    Unwritten { path: std::path::PathBuf },
    #[error("receipt {path} does not decode")]
    Corrupt {
        path: std::path::PathBuf,
        #[source]
        source: DecodeError,
    },
}

/// Reads and decodes the receipt at `path` (magic, version, length, checksum). A decoded receipt
/// proves nothing yet: [`bind_receipt`] ties it to its registration.
pub fn read_receipt_file(path: &Path) -> Result<Receipt, ReceiptFileError> {
    let bytes = crate::store::registry::read_bounded(path, 64 * 1024).map_err(|source| {
        ReceiptFileError::Read {
            path: path.to_owned(),
            source,
        }
    })?;
    if refine_protocol::is_unwritten(&bytes) {
        return Err(ReceiptFileError::Unwritten {
            path: path.to_owned(),
        });
    }
    Receipt::decode(&bytes).map_err(|source| ReceiptFileError::Corrupt {
        path: path.to_owned(),
        source,
    })
}

/// What a receipt read from a file proves about its registration.
#[derive(Debug)]
pub enum ReceiptBinding {
    /// The registration's own proof file holds this very receipt: the assessment says what it
    /// proves (`exited` once its guardian is gone).
    Holds {
        registration: Box<Registration>,
        assessment: Assessment,
    },
    /// The registration exists, but its proof file holds another receipt or none.
    Differs {
        registration: Box<Registration>,
        assessment: Assessment,
    },
    /// No registration of the receipt's id in this runtime (or no runtime): nothing to bind to.
    Unbound,
}

impl ReceiptBinding {
    /// Whether the receipt proves its scope ended: the registration's own, and `exited`.
    pub fn verified(&self) -> bool {
        matches!(self, ReceiptBinding::Holds { assessment, .. } if assessment.is_exited())
    }
}

/// Binds `receipt` (read from a file) to its registration in `runtime`: the one assessment
/// (same runtime, the registered proof inode, every bound field equal) must find this receipt in
/// the registration's own proof file.
pub fn bind_receipt(
    runtime: Option<&Runtime>,
    receipt: &Receipt,
    boot: &dyn BootSource,
) -> ReceiptBinding {
    let Some(rt) = runtime else {
        return ReceiptBinding::Unbound;
    };
    let Ok(reg) = rt.read_registration(receipt.registration) else {
        return ReceiptBinding::Unbound;
    };
    let assessment = assess(rt, &reg, boot);
    let registration = Box::new(reg);
    if assessment.receipt() == Some(receipt) {
        ReceiptBinding::Holds {
            registration,
            assessment,
        }
    } else {
        ReceiptBinding::Differs {
            registration,
            assessment,
        }
    }
}

/// Adds the tree's usage (H4, from the receipt) to the launch's result record of `id` when the
/// receipt came after the result (a descendant held the scope past the workload's exit).
/// Display only, like the result itself: best effort, logged on failure.
pub(crate) fn complete_result_usage(
    rt: &Runtime,
    id: RegistrationId,
    usage: Option<refine_protocol::TreeUsage>,
    cgroup_usage: Option<refine_protocol::CgroupUsage>,
    limit_usage: Option<refine_protocol::record::LimitUsage>,
) {
    let Ok(Some(mut result)) = rt.read_result(id) else {
        return;
    };
    let limit_usage = limit_usage.or(result.limit_usage);
    let cgroup_usage = cgroup_usage.or(result.cgroup_usage);
    // F4: where the scope had a cgroup, its CPU times are the kernel's count of every
    // member's (a child the kernel reaped itself is in no one's `RUSAGE_CHILDREN`); the
    // receipt's count never replaces them.
    let usage = crate::kernel::cgroup::with_usage(usage.or(result.usage), cgroup_usage);
    if (result.usage, result.cgroup_usage, result.limit_usage) == (usage, cgroup_usage, limit_usage)
    {
        return;
    }
    (result.usage, result.cgroup_usage, result.limit_usage) = (usage, cgroup_usage, limit_usage);
    if let Err(e) = rt.write_result(&result) {
        tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot record the tree's usage");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name` is the variant's serialized name (the metrics label and the JSON key agree).
    #[test]
    fn reason_names_are_the_serialized_names() {
        let serialized = |r: &UnverifiedReason| match serde_json::to_value(r).unwrap() {
            serde_json::Value::String(s) => s,
            serde_json::Value::Object(m) => m.keys().next().unwrap().clone(),
            other => panic!("unexpected {other}"),
        };
        for r in [
            UnverifiedReason::ProofMissing,
            UnverifiedReason::ProofUnreadable { errno: Some(13) },
            UnverifiedReason::FieldMismatch {
                field: BoundField::Proof,
            },
            UnverifiedReason::GuardianGoneWithoutReceipt,
            UnverifiedReason::BootIdMissing,
            UnverifiedReason::CurrentBootUnknown,
        ] {
            assert_eq!(r.name(), serialized(&r), "{r:?}");
        }
    }
}

//! Why a scope is in its state, where the state alone does not say: the `reason` of `show`,
//! `ps`, `stop`, `recover` and `receipt` documents. Typed, so a script matches on `kind` (and
//! `check`) instead of on words; the views word them ([`std::fmt::Display`]).

use serde::{Deserialize, Serialize};

/// A receipt field bound to the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BoundField {
    Registration,
    Runtime,
    BootId,
    Guardian,
    Workload,
    Proof,
}

/// A proof file's `(st_dev, st_ino)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProofInode {
    pub dev: u64,
    pub ino: u64,
}

/// Why a scope is `unverified`: the check that failed (`check`), with its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum UnverifiedReason {
    /// No file at the registered proof path.
    ProofMissing,
    /// The proof file could not be read (errno).
    ProofUnreadable { errno: Option<i32> },
    /// The file at the proof path is not the registered inode (replaced or copied).
    ProofReplaced {
        registered: ProofInode,
        found: ProofInode,
    },
    /// The proof file holds bytes that are not a valid receipt (the decoder's words).
    ReceiptCorrupt { error: String },
    /// A valid receipt, but a bound field differs from the registration.
    FieldMismatch { field: BoundField },
    /// Same boot, the guardian is gone, and no receipt was written.
    GuardianGoneWithoutReceipt,
    /// The registration carries no boot id (all zero).
    BootIdMissing,
    /// The current boot id cannot be read.
    CurrentBootUnknown,
    /// Earlier-boot evidence whose boot ids disagree (registration vs receipt).
    MixedBootIds { registration: String, other: String },
}

/// The `reason` beside a scope's `state` (`kind` says which).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScopeReason {
    /// `unverified`: the check that `failed`.
    Unverified { failed: UnverifiedReason },
    /// `exited` without a receipt: its boot has ended, which ended every process of it.
    EarlierBoot { boot_id: String },
    /// `receipt`: a valid receipt, but not the one the registration's proof file holds.
    NotTheProofFilesReceipt,
    /// `receipt`: the checksum is valid, but no registration of the port to bind it to.
    Unbound { registration: String, port: u16 },
    /// The stop of the scope's residue failed (its launch result says why).
    StopFailed { error: String },
    /// Its record cannot be read, or its stop failed: the error, in words.
    Error { error: String },
}

impl std::fmt::Display for BoundField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            &crate::docs::variant_name(self)
                .unwrap_or("field")
                .replace('_', " "),
        )
    }
}

impl std::fmt::Display for UnverifiedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use UnverifiedReason as R;
        match self {
            R::ProofMissing => f.write_str("proof missing"),
            R::ProofUnreadable { errno: Some(e) } => write!(f, "proof unreadable (errno {e})"),
            R::ProofUnreadable { errno: None } => f.write_str("proof unreadable"),
            R::ProofReplaced { registered, found } => write!(
                f,
                "proof replaced (registered inode {}:{}, found {}:{})",
                registered.dev, registered.ino, found.dev, found.ino
            ),
            R::ReceiptCorrupt { error } => write!(f, "receipt corrupt: {error}"),
            R::FieldMismatch { field } => write!(f, "receipt field mismatch: {field}"),
            R::GuardianGoneWithoutReceipt => f.write_str("guardian gone without receipt"),
            R::BootIdMissing => f.write_str("boot id missing"),
            R::CurrentBootUnknown => f.write_str("current boot unknown"),
            R::MixedBootIds {
                registration,
                other,
            } => write!(
                f,
                "mixed boot ids (registration {registration}, other {other})"
            ),
        }
    }
}

impl std::fmt::Display for ScopeReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeReason::Unverified { failed } => failed.fmt(f),
            ScopeReason::EarlierBoot { boot_id } => {
                write!(f, "boot {boot_id} has ended (no receipt needed)")
            }
            ScopeReason::NotTheProofFilesReceipt => {
                f.write_str("receipt is not the one the registration's proof file holds")
            }
            ScopeReason::Unbound { registration, port } => write!(
                f,
                "checksum valid, but no registration {registration} on port {port} to bind it to"
            ),
            ScopeReason::StopFailed { error } => write!(f, "stop failed: {error}"),
            ScopeReason::Error { error } => f.write_str(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_tagged_objects_and_read_back() {
        let cases = [
            (
                ScopeReason::Unverified {
                    failed: UnverifiedReason::FieldMismatch {
                        field: BoundField::Workload,
                    },
                },
                r#"{"kind":"unverified","failed":{"check":"field_mismatch","field":"workload"}}"#,
            ),
            (
                ScopeReason::Unverified {
                    failed: UnverifiedReason::ProofMissing,
                },
                r#"{"kind":"unverified","failed":{"check":"proof_missing"}}"#,
            ),
            (
                ScopeReason::Error { error: "x".into() },
                r#"{"kind":"error","error":"x"}"#,
            ),
        ];
        for (reason, json) in cases {
            assert_eq!(serde_json::to_string(&reason).unwrap(), json);
            assert_eq!(serde_json::from_str::<ScopeReason>(json).unwrap(), reason);
        }
    }
}

//! Serde for the core types compiled into this crate (see the crate docs for why they are not
//! derived in `refine-protocol-core`). Each type is mirrored once with serde's remote derive; the
//! compiler checks every mirror field by field against the real type, so a field added in the
//! core without its mirror is a build error, not a silently missing key. The representation is
//! exactly what `#[derive(Serialize, Deserialize)]` on the type itself gives (same names, same
//! `snake_case` variants): the JSON documents and bincode records are unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The mirrors, named like the types they describe; their fields are the real types.
mod mirror {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::RegistrationId")]
    pub struct RegistrationId(pub [u8; 16]);

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::RuntimeId")]
    pub struct RuntimeId(pub [u8; 16]);

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::BootId")]
    pub struct BootId(pub [u8; 16]);

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::ProcessWitness")]
    pub struct ProcessWitness {
        pub pid: u32,
        pub start_time: u64,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::ProofIdentity")]
    pub struct ProofIdentity {
        pub dev: u64,
        pub ino: u64,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::WorkloadStatus", rename_all = "snake_case")]
    pub enum WorkloadStatus {
        Exited(i32),
        Signaled(i32),
        NeverStarted,
        Unknown,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::ScopeEnd", rename_all = "snake_case")]
    pub enum ScopeEnd {
        Completed,
        Aborted,
        SpawnFailed,
        GuardianError { code: u16 },
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::Receipt")]
    pub struct Receipt {
        pub registration: crate::RegistrationId,
        pub runtime: crate::RuntimeId,
        pub boot_id: crate::BootId,
        pub guardian: crate::ProcessWitness,
        pub workload: crate::ProcessWitness,
        pub proof: crate::ProofIdentity,
        pub status: crate::WorkloadStatus,
        pub end: crate::ScopeEnd,
        pub spawn_errno: i32,
        pub reaped: u32,
        pub workload_exited_at_ns: u64,
        pub written_at_ns: u64,
        /// Absent from version-1 receipts (and from documents written before it existed).
        #[serde(default)]
        pub usage: Option<crate::TreeUsage>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::TreeUsage")]
    pub struct TreeUsage {
        pub user_us: u64,
        pub system_us: u64,
        pub max_rss_kib: u64,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::frame::SpawnStep", rename_all = "snake_case")]
    pub enum SpawnStep {
        Program,
        Cwd,
        User,
        Setup,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::Rlimit")]
    pub struct Rlimit {
        pub resource: u32,
        pub soft: u64,
        pub hard: u64,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(remote = "crate::Hello")]
    pub struct Hello {
        pub guardian: crate::ProcessWitness,
        pub boot_id: crate::BootId,
        pub workload: crate::ProcessWitness,
        pub workload_pgid: u32,
        pub workload_sid: u32,
        pub proof: crate::ProofIdentity,
        /// Frame only: the registration records the placement in its own `cgroup` field.
        #[serde(skip)]
        pub cgroup: crate::frame::Placement,
        /// Frame only: the registration records it in `guardian_provenance`.
        #[serde(skip)]
        pub provenance: Option<crate::provenance::Provenance>,
    }
}

/// `impl Serialize + Deserialize for T` through its mirror.
macro_rules! through_mirror {
    ($($name:ident),* $(,)?) => {$(
        impl Serialize for crate::$name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                mirror::$name::serialize(self, s)
            }
        }

        impl<'de> Deserialize<'de> for crate::$name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                mirror::$name::deserialize(d)
            }
        }
    )*};
}

through_mirror!(
    RegistrationId,
    RuntimeId,
    BootId,
    ProcessWitness,
    ProofIdentity,
    WorkloadStatus,
    ScopeEnd,
    Receipt,
    TreeUsage,
    Rlimit,
    Hello,
);

/// The schema of [`crate::frame::SpawnStep`] as its mirror writes it (feature `schema`).
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[schemars(rename = "SpawnStep", rename_all = "snake_case")]
#[allow(dead_code)]
pub(crate) enum SpawnStepSchema {
    Program,
    Cwd,
    User,
    Setup,
}

impl Serialize for crate::frame::SpawnStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        mirror::SpawnStep::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for crate::frame::SpawnStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        mirror::SpawnStep::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use crate::{ProcessWitness, RegistrationId, ScopeEnd, WorkloadStatus};

    /// The shapes `#[derive]` on the types themselves gave (the documents' contract).
    #[test]
    fn json_is_what_a_derive_on_the_type_gives() {
        let json = |v: serde_json::Value| v.to_string();
        let id = RegistrationId([1; 16]);
        assert_eq!(
            json(serde_json::to_value(id).unwrap()),
            format!("{:?}", [1; 16]).replace(' ', "")
        );
        assert_eq!(
            json(
                serde_json::to_value(ProcessWitness {
                    pid: 7,
                    start_time: 9
                })
                .unwrap()
            ),
            r#"{"pid":7,"start_time":9}"#
        );
        assert_eq!(
            json(serde_json::to_value(WorkloadStatus::Exited(3)).unwrap()),
            r#"{"exited":3}"#
        );
        assert_eq!(
            json(serde_json::to_value(WorkloadStatus::NeverStarted).unwrap()),
            r#""never_started""#
        );
        assert_eq!(
            json(serde_json::to_value(ScopeEnd::SpawnFailed).unwrap()),
            r#""spawn_failed""#
        );
        let back: WorkloadStatus = serde_json::from_str(r#"{"signaled":9}"#).unwrap();
        assert_eq!(back, WorkloadStatus::Signaled(9));
    }
}

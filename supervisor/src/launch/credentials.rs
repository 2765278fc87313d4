//! Who a workload runs as (SPEC X1): `run --user USER[:GROUP]` resolved to a uid, a gid and the
//! supplementary groups, which the guardian's gated child takes (`setgroups`, `setresgid`,
//! `setresuid`, every capability set emptied, all read back: X3) after *start*, just before
//! `execve`, in a session of its own (X2). The guardian, the proof file and `run/P` stay this
//! process's: a workload of another uid can neither write its evidence nor reach its guardian.
//!
//! # The rule
//! - `USER` is a name in `/etc/passwd` or a numeric uid; `GROUP` a name in `/etc/group` or a
//!   numeric gid. Both files are read directly (as runc does), not through NSS.
//! - The primary group is `GROUP` if given, else the user's group in `/etc/passwd`; a numeric
//!   uid without an entry must name its group (no silent root group, unlike `docker -u 1234`).
//! - Supplementary groups: the primary group plus every group of `/etc/group` that lists the
//!   user's name as a member (what `initgroups` gives a login), at most [`MAX_GROUPS`].
//! - Only a process with `CAP_SETUID` and `CAP_SETGID` (root, normally) may ask for it
//!   ([`require_privilege`]).
//! - Root (uid 0) and this process's own uid are refused ([`resolve`]): neither would keep the
//!   workload from its evidence, which is what `--user` promises (X3).
//! - The environment is left as the caller prepared it (like `setpriv`): `HOME`, `USER` and
//!   `LOGNAME` are not rewritten; pass `--env` for that.
//!
//! # Caveats
//! Users known only to NSS (LDAP, sssd) are not found by name; give their numeric `uid:gid`.

use std::io;
use std::path::{Path, PathBuf};

pub use refine_protocol::frame::MAX_GROUPS;

/// A resolved `--user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, the primary group first; no duplicates.
    pub groups: Vec<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("--user needs root (CAP_SETUID and CAP_SETGID); this process (uid {uid}) lacks them")]
    NotPrivileged { uid: u32 },
    #[error("--user {spec:?}: expected USER[:GROUP] (a name or a number each)")]
    Syntax { spec: String },
    #[error("--user {spec:?}: no user {name:?} in /etc/passwd")]
    UnknownUser { spec: String, name: String },
    #[error("--user {spec:?}: no group {name:?} in /etc/group")]
    UnknownGroup { spec: String, name: String },
    #[error("--user {spec:?}: uid {uid} has no entry in /etc/passwd, so it has no group: give one ({uid}:GID)")]
    NoGroup { spec: String, uid: u32 },
    #[error(
        "--user {spec:?}: {count} supplementary groups, more than the {max} a launch may carry"
    )]
    TooManyGroups {
        spec: String,
        count: usize,
        max: usize,
    },
    #[error(
        "--user {spec:?}: uid 0 is root, which keeps every privilege; name an unprivileged user"
    )]
    Root { spec: String },
    #[error(
        "--user {spec:?}: gid 0 is the root group, whose files it could write; name another group"
    )]
    RootGroup { spec: String },
    #[error("--user {spec:?}: uid {uid} is this supervisor's own, which can tamper with the evidence; name another user")]
    OwnUid { spec: String, uid: u32 },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Refuses unless this process may change its credentials: `CAP_SETUID` and `CAP_SETGID` in its
/// effective set (`/proc/self/status`), or, where that cannot be read, an effective uid of 0.
pub fn require_privilege() -> Result<(), CredentialsError> {
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    let effective = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        });
    let uid = rustix::process::geteuid().as_raw();
    let allowed = match effective {
        Some(caps) => caps & (1 << CAP_SETUID) != 0 && caps & (1 << CAP_SETGID) != 0,
        None => uid == 0,
    };
    if allowed {
        Ok(())
    } else {
        Err(CredentialsError::NotPrivileged { uid })
    }
}

/// Resolves `USER[:GROUP]` against `/etc/passwd` and `/etc/group`; refuses root and this
/// process's own uid.
pub fn resolve(spec: &str) -> Result<Credentials, CredentialsError> {
    let read = |p: &str| {
        std::fs::read_to_string(p).map_err(|source| CredentialsError::Read {
            path: Path::new(p).to_owned(),
            source,
        })
    };
    let c = resolve_in(spec, &read("/etc/passwd")?, &read("/etc/group")?)?;
    refuse_unprotected(spec, &c, rustix::process::geteuid().as_raw())?;
    Ok(c)
}

/// Refuses a target that `--user` could not protect the evidence from: root, the root group
/// (primary or supplementary), or `own_uid`.
pub(crate) fn refuse_unprotected(
    spec: &str,
    c: &Credentials,
    own_uid: u32,
) -> Result<(), CredentialsError> {
    if c.uid == 0 {
        return Err(CredentialsError::Root {
            spec: spec.to_owned(),
        });
    }
    if c.gid == 0 || c.groups.contains(&0) {
        return Err(CredentialsError::RootGroup {
            spec: spec.to_owned(),
        });
    }
    if c.uid == own_uid {
        return Err(CredentialsError::OwnUid {
            spec: spec.to_owned(),
            uid: own_uid,
        });
    }
    Ok(())
}

/// [`resolve`] against the given file contents.
pub(crate) fn resolve_in(
    spec: &str,
    passwd: &str,
    group: &str,
) -> Result<Credentials, CredentialsError> {
    let syntax = || CredentialsError::Syntax {
        spec: spec.to_owned(),
    };
    let (user, group_part) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() || group_part.is_some_and(|g| g.is_empty() || g.contains(':')) {
        return Err(syntax());
    }
    let users = entries(passwd, 4);
    let entry = match numeric(user) {
        Some(Ok(uid)) => users.iter().find(|f| f[2] == uid.to_string()),
        Some(Err(())) => return Err(syntax()),
        None => users.iter().find(|f| f[0] == user),
    };
    let (uid, name, passwd_gid) = match (entry, numeric(user)) {
        (Some(f), _) => (
            id_field(f[2]).ok_or_else(syntax)?,
            Some(f[0]),
            id_field(f[3]),
        ),
        (None, Some(Ok(uid))) => (uid, None, None),
        (None, _) => {
            return Err(CredentialsError::UnknownUser {
                spec: spec.to_owned(),
                name: user.to_owned(),
            })
        }
    };
    let groups_db = entries(group, 3);
    let gid = match group_part {
        Some(g) => match numeric(g) {
            Some(Ok(gid)) => gid,
            Some(Err(())) => return Err(syntax()),
            None => groups_db
                .iter()
                .find(|f| f[0] == g)
                .and_then(|f| id_field(f[2]))
                .ok_or_else(|| CredentialsError::UnknownGroup {
                    spec: spec.to_owned(),
                    name: g.to_owned(),
                })?,
        },
        None => passwd_gid.ok_or(CredentialsError::NoGroup {
            spec: spec.to_owned(),
            uid,
        })?,
    };
    let mut groups = vec![gid];
    if let Some(name) = name {
        for f in &groups_db {
            let member = f.get(3).is_some_and(|m| m.split(',').any(|m| m == name));
            if let (true, Some(g)) = (member, id_field(f[2])) {
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
        }
    }
    if groups.len() > MAX_GROUPS {
        return Err(CredentialsError::TooManyGroups {
            spec: spec.to_owned(),
            count: groups.len(),
            max: MAX_GROUPS,
        });
    }
    Ok(Credentials { uid, gid, groups })
}

/// The `:`-separated fields of every entry with at least `min` fields (comments, blank lines
/// and NIS `+`/`-` lines skipped).
fn entries(text: &str, min: usize) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('+') && !l.starts_with('-'))
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= min)
        .collect()
}

/// `None`: not a number (a name); `Some(Err)`: a number that is no valid id.
fn numeric(s: &str) -> Option<Result<u32, ()>> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(id_field(s).ok_or(()))
}

/// An id: decimal, below `u32::MAX` (which the kernel reads as "unchanged").
fn id_field(s: &str) -> Option<u32> {
    s.parse::<u32>().ok().filter(|&id| id != u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          # comment\n\
                          alice:x:1000:1000::/home/alice:/bin/sh\n\
                          nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
    const GROUP: &str = "root:x:0:\nwheel:x:10:alice,bob\nalice:x:1000:\n\
                         docker:x:999:bob,alice\nnogroup:x:65534:\n";

    fn r(spec: &str) -> Result<Credentials, CredentialsError> {
        resolve_in(spec, PASSWD, GROUP)
    }

    #[test]
    fn names_numbers_and_groups() {
        let alice = Credentials {
            uid: 1000,
            gid: 1000,
            groups: vec![1000, 10, 999],
        };
        assert_eq!(r("alice").unwrap(), alice);
        assert_eq!(r("1000").unwrap(), alice);
        let g = r("alice:wheel").unwrap();
        assert_eq!((g.gid, g.groups), (10, vec![10, 999]));
        assert_eq!(r("nobody:0").unwrap().groups, vec![0]);
        assert_eq!(r("4242:77").unwrap().groups, vec![77]);
    }

    #[test]
    fn bad_specs_are_typed() {
        assert!(matches!(
            r("mallory"),
            Err(CredentialsError::UnknownUser { .. })
        ));
        assert!(matches!(
            r("alice:nope"),
            Err(CredentialsError::UnknownGroup { .. })
        ));
        assert!(matches!(
            r("4242"),
            Err(CredentialsError::NoGroup { uid: 4242, .. })
        ));
        for bad in [
            "",
            ":0",
            "alice:",
            "a:b:c",
            "4294967295",
            "alice:4294967295",
        ] {
            assert!(
                matches!(r(bad), Err(CredentialsError::Syntax { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn root_and_the_own_uid_are_refused() {
        let root = r("root").unwrap();
        assert!(matches!(
            refuse_unprotected("root", &root, 1000),
            Err(CredentialsError::Root { .. })
        ));
        let alice = r("alice").unwrap();
        assert!(matches!(
            refuse_unprotected("alice", &alice, 1000),
            Err(CredentialsError::OwnUid { uid: 1000, .. })
        ));
        assert!(refuse_unprotected("alice", &alice, 0).is_ok());
    }

    /// The root group (gid 0) owns what root's files let their group write: as the primary
    /// group (`nobody:root`, `nobody:0`) or through `/etc/group`, it is refused like uid 0.
    #[test]
    fn the_root_group_is_refused_primary_or_supplementary() {
        for spec in ["nobody:0", "nobody:root", "alice:root"] {
            let c = r(spec).unwrap();
            assert!(
                matches!(
                    refuse_unprotected(spec, &c, 0),
                    Err(CredentialsError::RootGroup { .. })
                ),
                "{spec}: {c:?}"
            );
        }
        let member = resolve_in(
            "carol",
            "carol:x:1002:1002::/home/carol:/bin/sh\n",
            "root:x:0:carol\ncarol:x:1002:\n",
        )
        .unwrap();
        assert!(matches!(
            refuse_unprotected("carol", &member, 0),
            Err(CredentialsError::RootGroup { .. })
        ));
    }

    #[test]
    fn too_many_groups_are_refused() {
        let mut group = String::new();
        for g in 0..=MAX_GROUPS {
            group.push_str(&format!("g{g}:x:{}:alice\n", 2000 + g));
        }
        assert!(matches!(
            resolve_in("alice", PASSWD, &group),
            Err(CredentialsError::TooManyGroups { .. })
        ));
    }
}

//! X11: the Landlock domain every workload starts in, by default, where the kernel has one.
//!
//! Landlock only allows: once a right is handled, it is denied except beneath the paths a rule
//! grants it on. To take away writes, truncation, renames, links and removals under the home's
//! `run/` (and reads of scopes' output in `run/P/logs/`) and leave the rest of the file system
//! as it was, the ruleset emulates a deny-list:
//!
//! - for every directory on the way from `/` down to `run/` (`/`, ..., the home), each entry
//!   other than the one leading to `run/` gets a rule with every handled right (a directory) or
//!   the file rights (a file with one name); the ancestors themselves get none, nor do links
//!   (a symbolic link, a file with other names: their rights would reach `run/`);
//! - inside `run/`, every entry but the ports' `logs/` is readable (records, proofs, locks,
//!   the service's log): nothing there is writable.
//!
//! The cost (documented in supervisor/README.md's threat model): a protected workload cannot
//! create, remove or rename entries directly in an ancestor of `run/` (it can write the files
//! that were there at its launch), and entries made there after its launch are out of its
//! reach. Where an ancestor is a shared temporary directory (world-writable and sticky: `/tmp`,
//! `/var/tmp`, `/dev/shm`), that would break `mktemp`: the file-system part is left out and the
//! record says why; the scoping still holds.
//!
//! Handled: every file-system right of ABI 3 but `EXECUTE` and `READ_DIR` (listing stays as it
//! was), never `IOCTL_DEV`; with ABI 6 the signal and abstract-socket scopes (`--ready notify`
//! keeps abstract sockets unscoped: the workload must reach the launcher's notify socket).

use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path};

use refine_protocol::record::{ProtectAsk, ProtectPart, Protection};

use rustix::fs::{self as rfs, FileType, Mode, OFlags};

use crate::kernel::landlock::{self, fs as lfs, scope, Handled, Ruleset};

/// The file-system rights the X11 domain handles.
pub const HANDLED_FS: u64 = lfs::WRITE_FILE
    | lfs::READ_FILE
    | lfs::REMOVE_DIR
    | lfs::REMOVE_FILE
    | lfs::MAKE_CHAR
    | lfs::MAKE_DIR
    | lfs::MAKE_REG
    | lfs::MAKE_SOCK
    | lfs::MAKE_FIFO
    | lfs::MAKE_BLOCK
    | lfs::MAKE_SYM
    | lfs::REFER
    | lfs::TRUNCATE;

/// The nested runs' homes (`HOME/nested/`): a sibling of `run/`, so writable from the domain.
pub const NESTED_DIR: &str = "nested";

/// A launch's protection: the ruleset for its guardian and what the record says.
#[derive(Debug)]
pub struct Built {
    pub ruleset: Option<OwnedFd>,
    pub no_new_privs: bool,
    pub record: Protection,
}

/// Builds the domain for a launch under `home` (its `run/` is `home/run`) as `ask` says.
/// `ready_notify`: the workload notifies through an abstract socket made outside the domain.
/// `sandbox`: X12's sandbox, checked ([`crate::launch::sandbox::plan`]): its rules join the
/// same ruleset (the entries beside the way to `run/` then get read rights only).
pub fn build(
    ask: ProtectAsk,
    home: &Path,
    ready_notify: bool,
    sandbox: Option<&crate::launch::sandbox::Plan>,
) -> io::Result<Built> {
    let abi = landlock::abi().unwrap_or(0);
    let want_fs = matches!(ask, ProtectAsk::All | ProtectAsk::Fs);
    let want_scopes = matches!(ask, ProtectAsk::All | ProtectAsk::Signals);
    let home = fs::canonicalize(home)?;
    let run = home.join("run");
    let fs_part = match () {
        _ if !want_fs => ProtectPart::OptedOut,
        _ if abi < 3 => ProtectPart::Unavailable,
        _ if under_shared_tmp(&run) => ProtectPart::SharedTmp,
        _ => ProtectPart::Held,
    };
    let scope_part = match () {
        _ if !want_scopes => ProtectPart::OptedOut,
        _ if abi < 6 => ProtectPart::Unavailable,
        _ => ProtectPart::Held,
    };
    let abstract_part = match scope_part {
        ProtectPart::Held if ready_notify => ProtectPart::ReadyNotify,
        p => p,
    };
    // The file-system rules are gathered before the ruleset exists: a folder on the way that
    // cannot be listed leaves the part out (recorded), never a launch refused or half a rule set.
    let sandbox_fs = sandbox.is_some_and(|p| p.fs());
    let beside = if sandbox_fs {
        lfs::READ_FILE
    } else {
        HANDLED_FS
    };
    let (fs_part, mut rules) = match fs_part {
        ProtectPart::Held => match gather(&home, &run, beside) {
            Ok(rules) => (ProtectPart::Held, rules),
            Err(_) => (ProtectPart::Unlistable, Vec::new()),
        },
        p => (p, Vec::new()),
    };
    // X12: reads everywhere (but what X11 keeps out of reach), writes beneath the roots.
    if let Some(plan) = sandbox.filter(|p| p.fs()) {
        if fs_part != ProtectPart::Held {
            grant(&mut rules, Path::new("/"), lfs::READ_FILE, lfs::READ_FILE);
        }
        for root in plan.write_roots() {
            if run.starts_with(root) {
                beside_the_way(&mut rules, root, &run, HANDLED_FS, HANDLED_FS & lfs::FILE)?;
            } else {
                grant(&mut rules, root, HANDLED_FS, HANDLED_FS & lfs::FILE);
            }
        }
        let device = lfs::READ_FILE | lfs::WRITE_FILE | lfs::TRUNCATE;
        for dev in crate::launch::sandbox::DEVICES {
            grant_device(&mut rules, Path::new(dev), device);
        }
    }
    let network_none =
        sandbox.is_some_and(|p| p.network == refine_protocol::record::NetworkAsk::None);
    let mut record = Protection {
        asked: ask,
        abi,
        fs: fs_part,
        signals: scope_part,
        abstract_sockets: abstract_part,
        no_new_privs: false,
        rules: 0,
    };
    let handled = Handled {
        fs: if fs_part == ProtectPart::Held || sandbox_fs {
            HANDLED_FS
        } else {
            0
        },
        net: if network_none {
            landlock::net::BIND_TCP | landlock::net::CONNECT_TCP
        } else {
            0
        },
        scoped: if scope_part == ProtectPart::Held {
            scope::SIGNAL
        } else {
            0
        } | if abstract_part == ProtectPart::Held {
            scope::ABSTRACT_UNIX_SOCKET
        } else {
            0
        },
    };
    if handled == Handled::default() {
        return Ok(Built {
            ruleset: None,
            no_new_privs: false,
            record,
        });
    }
    let mut rs = Ruleset::new(abi, handled)?;
    for (fd, access) in &rules {
        rs.allow_beneath(fd.as_fd(), *access)?;
    }
    record.rules = rs.rules();
    // Item 4: Landlock without CAP_SYS_ADMIN needs no_new_privs; root keeps setuid programs.
    record.no_new_privs = !rustix::process::geteuid().is_root();
    Ok(Built {
        ruleset: Some(rs.into_fd()),
        no_new_privs: record.no_new_privs,
        record,
    })
}

/// The rules of the file-system part: `O_PATH` descriptors and the rights each gets.
fn gather(home: &Path, run: &Path, beside: u64) -> io::Result<Vec<(OwnedFd, u64)>> {
    // The nested runs' homes exist before the home is listed, so that they are writable.
    let nested = home.join(NESTED_DIR);
    if let Err(e) = fs::create_dir(&nested) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(e);
        }
    }
    let mut rules = Vec::new();
    deny_beneath(&mut rules, run, beside)?;
    Ok(rules)
}

/// `REFINE_HOME=HOME/nested/ID` for a workload whose domain holds the file-system part, unless
/// its environment names another home: a nested `refine-supervisor run` could not write this
/// home's `run/`, and keeps its own evidence there instead (made by the nested run; protected
/// from its own workload by its own domain, stacked on this one).
pub fn nested_home(
    record: &Protection,
    env: &crate::launch::env_policy::EnvMap,
    home: &Path,
    id: refine_protocol::RegistrationId,
) -> Option<std::ffi::OsString> {
    if record.fs != ProtectPart::Held {
        return None;
    }
    let own = fs::canonicalize(home).ok()?;
    let named = env
        .iter()
        .find(|(k, _)| k.as_os_str() == "REFINE_HOME")
        .map(|(_, v)| v.clone());
    // The same folder by its identity (device, inode), not by its text.
    let identity = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    if let Some(v) = named {
        match identity(Path::new(&v)) {
            Some(named) if Some(named) == identity(&own) => {}
            _ => return None,
        }
    }
    let mut entry = std::ffi::OsString::from("REFINE_HOME=");
    entry.push(own.join(NESTED_DIR).join(id.to_string()));
    Some(entry)
}

/// Whether a directory on the way to `path` is world-writable and sticky.
fn under_shared_tmp(path: &Path) -> bool {
    path.ancestors()
        .skip(1)
        .any(|a| fs::metadata(a).is_ok_and(|m| m.is_dir() && m.mode() & 0o1002 == 0o1002))
}

/// `O_PATH` of `path` itself (never followed), and whether it may carry a rule: a directory,
/// or a file with no other name. A symbolic link would carry the rights to its target (which
/// can be `run/`), a hard link to every other name of its inode (an artifact's): neither gets
/// a rule, and what they lead to keeps the rules of its own way.
fn open_path(path: &Path) -> io::Result<Option<(OwnedFd, bool)>> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let m = f.metadata()?;
    let ruled = m.is_dir() || (m.is_file() && m.nlink() == 1);
    Ok(ruled.then(|| (f.into(), m.is_dir())))
}

/// `beside` rights (all of them, or X12's reads) beside the way down to `run`, read rights
/// inside it but the ports' `logs/`.
fn deny_beneath(rs: &mut Vec<(OwnedFd, u64)>, run: &Path, beside: u64) -> io::Result<()> {
    beside_the_way(rs, Path::new("/"), run, beside, beside & lfs::FILE)?;
    // `run/` itself: what is there at the launch is readable, nothing writable.
    let Ok(mut ports) = Listing::open(run) else {
        return Ok(());
    };
    for (name, kind) in ports.entries()? {
        if kind != FileType::Directory {
            ports.grant(rs, &name, kind, lfs::READ_FILE, lfs::READ_FILE);
            continue;
        }
        let mut port = Listing::open_in(&ports, &name)?;
        for (inner, kind) in port.entries()? {
            if inner.as_bytes() == b"logs" {
                continue;
            }
            port.grant(rs, &inner, kind, lfs::READ_FILE, lfs::READ_FILE);
        }
    }
    Ok(())
}

/// A rule with `dir` (`file`) rights on every entry beside the way from `from` down to `to`
/// (`from` an ancestor of `to`); the directories on the way get none.
fn beside_the_way(
    rs: &mut Vec<(OwnedFd, u64)>,
    from: &Path,
    to: &Path,
    dir: u64,
    file: u64,
) -> io::Result<()> {
    let rest = to.strip_prefix(from).unwrap_or(to);
    let mut at = Listing::open(from)?;
    for part in rest.components() {
        let Component::Normal(next) = part else {
            continue;
        };
        for (name, kind) in at.entries()? {
            if name.as_bytes() == next.as_bytes() {
                continue;
            }
            at.grant(rs, &name, kind, dir, file);
        }
        at = Listing::open_in(&at, &CString::new(next.as_bytes())?)?;
    }
    Ok(())
}

/// A directory being listed for rules: its entries are opened relative to its descriptor (no
/// walk from `/` for each), and the type the listing gives spares a `stat` where it settles the
/// question (a link or a special file never gets a rule, a directory is opened as one).
struct Listing(rfs::Dir);

impl Listing {
    fn open(dir: &Path) -> io::Result<Listing> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(Listing(rfs::Dir::new(rfs::open(
            dir,
            flags,
            Mode::empty(),
        )?)?))
    }

    /// The folder `name` of `parent`, the way [`fs::read_dir`] follows it.
    fn open_in(parent: &Listing, name: &CStr) -> io::Result<Listing> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rfs::openat(parent.0.fd()?, name, flags, Mode::empty())?;
        Ok(Listing(rfs::Dir::new(fd)?))
    }

    /// The entries but `.` and `..`, with their type (read once).
    fn entries(&mut self) -> io::Result<Vec<(CString, FileType)>> {
        let mut out = Vec::new();
        while let Some(entry) = self.0.read() {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                // A file system that does not say (as `fs::DirEntry::file_type` does): ask it.
                let at = self.0.fd()?;
                kind = match rfs::statat(at, name, rfs::AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                };
            }
            out.push((name.to_owned(), kind));
        }
        Ok(out)
    }

    /// [`grant`] of the entry `name` (listed as `kind`): `O_PATH` of the entry itself, never
    /// followed. A directory gets `dir` rights, a file with one name `file` rights; a link, a
    /// file with other names and a special file none. An entry that went away or cannot be
    /// opened gets none, and one that changed its type since the listing is judged by what it
    /// is when opened.
    fn grant(
        &self,
        rs: &mut Vec<(OwnedFd, u64)>,
        name: &CStr,
        kind: FileType,
        dir: u64,
        file: u64,
    ) {
        let path = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(at) = self.0.fd() else { return };
        match kind {
            FileType::Symlink
            | FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice => {}
            FileType::Directory => {
                if let Ok(fd) = rfs::openat(at, name, path | OFlags::DIRECTORY, Mode::empty()) {
                    rs.push((fd, dir));
                }
            }
            _ => {
                let Ok(fd) = rfs::openat(at, name, path, Mode::empty()) else {
                    return;
                };
                let Ok(st) = rfs::fstat(&fd) else { return };
                match FileType::from_raw_mode(st.st_mode) {
                    FileType::Directory => rs.push((fd, dir)),
                    FileType::RegularFile if st.st_nlink == 1 => rs.push((fd, file)),
                    _ => {}
                }
            }
        }
    }
}

/// X12: `access` on a device node or a directory of them (`/dev/pts`); a missing one gets none.
fn grant_device(rs: &mut Vec<(OwnedFd, u64)>, path: &Path, access: u64) {
    let Ok(f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    else {
        return;
    };
    let Ok(m) = f.metadata() else { return };
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_char_device() || t.is_dir() {
        rs.push((f.into(), access));
    }
}

/// One rule on `path`: `dir` rights on a directory, `file` rights on a file. An entry that went
/// away or cannot be opened (no permission), and one [`open_path`] gives no rule, gets none.
fn grant(rs: &mut Vec<(OwnedFd, u64)>, path: &Path, dir: u64, file: u64) {
    if let Ok(Some((fd, is_dir))) = open_path(path) {
        rs.push((fd, if is_dir { dir } else { file }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Which entries beside the way get a rule, and which rights: a folder its folder rights, a
    /// file with one name its file rights, nothing for a link, a many-named file or a FIFO.
    #[test]
    fn the_rules_beside_the_way_go_to_folders_and_single_named_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let a = root.join("a");
        let run = a.join("run");
        fs::create_dir_all(&run).unwrap();
        fs::create_dir(root.join("x")).unwrap();
        fs::create_dir(a.join("d")).unwrap();
        fs::write(a.join("f"), b"").unwrap();
        fs::write(a.join("g"), b"").unwrap();
        fs::hard_link(a.join("g"), a.join("g2")).unwrap();
        std::os::unix::fs::symlink(&run, a.join("l")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            a.join("p"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let mut rules = Vec::new();
        beside_the_way(&mut rules, &root, &run, 1, 2).unwrap();
        let identity = |p: &Path| {
            let m = fs::symlink_metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let mut got: Vec<((u64, u64), u64)> = rules
            .iter()
            .map(|(fd, rights)| {
                let st = rustix::fs::fstat(fd).unwrap();
                ((st.st_dev, st.st_ino), *rights)
            })
            .collect();
        got.sort();
        let mut want = vec![
            (identity(&root.join("x")), 1),
            (identity(&a.join("d")), 1),
            (identity(&a.join("f")), 2),
        ];
        want.sort();
        assert_eq!(got, want);
    }
}

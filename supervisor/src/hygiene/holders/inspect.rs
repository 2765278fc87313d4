//! The one inspection walk of a process's `/proc` entries ([`walk`]) and its two matching
//! rules: path text in the caller's mount namespace ([`ByPath`]), file identity in any other
//! ([`ByIdentity`]); the module docs of [`super`] say why.

use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::process::Pid;

use super::{Ident, Target, Via, DELETED};
use crate::kernel::procfs;

/// `..` is followed at most this many times from a process's folder (a deeper tree is not
/// matched by identity).
const MAX_WALK: usize = 256;
/// `maps` is read at most this far per process.
const MAPS_MAX: u64 = 8 << 20;

/// What one process's files say.
pub(super) enum Inspected {
    Holds { via: Via, path: Vec<u8> },
    Clear,
    Gone,
    Unreadable,
}

pub(super) fn proc_file(pid: Pid, leaf: &str) -> PathBuf {
    procfs::proc_path(pid, leaf)
}

/// The caller's mount and pid namespaces (the identities of `/proc/self/ns/{mnt,pid}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Namespaces {
    pub(super) mnt: Option<Ident>,
    pub(super) pid: Option<Ident>,
}

impl Namespaces {
    pub(super) fn of_self() -> Namespaces {
        Namespaces {
            mnt: ns_ident(Path::new("/proc/self/ns/mnt")).ok(),
            pid: ns_ident(Path::new("/proc/self/ns/pid")).ok(),
        }
    }
}

/// The identity of a namespace link (`stat` follows it to the namespace's inode).
pub(super) fn ns_ident(link: &Path) -> io::Result<Ident> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(link).map(|m| (m.dev(), m.ino()))
}

/// Reads cwd, root, fd/ and maps of `pid` against the target, in that order (cheapest first),
/// up to the first hit: by path text in the caller's mount namespace, by file identity in any
/// other (see the module docs).
pub(super) fn inspect(
    pid: Pid,
    target: &Target,
    ours: Namespaces,
    maps: &mut Vec<u8>,
) -> Inspected {
    match ns_ident(&proc_file(pid, "ns/mnt")) {
        Ok(mnt) if Some(mnt) == ours.mnt => walk(pid, &ByPath(target), maps),
        Ok(_) => match target.ident {
            Some(target) => {
                let root = proc_file(pid, "root");
                walk(pid, &ByIdentity { target, root }, maps)
            }
            None => Inspected::Clear,
        },
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Inspected::Unreadable,
        Err(e) if gone(&e) && !proc_file(pid, "").exists() => Inspected::Gone,
        // No namespace links (a kernel without them): one mount namespace.
        Err(_) if ours.mnt.is_none() => walk(pid, &ByPath(target), maps),
        Err(_) => Inspected::Clear,
    }
}

/// One matching rule of [`walk`]: how what a process names is held against the target.
trait Matcher {
    /// Whether the directory link `link` (`/proc/PID/cwd`, `/proc/PID/root`) lies under the
    /// target: the path the process reports for it, when it does.
    fn dir(&self, link: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Whether the open file `link` (an entry of `/proc/PID/fd/`) is the target or lies under it.
    fn open_file(&self, link: &Path) -> Option<Vec<u8>>;
    /// The path of the first mapping of `maps` (`/proc/PID/maps`) that lies under the target.
    fn mapping(&self, maps: &[u8]) -> Option<Vec<u8>>;
}

/// The rule for a process of the caller's mount namespace: path text.
struct ByPath<'a>(&'a Target);

impl Matcher for ByPath<'_> {
    fn dir(&self, link: &Path) -> io::Result<Option<Vec<u8>>> {
        let p = fs::read_link(link)?;
        Ok(self
            .0
            .contains(p.as_os_str().as_bytes())
            .then(|| p.into_os_string().into_vec()))
    }

    fn open_file(&self, link: &Path) -> Option<Vec<u8>> {
        let p = fs::read_link(link).ok()?;
        let bytes = p.as_os_str().as_bytes();
        (bytes.first() == Some(&b'/') && self.0.contains(bytes))
            .then(|| p.into_os_string().into_vec())
    }

    fn mapping(&self, maps: &[u8]) -> Option<Vec<u8>> {
        maps.split(|&b| b == b'\n').find_map(|line| {
            // The path is the last column and the only one that contains '/'.
            let at = line.iter().position(|&b| b == b'/')?;
            self.0.contains(&line[at..]).then(|| line[at..].to_vec())
        })
    }
}

/// The rule for a process of another mount namespace: file identity only, its names looked up
/// through its own `root`.
struct ByIdentity {
    target: Ident,
    root: PathBuf,
}

/// The path a process reports for a link (empty when unreadable).
fn reported(link: &Path) -> Vec<u8> {
    fs::read_link(link)
        .map(|p| p.into_os_string().into_vec())
        .unwrap_or_default()
}

impl Matcher for ByIdentity {
    fn dir(&self, link: &Path) -> io::Result<Option<Vec<u8>>> {
        let held = open_dir(link).map(|dir| walk_finds(dir, self.target))?;
        Ok(held.then(|| reported(link)))
    }

    fn open_file(&self, link: &Path) -> Option<Vec<u8>> {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(link).ok()?;
        let held = if meta.is_dir() {
            open_dir(link).is_ok_and(|d| walk_finds(d, self.target))
        } else {
            let text = reported(link);
            file_under(&self.root, &text, (meta.dev(), meta.ino()), self.target)
        };
        held.then(|| reported(link))
    }

    fn mapping(&self, maps: &[u8]) -> Option<Vec<u8>> {
        let mut seen = std::collections::HashSet::new();
        maps.split(|&b| b == b'\n').find_map(|line| {
            let (ident, path) = maps_entry(line)?;
            (seen.insert(ident) && file_under(&self.root, path, ident, self.target))
                .then(|| path.to_vec())
        })
    }
}

/// The one walk of a process's `/proc` entries: `cwd` and `root`, every entry of `fd/`, then
/// `maps` (cheapest first), up to the first that `rule` finds under the target.
fn walk(pid: Pid, rule: &impl Matcher, maps: &mut Vec<u8>) -> Inspected {
    let mut denied = false;
    for (leaf, via) in [("cwd", Via::Cwd), ("root", Via::Root)] {
        match rule.dir(&proc_file(pid, leaf)) {
            Ok(Some(path)) => return Inspected::Holds { via, path },
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => denied = true,
            Err(e) if gone(&e) && leaf == "cwd" && !proc_file(pid, "").exists() => {
                return Inspected::Gone
            }
            Err(_) => {}
        }
    }
    match fs::read_dir(proc_file(pid, "fd")) {
        Ok(entries) => {
            let held = entries
                .filter_map(|e| e.ok())
                .find_map(|entry| rule.open_file(&entry.path()));
            if let Some(path) = held {
                return Inspected::Holds {
                    via: Via::OpenFile,
                    path,
                };
            }
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => denied = true,
        Err(_) => {}
    }
    maps.clear();
    match fs::File::open(proc_file(pid, "maps")).and_then(|f| f.take(MAPS_MAX).read_to_end(maps)) {
        Ok(_) => {
            if let Some(path) = rule.mapping(maps) {
                return Inspected::Holds {
                    via: Via::MappedFile,
                    path,
                };
            }
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => denied = true,
        Err(_) => {}
    }
    if denied {
        Inspected::Unreadable
    } else {
        Inspected::Clear
    }
}

/// The (device, inode) and path of a `maps` line naming a file (`addr perms offset MAJ:MIN
/// INODE PATH`); `None` for anonymous and special mappings.
pub(super) fn maps_entry(line: &[u8]) -> Option<(Ident, &[u8])> {
    let at = line.iter().position(|&b| b == b'/')?;
    let mut cols = line[..at]
        .split(|&b| b == b' ')
        .filter(|c| !c.is_empty())
        .skip(3);
    let dev = std::str::from_utf8(cols.next()?).ok()?;
    let ino: u64 = std::str::from_utf8(cols.next()?).ok()?.parse().ok()?;
    let (major, minor) = dev.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    (ino != 0).then_some(((libc::makedev(major, minor), ino), &line[at..]))
}

/// Whether the file `ident`, which its process names `text` (a path of its own mount
/// namespace), is the target or lies under it: the name is looked up through the process's
/// root (`/proc/PID/root`), must still be that very file, and its folder is walked up.
fn file_under(root: &Path, text: &[u8], ident: Ident, target: Ident) -> bool {
    use std::os::unix::fs::MetadataExt;
    if ident == target {
        return true;
    }
    let Some(rel) = text.strip_prefix(b"/") else {
        return false;
    };
    if rel.ends_with(DELETED) {
        return false;
    }
    let named = root.join(std::ffi::OsStr::from_bytes(rel));
    let same = fs::symlink_metadata(&named).is_ok_and(|m| (m.dev(), m.ino()) == ident);
    same && named
        .parent()
        .is_some_and(|dir| open_dir(dir).is_ok_and(|d| walk_finds(d, target)))
}

/// `open(path, O_PATH | O_DIRECTORY)`, following the last link (`/proc/PID/cwd`).
pub(super) fn open_dir(path: &Path) -> io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// Whether `dir` or one of its ancestors, followed through `..` in the mount tree `dir` belongs
/// to, is the folder `target` (same device and inode).
pub(super) fn walk_finds(mut dir: rustix::fd::OwnedFd, target: Ident) -> bool {
    use rustix::fs::{Mode, OFlags};
    let ident =
        |fd: &rustix::fd::OwnedFd| rustix::fs::fstat(fd).ok().map(|st| (st.st_dev, st.st_ino));
    let Some(mut here) = ident(&dir) else {
        return false;
    };
    for _ in 0..MAX_WALK {
        if here == target {
            return true;
        }
        let Ok(up) = rustix::fs::openat(
            &dir,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        let Some(there) = ident(&up) else {
            return false;
        };
        if there == here {
            return false; // the root of its tree
        }
        (dir, here) = (up, there);
    }
    false
}

pub(super) fn gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

//! The home's checks (sshd's StrictModes for the home, `run/` and the folders above them; a
//! private `run/P`), and the home derived from the running executable.

use super::*;

/// `home` made absolute against the current directory (lexically, as the caller wrote it), so
/// that every path recorded under it reads the same from any directory (X4).
pub(super) fn absolute_home(home: &Path) -> Result<PathBuf, RegistryError> {
    std::path::absolute(home).map_err(io_err("resolve", home))
}

/// The home must be a folder, and it and every folder above it (as written, and as resolved
/// through symbolic links) must pass [`check_strict`]: nobody but this user and root could
/// rename or replace anything on the way to `run/` (X4).
pub fn check_home(home: &Path) -> Result<(), RegistryError> {
    if !home.is_dir() {
        return Err(RegistryError::MissingHome(home.to_owned()));
    }
    check_chain(home, home)
}

/// Makes a missing home (and the folders above it), 0700 whatever the umask, after
/// [`check_new_home`]: `Ok(true)` when it was made, `Ok(false)` when it existed. The CLI's `run`
/// and `serve` and [`crate::Supervisor::open`] create a home through it; nothing else does (D7).
pub fn create_home(home: &Path) -> Result<bool, RegistryError> {
    let home = &absolute_home(home)?;
    if home.is_dir() {
        return Ok(false);
    }
    check_new_home(home)?;
    durable::create_private_dirs(home).map_err(|source| RegistryError::CreateHome {
        path: home.to_owned(),
        source,
    })?;
    Ok(true)
}

/// [`check_home`] for a home about to be created: its deepest existing ancestor and every
/// folder above that must pass [`check_strict`] before any folder of the home is made, so a
/// refused home leaves nothing behind (X4). `home` must be absolute.
pub fn check_new_home(home: &Path) -> Result<(), RegistryError> {
    let existing = home
        .ancestors()
        .find(|p| p.symlink_metadata().is_ok())
        .unwrap_or(Path::new("/"));
    if !existing.is_dir() {
        // Nothing can be made under a file: the creation fails and says so.
        return Ok(());
    }
    check_chain(home, existing)
}

/// `from` and every folder above it, as written and as resolved, pass [`check_strict`].
pub(super) fn check_chain(home: &Path, from: &Path) -> Result<(), RegistryError> {
    check_chain_trusting(home, from, None)
}

/// [`check_chain`], trusting the owner `also` too.
pub(super) fn check_chain_trusting(
    home: &Path,
    from: &Path,
    also: Option<u32>,
) -> Result<(), RegistryError> {
    let real = fs::canonicalize(from).map_err(io_err("resolve", from))?;
    for chain in [from, real.as_path()] {
        for p in chain.ancestors() {
            check_strict_trusting(home, p, also)?;
        }
    }
    Ok(())
}

/// sshd's StrictModes for one entry on the way to `run/P`: owned by this process's effective
/// uid or by root, and (unless it is a symbolic link, whose mode means nothing, or a sticky
/// folder such as `/tmp`) writable by neither group nor others.
pub(super) fn check_strict(home: &Path, path: &Path) -> Result<(), RegistryError> {
    check_strict_trusting(home, path, None)
}

/// For root only: the owner of `home`, when it is another user (see [`Runtime::open_existing`]).
pub(super) fn root_also_trusts(home: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let owner = home.metadata().ok()?.uid();
    (me == 0 && owner != 0).then_some(owner)
}

/// [`check_strict`], trusting the owner `also` too.
pub(super) fn check_strict_trusting(
    home: &Path,
    path: &Path,
    also: Option<u32>,
) -> Result<(), RegistryError> {
    let meta = path.symlink_metadata().map_err(io_err("inspect", path))?;
    let meta_owner = {
        use std::os::unix::fs::MetadataExt;
        meta.uid()
    };
    if also == Some(meta_owner) {
        // Trusted as its owner: the mode must still keep everyone else out.
        return match untrusted_mode(&meta, true) {
            None => Ok(()),
            Some(why) => Err(RegistryError::UnsafePath {
                home: home.to_owned(),
                path: path.to_owned(),
                why,
            }),
        };
    }
    match untrusted_because(&meta, true) {
        None => Ok(()),
        Some(why) => Err(RegistryError::UnsafePath {
            home: home.to_owned(),
            path: path.to_owned(),
            why,
        }),
    }
}

/// Why another user could replace the entry `meta` describes (a folder, or with `folder`
/// false a regular file), or `None` when only this user and root could.
pub(super) fn untrusted_because(meta: &fs::Metadata, folder: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        Some(format!(
            "owned by uid {}, neither this user (uid {me}) nor root",
            meta.uid()
        ))
    } else {
        untrusted_mode(meta, folder)
    }
}

/// [`untrusted_because`] without the owner: why the entry's type or mode lets another user
/// replace it.
pub(super) fn untrusted_mode(meta: &fs::Metadata, folder: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o7777;
    if meta.file_type().is_symlink() {
        None
    } else if folder && !meta.is_dir() {
        Some("not a folder".to_owned())
    } else if !folder && !meta.is_file() {
        Some("not a regular file".to_owned())
    } else if mode & 0o022 != 0 && (!folder || mode & 0o1000 == 0) {
        Some(format!("writable by group or others (mode {mode:04o})"))
    } else {
        None
    }
}

/// X4 for the guardian: the executable itself (resolved) and every folder above it, as written
/// and as resolved, owned by this user or root and writable by no one else, so no other user
/// could swap the program that writes the evidence.
///
/// A process checks a path once per identity of the file it names (device, inode, mode,
/// owner, change and modification times): a later launch through the same path costs one
/// `stat` while that identity stands, and a different file (a rebuilt or replaced program)
/// is checked whole again. What the whole check established can only be undone by this user
/// or root (every folder on the way is theirs and writable by no one else), who are trusted
/// anyway.
pub fn check_trusted_executable(exe: &Path) -> Result<(), RegistryError> {
    static TRUSTED: std::sync::Mutex<Vec<(PathBuf, FileIdentity)>> =
        std::sync::Mutex::new(Vec::new());
    /// Paths remembered (a process uses one guardian, a test a few).
    const REMEMBERED: usize = 4;
    let ident = fs::metadata(exe).ok().map(|m| FileIdentity::of(&m));
    let known = |list: &Vec<(PathBuf, FileIdentity)>| {
        ident.is_some_and(|i| list.iter().any(|(p, k)| p == exe && *k == i))
    };
    if known(&TRUSTED.lock().unwrap_or_else(|p| p.into_inner())) {
        return Ok(());
    }
    check_executable_whole(exe)?;
    if let Some(i) = ident {
        let mut list = TRUSTED.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(p, _)| p != exe);
        if list.len() >= REMEMBERED {
            list.remove(0);
        }
        list.push((exe.to_owned(), i));
    }
    Ok(())
}

/// What tells one file from another, and a changed file from itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    mode: u32,
    uid: u32,
    ctime: (i64, i64),
    mtime: (i64, i64),
}

impl FileIdentity {
    fn of(m: &fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            mode: m.mode(),
            uid: m.uid(),
            ctime: (m.ctime(), m.ctime_nsec()),
            mtime: (m.mtime(), m.mtime_nsec()),
        }
    }
}

/// [`check_trusted_executable`] without the memory: every folder on both chains.
fn check_executable_whole(exe: &Path) -> Result<(), RegistryError> {
    let refuse = |path: &Path, why: String| RegistryError::UnsafeExecutable {
        exe: exe.to_owned(),
        path: path.to_owned(),
        why,
    };
    let real = fs::canonicalize(exe).map_err(io_err("resolve", exe))?;
    let meta = real.metadata().map_err(io_err("inspect", &real))?;
    if let Some(why) = untrusted_because(&meta, false) {
        return Err(refuse(&real, why));
    }
    let written = exe.parent().unwrap_or(Path::new("/"));
    let written = std::path::absolute(written).map_err(io_err("resolve", written))?;
    let real_dir = real.parent().unwrap_or(Path::new("/"));
    let chains: &[&Path] = if written == real_dir {
        &[real_dir]
    } else {
        &[written.as_path(), real_dir]
    };
    for chain in chains {
        for p in chain.ancestors() {
            let meta = p.symlink_metadata().map_err(io_err("inspect", p))?;
            if let Some(why) = untrusted_because(&meta, true) {
                return Err(refuse(p, why));
            }
        }
    }
    Ok(())
}

/// Refuses `path` unless it is a folder (not a link) owned by this process's effective uid that
/// neither group nor others may write.
pub(super) fn check_private(path: &Path) -> Result<(), RegistryError> {
    check_private_trusting(path, None)
}

/// [`check_private`], accepting the owner `also` too.
pub(super) fn check_private_trusting(path: &Path, also: Option<u32>) -> Result<(), RegistryError> {
    use std::os::unix::fs::MetadataExt;
    let meta = path.symlink_metadata().map_err(io_err("inspect", path))?;
    let me = rustix::process::geteuid().as_raw();
    let why = if !meta.is_dir() {
        "not a folder (a link or a file)".to_owned()
    } else if meta.uid() != me && Some(meta.uid()) != also {
        format!("owned by uid {}, not by this user (uid {me})", meta.uid())
    } else if meta.mode() & 0o022 != 0 {
        format!(
            "writable by group or others (mode {:04o})",
            meta.mode() & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(RegistryError::Unsafe {
        path: path.to_owned(),
        why,
    })
}

/// The product home, derived from the running executable: an installed
/// `<home>/bin/refine-supervisor`, or the Cargo workspace whose `target/` holds it.
pub fn default_home() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent();
    while let Some(d) = dir {
        if d.file_name().is_some_and(|n| n == "target") {
            if let Some(ws) = d.parent() {
                return Ok(ws.to_owned());
            }
        }
        if d.file_name().is_some_and(|n| n == "bin") {
            if let Some(home) = d.parent() {
                return Ok(home.to_owned());
            }
        }
        dir = d.parent();
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("cannot derive a home from {}", exe.display()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The remembered check stands only while the file is the same: a program made writable
    /// by others after a launch trusted it is refused at the next.
    #[test]
    fn a_trusted_program_changed_since_is_checked_again() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("guardian");
        fs::write(&exe, b"#!/bin/sh\n").unwrap();
        let chmod = |mode| fs::set_permissions(&exe, fs::Permissions::from_mode(mode)).unwrap();
        chmod(0o755);
        check_trusted_executable(&exe).unwrap();
        check_trusted_executable(&exe).unwrap();
        chmod(0o777);
        let err = check_trusted_executable(&exe).unwrap_err().to_string();
        assert!(err.contains("writable by group or others"), "{err}");
        chmod(0o755);
        check_trusted_executable(&exe).unwrap();
    }
}

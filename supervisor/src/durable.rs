//! The one way to write a file that must survive a crash: a new temp file in the same directory
//! (`O_CREAT|O_EXCL`), write, `fsync`, `rename` over the target, `fsync` the directory.
//!
//! It is also where the runtime's files get their modes (X1): every folder created under `run/`
//! is 0700 ([`create_private_dir`]) and every file 0600 ([`open_private`], [`write_atomic`]),
//! whatever the umask: the mode is set explicitly (`fchmod`/`chmod`) when the umask took bits
//! from it.
//!
//! # Caveats
//! Readers see either the old or the new content, never a torn one. A crash may leave a
//! `.tmp-*` file behind; it is never mistaken for a record (records are named by id).

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Mode of every folder the supervisor creates under `run/`.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the supervisor creates under `run/`.
pub const FILE_MODE: u32 = 0o600;

/// Opens `path` with `opts`; a file it creates is mode 0600 whatever the umask, and an existing
/// one of another mode is set to 0600 (`fchmod`).
pub fn open_private(opts: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let f = opts.mode(FILE_MODE).open(path)?;
    set_mode(&f, FILE_MODE)?;
    Ok(f)
}

/// `fchmod(f, mode)` unless it already has that mode.
fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    if f.metadata()?.permissions().mode() & 0o7777 != mode {
        f.set_permissions(Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Atomically replaces (or creates) `path` with `bytes`, durably. `mode` is the new file's mode.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        set_mode(&f, mode)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `fsync` a directory so that entries created or renamed in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates the folder `dir` (its parent must exist) mode 0700 whatever the umask, and makes
/// the new entry durable. An existing `dir` is left as it is (the registry checks it).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e),
    }
    fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Creates `dir` and its missing parents, each 0700 whatever the umask (a home: X4).
pub fn create_private_dirs(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dirs(parent)?;
    }
    create_private_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rec");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["rec"]);
    }
}

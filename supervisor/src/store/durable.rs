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
pub(crate) const DIR_MODE: u32 = 0o700;
/// Mode of every file the supervisor creates under `run/`.
pub(crate) const FILE_MODE: u32 = 0o600;

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

/// A new file in `dir` without a name (`O_TMPFILE`, read-write, mode 0600): it vanishes with
/// its last descriptor unless [`link_nameless`] gives it one, so a crash leaves nothing behind.
pub(crate) fn open_nameless(dir: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(FILE_MODE)
        .open(dir)?;
    set_mode(&f, FILE_MODE)?;
    Ok(f)
}

/// Whether [`open_nameless`] failed because the file system (or kernel) has no `O_TMPFILE`.
pub(crate) fn nameless_unsupported(e: &io::Error) -> bool {
    // EISDIR: a kernel without O_TMPFILE sees a read-write open of a folder.
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
    )
}

/// Gives the nameless file `f` the name `path` (`linkat` through `/proc/self/fd`, which needs
/// no privilege); an existing `path` is never replaced (`AlreadyExists`).
pub(crate) fn link_nameless(f: &File, path: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    // With `CAP_DAC_READ_SEARCH` (root) the descriptor itself is linked (`AT_EMPTY_PATH`):
    // no walk through `/proc`. Without it the kernel says `ENOENT`, and this process uses the
    // `/proc/self/fd` name from then on.
    static EMPTY_PATH_REFUSED: AtomicBool = AtomicBool::new(false);
    if !EMPTY_PATH_REFUSED.load(Ordering::Relaxed) {
        match rustix::fs::linkat(
            f,
            "",
            rustix::fs::CWD,
            path,
            rustix::fs::AtFlags::EMPTY_PATH,
        ) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::PERM | rustix::io::Errno::INVAL)
                if path
                    .parent()
                    .is_none_or(|d| d.as_os_str().is_empty() || d.exists()) =>
            {
                EMPTY_PATH_REFUSED.store(true, Ordering::Relaxed);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let proc = format!("/proc/self/fd/{}", f.as_raw_fd());
    rustix::fs::linkat(
        rustix::fs::CWD,
        proc.as_str(),
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::SYMLINK_FOLLOW,
    )
    .map_err(io::Error::from)
}

/// Makes `f` and the names just given to it in `dirs` durable. On a journalling file system
/// that commits a file's metadata with its `fsync` (ext4, xfs, btrfs: a new link changes the
/// inode's link count in the same transaction as the directory entry, and `fsync` commits that
/// transaction), one `fsync` of the file does it; tmpfs keeps nothing across a crash anyway.
/// Anywhere else the folders are synced too, as POSIX asks: ext4 without a journal writes a
/// file's inode at its `fsync` but at most one new name's folder (F3's two syncs then become
/// four).
pub fn sync_linked(f: &File, dirs: &[&Path]) -> io::Result<()> {
    f.sync_all()?;
    if !commits_names_with_file(f) {
        for d in dirs {
            sync_dir(d)?;
        }
    }
    Ok(())
}

/// ext4 (also ext2/3's magic), xfs, btrfs and tmpfs (see [`sync_linked`]).
fn commits_names_with_file(f: &File) -> bool {
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const TMPFS: i64 = 0x0102_1994;
    match rustix::fs::fstatfs(f) {
        #[allow(clippy::unnecessary_cast)]
        Ok(st) => {
            let t = st.f_type as i64;
            if t == EXT4 {
                // ext2 has the same magic and no journal; ext3/4 without a journal neither.
                return has_journal(f);
            }
            matches!(t, XFS | BTRFS | TMPFS)
        }
        Err(_) => false,
    }
}

/// Whether the ext file system holding `f` has a journal. `/sys/fs/ext4/<device>/journal_task`
/// holds the journal thread's pid; without a journal it reads `<none>` (newer kernels) or is
/// missing (older ones). Unknown counts as none: the folders are synced then.
fn has_journal(f: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = f.metadata() else {
        return false;
    };
    let dev = format!(
        "/sys/dev/block/{}:{}",
        libc::major(m.dev()),
        libc::minor(m.dev())
    );
    fs::read_link(dev)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_owned()))
        .and_then(|name| {
            fs::read_to_string(Path::new("/sys/fs/ext4").join(name).join("journal_task")).ok()
        })
        .is_some_and(|task| names_a_journal_thread(&task))
}

/// `journal_task`'s text names a thread: a pid, which reads 0 from a pid namespace the
/// thread is not in (a container), and `<none>` without a journal.
fn names_a_journal_thread(task: &str) -> bool {
    let task = task.trim();
    !task.is_empty() && task.bytes().all(|b| b.is_ascii_digit())
}

/// `fsync` a directory so that entries created or renamed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
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
    fn a_journal_is_told_by_its_thread_not_by_the_file() {
        assert!(names_a_journal_thread("812\n"));
        assert!(names_a_journal_thread("0\n"));
        assert!(!names_a_journal_thread("<none>\n"));
        assert!(!names_a_journal_thread(""));
    }

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

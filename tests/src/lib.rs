//! Shared harness for the end-to-end tests in `tests/tests/`.
//!
//! The tests are their own crate, so Cargo does not promise to build `refine-guardian` and
//! `refine-supervisor` first: the README's test command (`scripts/test`) builds every binary, and
//! [`bin`] finds them beside the test executable, failing with "build the binaries first" otherwise.
//!
//! Every build of the guardian is the product (static, no C library: its only dependencies are
//! `refine-protocol-core` and `libc`), so the one beside the tests is the one that ships;
//! `REFINE_GUARDIAN` can still point the tests and the supervisor at another.
//!
//! Shared shapes live here, not copied into test files: [`cli_support`] for the CLI and the
//! service (a [`cli_support::Home`], its waits and reads), [`stopkit`] for launches through
//! the guardian and the stop, [`driver`] for the raw guardian protocol, [`history`] for
//! fabricated records. A command line of plain words is written as it is typed with [`words`]
//! (single quotes keep a word with spaces whole); an argument computed at run time stays an
//! element of an array.

pub mod driver;
pub mod elf;
pub mod history;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

/// Path of a workspace binary (`refine-guardian`, `refine-supervisor`) next to this test binary;
/// for the guardian, `$REFINE_GUARDIAN` when set.
pub fn bin(name: &str) -> PathBuf {
    if name == "refine-guardian" {
        if let Some(p) = std::env::var_os("REFINE_GUARDIAN") {
            let path = PathBuf::from(p);
            assert!(
                path.is_file(),
                "REFINE_GUARDIAN={} does not exist",
                path.display()
            );
            return path;
        }
    }
    let exe = std::env::current_exe().expect("current_exe");
    // target/debug/deps/<test> -> target/debug/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    built(
        dir.join(name),
        "build the binaries first (`cargo build --workspace --bins`, or run scripts/test)",
    )
}

/// `path`, which a build must have left there: a missing file fails the test saying `how` to
/// build it.
pub fn built(path: PathBuf, how: &str) -> PathBuf {
    assert!(path.is_file(), "{} is missing: {how}", path.display());
    path
}

/// Polls `cond` until it holds or `deadline` passes; returns whether it held. For state that has
/// no event to wait on; deadlines are generous because the machine is shared.
pub fn wait_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub mod cli_support;
pub mod stopkit;

/// The receipt on disk equals `receipt` (the one the guardian sent) and is bound to `reg`: every
/// field SPEC A2 names, and the proof file is still the registered device and inode.
pub fn assert_receipt_binds(
    receipt: &refine_protocol::Receipt,
    reg: &refine_protocol::record::Registration,
) {
    use std::os::unix::fs::MetadataExt;
    let bytes = std::fs::read(&reg.proof_path).expect("proof file");
    let on_disk = refine_protocol::Receipt::decode(&bytes).expect("receipt on disk decodes");
    assert_eq!(&on_disk, receipt, "the receipt on disk is the one sent");
    assert_eq!(on_disk.registration, reg.id);
    assert_eq!(on_disk.runtime, reg.runtime);
    assert_eq!(on_disk.boot_id, reg.hello.boot_id);
    assert_eq!(on_disk.guardian, reg.hello.guardian);
    assert_eq!(on_disk.workload, reg.hello.workload);
    assert_eq!(on_disk.proof, reg.hello.proof);
    let meta = std::fs::metadata(&reg.proof_path).expect("proof file");
    assert_eq!((meta.dev(), meta.ino()), (reg.proof().dev, reg.proof().ino));
}

/// Rewrites a file in place (same inode, so evidence bound to its device and inode still
/// points at it): how tests damage a receipt or record without replacing it.
pub fn overwrite_in_place(path: impl AsRef<Path>, bytes: &[u8]) {
    use std::io::Write as _;
    let path = path.as_ref();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .unwrap_or_else(|e| panic!("overwrite {}: {e}", path.display()));
}

/// Installs an executable at `path` (mode 0755) with `contents`, written by a child process.
///
/// A file this (multi-threaded) test process wrote itself could not be executed reliably: while
/// the writable descriptor is open, any other test thread's fork inherits it until its exec, and
/// `execve` of a file someone holds open for writing fails with `ETXTBSY`.
pub fn install_executable(path: &Path, contents: &[u8]) {
    use std::io::Write as _;
    let mut child = std::process::Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 0755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sh to install an executable");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(contents)
        .expect("write the executable");
    let status = child.wait().expect("wait sh");
    assert!(
        status.success(),
        "installing {} failed: {status}",
        path.display()
    );
}

/// A finished SHA-256 as lowercase hex (what `sha256sum` prints).
pub fn sha256_hex(hash: Sha256) -> String {
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a file's content as lowercase hex.
pub fn sha256_file(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    sha256_hex(Sha256::new_with_prefix(bytes))
}

/// A tmpfs of a few pages mounted for one test, unmounted (lazily) at the end.
pub struct TinyDisk {
    dir: tempfile::TempDir,
    /// The image file behind an ext4 disk ([`TinyDisk::mount_ext4`]).
    image: Option<tempfile::TempDir>,
}

impl TinyDisk {
    /// Mounts one of `size` (as `mount -o size=` reads it: `2m`); `None` where this process
    /// cannot mount (not root).
    pub fn mount(size: &str) -> Option<TinyDisk> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "refine-test",
            ])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(TinyDisk { dir, image: None })
    }

    /// An ext4 file system of `mib` MiB on a loop device (a file system that overwrites in
    /// place, with delayed allocation); `None` where this process cannot make or mount one (not
    /// root, no `mkfs.ext4`, no loop device).
    pub fn mount_ext4(mib: u64) -> Option<TinyDisk> {
        Self::mount_ext4_with(mib, true)
    }

    /// As [`TinyDisk::mount_ext4`], with or without a journal (`mkfs.ext4 -O ^has_journal`: a
    /// file system whose `fsync` of a file does not commit the names just given to it).
    pub fn mount_ext4_with(mib: u64, journal: bool) -> Option<TinyDisk> {
        let image = tempfile::tempdir().ok()?;
        let file = image.path().join("disk.img");
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(mib << 20))
            .ok()?;
        let made = std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0", "-b", "4096"])
            .args([
                "-O",
                if journal {
                    "has_journal"
                } else {
                    "^has_journal"
                },
            ])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "ext4", "-o", "loop"])
            .arg(&file)
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let _ = std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        );
        Some(TinyDisk {
            dir,
            image: Some(image),
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk, then frees `pages` 4 KiB pages of it.
    pub fn fill_leaving(&self, pages: u64) {
        use std::io::Write;
        let fill = self.path().join("fill");
        let mut f = std::fs::File::create(&fill).unwrap();
        let block = vec![0xa5u8; 4096];
        while f.write_all(&block).is_ok() {}
        // ext4: growing one file needs blocks for its extent tree too, and a delayed write
        // reserves more than it takes: the last blocks go to small files of their own, each
        // synced, until not one more fits.
        if self.image.is_some() {
            let _ = f.sync_all();
            for n in 0.. {
                let small = self.path().join(format!("fill.{n}"));
                let fits = std::fs::File::create(&small)
                    .and_then(|mut s| s.write_all(&block).and_then(|()| s.sync_all()));
                if fits.is_err() {
                    let _ = std::fs::remove_file(&small);
                    break;
                }
            }
        }
        let len = f.metadata().unwrap().len() / 4096 * 4096;
        f.set_len(len.saturating_sub(pages * 4096)).unwrap();
    }

    pub fn free(&self) {
        let _ = std::fs::remove_file(self.path().join("fill"));
        for n in 0.. {
            if std::fs::remove_file(self.path().join(format!("fill.{n}"))).is_err() {
                break;
            }
        }
        if self.image.is_some() {
            // ext4 gives a removed file's blocks back at its next commit.
            let _ = std::process::Command::new("sync")
                .arg("-f")
                .arg(self.path())
                .status();
        }
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A new pseudo-terminal: its master (not this process's controlling terminal) and its slave
/// opened for reading and writing, to hand to a child as its terminal.
pub fn open_pty() -> (std::os::fd::OwnedFd, std::fs::File) {
    use std::os::unix::ffi::OsStrExt;
    let master =
        rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)
            .expect("openpt");
    rustix::pty::grantpt(&master).expect("grantpt");
    rustix::pty::unlockpt(&master).expect("unlockpt");
    let name = rustix::pty::ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(Path::new(std::ffi::OsStr::from_bytes(name.as_bytes())))
        .expect("open the terminal");
    (master, slave)
}

/// Spawns `cmd` with its stdout on a pipe and reads the first line it prints (a pid, an id,
/// `ready`): the child, and the line as read (end of file gives an empty line). Only the first
/// line is read; the pipe is closed after it.
pub fn spawn_first_line(
    cmd: &mut std::process::Command,
    what: &str,
) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("read the first line of {what}: {e}"));
    (child, line)
}

/// Whether this case must skip because the process is not root: then it prints
/// `skipped: WHY` (the house's form for a skipped case) and returns true.
pub fn skip_unless_root(why: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return false;
    }
    eprintln!("skipped: {why}");
    true
}

/// `(uid, gid)` of `name` in /etc/passwd.
pub fn passwd_ids(name: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 4 || f[0] != name {
            return None;
        }
        Some((f[2].parse().ok()?, f[3].parse().ok()?))
    })
}

/// Whether this case must skip because the process is not root or there is no `nobody` user
/// to run as: then it prints `skipped: needs root (NEEDS)` or `skipped: no `nobody` user in
/// /etc/passwd` and returns true.
pub fn skip_unless_root_and_nobody(needs: &str) -> bool {
    if skip_unless_root(&format!("needs root ({needs})")) {
        return true;
    }
    if passwd_ids("nobody").is_some() {
        return false;
    }
    eprintln!("skipped: no `nobody` user in /etc/passwd");
    true
}

/// Whether this case must skip because `program` (asked for `--version`) cannot be run here:
/// then it prints `skipped: WHY` and returns true.
pub fn skip_without(program: &str, why: &str) -> bool {
    if std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok()
    {
        return false;
    }
    eprintln!("skipped: {why}");
    true
}

/// The words of a command line written as it is typed: split at white space, a word in single
/// quotes kept whole (`run --json -- sh -c 'sleep 600 & echo left'`), as `sh` reads them when
/// nothing is escaped. A quote inside a word, or one left open, is a mistake in the test and
/// panics naming the line.
pub fn words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let (word, after) = if let Some(quoted) = rest.strip_prefix('\'') {
            let end = quoted
                .find('\'')
                .unwrap_or_else(|| panic!("an open quote in {line:?}"));
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        assert!(
            !word.contains('\'') && after.chars().next().is_none_or(char::is_whitespace),
            "a quote inside a word of {line:?}"
        );
        out.push(word);
        rest = after.trim_start();
    }
    out
}

/// The pid a workload wrote to `path` (one number, white space around it allowed); a file that
/// does not hold one fails the test naming it.
pub fn read_pid(path: &Path) -> u32 {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read the pid in {}: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {text:?} is not a pid: {e}", path.display()))
}

/// The direct children of `pid` (every thread's `/proc/PID/task/T/children`); none when it is
/// gone.
pub fn proc_children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    let mut out = Vec::new();
    for task in tasks.into_iter().flatten().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// One signal set of a `/proc/PID/status` text (`key` is `"SigBlk:"`, `"SigIgn:"`, ...) as bits.
pub fn status_mask(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no {key} in {status}"))
}

/// SplitMix64 for a test's random moments: seeded from `$VAR` when set (to replay a run), else
/// from the clock; the seed is printed so that a failure can be replayed.
pub struct Rng {
    state: u64,
    seed: u64,
}

impl Rng {
    pub fn seeded(var: &str) -> Rng {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("seed {seed} ({var}={seed} replays it)");
        Rng { state: seed, seed }
    }

    /// The seed (for a failure's message).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// Whether a receipt that decodes lands at `proof` within `bound`.
pub fn receipt_lands(proof: &Path, bound: Duration) -> bool {
    wait_until(bound, || {
        std::fs::read(proof)
            .ok()
            .and_then(|b| refine_protocol::Receipt::decode(&b).ok())
            .is_some()
    })
}

/// The state letter of `pid` (`/proc/PID/stat` field 3: `S`, `T`, `Z`, ...); `None` once it is
/// gone.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Starts `cmd` (a child of the test) with stdin, stdout and stderr on `/dev/null`.
pub fn spawn_quiet(cmd: &mut std::process::Command, what: &str) -> std::process::Child {
    use std::process::Stdio;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"))
}

/// A helper program's report to the test: `line` on stdout, flushed at once (a failed write is
/// ignored: the test reads what came).
pub fn say(line: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Reads lines from `reader` until one (trimmed) satisfies `wanted`, and returns it trimmed;
/// an end of file first fails the test saying `what` ended before it printed `expected`.
pub fn read_until(
    reader: &mut impl std::io::BufRead,
    what: &str,
    expected: &str,
    mut wanted: impl FnMut(&str) -> bool,
) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("read {what}'s output: {e}"));
        assert!(n > 0, "{what} ended before it printed {expected}");
        if wanted(line.trim()) {
            return line.trim().to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn words_split_at_white_space_and_keep_a_quoted_word_whole() {
        assert_eq!(
            words("  run --json  -- true "),
            ["run", "--json", "--", "true"]
        );
        assert_eq!(
            words("sh -c 'sleep 600 & echo left' ''"),
            ["sh", "-c", "sleep 600 & echo left", ""]
        );
        assert!(words("").is_empty());
    }

    #[test]
    #[should_panic(expected = "an open quote")]
    fn an_open_quote_is_a_mistake() {
        words("sh -c 'exit 3");
    }

    #[test]
    #[should_panic(expected = "a quote inside a word")]
    fn a_quote_inside_a_word_is_a_mistake() {
        words("it's");
    }
}

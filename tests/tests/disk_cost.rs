//! What one launch costs on the disk (SPEC F3): a `run -- /bin/true` creates at most 3 files in
//! `run/P`, syncs at most twice (the registration before *start*, the receipt at the end), leaves
//! no empty artifact behind (the views say "no output"), and at most 8 KiB in `run/P`.
//!
//! The creates and syncs are counted with `strace -f` over the whole launch (supervisor and
//! guardian); without `strace` those cases skip with a printed reason. A sync is a call that
//! waits for data to reach the disk; `sync_file_range` with `SYNC_FILE_RANGE_WRITE` alone only
//! starts a write-back (the guardian's reserved receipt block, so that the registration's commit
//! carries it) and waits for nothing: it is counted apart, at most once.

use refine_tests::cli_support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::{describe, output_of, Home};
use refine_tests::{bin, TinyDisk};

/// Every regular file under `dir` with its allocated bytes (`st_blocks * 512`), by inode (a
/// second name of a file is not a second file).
fn files(dir: &Path) -> BTreeMap<(u64, u64), (PathBuf, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let m = e.path().symlink_metadata().expect("stat");
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                out.insert((m.dev(), m.ino()), (e.path(), m.blocks() * 512));
            }
        }
    }
    out
}

fn strace() -> Option<PathBuf> {
    ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// What one traced launch did: (files created in `run/P`, sync calls).
struct Counted {
    created: Vec<String>,
    syncs: Vec<String>,
    /// `sync_file_range(.., SYNC_FILE_RANGE_WRITE)`: a write-back started, nothing waited for.
    writebacks: Vec<String>,
}

/// `strace -f` over `refine-supervisor run -- ARGV` in `home`: the `calls` it makes (and the
/// guardian and workload below it), written to `output`; `extra` goes to strace.
fn traced(
    strace: &Path,
    home: &Home,
    output: &Path,
    calls: &str,
    extra: &[&str],
    argv: &[&str],
) -> Command {
    let mut cmd = Command::new(strace);
    cmd.args(["-f", "-qq"])
        .args(extra)
        .arg("-o")
        .arg(output)
        .arg("-e")
        .arg(format!("trace={calls}"))
        .arg(bin("refine-supervisor"))
        .arg("--home")
        .arg(home.path())
        .arg("--port")
        .arg(home.port.to_string())
        .args(["run", "--"])
        .args(argv);
    cmd
}

fn traced_run(home: &Home, argv: &[&str]) -> Option<Counted> {
    let Some(strace) = strace() else {
        eprintln!("skipped: strace is not installed (apt-get install -y strace)");
        return None;
    };
    let trace = home.path().join("trace");
    let calls = "open,openat,openat2,creat,mknodat,fsync,fdatasync,syncfs,sync,sync_file_range";
    let out = output_of(traced(&strace, home, &trace, calls, &["-y"], argv));
    assert!(out.status.success(), "{}", describe(argv, &out));
    let text = std::fs::read_to_string(&trace).expect("trace");
    std::fs::remove_file(&trace).expect("remove trace");
    let run = home.run_dir().display().to_string();
    let mut created = Vec::new();
    let mut syncs = Vec::new();
    let mut writebacks = Vec::new();
    for line in text.lines() {
        let call = line.split_once(' ').map_or(line, |(_, c)| c).trim_start();
        let failed = line.contains("= -1 ");
        // (an interrupted call's line ends in `<unfinished ...>`: the flags are still on it)
        if call.starts_with("sync_file_range(") && !call.contains("WAIT") {
            writebacks.push(line.to_owned());
        } else if call.starts_with("fsync(")
            || call.starts_with("fdatasync(")
            || call.starts_with("syncfs(")
            || call.starts_with("sync(")
            || call.starts_with("sync_file_range(")
        {
            syncs.push(line.to_owned());
        } else if (line.contains("O_CREAT")
            || line.contains("O_TMPFILE")
            || call.starts_with("creat"))
            && line.contains(&run)
            && !failed
        {
            created.push(line.to_owned());
        }
    }
    Some(Counted {
        created,
        syncs,
        writebacks,
    })
}

/// A traced `run -- /bin/true` in `home` after a first one, which created the runtime (once
/// per port, as any first launch does).
fn traced_second_launch(home: &Home) -> Option<Counted> {
    let first = home.cli(&["run", "--", "/bin/true"]);
    assert!(first.status.success(), "{}", describe(&["run"], &first));
    traced_run(home, &["/bin/true"])
}

/// Fails unless `calls` holds at most `n` lines (of what they are, `what`).
fn at_most(calls: &[String], n: usize, what: &str) {
    assert!(
        calls.len() <= n,
        "{} {what} (at most {n}):\n{}",
        calls.len(),
        calls.join("\n")
    );
}

/// A home on `disk`.
fn home_on(disk: &TinyDisk) -> Home {
    Home {
        dir: tempfile::tempdir_in(disk.path()).expect("tempdir"),
        port: 7411,
    }
}

/// F3 is a budget for a file system that commits a file's new names with its `fsync` (ext4
/// with its journal, as made by default, xfs, btrfs; tmpfs): the home is on a journalled ext4
/// where this process can mount one, on tmpfs otherwise.
#[test]
fn a_launch_of_true_creates_at_most_three_files_and_syncs_at_most_twice() {
    let disk = TinyDisk::mount_ext4_with(32, true);
    let home = match &disk {
        Some(disk) => home_on(disk),
        None => {
            eprintln!("note: cannot mount an ext4 file system (not root?): the home is on tmpfs");
            Home {
                dir: tempfile::tempdir_in("/dev/shm").expect("tempdir"),
                port: 7411,
            }
        }
    };
    let Some(c) = traced_second_launch(&home) else {
        return;
    };
    at_most(&c.created, 3, "files created");
    at_most(&c.syncs, 2, "syncs");
    at_most(&c.writebacks, 1, "write-backs started");
}

/// On ext4 without a journal a file's `fsync` writes the file, not the folders its new names
/// are in (the kernel syncs at most one new name's folder, and which one is not said): the
/// registration also syncs `open/` and `registrations/`, as POSIX asks, so that a crash can
/// never keep the record and lose its marker, or the reverse. Two syncs more than F3's budget:
/// the price of the names being durable there.
#[test]
fn a_registration_on_ext4_without_a_journal_syncs_the_folders_of_its_names() {
    let Some(disk) = TinyDisk::mount_ext4_with(32, false) else {
        eprintln!(
            "skipped: cannot make and mount an ext4 file system (root, mkfs.ext4, a loop device)"
        );
        return;
    };
    let home = home_on(&disk);
    let Some(c) = traced_second_launch(&home) else {
        return;
    };
    let run = home.run_dir().display().to_string();
    for dir in ["open", "registrations"] {
        let synced = format!("<{run}/{dir}>)");
        assert!(
            c.syncs
                .iter()
                .any(|l| l.contains("fsync(") && l.contains(&synced)),
            "the folder {dir}/ was not synced after the registration's names were given:\n{}",
            c.syncs.join("\n")
        );
    }
    at_most(&c.syncs, 4, "syncs");
}

#[test]
fn a_silent_launch_leaves_no_artifact_and_at_most_8_kib() {
    let home = Home::new();
    let first = home.cli(&["run", "--", "/bin/true"]);
    assert!(first.status.success(), "{}", describe(&["run"], &first));
    let before = files(&home.run_dir());
    let (_, id) = home.run_ok(&["/bin/true"]);
    let after = files(&home.run_dir());
    let new: Vec<_> = after
        .iter()
        .filter(|(k, _)| !before.contains_key(k))
        .map(|(_, v)| v.clone())
        .collect();
    let names: Vec<String> = new
        .iter()
        .map(|(p, b)| format!("{} ({b} B)", p.display()))
        .collect();
    assert!(
        !new.iter().any(|(p, _)| {
            let p = p.to_string_lossy();
            p.ends_with(".stdout") || p.ends_with(".stderr")
        }),
        "an empty stream left an artifact: {names:?}"
    );
    assert!(new.len() <= 3, "{} new files: {names:?}", new.len());
    let bytes: u64 = new.iter().map(|(_, b)| b).sum();
    assert!(
        bytes <= 8 * 1024,
        "{bytes} bytes on disk for one launch: {names:?}"
    );
    // The views say so rather than failing on the missing file.
    for view in [vec!["logs", id.as_str()], vec!["show", id.as_str()]] {
        let out = home.cli(&view);
        assert!(out.status.success(), "{}", describe(&view, &out));
        // `logs` says it as a note on stderr: its stdout is the stream's bytes (none).
        let logs = view[0] == "logs";
        let text = String::from_utf8_lossy(if logs { &out.stderr } else { &out.stdout });
        assert!(
            text.contains("no output"),
            "`{}` does not say \"no output\": {text}",
            view.join(" ")
        );
        if logs {
            assert!(out.stdout.is_empty(), "logs printed {:?}", out.stdout);
        }
    }
}

#[test]
fn a_stream_that_writes_gets_its_artifact_and_a_silent_one_none() {
    let home = Home::new();
    let (_, id) = home.run_ok(&["/bin/sh", "-c", "echo hello"]);
    let logs = home.run_dir().join("logs");
    assert_eq!(
        std::fs::read(logs.join(format!("{id}.stdout"))).expect("stdout artifact"),
        b"hello\n"
    );
    assert!(
        !logs.join(format!("{id}.stderr")).exists(),
        "the silent stderr left an artifact"
    );
    let out = home.cli(&["logs", &id]);
    assert!(out.status.success(), "{}", describe(&["logs"], &out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello"));
}

/// F5: while it holds a workload, the guardian that ships (the release build) holds at most
/// 16 kB of private memory: its stack and its data page; the launch frame's pages, and the
/// stack the launch used below the reaping loop, went back to the kernel once the workload
/// started.
///
/// How many stack pages a given use dirties depends on where its top falls within a page: the
/// kernel moves it by a random offset on every exec. So this sweeps that offset instead of
/// sampling it: with address randomization off for the launch (`personality`), a longer path
/// to the guardian moves its stack down by as many bytes, and sixteen paths 256 bytes apart
/// cover every position within a page (with up to 4 KiB of path, more than a real one takes).
#[test]
fn the_guardian_holds_at_most_16_kb_of_private_memory_while_it_holds_a_workload() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    // target/debug/deps/<test> -> target/release/refine-guardian
    let exe = std::env::current_exe().expect("current_exe");
    let release = exe
        .ancestors()
        .nth(3)
        .expect("target dir")
        .join("release/refine-guardian");
    if !release.is_file() {
        eprintln!(
            "skipped: {} is missing (cargo build --release -p refine-guardian; scripts/test does)",
            release.display()
        );
        return;
    }
    // A binary written moments ago (the build) counts its page-cache pages as Private_Dirty
    // until they are written back: write them back, so this measures the guardian.
    std::fs::File::open(&release)
        .and_then(|f| f.sync_all())
        .expect("sync the guardian binary");
    let home = Home::new();
    let links = tempfile::tempdir().expect("tempdir");
    let mut runs = Vec::new();
    for step in 0..16usize {
        // Components of at most 200 bytes, 256 * step bytes of path in all before the link.
        let mut dir = links.path().join(format!("{step:02}"));
        let mut left = 256 * step;
        while left > 0 {
            let n = left.min(200);
            dir.push("x".repeat(n - 1));
            left -= n;
        }
        std::fs::create_dir_all(&dir).expect("create the link's directory");
        let link = dir.join("refine-guardian");
        std::os::unix::fs::symlink(&release, &link).expect("link the guardian");
        let mut cmd = home.command(&["run", "--", "sh", "-c", "echo ready; exec sleep 600"]);
        cmd.env("REFINE_GUARDIAN", &link)
            .stdout(std::process::Stdio::piped());
        // SAFETY: personality(2) is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn run");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("read run's stdout");
        assert_eq!(line.trim(), "ready");
        runs.push((step, child, out));
    }
    // Per mapping: the stack's dirty pages, and the rest (the guardian's own data page).
    let read_dirty = |pid: u64| -> (u64, u64, String) {
        let smaps =
            std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("the guardian's smaps");
        let (mut stack, mut other, mut in_stack) = (0u64, 0u64, false);
        for l in smaps.lines() {
            if l.split_whitespace()
                .next()
                .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
            {
                in_stack = l.ends_with("[stack]");
            } else if let Some(v) = l.strip_prefix("Private_Dirty:") {
                let kb: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                if in_stack {
                    stack += kb;
                } else {
                    other += kb;
                }
            }
        }
        (stack, other, smaps)
    };
    let rows = home.ps();
    assert_eq!(rows.len(), runs.len(), "{rows:?}");
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().expect("id")).collect();
    let guardians: Vec<u64> = ids
        .iter()
        .map(|id| cli_support::witnesses(&home, id)[0].0)
        .collect();
    // The workload's line can come before the guardian has handed its launch pages back (right
    // after it learns the exec went through): what is measured is the steady state while it
    // holds the workload, reached within the bound.
    let mut last = Vec::new();
    refine_tests::wait_until(cli_support::DEADLINE, || {
        last = guardians.iter().map(|&g| (g, read_dirty(g))).collect();
        last.iter()
            .all(|(_, (stack, other, _))| stack + other <= 16)
    });
    let over: Vec<String> = last
        .iter()
        .filter(|(_, (stack, other, _))| stack + other > 16)
        .map(|(g, (stack, other, smaps))| {
            format!("guardian {g}: {stack} kB of stack and {other} kB else\n{smaps}")
        })
        .collect();
    let stop = home.cli(&[&["stop"][..], &ids].concat());
    for (_, child, _) in &mut runs {
        let _ = cli_support::wait_bounded(child, cli_support::DEADLINE, "run");
    }
    assert!(stop.status.success(), "{}", describe(&["stop"], &stop));
    assert!(
        over.is_empty(),
        "{} of 16 stack positions held more than 16 kB of Private_Dirty:\n{}",
        over.len(),
        over.join("\n")
    );
}

/// F4 on a disk: a scope that outlives [`SETTLE`] has its proof file synced once while the
/// workload runs, by the guardian, so that the receipt's own `fdatasync` at the end no longer
/// carries the file's first sync (on ext4 without a journal that also writes the block of its
/// new directory entry: one device trip more on the stop's path). The traced calls arrive
/// through a FIFO as strace makes them; the workload waits on its stdin, which the test closes
/// only once the early sync was seen (or the generous bound passed).
#[test]
fn a_scope_that_outlives_a_second_has_its_proof_file_synced_while_it_runs() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::mpsc;
    const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);
    let Some(strace) = strace() else {
        eprintln!("skipped: strace is not installed (apt-get install -y strace)");
        return;
    };
    let home = Home::new();
    let first = home.cli(&["run", "--", "/bin/true"]);
    assert!(first.status.success(), "{}", describe(&["run"], &first));
    let fifo = home.path().join("trace.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let f = std::fs::File::open(&fifo).expect("open the trace fifo");
            for line in BufReader::new(f).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    };
    let argv = ["/bin/sh", "-c", "read line"];
    let mut cmd = traced(&strace, &home, &fifo, "fsync,fdatasync", &["-y"], &argv);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().expect("spawn strace");
    let mut stdin = child.stdin.take();
    let proofs = home.run_dir().join("proofs").display().to_string();
    let is_proof_sync = |l: &str| l.contains("fdatasync(") && l.contains(&proofs);
    let mut seen = Vec::new();
    let deadline = started + cli_support::DEADLINE;
    let early = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = is_proof_sync(&line);
                seen.push(line);
                if hit {
                    break Some(started.elapsed());
                }
            }
            Err(_) => break None,
        }
    };
    // The workload ends on end of file (or a line).
    if let Some(mut s) = stdin.take() {
        let _ = s.write_all(b"\n");
    }
    let status = child.wait().expect("wait strace");
    seen.extend(rx.iter());
    reader.join().expect("reader");
    let syncs: Vec<&String> = seen.iter().filter(|l| is_proof_sync(l)).collect();
    let Some(early) = early else {
        panic!(
            "no fdatasync of the proof file while the workload ran ({:?} waited):\n{}",
            cli_support::DEADLINE,
            seen.join("\n")
        );
    };
    assert!(status.success(), "run under strace: {status}");
    assert!(
        early >= SETTLE,
        "the proof file was synced after {early:?}, before the scope was {SETTLE:?} old"
    );
    // The early sync, then the receipt's: nothing more.
    assert_eq!(syncs.len(), 2, "proof file syncs:\n{}", seen.join("\n"));
}

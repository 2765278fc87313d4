//! Output producer for the capture and engine tests. Modes (first argument):
//! - `bytes N`: N deterministic pseudo-random bytes on stdout, then their SHA-256 (hex) on stderr.
//! - `fill N`: N zero bytes on stdout, written 128 KiB at a time from one buffer, as a program
//!   writes output it holds in memory (the capture benchmark's producer).
//! - `utf8-split`: `caf` plus the first byte of `é`, waits for one byte on stdin, then the rest.
//! - `close-stdout`: `bye` on stdout, closes stdout, `closed` on stderr, runs until stdin EOF, exit 3.
//! - `orphan-flood`: starts a detached `flood` child sharing stdout, prints `flood-pid N` on
//!   stderr and exits 0 at once.
//! - `flood`: writes stdout until it fails.
//! - `idle-then-exit`: prints `ready`, then waits for stdin EOF.
//! - `seq LINES BATCH PAUSE_MS`: `seq N` lines 1..=LINES on stdout, BATCH lines per write, a
//!   pause between writes (its pace, not a synchronization); a failed write exits 3 with the
//!   error. At the end, `max-stall-us N` on stderr: the longest single write, timed here.
use std::io::{Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use sha2::{Digest, Sha256};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let mut out = std::io::stdout().lock();
    match mode {
        "bytes" => {
            let n: u64 = args[2].parse().expect("byte count");
            let mut hash = Sha256::new();
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut buf = vec![0u8; 64 * 1024];
            let mut left = n;
            while left > 0 {
                for b in buf.chunks_mut(8) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let bytes = state.to_le_bytes();
                    b.copy_from_slice(&bytes[..b.len()]);
                }
                let take = left.min(buf.len() as u64) as usize;
                out.write_all(&buf[..take]).expect("write stdout");
                hash.update(&buf[..take]);
                left -= take as u64;
            }
            out.flush().expect("flush");
            let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("{digest}");
        }
        "fill" => {
            let n: u64 = args[2].parse().expect("byte count");
            let buf = vec![0u8; 128 * 1024];
            let mut left = n;
            // Straight to fd 1: no user-space buffering in between.
            let mut raw = std::fs::File::from(
                std::io::stdout()
                    .as_fd()
                    .try_clone_to_owned()
                    .expect("dup stdout"),
            );
            while left > 0 {
                let take = left.min(buf.len() as u64) as usize;
                raw.write_all(&buf[..take]).expect("write stdout");
                left -= take as u64;
            }
        }
        "utf8-split" => {
            out.write_all(b"caf\xc3").expect("write");
            out.flush().expect("flush");
            let mut one = [0u8; 1];
            let _ = std::io::stdin().read(&mut one);
            out.write_all(b"\xa9!\n").expect("write");
        }
        "close-stdout" => {
            out.write_all(b"bye\n").expect("write");
            out.flush().expect("flush");
            drop(out);
            // SAFETY: fd 1 is this process's stdout, owned by nothing else once the lock is
            // dropped; taking ownership closes it exactly once.
            drop(unsafe { OwnedFd::from_raw_fd(1) });
            eprintln!("closed");
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            std::process::exit(3);
        }
        "orphan-flood" => {
            let exe = std::env::current_exe().expect("current_exe");
            let child = std::process::Command::new(exe)
                .arg("flood")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn flood");
            eprintln!("flood-pid {}", child.id());
            // Exit without waiting: the flooder is orphaned and keeps the stdout pipe.
            std::process::exit(0);
        }
        "flood" => {
            let buf = [b'x'; 4096];
            while out.write_all(&buf).is_ok() {}
        }
        "seq" => {
            let n: u64 = args[2].parse().expect("line count");
            let batch: u64 = args[3].parse().expect("batch");
            let pause = std::time::Duration::from_millis(args[4].parse().expect("pause"));
            // Unbuffered: each batch is one write(2), timed.
            let mut raw = std::fs::File::from(
                std::io::stdout()
                    .as_fd()
                    .try_clone_to_owned()
                    .expect("dup stdout"),
            );
            let mut max = std::time::Duration::ZERO;
            let mut i = 1;
            while i <= n {
                let mut text = String::new();
                for j in i..(i + batch).min(n + 1) {
                    text.push_str(&format!("seq {j}\n"));
                }
                let t = std::time::Instant::now();
                if let Err(e) = raw.write_all(text.as_bytes()) {
                    eprintln!("write failed at seq {i}: {e}");
                    std::process::exit(3);
                }
                max = max.max(t.elapsed());
                i += batch;
                std::thread::sleep(pause);
            }
            eprintln!("max-stall-us {}", max.as_micros());
        }
        "idle-then-exit" => {
            out.write_all(b"ready\n").expect("write");
            out.flush().expect("flush");
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        }
        _ => {
            eprintln!("cap-producer: unknown mode {mode:?}");
            std::process::exit(2);
        }
    }
}

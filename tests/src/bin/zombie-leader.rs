//! `zombie-leader`: a process whose main thread calls `pthread_exit` while another thread keeps
//! running. `/proc/PID/stat` then shows the thread-group leader as `Z` although the process is
//! alive (SPEC T5). Prints `ready 1` once the worker thread runs, then ends its main thread
//! (the thread-exit system call `pthread_exit` ends in).

use std::io::Write;
use std::time::Duration;

fn main() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tx.send(()).expect("main waits");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    });
    rx.recv().expect("worker started");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready 1")
        .and_then(|()| out.flush())
        .expect("stdout");
    drop(out);
    // `pthread_exit` would end the thread by forced unwinding, which aborts in a `panic = "abort"`
    // build ("entered unreachable code"); the thread-exit system call is what it ends in, and
    // leaves the leader in the same state (`Z`, the thread group alive).
    // SAFETY: `exit` (not `exit_group`) ends only the calling thread; the worker references
    // nothing on this thread's stack, and this call does not return.
    unsafe {
        libc::syscall(libc::SYS_exit, 0);
    }
    unreachable!("the main thread exited")
}

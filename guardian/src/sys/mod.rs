//! Every system call the guardian makes, as small typed wrappers over raw system calls (see
//! [`raw`]; the `libc` crate supplies only constants and struct layouts). This module and its
//! `raw` submodule are the only place allowed to use `unsafe`.
//!
//! # Safety
//!
//! The contract every block here relies on:
//! - the guardian is single-threaded (no_std, no runtime, no threads are ever created), so
//!   `fork` is followed in the child only by the async-signal-safe calls of [`child`];
//! - every pointer handed to the kernel comes from a live Rust reference or slice whose length is
//!   passed alongside it, or from a NUL-terminated `CStr`;
//! - descriptors are owned by [`OwnedFd`] (closed exactly once, on drop) or are the fixed numbers
//!   0, 1, 2;
//! - argv/envp arrays handed to `execve` are NULL-terminated (checked) and point into the frame
//!   buffer, which is mapped once and never unmapped.
#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, c_void, CStr};

mod mark;
pub mod raw;

pub use mark::PROVENANCE;

use raw::syscall;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets, as two 32-bit halves.
const CAP_VERSION_3: u32 = 0x2008_0522;

/// An errno value from a failed system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const INTR: Errno = Errno(libc::EINTR);
    pub const AGAIN: Errno = Errno(libc::EAGAIN);
    pub const NOENT: Errno = Errno(libc::ENOENT);
    pub const CHILD: Errno = Errno(libc::ECHILD);
}

/// A raw system call result: -4095..=-1 is a negated errno, anything else the value.
fn cvt_isize(r: isize) -> Result<usize, Errno> {
    if (-4095..0).contains(&r) {
        Err(Errno(-r as i32))
    } else {
        Ok(r as usize)
    }
}

/// [`cvt_isize`] for calls whose value is an `int` (a descriptor, a pid, 0).
fn cvt(r: isize) -> Result<c_int, Errno> {
    cvt_isize(r).map(|v| v as c_int)
}

/// Retries `f` while it fails with `EINTR` (the one EINTR helper).
pub fn retry<T>(mut f: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            other => return other,
        }
    }
}

/// A process id the kernel gave us (from `fork`, `waitpid` or `getpid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pid(libc::pid_t);

impl Pid {
    pub const fn as_u32(self) -> u32 {
        self.0 as u32
    }
}

/// An owned file descriptor, closed on drop.
#[derive(Debug)]
pub struct OwnedFd(c_int);

impl OwnedFd {
    pub const fn as_raw(&self) -> c_int {
        self.0
    }
}

impl Drop for OwnedFd {
    fn drop(&mut self) {
        // SAFETY: self.0 is a descriptor this value owns; it is closed exactly once, here.
        unsafe { syscall!(libc::SYS_close, self.0) };
    }
}

// ---------------------------------------------------------------------------------------------
// Panics and exit (the entry point is in `raw`).

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    write_stderr(b"refine-guardian: internal error (panic)\n");
    abort()
}

/// Dies by `SIGABRT` (as C's `abort`): default disposition, unblocked, raised; if that somehow
/// returns, exits 134.
fn abort() -> ! {
    let dfl = [0u64; 4];
    let abrt: u64 = 1 << (libc::SIGABRT - 1);
    // SAFETY: a zeroed kernel sigaction (SIG_DFL) and a one-signal kernel sigset, both live;
    // old values are not requested; kill targets this process.
    unsafe {
        syscall!(
            libc::SYS_rt_sigaction,
            libc::SIGABRT,
            dfl.as_ptr(),
            0usize,
            8usize
        );
        syscall!(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK,
            &abrt as *const u64,
            0usize,
            8usize
        );
        syscall!(libc::SYS_kill, getpid().0, libc::SIGABRT);
    }
    exit(134)
}

/// The precompiled `core` refers to this symbol from its unwind tables even though the guardian
/// is built with `panic = "abort"` and never unwinds (an abort needs no personality routine).
/// `std` would provide it; without `std` this stub satisfies the linker and is never called.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

/// Ends the process now, without running anything else.
pub fn exit(code: i32) -> ! {
    // SAFETY: exit_group takes a plain integer and ends every thread of the process.
    unsafe { syscall!(libc::SYS_exit_group, code) };
    // exit_group does not return.
    loop {
        core::hint::spin_loop();
    }
}

// ---------------------------------------------------------------------------------------------
// Plain descriptors.

/// Best-effort write of one line to fd 2.
pub fn write_stderr(bytes: &[u8]) {
    let _ = write_all(2, bytes);
}

/// Writes all of `bytes` to `fd`, retrying on `EINTR` and short writes.
pub fn write_all(fd: c_int, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        let n = retry(|| {
            // SAFETY: bytes is a live slice of bytes.len() bytes.
            cvt_isize(unsafe { syscall!(libc::SYS_write, fd, bytes.as_ptr(), bytes.len()) })
        })?;
        if n == 0 {
            return Err(Errno(libc::EIO));
        }
        bytes = &bytes[n..];
    }
    Ok(())
}

/// One `read` (EINTR retried); 0 is end of file.
pub fn read(fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: buf is a live, writable slice of buf.len() bytes.
    retry(|| cvt_isize(unsafe { syscall!(libc::SYS_read, fd.0, buf.as_mut_ptr(), buf.len()) }))
}

/// Reads a whole small file (at most `buf.len()` bytes) into `buf`.
pub fn read_file(path: &CStr, buf: &mut [u8]) -> Result<usize, Errno> {
    let fd = OwnedFd(retry(|| {
        // SAFETY: path is NUL-terminated.
        cvt(unsafe { open(path, libc::O_RDONLY | libc::O_CLOEXEC, 0) })
    })?);
    let mut len = 0;
    while len < buf.len() {
        let n = read(&fd, &mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    Ok(len)
}

/// The socket type (`SO_TYPE`) of `fd`.
pub fn socket_type(fd: c_int) -> Result<c_int, Errno> {
    let mut ty: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: ty and len are live locals of the sizes the kernel is told.
    cvt(unsafe {
        syscall!(
            libc::SYS_getsockopt,
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            &mut ty as *mut c_int,
            &mut len as *mut libc::socklen_t
        )
    })?;
    Ok(ty)
}

/// Duplicates `fd` to a close-on-exec descriptor numbered at least `min`.
pub fn dup_cloexec(fd: c_int, min: c_int) -> Result<OwnedFd, Errno> {
    // SAFETY: F_DUPFD_CLOEXEC takes an integer argument and only creates a new descriptor.
    cvt(unsafe { syscall!(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, min) }).map(OwnedFd)
}

/// Closes every descriptor from `first` up (`close_range`; best effort: kernels before 5.9 lack
/// it, and then inherited descriptors stay open).
#[doc(alias = "close_range")]
pub fn close_from(first: c_int) {
    // SAFETY: close_range only closes descriptors; none from `first` up is owned by any
    // OwnedFd yet (called before the guardian opens anything of its own).
    unsafe {
        syscall!(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0
        )
    };
}

/// Points descriptor `target` (0, 1 or 2) at `/dev/null`.
pub fn reopen_dev_null(target: c_int) -> Result<(), Errno> {
    let null = OwnedFd(retry(|| {
        // SAFETY: the path is a NUL-terminated literal.
        cvt(unsafe { open(c"/dev/null", libc::O_RDWR | libc::O_CLOEXEC, 0) })
    })?);
    dup2(null.0, target)
}

/// `openat(AT_FDCWD, path, flags, mode)`.
///
/// # Safety
/// None beyond a NUL-terminated `path`, which `&CStr` guarantees; `unsafe` only because it is a
/// raw system call.
unsafe fn open(path: &CStr, flags: c_int, mode: libc::c_uint) -> isize {
    // SAFETY: path is NUL-terminated and outlives the call.
    unsafe { syscall!(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), flags, mode) }
}

/// `dup2(fd, target)` as `dup3` (which every architecture has; it refuses equal numbers, where
/// `dup2` does nothing).
fn dup2(fd: c_int, target: c_int) -> Result<(), Errno> {
    if fd == target {
        return Ok(());
    }
    // SAFETY: plain descriptor numbers; the old target is released by the kernel.
    retry(|| cvt(unsafe { syscall!(libc::SYS_dup3, fd, target, 0) })).map(drop)
}

/// `splice(from, NULL, to, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)`: moves up to `len`
/// bytes from the pipe `from` to `to` at its file position, without waiting for the pipe;
/// `EINTR` retried. 0 is the pipe's end of file.
pub fn splice_out(from: &OwnedFd, to: c_int, len: usize) -> Result<usize, Errno> {
    let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
    retry(|| {
        // SAFETY: plain descriptors and null offsets (the file position is used).
        cvt_isize(unsafe {
            syscall!(
                libc::SYS_splice,
                from.0,
                core::ptr::null_mut::<i64>(),
                to,
                core::ptr::null_mut::<i64>(),
                len,
                flags
            )
        })
    })
}

/// Asks for a pipe buffer of `bytes` (fewer wake-ups); the system limit may refuse, harmlessly.
pub fn set_pipe_size(fd: &OwnedFd, bytes: usize) {
    // SAFETY: a plain fcntl on an owned descriptor.
    let _ = unsafe { syscall!(libc::SYS_fcntl, fd.0, libc::F_SETPIPE_SZ, bytes) };
}

/// Sets `O_NONBLOCK` on the descriptor's open file description.
pub fn set_nonblocking(fd: &OwnedFd) -> Result<(), Errno> {
    // SAFETY: a plain fcntl on an owned descriptor.
    let flags = cvt(unsafe { syscall!(libc::SYS_fcntl, fd.0, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe {
        syscall!(
            libc::SYS_fcntl,
            fd.0,
            libc::F_SETFL,
            flags | libc::O_NONBLOCK
        )
    })
    .map(drop)
}

/// `/dev/null` for writing, close-on-exec.
pub fn open_dev_null() -> Result<OwnedFd, Errno> {
    retry(|| {
        // SAFETY: the path is a NUL-terminated literal.
        cvt(unsafe { open(c"/dev/null", libc::O_WRONLY | libc::O_CLOEXEC, 0) })
    })
    .map(OwnedFd)
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a live array of the two ints pipe2 writes.
    cvt(unsafe { syscall!(libc::SYS_pipe2, fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((OwnedFd(fds[0]), OwnedFd(fds[1])))
}

// ---------------------------------------------------------------------------------------------
// Memory: the frame buffer and the exec pointer arrays.

/// Maps `len` bytes that live as long as the process: the launch frame (which the decoded spec
/// borrows) followed by the argv/envp pointer arrays (see [`pointer_slots`]). Anonymous and
/// zero-filled, so only the pages actually written become resident: a small launch dirties one
/// or two pages (a 192 KiB stack array would instead be probed, page by page, into memory).
pub fn map_region(len: usize) -> Result<&'static mut [u8], Errno> {
    // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
    let base = cvt_isize(unsafe {
        syscall!(
            libc::SYS_mmap,
            0usize,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1isize,
            0usize
        )
    })? as *mut u8;
    // SAFETY: the mapping is `len` bytes, zero-filled (every byte an initialized u8), never
    // unmapped (hence 'static), and this is the only reference to it.
    Ok(unsafe { core::slice::from_raw_parts_mut(base, len) })
}

/// Gives the pages of the mapping at `addr` (`len` bytes, from [`map_region`]) back to the
/// kernel (`MADV_DONTNEED`): they read as zeros afterwards, so the caller must hold no reference
/// it still reads. A fork's copy keeps its own pages. Best effort.
pub fn discard(addr: usize, len: usize) {
    // SAFETY: a private anonymous mapping of this process; its contents are no longer read.
    let _ = unsafe { syscall!(libc::SYS_madvise, addr, len, libc::MADV_DONTNEED) };
}

/// How far below the caller's frame [`discard_stack_below`] gives pages back: deeper than the
/// guardian's stack ever reaches (its largest frame holds a 4 KiB buffer), and within the stack
/// mapping the kernel sets up (at least 128 KiB); a range past its end is skipped (`ENOMEM`).
const STACK_SPAN: usize = 64 * 1024;

/// Gives back to the kernel the stack pages below the caller's frame: the handshake, the fork
/// and the gate reached deeper than the reaping loop ever does, and each page they touched would
/// stay resident while the guardian holds its workload (F5). Nothing lives below the stack
/// pointer here (no signal handler runs on this stack: signals are read from the signalfd), and
/// the pages read as zeros when touched again. Keeps the red zone (128 bytes on x86-64) and the
/// page the stack pointer is in.
#[inline(always)]
pub fn discard_stack_below() {
    const PAGE: usize = 4096;
    let end = (raw::stack_pointer() - 128) & !(PAGE - 1);
    let start = end.saturating_sub(STACK_SPAN);
    // SAFETY: every byte in [start, end) is below the live stack (and so unread) or outside the
    // stack mapping, which madvise skips.
    let _ = unsafe { syscall!(libc::SYS_madvise, start, end - start, libc::MADV_DONTNEED) };
}

/// Carves two adjacent pointer arrays (argv: `na` slots, envp: `ne` slots) from the start of
/// `tail`, which must be 8-byte aligned and long enough; `None` otherwise.
pub fn pointer_slots(
    tail: &'static mut [u8],
    na: usize,
    ne: usize,
) -> Option<(&'static mut [*const c_char], &'static mut [*const c_char])> {
    let size = core::mem::size_of::<*const c_char>();
    let ptr = tail.as_mut_ptr();
    if !ptr.cast::<*const c_char>().is_aligned() || tail.len() / size < na.checked_add(ne)? {
        return None;
    }
    // SAFETY: alignment and length were checked above; every byte of `tail` is an initialized
    // u8 and any initialized bit pattern is a valid raw pointer; the two arrays are disjoint
    // and `tail` (borrowed mutably for 'static) is consumed, so nothing else aliases them.
    unsafe {
        let argv = core::slice::from_raw_parts_mut(ptr.cast::<*const c_char>(), na);
        let envp = core::slice::from_raw_parts_mut(ptr.add(na * size).cast::<*const c_char>(), ne);
        Some((argv, envp))
    }
}

// ---------------------------------------------------------------------------------------------
// The SOCK_SEQPACKET channel.

/// One received message.
pub struct Received {
    /// Bytes of the message that fit in the buffer (0 with `len == 0` and no flags: EOF).
    pub len: usize,
    /// The message was larger than the buffer (`MSG_TRUNC`).
    pub truncated: bool,
    /// Descriptors were cut (`MSG_CTRUNC`) or more than [`MAX_RECEIVED_FDS`] arrived.
    pub fds_cut: bool,
    /// Received descriptors (close-on-exec), in order.
    pub fds: [Option<OwnedFd>; MAX_RECEIVED_FDS],
}

/// Most descriptors one message brings: stdin, stdout, stderr, and a capturing launch's two
/// indexes (its stdout and stderr are its artifacts), the launcher's registration lock (L3) and
/// the readiness pipe (H6), and the Landlock ruleset (X11).
pub const MAX_RECEIVED_FDS: usize = 8;

/// Receives one message without blocking (the caller polled), with up to [`MAX_RECEIVED_FDS`]
/// `SCM_RIGHTS` descriptors, received close-on-exec.
pub fn recv_msg(fd: &OwnedFd, buf: &mut [u8]) -> Result<Received, Errno> {
    // Room for exactly one SCM_RIGHTS header with eight ints (CMSG_SPACE(32) = 48 on LP64).
    let mut cbuf = [0u64; 6];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<c_void>(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast::<c_void>();
    msg.msg_controllen = core::mem::size_of_val(&cbuf);
    let n = retry(|| {
        // SAFETY: msg points at iov (a live buffer of buf.len() bytes) and cbuf (its stated size).
        cvt_isize(unsafe {
            syscall!(
                libc::SYS_recvmsg,
                fd.0,
                &mut msg as *mut libc::msghdr,
                libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT
            )
        })
    })?;
    let mut out = Received {
        len: n.min(buf.len()),
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
        fds_cut: msg.msg_flags & libc::MSG_CTRUNC != 0,
        fds: [None, None, None, None, None, None, None, None],
    };
    let mut count = 0usize;
    // SAFETY: msg was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay within msg_controllen and
    // CMSG_DATA of an SCM_RIGHTS header holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors, which
    // the kernel installed in this process, so taking ownership of each is sound.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / core::mem::size_of::<c_int>() {
                    let fd = OwnedFd(core::ptr::read_unaligned(data.add(i)));
                    if count < MAX_RECEIVED_FDS {
                        out.fds[count] = Some(fd);
                    } else {
                        out.fds_cut = true; // dropped: closed
                    }
                    count += 1;
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(out)
}

/// Sends one message without blocking and without `SIGPIPE`.
pub fn send_msg(fd: &OwnedFd, bytes: &[u8]) -> Result<(), Errno> {
    let n = retry(|| {
        // SAFETY: bytes is a live slice of bytes.len() bytes.
        cvt_isize(unsafe {
            syscall!(
                libc::SYS_sendto,
                fd.0,
                bytes.as_ptr(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                0usize,
                0usize
            )
        })
    })?;
    if n != bytes.len() {
        return Err(Errno(libc::EMSGSIZE));
    }
    Ok(())
}

/// [`send_msg`] with one descriptor passed along (`SCM_RIGHTS`): the message holds a reference
/// to its open file description until the peer reads it (or its socket goes).
pub fn send_msg_with_fd(fd: &OwnedFd, bytes: &[u8], passed: &OwnedFd) -> Result<(), Errno> {
    // One SCM_RIGHTS header with one int: CMSG_SPACE(4) = 24 on LP64, in 8-byte words.
    let mut cbuf = [0u64; 3];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast::<c_void>();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(core::mem::size_of::<c_int>() as u32) } as usize;
    if space > core::mem::size_of_val(&cbuf) {
        return Err(Errno(libc::EINVAL));
    }
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at cbuf, 8-byte aligned and at least msg_controllen bytes
    // (checked just above); CMSG_FIRSTHDR is within it, and CMSG_DATA of a header of CMSG_LEN(4)
    // bytes has room for one int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(Errno(libc::EINVAL));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(core::mem::size_of::<c_int>() as u32) as _;
        core::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), passed.0);
    }
    let n = retry(|| {
        // SAFETY: msg points at iov (bytes, a live slice) and cbuf (its stated size), both live
        // for the call; the kernel only reads them.
        cvt_isize(unsafe {
            syscall!(
                libc::SYS_sendmsg,
                fd.0,
                &msg as *const libc::msghdr,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT
            )
        })
    })?;
    if n != bytes.len() {
        return Err(Errno(libc::EMSGSIZE));
    }
    Ok(())
}

/// A `pollfd` entry for `fd` waiting for input.
pub fn poll_in(fd: &OwnedFd) -> libc::pollfd {
    libc::pollfd {
        fd: fd.0,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// An entry `poll` skips (negative fd).
pub const fn poll_none() -> libc::pollfd {
    libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }
}

/// `poll` with a timeout in ms (-1: none). `EINTR` is returned as 0 ready entries.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> Result<usize, Errno> {
    // `ppoll` (every architecture has it): a timespec, or none for "wait forever".
    let ts = libc::timespec {
        tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
        tv_nsec: (timeout_ms.max(0) % 1000) as libc::c_long * 1_000_000,
    };
    let tsp = if timeout_ms < 0 {
        core::ptr::null()
    } else {
        &ts as *const libc::timespec
    };
    // SAFETY: fds is a live slice of fds.len() pollfd entries; tsp is null or a live timespec;
    // no signal mask is passed.
    match cvt(unsafe {
        syscall!(
            libc::SYS_ppoll,
            fds.as_mut_ptr(),
            fds.len(),
            tsp,
            0usize,
            0usize
        )
    }) {
        Ok(n) => Ok(n as usize),
        Err(Errno::INTR) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Whether a polled entry has input, hang-up or error pending.
pub fn ready(p: &libc::pollfd) -> bool {
    p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

// ---------------------------------------------------------------------------------------------
// Processes.

#[doc(alias = "PR_SET_CHILD_SUBREAPER")]
pub fn set_child_subreaper() -> Result<(), Errno> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes one integer flag.
    cvt(unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_CHILD_SUBREAPER,
            1usize,
            0,
            0,
            0
        )
    })?;
    Ok(())
}

/// `setpgid(0, 0)`: a process group of our own, so a `kill(-pgid)` aimed at the launcher's
/// group does not reach us. `EPERM` (we lead a session already) leaves us out of any other group
/// anyway and is not an error.
pub fn leave_process_group() -> Result<(), Errno> {
    // SAFETY: plain integer arguments (0, 0: own pid, own pgid).
    match cvt(unsafe { syscall!(libc::SYS_setpgid, 0, 0) }) {
        Ok(_) | Err(Errno(libc::EPERM)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `PR_SET_DUMPABLE 0`: `/proc/<us>/fd`, `mem`, `environ` become reachable only with
/// `CAP_SYS_PTRACE`, and no core dump is written.
#[doc(alias = "PR_SET_DUMPABLE")]
pub fn set_not_dumpable() -> Result<(), Errno> {
    // SAFETY: PR_SET_DUMPABLE takes one integer flag.
    cvt(unsafe { syscall!(libc::SYS_prctl, libc::PR_SET_DUMPABLE, 0usize, 0, 0, 0) }).map(drop)
}

/// `chdir("/")`: the guardian pins no directory (a checkout) while it holds a scope.
pub fn chdir_root() -> Result<(), Errno> {
    // SAFETY: the path is a NUL-terminated literal.
    cvt(unsafe { syscall!(libc::SYS_chdir, c"/".as_ptr()) }).map(drop)
}

pub fn getpid() -> Pid {
    // SAFETY: getpid has no preconditions.
    Pid(unsafe { syscall!(libc::SYS_getpid) } as libc::pid_t)
}

pub enum Fork {
    Child,
    Parent(Pid),
}

/// `fork` (a `clone` with only `SIGCHLD` as its exit signal). The guardian is single-threaded
/// and keeps no C library state, so the child may run the [`child`] calls.
pub fn fork() -> Result<Fork, Errno> {
    // SAFETY: single-threaded process (module contract); no new stack, no TLS, no tid
    // pointers (all zero); the child only makes the calls in `child` and then execs or exits.
    match cvt(unsafe { syscall!(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) })? {
        0 => Ok(Fork::Child),
        pid => Ok(Fork::Parent(Pid(pid))),
    }
}

/// `clone3`'s argument block, `CLONE_ARGS_SIZE_VER2` (88 bytes: up to `cgroup`, Linux 5.7).
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7; not in the `libc` crate).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// A fork straight into the cgroup `dir` refers to: `clone3` with `CLONE_INTO_CGROUP` and
/// `SIGCHLD` as the exit signal, no new stack (the child runs on a copy of this one, as after
/// `fork`). The child is a member of that cgroup from its first instruction: nothing it starts
/// can escape it. `ENOSYS` (kernel < 5.3), `E2BIG`/`EINVAL` (< 5.7), `EBADF` (not a cgroup v2
/// directory) and the rest come back unchanged for the caller to fall back on [`fork`].
#[doc(alias = "CLONE_INTO_CGROUP")]
pub fn fork_into_cgroup(dir: &OwnedFd) -> Result<Fork, Errno> {
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: dir.0 as u64,
    };
    // SAFETY: single-threaded process (module contract); args is a live, fully initialised
    // clone_args of the size passed; no stack, TLS, tid or pidfd pointers (all zero); the child
    // only makes the calls in `child` and then execs or exits, as after `fork`.
    match cvt(unsafe {
        syscall!(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            core::mem::size_of::<CloneArgs>()
        )
    })? {
        0 => Ok(Fork::Child),
        pid => Ok(Fork::Parent(Pid(pid))),
    }
}

/// A cgroup v2 directory, opened for [`fork_into_cgroup`] (`O_PATH` is not enough: the kernel
/// wants a directory opened for reading).
pub fn open_dir(path: &CStr) -> Result<OwnedFd, Errno> {
    Ok(OwnedFd(retry(|| {
        // SAFETY: path is NUL-terminated (CStr).
        cvt(unsafe {
            open(
                path,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                0,
            )
        })
    })?))
}

/// A directory held as its parent's descriptor and its last name: removable after the text of
/// its path is gone (the launch frame's pages are discarded once the workload started, F5).
pub struct Leaf {
    parent: OwnedFd,
    /// NUL-terminated (a name is at most 255 bytes).
    name: [u8; 256],
    /// The directory's `cgroup.events`, read for `populated` and polled (`POLLPRI`) for its
    /// changes (X7); `None` where it cannot be opened (not a cgroup v2 directory).
    events: Option<OwnedFd>,
}

impl Leaf {
    /// The directory at `path`; `None` where it cannot be opened or its last name is not a
    /// plain name.
    pub fn of(path: &CStr) -> Option<Leaf> {
        let bytes = path.to_bytes();
        let name = &bytes[bytes.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)..];
        if name.is_empty() || name.len() > 255 || name == b"." || name == b".." {
            return None;
        }
        let dir = open_dir(path).ok()?;
        let parent = retry(|| {
            // SAFETY: a live descriptor and a NUL-terminated name.
            cvt(unsafe {
                syscall!(
                    libc::SYS_openat,
                    dir.0,
                    c"..".as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    0
                )
            })
        })
        .ok()?;
        let events = retry(|| {
            // SAFETY: a live descriptor and a NUL-terminated name.
            cvt(unsafe {
                syscall!(
                    libc::SYS_openat,
                    dir.0,
                    c"cgroup.events".as_ptr(),
                    libc::O_RDONLY | libc::O_CLOEXEC,
                    0
                )
            })
        })
        .ok()
        .map(OwnedFd);
        let mut buf = [0u8; 256];
        buf[..name.len()].copy_from_slice(name);
        Some(Leaf {
            parent: OwnedFd(parent),
            name: buf,
            events,
        })
    }

    /// Whether `cgroup.events` says `populated 1`: a process is still a member of the cgroup
    /// or of one below it. `false` where the file is missing, unreadable or says otherwise
    /// (a removed cgroup holds nothing). Each read also rearms its `POLLPRI`.
    #[doc(alias = "cgroup.events")]
    pub fn populated(&self) -> bool {
        let Some(fd) = &self.events else {
            return false;
        };
        let mut buf = [0u8; 128];
        let n = match retry(|| {
            // SAFETY: buf is a live, writable slice of buf.len() bytes; offset 0.
            cvt_isize(unsafe {
                syscall!(libc::SYS_pread64, fd.0, buf.as_mut_ptr(), buf.len(), 0usize)
            })
        }) {
            Ok(n) => n.min(buf.len()),
            Err(_) => return false,
        };
        buf[..n]
            .split(|&b| b == b'\n')
            .any(|line| line == b"populated 1")
    }

    /// A `pollfd` entry that wakes when `cgroup.events` changes (`POLLPRI`; the kernel adds
    /// `POLLERR`), or one `poll` skips.
    pub fn poll_events(&self) -> libc::pollfd {
        match &self.events {
            Some(fd) => libc::pollfd {
                fd: fd.0,
                events: libc::POLLPRI,
                revents: 0,
            },
            None => poll_none(),
        }
    }

    /// `rmdir`: fails (`EBUSY`) while the cgroup still holds a process.
    pub fn remove(&self) -> Result<(), Errno> {
        // SAFETY: a live descriptor and a NUL-terminated name.
        cvt(unsafe {
            syscall!(
                libc::SYS_unlinkat,
                self.parent.0,
                self.name.as_ptr(),
                libc::AT_REMOVEDIR
            )
        })
        .map(drop)
    }

    /// `cgroup.kill` (Linux 5.14): the kernel sends `SIGKILL` to every member of the cgroup
    /// and of the cgroups below it, and fails the forks racing with it. Opened through the
    /// parent's descriptor and the directory's name (no path text is kept), written, closed.
    #[doc(alias = "cgroup.kill")]
    pub fn kill(&self) -> Result<(), Errno> {
        let dir = OwnedFd(retry(|| {
            // SAFETY: a live descriptor and a NUL-terminated name.
            cvt(unsafe {
                syscall!(
                    libc::SYS_openat,
                    self.parent.0,
                    self.name.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    0
                )
            })
        })?);
        let file = OwnedFd(retry(|| {
            // SAFETY: a live descriptor and a NUL-terminated name.
            cvt(unsafe {
                syscall!(
                    libc::SYS_openat,
                    dir.0,
                    c"cgroup.kill".as_ptr(),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                    0
                )
            })
        })?);
        write_all(file.0, b"1")
    }
}

/// `setpgid(pid, pid)` from the parent (closes the race with the child's own call).
pub fn setpgid_child(pid: Pid) -> Result<(), Errno> {
    // SAFETY: plain integer arguments.
    cvt(unsafe { syscall!(libc::SYS_setpgid, pid.0, pid.0) }).map(drop)
}

pub fn getpgid(pid: Pid) -> Result<u32, Errno> {
    // SAFETY: plain integer argument.
    cvt(unsafe { syscall!(libc::SYS_getpgid, pid.0) }).map(|v| v as u32)
}

pub fn getsid(pid: Pid) -> Result<u32, Errno> {
    // SAFETY: plain integer argument.
    cvt(unsafe { syscall!(libc::SYS_getsid, pid.0) }).map(|v| v as u32)
}

/// A pidfd for our own (unreaped) child: its pid cannot be reused before we reap it.
pub fn pidfd_open(pid: Pid) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor (close-on-exec).
    cvt(unsafe { syscall!(libc::SYS_pidfd_open, pid.0, 0) }).map(OwnedFd)
}

/// Sends `signo` through a pidfd (never by bare pid).
pub fn pidfd_send_signal(pidfd: &OwnedFd, signo: c_int) -> Result<(), Errno> {
    // SAFETY: a live pidfd, a signal number, a null siginfo (kernel fills it), no flags.
    cvt(unsafe { syscall!(libc::SYS_pidfd_send_signal, pidfd.0, signo, 0usize, 0) }).map(drop)
}

/// Sends `signo` to the process group `leader` leads, which must be our own unreaped child
/// (a zombie counts): while it is unreaped its pid, and so the group's id, cannot be reused.
pub fn kill_group_of_child(leader: Pid, signo: c_int) -> Result<(), Errno> {
    // SAFETY: plain integer arguments; a negative pid names a process group.
    cvt(unsafe { syscall!(libc::SYS_kill, -leader.0, signo) }).map(drop)
}

/// Calls `f` with each direct child of this process, as the kernel lists them in
/// `/proc/thread-self/children` (`CONFIG_PROC_CHILDREN`; the guardian is single-threaded, so its
/// one thread's list is all of them), read through a small buffer. Every pid passed is a child
/// of ours until we reap it, which nothing does while the list is read.
///
/// # Caveats
/// The list is a snapshot per read: a child that arrives meanwhile (an orphan reparented to us)
/// may be missed, and is listed by the next call.
pub fn for_each_child(mut f: impl FnMut(Pid)) -> Result<(), Errno> {
    let fd = OwnedFd(retry(|| {
        // SAFETY: the path is a NUL-terminated literal.
        cvt(unsafe {
            open(
                c"/proc/thread-self/children",
                libc::O_RDONLY | libc::O_CLOEXEC,
                0,
            )
        })
    })?);
    let mut buf = [0u8; 128];
    // The number being read (it may span two reads), if any digit of it came.
    let mut pid: Option<libc::pid_t> = None;
    loop {
        let n = read(&fd, &mut buf)?;
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if b.is_ascii_digit() {
                let digit = libc::pid_t::from(b - b'0');
                pid = Some(pid.unwrap_or(0).saturating_mul(10).saturating_add(digit));
            } else if let Some(p) = pid.take() {
                if p > 0 {
                    f(Pid(p));
                }
            }
        }
    }
    if let Some(p) = pid.filter(|&p| p > 0) {
        f(Pid(p));
    }
    Ok(())
}

/// `kill(child, signo)` by pid, for our own unreaped child ([`for_each_child`], [`fork`]): until
/// we reap it, its pid cannot name another process. A pid of 0 or less (a group) is refused.
pub fn signal_child(child: Pid, signo: c_int) -> Result<(), Errno> {
    if child.0 <= 0 {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: plain integer arguments; a positive pid names one process.
    cvt(unsafe { syscall!(libc::SYS_kill, child.0, signo) }).map(drop)
}

/// `readlink(path)` into `buf`: the link's length, `buf.len()` when it may have been cut.
/// On `/proc/PID/exe` the kernel formats the executable's path from its dentry: nothing is asked
/// of the file system the file is on (a FUSE server cannot hold this call).
pub fn readlink(path: &CStr, buf: &mut [u8]) -> Result<usize, Errno> {
    retry(|| {
        // SAFETY: path is NUL-terminated; buf is a live, writable slice of buf.len() bytes.
        cvt_isize(unsafe {
            syscall!(
                libc::SYS_readlinkat,
                libc::AT_FDCWD,
                path.as_ptr(),
                buf.as_mut_ptr(),
                buf.len()
            )
        })
    })
}

/// This process's command name (`PR_GET_NAME`): at most 15 bytes, NUL-padded to 16.
#[doc(alias = "PR_GET_NAME")]
pub fn own_comm() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes (TASK_COMM_LEN) into the live buffer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_GET_NAME,
            name.as_mut_ptr(),
            0,
            0,
            0
        )
    };
    name
}

pub enum Reaped {
    /// A child was reaped with this raw wait status.
    Child(Pid, c_int),
    /// Children remain, none has exited.
    None,
    /// `ECHILD`: no children at all.
    NoChildren,
}

/// One `waitpid(-1, WNOHANG)` (EINTR retried). Only the guardian, a single-threaded subreaper,
/// ever calls this.
pub fn reap_one() -> Result<Reaped, Errno> {
    let mut status: c_int = 0;
    match retry(|| {
        // SAFETY: status is a live int the kernel writes; no rusage is requested.
        cvt(unsafe {
            syscall!(
                libc::SYS_wait4,
                -1isize,
                &mut status as *mut c_int,
                libc::WNOHANG,
                0usize
            )
        })
    }) {
        Ok(0) => Ok(Reaped::None),
        Ok(pid) => Ok(Reaped::Child(Pid(pid), status)),
        Err(Errno::CHILD) => Ok(Reaped::NoChildren),
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Signals.

/// The kernel's signal set: one bit per signal 1..=64 (8 bytes, the `sigsetsize` passed).
type KernelSigset = u64;
const SIGSET_SIZE: usize = core::mem::size_of::<KernelSigset>();

/// `rt_sigprocmask(SIG_SETMASK, set)`.
fn set_signal_mask(set: KernelSigset) -> Result<(), Errno> {
    // SAFETY: set is a live kernel sigset of SIGSET_SIZE bytes; the old mask is not requested.
    cvt(unsafe {
        syscall!(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &set as *const KernelSigset,
            0usize,
            SIGSET_SIZE
        )
    })
    .map(drop)
}

/// Blocks every signal except `unblocked` and returns a non-blocking,
/// close-on-exec signalfd for all blocked signals.
pub fn block_signals_to_signalfd(unblocked: &[c_int]) -> Result<OwnedFd, Errno> {
    let mut set = KernelSigset::MAX;
    for &s in unblocked {
        set &= !(1 << (s - 1));
    }
    set_signal_mask(set)?;
    // SAFETY: -1 asks for a new signalfd watching the live set (SIGSET_SIZE bytes).
    cvt(unsafe {
        syscall!(
            libc::SYS_signalfd4,
            -1isize,
            &set as *const KernelSigset,
            SIGSET_SIZE,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC
        )
    })
    .map(OwnedFd)
}

/// Every disposition back to `SIG_DFL`: ignored ones survive `execve` (an inherited `SIG_IGN`
/// for `SIGCHLD` makes the kernel reap children itself, with no status and no wake-up). The raw
/// `rt_sigaction` is used so that the signals libc keeps for itself (32, 33) are reset too; an
/// all-zero kernel `struct sigaction` is `SIG_DFL`, no flags, empty mask. `SIGKILL`/`SIGSTOP`
/// are skipped (the kernel refuses them; they cannot be ignored anyway).
pub fn reset_dispositions() {
    let dfl = [0u64; 4]; // larger than the kernel's struct sigaction on every Linux arch
    for sig in 1..=64 as c_int {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: dfl is a live, zeroed buffer at least the size of the kernel's struct
        // sigaction; the old action is not requested; sigsetsize is the kernel's (8).
        unsafe {
            syscall!(
                libc::SYS_rt_sigaction,
                sig,
                dfl.as_ptr(),
                0usize,
                SIGSET_SIZE
            )
        };
    }
}

/// Takes one pending signal from a non-blocking signalfd; `None` when none is pending.
pub fn read_signal(sfd: &OwnedFd) -> Result<Option<c_int>, Errno> {
    let mut info = [0u8; 128]; // sizeof(struct signalfd_siginfo)
    match read(sfd, &mut info) {
        Ok(128) => Ok(Some(
            u32::from_ne_bytes([info[0], info[1], info[2], info[3]]) as c_int,
        )),
        Ok(_) => Ok(None),
        Err(Errno::AGAIN) => Ok(None),
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Files and time.

/// Creates `path` with `O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC`, mode 0600 whatever the umask
/// (`fchmod` after the open); returns it with its `(st_dev, st_ino)`.
pub fn create_exclusive(path: &CStr) -> Result<(OwnedFd, u64, u64), Errno> {
    let fd = OwnedFd(retry(|| {
        // SAFETY: path is NUL-terminated; the mode is passed as the variadic argument open expects.
        cvt(unsafe {
            open(
                path,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        })
    })?);
    // SAFETY: a live descriptor and a plain mode.
    cvt(unsafe { syscall!(libc::SYS_fchmod, fd.0, 0o600) })?;
    // SAFETY: stat is plain data; fstat fills it for a live descriptor.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a live stat buffer.
    cvt(unsafe { syscall!(libc::SYS_fstat, fd.0, &mut st as *mut libc::stat) })?;
    Ok((fd, st.st_dev, st.st_ino))
}

/// How [`reserve`] set the receipt's bytes aside.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// Written as zeros on a file system that overwrites in place (ext4, xfs), whose delayed
    /// allocation reserves the space at the write: [`start_writeback`] then gives them their
    /// blocks, so that the registration's commit carries them and the receipt is an overwrite
    /// whose `fdatasync` commits nothing.
    Zeros,
    /// Allocated by `fallocate` (or written, where it is missing), as a copy-on-write file
    /// system needs: the receipt's write then fills the allocated space.
    Allocated,
}

/// Sets `zeros.len()` bytes from offset 0 of `fd` aside for the receipt (see [`Reserved`]);
/// the size grows to that length either way. A full disk fails here.
#[doc(alias = "fallocate")]
pub fn reserve(fd: &OwnedFd, zeros: &[u8]) -> Result<Reserved, Errno> {
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    // SAFETY: statfs is plain data; fstatfs fills it for a live descriptor.
    let mut st: libc::statfs = unsafe { core::mem::zeroed() };
    // SAFETY: st is a live statfs buffer.
    let fs = cvt(unsafe { syscall!(libc::SYS_fstatfs, fd.0, &mut st as *mut libc::statfs) })
        .map(|_| st.f_type as i64);
    if matches!(fs, Ok(EXT4 | XFS)) {
        return pwrite_all(fd, zeros, 0).map(|()| Reserved::Zeros);
    }
    // SAFETY: plain integer arguments on a live descriptor.
    match retry(|| cvt(unsafe { syscall!(libc::SYS_fallocate, fd.0, 0, 0, zeros.len()) })) {
        Err(Errno(libc::EOPNOTSUPP)) => pwrite_all(fd, zeros, 0),
        other => other.map(drop),
    }
    .map(|()| Reserved::Allocated)
}

/// Starts writing `fd`'s dirty pages back (`sync_file_range`, `SYNC_FILE_RANGE_WRITE`): the
/// file system allocates their blocks now and the write proceeds on its own. Waits for nothing
/// and syncs nothing; a failure only means the receipt's `fdatasync` does the work later.
pub fn start_writeback(fd: &OwnedFd) {
    // SAFETY: plain integer arguments on a live descriptor.
    let _ = unsafe {
        syscall!(
            libc::SYS_sync_file_range,
            fd.0,
            0,
            0,
            libc::SYNC_FILE_RANGE_WRITE
        )
    };
}

/// `unlink(path)`.
pub fn unlink(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is NUL-terminated.
    cvt(unsafe { syscall!(libc::SYS_unlinkat, libc::AT_FDCWD, path.as_ptr(), 0) }).map(drop)
}

/// `pwrite` all of `bytes` at offset 0, cut the file to their length if it is longer
/// (`ftruncate`: bytes appended by anyone else are gone; at the reserved length there is
/// nothing to cut, and a cut would commit the file's metadata again), then `fdatasync`.
pub fn write_whole_sync(fd: &OwnedFd, bytes: &[u8]) -> Result<(), Errno> {
    pwrite_all(fd, bytes, 0)?;
    // SAFETY: stat is plain data; fstat fills it for a live descriptor.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a live stat buffer.
    let size = cvt(unsafe { syscall!(libc::SYS_fstat, fd.0, &mut st as *mut libc::stat) })
        .map(|_| st.st_size);
    if size != Ok(bytes.len() as i64) {
        // SAFETY: a live descriptor and a length.
        retry(|| cvt(unsafe { syscall!(libc::SYS_ftruncate, fd.0, bytes.len()) }))?;
    }
    datasync(fd)
}

/// `fdatasync(fd)`: the file's data, and whatever metadata reading it back needs, on the disk.
pub fn datasync(fd: &OwnedFd) -> Result<(), Errno> {
    // SAFETY: a live descriptor.
    retry(|| cvt(unsafe { syscall!(libc::SYS_fdatasync, fd.0) })).map(drop)
}

/// `pwrite` all of `bytes` at `offset` (EINTR and short writes retried).
fn pwrite_all(fd: &OwnedFd, bytes: &[u8], offset: i64) -> Result<(), Errno> {
    let mut done = 0usize;
    while done < bytes.len() {
        let rest = &bytes[done..];
        let n = retry(|| {
            // SAFETY: rest is a live slice of rest.len() bytes.
            cvt_isize(unsafe {
                syscall!(
                    libc::SYS_pwrite64,
                    fd.0,
                    rest.as_ptr(),
                    rest.len(),
                    offset + done as i64
                )
            })
        })?;
        if n == 0 {
            return Err(Errno(libc::EIO));
        }
        done += n;
    }
    Ok(())
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a live timespec; the clocks used always exist.
    unsafe {
        syscall!(
            libc::SYS_clock_gettime,
            clock,
            &mut ts as *mut libc::timespec
        )
    };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// `CLOCK_REALTIME` in ns (for receipts: wall-clock evidence).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `getrusage(RUSAGE_CHILDREN)`: what every child this process waited for cost, each with the
/// children it waited for in turn (H4). Zeros if the call fails (it cannot, with a valid buffer).
#[doc(alias = "getrusage")]
pub fn children_usage() -> refine_protocol_core::TreeUsage {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a pointer to a live, writable rusage.
    let r = unsafe {
        syscall!(
            libc::SYS_getrusage,
            libc::RUSAGE_CHILDREN,
            &mut ru as *mut libc::rusage
        )
    };
    if r < 0 {
        return refine_protocol_core::TreeUsage::default();
    }
    let us = |t: libc::timeval| (t.tv_sec.max(0) as u64) * 1_000_000 + t.tv_usec.max(0) as u64;
    refine_protocol_core::TreeUsage {
        user_us: us(ru.ru_utime),
        system_us: us(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss.max(0) as u64,
    }
}

/// `CLOCK_MONOTONIC` in ms (for deadlines).
pub fn monotonic_ms() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) / 1_000_000
}

// ---------------------------------------------------------------------------------------------
// Between fork and exec.

/// One classic BPF instruction of a seccomp program (`struct sock_filter`).
pub type Filter = libc::sock_filter;

/// The calls the forked child makes before `execve`: async-signal-safe only, no allocation, no
/// formatting. Each returns the errno on failure.
pub mod child {
    use super::*;

    pub fn setsid() -> Result<(), Errno> {
        // SAFETY: no arguments.
        cvt(unsafe { syscall!(libc::SYS_setsid) }).map(drop)
    }

    pub fn setpgid_self() -> Result<(), Errno> {
        // SAFETY: plain integer arguments (0, 0: own pid, own pgid).
        cvt(unsafe { syscall!(libc::SYS_setpgid, 0, 0) }).map(drop)
    }

    /// `dup2(fd, target)`; the new descriptor is not close-on-exec.
    pub fn dup2(fd: &OwnedFd, target: c_int) -> Result<(), Errno> {
        super::dup2(fd.0, target)
    }

    /// `fd` moved to the lowest free number at or above `min` (close-on-exec): what the child
    /// still needs is kept off the number the workload's readiness descriptor takes.
    pub fn moved_above(fd: OwnedFd, min: c_int) -> Result<OwnedFd, Errno> {
        // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor; the old one is closed on drop.
        let n = cvt(unsafe { syscall!(libc::SYS_fcntl, fd.0, libc::F_DUPFD_CLOEXEC, min) })?;
        Ok(OwnedFd(n as c_int))
    }

    /// `fd` on `target` across the exec: `dup3` without `O_CLOEXEC`, or, when it already is
    /// `target`, its close-on-exec flag cleared.
    pub fn keep_on(fd: &OwnedFd, target: c_int) -> Result<(), Errno> {
        if fd.0 == target {
            // SAFETY: F_SETFD with 0 only clears the descriptor's flags.
            return cvt(unsafe { syscall!(libc::SYS_fcntl, fd.0, libc::F_SETFD, 0) }).map(drop);
        }
        super::dup2(fd.0, target)
    }

    /// Makes the terminal on fd 0 the controlling terminal (after `setsid`).
    #[doc(alias = "TIOCSCTTY")]
    pub fn set_controlling_tty() -> Result<(), Errno> {
        // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal).
        cvt(unsafe { syscall!(libc::SYS_ioctl, 0, libc::TIOCSCTTY, 0) }).map(drop)
    }

    /// Every disposition back to `SIG_DFL` ([`super::reset_dispositions`]), then `SIG_IGN` for
    /// the signals of `ignored` and `blocked` as the mask (bit n-1: signal n; both empty for a
    /// clean start). `SIGKILL`/`SIGSTOP` bits are refused by the decoder and skipped here.
    pub fn reset_signals(ignored: u64, blocked: u64) -> Result<(), Errno> {
        super::reset_dispositions();
        // A kernel `struct sigaction` whose handler is SIG_IGN (1), no flags, an empty mask.
        let ign = [1u64, 0, 0, 0];
        for sig in 1..=64 as c_int {
            if ignored & (1 << (sig - 1)) == 0 || sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            // SAFETY: ign is a live buffer at least the size of the kernel's struct sigaction
            // (handler SIG_IGN, the rest zero); the old action is not requested; sigsetsize is
            // the kernel's (8).
            unsafe {
                syscall!(
                    libc::SYS_rt_sigaction,
                    sig,
                    ign.as_ptr(),
                    0usize,
                    SIGSET_SIZE
                )
            };
        }
        set_signal_mask(blocked)
    }

    /// Marks every descriptor from 3 up close-on-exec, so the workload gets exactly its
    /// stdin, stdout and stderr (nothing the launcher leaked to the guardian). Kernels before
    /// 5.11 lack the flag: then inherited descriptors stay as the launcher left them.
    #[doc(alias = "close_range")]
    pub fn cloexec_from_3() {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors.
        unsafe {
            syscall!(
                libc::SYS_close_range,
                3,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC
            )
        };
    }

    pub fn setrlimit(resource: u32, soft: u64, hard: u64) -> Result<(), Errno> {
        let lim = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: lim is a live rlimit (the kernel's 64-bit layout); pid 0 is this process; the
        // old limit is not requested; an unknown resource fails with EINVAL.
        cvt(unsafe {
            syscall!(
                libc::SYS_prlimit64,
                0,
                resource,
                &lim as *const libc::rlimit,
                0usize
            )
        })
        .map(drop)
    }

    /// Becomes `uid`/`gid` with exactly `groups` and no capability (X1, X3), checked:
    /// 1. the bounding set is emptied where this process may (`PR_CAPBSET_DROP` needs
    ///    `CAP_SETPCAP`; without it the set stays, and a setuid program may still gain what it
    ///    allows);
    /// 2. `setgroups`, `setresgid`, `setresuid`, in that order (each later call gives up the
    ///    privilege the earlier ones need), all three ids of each kind;
    /// 3. the ambient set cleared (`PR_CAP_AMBIENT_CLEAR_ALL`: the kernel clears it by itself
    ///    only on a change from uid 0), then inheritable, permitted and effective emptied
    ///    (`capset`);
    /// 4. `PR_SET_DUMPABLE 0` again (changing ids resets it to `fs.suid_dumpable`): the child
    ///    stays unreachable until `execve`, which closes the close-on-exec descriptors before
    ///    it makes the program dumpable;
    /// 5. read back: the real, effective and saved uid and gid, the groups (as a set: the
    ///    kernel sorts them) and the three capability sets (ambient is a subset of permitted,
    ///    so an empty permitted set proves it empty). Any difference is `EPERM`.
    #[doc(alias = "setgroups")]
    #[doc(alias = "setresuid")]
    #[doc(alias = "capset")]
    #[doc(alias = "PR_CAP_AMBIENT_CLEAR_ALL")]
    pub fn drop_privileges(uid: u32, gid: u32, groups: &[u32]) -> Result<(), Errno> {
        for cap in 0..64usize {
            // SAFETY: PR_CAPBSET_DROP takes one integer; EINVAL past the last capability.
            if unsafe { syscall!(libc::SYS_prctl, libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } < 0 {
                break;
            }
        }
        // SAFETY: groups is a live slice of groups.len() gid_t (u32) values.
        cvt(unsafe { syscall!(libc::SYS_setgroups, groups.len(), groups.as_ptr()) })?;
        // SAFETY: plain integer arguments.
        cvt(unsafe { syscall!(libc::SYS_setresgid, gid, gid, gid) })?;
        // SAFETY: plain integer arguments.
        cvt(unsafe { syscall!(libc::SYS_setresuid, uid, uid, uid) })?;
        // SAFETY: PR_CAP_AMBIENT with PR_CAP_AMBIENT_CLEAR_ALL takes no further argument.
        cvt(unsafe {
            syscall!(
                libc::SYS_prctl,
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0
            )
        })?;
        let mut header = [CAP_VERSION_3, 0u32];
        let mut data = [0u32; 6];
        // SAFETY: a version-3 header (two u32: version, pid 0 = self) and two zeroed
        // {effective, permitted, inheritable} triples, as capset reads for version 3.
        cvt(unsafe { syscall!(libc::SYS_capset, header.as_mut_ptr(), data.as_ptr()) })?;
        super::set_not_dumpable()?;

        let mismatch = Err(Errno(libc::EPERM));
        let (mut r, mut e, mut v) = (0u32, 0u32, 0u32);
        // SAFETY: three live u32 the kernel writes.
        cvt(unsafe {
            syscall!(
                libc::SYS_getresuid,
                &mut r as *mut u32,
                &mut e as *mut u32,
                &mut v as *mut u32
            )
        })?;
        if (r, e, v) != (uid, uid, uid) {
            return mismatch;
        }
        // SAFETY: three live u32 the kernel writes.
        cvt(unsafe {
            syscall!(
                libc::SYS_getresgid,
                &mut r as *mut u32,
                &mut e as *mut u32,
                &mut v as *mut u32
            )
        })?;
        if (r, e, v) != (gid, gid, gid) {
            return mismatch;
        }
        let mut now = [0u32; refine_protocol_core::frame::MAX_GROUPS];
        // SAFETY: now is a live buffer of now.len() gid_t (u32) values.
        let n =
            cvt(unsafe { syscall!(libc::SYS_getgroups, now.len(), now.as_mut_ptr()) })? as usize;
        if n != groups.len() || !groups.iter().all(|g| now[..n].contains(g)) {
            return mismatch;
        }
        data = [u32::MAX; 6];
        // SAFETY: the same header; data has room for the two triples capget writes.
        cvt(unsafe { syscall!(libc::SYS_capget, header.as_mut_ptr(), data.as_mut_ptr()) })?;
        if data != [0; 6] {
            return mismatch;
        }
        Ok(())
    }

    /// Installs the seccomp filter `program` on this (single-threaded) process
    /// (`seccomp(SECCOMP_SET_MODE_FILTER)`). Without `CAP_SYS_ADMIN` the kernel refuses it
    /// (`EACCES`) unless `no_new_privs` is set: then `PR_SET_NO_NEW_PRIVS` is set and the
    /// install tried once more. A root guardian's child keeps the ability to gain privileges
    /// through setuid programs (see `seccomp`'s module docs).
    #[doc(alias = "PR_SET_NO_NEW_PRIVS")]
    #[doc(alias = "SECCOMP_SET_MODE_FILTER")]
    pub fn install_filter(program: &'static [Filter]) -> Result<(), Errno> {
        let prog = libc::sock_fprog {
            len: program.len() as libc::c_ushort,
            filter: program.as_ptr().cast_mut(),
        };
        let install = || {
            // SAFETY: prog is a live sock_fprog whose pointer and length describe a 'static
            // program; the kernel copies it and never writes through the pointer.
            cvt(unsafe {
                syscall!(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &prog as *const libc::sock_fprog
                )
            })
        };
        match install() {
            Err(Errno(libc::EACCES)) => {
                // SAFETY: PR_SET_NO_NEW_PRIVS takes one integer flag (1) and zeros.
                cvt(unsafe { syscall!(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
                install().map(drop)
            }
            other => other.map(drop),
        }
    }

    /// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: no setuid or file-capability gain across `execve`.
    pub fn no_new_privs() -> Result<(), Errno> {
        // SAFETY: PR_SET_NO_NEW_PRIVS takes one integer flag (1) and zeros.
        cvt(unsafe { syscall!(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
    }

    /// X11: enforces the Landlock ruleset `fd` on this (single-threaded) process,
    /// `landlock_restrict_self(fd, 0)`; inherited by every descendant, kept across `execve`.
    pub fn landlock_restrict(fd: &OwnedFd) -> Result<(), Errno> {
        // SAFETY: landlock_restrict_self takes a descriptor and a flags word; no memory.
        cvt(unsafe { syscall!(libc::SYS_landlock_restrict_self, fd.0, 0) }).map(drop)
    }

    pub fn chdir(path: &CStr) -> Result<(), Errno> {
        // SAFETY: path is NUL-terminated.
        cvt(unsafe { syscall!(libc::SYS_chdir, path.as_ptr()) }).map(drop)
    }

    /// `execve`; returns only on failure. `argv` and `envp` must end with a null pointer.
    pub fn execve(path: *const c_char, argv: &[*const c_char], envp: &[*const c_char]) -> Errno {
        if argv.last().is_none_or(|p| !p.is_null()) || envp.last().is_none_or(|p| !p.is_null()) {
            return Errno(libc::EINVAL);
        }
        // SAFETY: argv and envp are NULL-terminated (checked above) arrays of pointers to
        // NUL-terminated strings in the never-unmapped frame buffer; path is NUL-terminated
        // (the caller passes argv[0] or a NUL-terminated stack buffer).
        let r = unsafe { syscall!(libc::SYS_execve, path, argv.as_ptr(), envp.as_ptr()) };
        cvt(r).err().unwrap_or(Errno(libc::EINVAL))
    }
}

//! The `setns` filter (SPEC X7): a seccomp program the gated child installs after *start*,
//! before it takes the workload's credentials and execs, that refuses `setns` into a PID or a
//! user namespace with `EPERM`.
//!
//! Why: the kernel reparents an orphan to a subreaper only within the orphan's own PID
//! namespace. A process the workload forks after joining a PID namespace made outside the scope
//! (`nsenter -t PID -p`, with `CAP_SYS_ADMIN`, or without any capability inside a user
//! namespace its own uid owns) goes to that namespace's init when its parent exits, never to
//! the guardian, which then sees `ECHILD` while it runs. Refusing the join closes that route on
//! every path; where the scope has a cgroup, the guardian also waits for it to be empty
//! (`reap`), which catches what the filter's opt-out lets through.
//!
//! What is refused: `setns(fd, nstype)` whose `nstype` is 0 (any kind: the kernel takes the
//! kind from the descriptor, which may be a PID or user namespace) or has `CLONE_NEWPID` or
//! `CLONE_NEWUSER` set (a namespace file of that kind, or a pidfd with those flags). A join of
//! other kinds (`CLONE_NEWNET`, `CLONE_NEWNS`, ...) named explicitly is allowed. The filter
//! checks the architecture in `seccomp_data`: the native one and its compat ABI (on x86-64
//! `i386`, and the x32 numbers under the native tag; on aarch64 32-bit ARM) each with their own
//! `setns` number; any other architecture is killed (the kernel cannot report one).
//!
//! The program is a static array (no allocation); it is inherited by every descendant and kept
//! across `execve`, and a nested guardian only adds its own.
//!
//! # no_new_privs
//! Installing a filter needs `CAP_SYS_ADMIN` in the task's user namespace, or `no_new_privs`.
//! The gated child installs it while it still holds the guardian's credentials (before the
//! user switch of `run --user`), so a root guardian needs no `no_new_privs` and setuid programs
//! in the workload (`sudo`, `ping`) keep working as under the bare command. Only a guardian
//! without `CAP_SYS_ADMIN` sets `no_new_privs` first (the kernel's `EACCES` says so): then its
//! workload cannot gain privileges through setuid or file capabilities, which it could not
//! have asked of a non-root guardian's user anyway except through setuid binaries.
//!
//! # Caveats
//! `--allow-setns` (the flag `FLAG_ALLOW_SETNS`) installs nothing. On the `/proc` path a
//! process forked in a joined namespace is then out of the guardian's and the stop's reach, as
//! the threat model says; on the cgroup path it stays a member of the scope's cgroup, so the
//! scope stays `live` until it ends. A kernel without seccomp filters fails the launch at its
//! setup step rather than running it unfiltered.

use crate::sys::Filter;

/// `BPF_LD | BPF_W | BPF_ABS`: load the 32-bit word at offset `k` of `seccomp_data`.
const LD_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const JEQ: u16 = 0x15;
/// `BPF_JMP | BPF_JSET | BPF_K`.
const JSET: u16 = 0x45;
/// `BPF_RET | BPF_K`.
const RET: u16 = 0x06;

/// Offsets in `struct seccomp_data`: the syscall number, the architecture, and the low 32 bits
/// of the second argument (little-endian u64 at 16 + 8).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG1_LOW: u32 = 24;

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

const CLONE_NEWPID: u32 = 0x2000_0000;
const CLONE_NEWUSER: u32 = 0x1000_0000;

#[cfg(target_arch = "x86_64")]
mod arch {
    /// `AUDIT_ARCH_X86_64` and its `setns`; x32 calls carry the native tag with bit 30 set.
    pub const NATIVE: u32 = 0xc000_003e;
    pub const NATIVE_SETNS: u32 = 308;
    pub const ALT_SETNS: u32 = 0x4000_0000 | 308;
    /// `AUDIT_ARCH_I386` and its `setns`.
    pub const COMPAT: u32 = 0x4000_0003;
    pub const COMPAT_SETNS: u32 = 346;
}

#[cfg(target_arch = "aarch64")]
mod arch {
    /// `AUDIT_ARCH_AARCH64` and its `setns` (no second native numbering).
    pub const NATIVE: u32 = 0xc000_00b7;
    pub const NATIVE_SETNS: u32 = 268;
    pub const ALT_SETNS: u32 = 268;
    /// `AUDIT_ARCH_ARM` (EABI) and its `setns`.
    pub const COMPAT: u32 = 0x4000_0028;
    pub const COMPAT_SETNS: u32 = 375;
}

const fn stmt(code: u16, k: u32) -> Filter {
    Filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Filter {
    Filter { code, jt, jf, k }
}

/// The program; jump offsets count from the next instruction.
static PROGRAM: [Filter; 14] = [
    /* 0 */ stmt(LD_ABS, ARCH),
    /* 1 */ jump(JEQ, arch::NATIVE, 0, 3), // native: 2; else 5
    /* 2 */ stmt(LD_ABS, NR),
    /* 3 */ jump(JEQ, arch::NATIVE_SETNS, 4, 0), // setns: 8
    /* 4 */ jump(JEQ, arch::ALT_SETNS, 3, 6), // setns: 8; else allow (11)
    /* 5 */ jump(JEQ, arch::COMPAT, 0, 6), // compat: 6; else kill (12)
    /* 6 */ stmt(LD_ABS, NR),
    /* 7 */ jump(JEQ, arch::COMPAT_SETNS, 0, 3), // setns: 8; else allow (11)
    /* 8 */ stmt(LD_ABS, ARG1_LOW),
    /* 9 */ jump(JEQ, 0, 3, 0), // nstype 0: deny (13)
    /* 10 */ jump(JSET, CLONE_NEWPID | CLONE_NEWUSER, 2, 0), // deny (13); else allow
    /* 11 */ stmt(RET, SECCOMP_RET_ALLOW),
    /* 12 */ stmt(RET, SECCOMP_RET_KILL_PROCESS),
    /* 13 */ stmt(RET, SECCOMP_RET_ERRNO | libc::EPERM as u32),
];

/// The filter's program, for [`crate::sys::child::install_filter`].
pub fn program() -> &'static [Filter] {
    &PROGRAM
}

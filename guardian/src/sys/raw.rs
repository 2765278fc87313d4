//! The guardian's own runtime: raw Linux system calls, the process entry point and the four
//! memory routines the compiler expects. The shipped guardian links no C library at all.
//!
//! Why: a static glibc executable spends user time in its start-up code (CPU
//! feature probing, IRELATIVE relocations, tunables) before `main`, on every launch; a dynamic
//! one spends it in the loader instead. The guardian needs none of that: it makes a few dozen
//! system calls and formats nothing. Without a C library it starts in the time the kernel takes
//! to map it, and its binary and private memory are a few pages.
//!
//! # Safety
//! [`call`] passes integers to the kernel; every caller (all in `sys`) states why the
//! pointers among them are valid. `_start` runs before anything else, on the kernel's initial
//! stack, and never returns.

use core::arch::asm;

/// One system call with up to six integer arguments; returns the kernel's raw result (a
/// negative errno on failure).
///
/// # Safety
/// The arguments must be what the kernel expects for `nr`: in particular every pointer must be
/// valid for the access the call makes.
#[inline(always)]
pub unsafe fn call(nr: libc::c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the x86-64 Linux system call convention: number in rax, arguments in rdi, rsi,
    // rdx, r10, r8, r9; rcx and r11 are clobbered; the caller vouches for the arguments.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the AArch64 Linux system call convention: number in x8, arguments in x0-x5,
    // result in x0; the caller vouches for the arguments.
    unsafe {
        asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") args[0] => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            in("x5") args[5],
            options(nostack),
        );
    }
    ret
}

/// The stack pointer where the caller stands (an inlined read: the caller's own frame).
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: copies a register; reads and writes no memory.
    unsafe {
        asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: copies a register; reads and writes no memory.
    unsafe {
        asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    sp
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("refine-guardian makes raw system calls on x86_64 and aarch64 Linux only");

/// `syscall!(SYS_x, a, b, ...)`: [`call`] with each argument cast to `usize`.
macro_rules! syscall {
    ($nr:expr) => {
        $crate::sys::raw::call($nr, [0; 6])
    };
    ($nr:expr, $a:expr) => {
        $crate::sys::raw::call($nr, [$a as usize, 0, 0, 0, 0, 0])
    };
    ($nr:expr, $a:expr, $b:expr) => {
        $crate::sys::raw::call($nr, [$a as usize, $b as usize, 0, 0, 0, 0])
    };
    ($nr:expr, $a:expr, $b:expr, $c:expr) => {
        $crate::sys::raw::call($nr, [$a as usize, $b as usize, $c as usize, 0, 0, 0])
    };
    ($nr:expr, $a:expr, $b:expr, $c:expr, $d:expr) => {
        $crate::sys::raw::call($nr, [$a as usize, $b as usize, $c as usize, $d as usize, 0, 0])
    };
    ($nr:expr, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
        $crate::sys::raw::call(
            $nr,
            [$a as usize, $b as usize, $c as usize, $d as usize, $e as usize, 0],
        )
    };
    ($nr:expr, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr, $f:expr) => {
        $crate::sys::raw::call(
            $nr,
            [$a as usize, $b as usize, $c as usize, $d as usize, $e as usize, $f as usize],
        )
    };
}
pub(crate) use syscall;

// ---------------------------------------------------------------------------------------------
// Entry point.

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".globl _start",
    ".type _start,@function",
    "_start:",
    "xor ebp, ebp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call {entry}",
    "ud2",
    entry = sym entry,
);

#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".globl _start",
    ".type _start,%function",
    "_start:",
    "mov x29, #0",
    "mov x30, #0",
    "mov x0, sp",
    "bl {entry}",
    "brk #0",
    entry = sym entry,
);

/// Where `_start` lands, on the kernel's initial stack (argc, argv, envp, auxv above it: the
/// guardian reads none of them, its launch arrives over stdin).
extern "C" fn entry(_initial_stack: *const usize) -> ! {
    crate::sys::exit(crate::run())
}

// ---------------------------------------------------------------------------------------------
// The memory routines `core` and the compiler call. On x86_64 copies and
// fills are the string instructions (`rep movsb`/`rep stosb`, fast on every current CPU);
// elsewhere, and for overlapping moves and compares, byte loops with volatile accesses, so the
// optimizer cannot turn them back into calls to themselves. The guardian moves a few kilobytes
// per launch at most.

mod mem {
    use core::ffi::c_int;
    use core::ptr::{read_volatile, write_volatile};

    /// # Safety
    /// `dst` and `src` valid for `n` bytes and not overlapping (the C contract).
    #[no_mangle]
    pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: copies rcx = n bytes from rsi = src to rdi = dst, both valid and disjoint by
        // the caller's contract; the direction flag is clear at every call (SysV ABI).
        unsafe {
            core::arch::asm!(
                "rep movsb",
                inout("rcx") n => _,
                inout("rdi") dst => _,
                inout("rsi") src => _,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        for i in 0..n {
            // SAFETY: i < n, within both buffers by the caller's contract.
            unsafe { write_volatile(dst.add(i), read_volatile(src.add(i))) };
        }
        dst
    }

    /// # Safety
    /// `dst` and `src` valid for `n` bytes; they may overlap.
    #[no_mangle]
    pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
        if (dst as usize) <= (src as usize) {
            for i in 0..n {
                // SAFETY: i < n, within both buffers; forwards when dst <= src never reads a
                // byte it already overwrote.
                unsafe { write_volatile(dst.add(i), read_volatile(src.add(i))) };
            }
        } else {
            for i in (0..n).rev() {
                // SAFETY: i < n, within both buffers; backwards when dst > src.
                unsafe { write_volatile(dst.add(i), read_volatile(src.add(i))) };
            }
        }
        dst
    }

    /// # Safety
    /// `dst` valid for `n` bytes.
    #[no_mangle]
    pub unsafe extern "C" fn memset(dst: *mut u8, c: c_int, n: usize) -> *mut u8 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: stores al = c into rcx = n bytes from rdi = dst, valid by the caller's
        // contract; the direction flag is clear at every call (SysV ABI).
        unsafe {
            core::arch::asm!(
                "rep stosb",
                inout("rcx") n => _,
                inout("rdi") dst => _,
                in("al") c as u8,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        for i in 0..n {
            // SAFETY: i < n, within the buffer.
            unsafe { write_volatile(dst.add(i), c as u8) };
        }
        dst
    }

    /// # Safety
    /// `a` and `b` valid for `n` bytes.
    #[no_mangle]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> c_int {
        for i in 0..n {
            // SAFETY: i < n, within both buffers.
            let (x, y) = unsafe { (read_volatile(a.add(i)), read_volatile(b.add(i))) };
            if x != y {
                return c_int::from(x) - c_int::from(y);
            }
        }
        0
    }

    /// # Safety
    /// `a` and `b` valid for `n` bytes.
    #[no_mangle]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> c_int {
        // SAFETY: the same contract.
        unsafe { memcmp(a, b, n) }
    }
}

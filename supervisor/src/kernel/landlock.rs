//! Landlock rulesets (X11, X12): built here, in the supervisor, and applied by the guardian's
//! gated child (`landlock_restrict_self`), which receives the ruleset as a descriptor in the
//! launch frame ([`refine_protocol::frame::FLAG_LANDLOCK`]).
//!
//! This module knows nothing about homes or launches: it asks the kernel its ABI, creates a
//! ruleset that handles exactly the rights and scopes a policy names (never more than the ABI
//! has: a policy that asks for more is refused here, never silently weakened), adds
//! `path beneath` rules on descriptors the caller opened, and hands the ruleset's descriptor on.
//! The policies live with their users (`launch::protect` for X11).
//!
//! Why raw system calls rather than the `landlock` crate: the crate's strength is its
//! best-effort compatibility layer (rights an older kernel lacks are dropped, and the caller
//! asks afterwards what held); here every dropped right must be recorded per launch or refused,
//! and the ruleset is built in one process and applied in another, so what is needed is the
//! three system calls, the ABI number and the descriptor. That is the few dozen lines below.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `LANDLOCK_ACCESS_FS_*` (`<linux/landlock.h>`), by the ABI that introduced them.
pub mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2: link or rename across directories.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;

    /// The rights a rule on a file (not a directory) may grant.
    pub const FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /// Every right of ABI 1.
    pub const ABI1: u64 = (1 << 13) - 1;

    /// Every file-system right the kernel of `abi` knows.
    pub const fn all(abi: u32) -> u64 {
        match abi {
            0 => 0,
            1 => ABI1,
            2 => ABI1 | REFER,
            3 | 4 => ABI1 | REFER | TRUNCATE,
            _ => ABI1 | REFER | TRUNCATE | IOCTL_DEV,
        }
    }
}

/// `LANDLOCK_ACCESS_NET_*` (ABI 4).
pub mod net {
    pub const BIND_TCP: u64 = 1 << 0;
    pub const CONNECT_TCP: u64 = 1 << 1;
}

/// `LANDLOCK_SCOPE_*` (ABI 6).
pub mod scope {
    pub const ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    pub const SIGNAL: u64 = 1 << 1;
}

const CREATE_RULESET_VERSION: u32 = 1 << 0;
const RULE_PATH_BENEATH: u32 = 1;
const RULE_NET_PORT: u32 = 2;

/// `struct landlock_ruleset_attr` (ABI 6 layout; older kernels are given a prefix of it).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed: 12 bytes).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// The Landlock ABI this kernel offers: `None` where it has none or it is disabled at boot
/// (`ENOSYS`, `EOPNOTSUPP`). Asked once per process: the kernel's answer does not change while
/// it runs.
pub fn abi() -> Option<u32> {
    static ABI: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *ABI.get_or_init(ask_abi)
}

fn ask_abi() -> Option<u32> {
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call reads no memory.
    let n = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    (n > 0).then_some(n as u32)
}

/// What a ruleset handles (everything else stays as without Landlock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handled {
    /// `fs::*` rights: denied except beneath the rules that grant them.
    pub fs: u64,
    /// `net::*` rights (ABI 4): denied except on the ports the rules grant.
    pub net: u64,
    /// `scope::*` (ABI 6): signals and abstract unix sockets stay within the domain.
    pub scoped: u64,
}

/// A ruleset being built, and how many rules it holds.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
    rules: u32,
}

impl Ruleset {
    /// Creates a ruleset that handles `handled` on a kernel of `abi` (from [`abi`]); refused
    /// (`EINVAL`) when a right or scope is newer than the ABI: never silently weakened.
    pub fn new(abi: u32, handled: Handled) -> io::Result<Ruleset> {
        let too_new = handled.fs & !fs::all(abi) != 0
            || (handled.net != 0 && abi < 4)
            || (handled.scoped != 0 && abi < 6);
        if too_new {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let attr = RulesetAttr {
            handled_access_fs: handled.fs,
            handled_access_net: handled.net,
            scoped: handled.scoped,
        };
        // The prefix of the structure this ABI knows (8 bytes before ABI 4, 16 before ABI 6).
        let size = match abi {
            0..=3 => 8,
            4 | 5 => 16,
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: attr is a live RulesetAttr of at least `size` bytes; the kernel only reads it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0u32,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the call returned a new close-on-exec descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Ruleset { fd, rules: 0 })
    }

    /// Grants `access` beneath `parent` (an `O_PATH` descriptor of a directory or a file; a
    /// file takes [`fs::FILE`] rights only).
    pub fn allow_beneath(&mut self, parent: BorrowedFd<'_>, access: u64) -> io::Result<()> {
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: parent.as_raw_fd(),
        };
        self.add_rule(RULE_PATH_BENEATH, &attr)
    }

    /// Grants `access` (`net::*`) on TCP `port` (ABI 4).
    pub fn allow_port(&mut self, port: u16, access: u64) -> io::Result<()> {
        let attr = NetPortAttr {
            allowed_access: access,
            port: u64::from(port),
        };
        self.add_rule(RULE_NET_PORT, &attr)
    }

    /// `landlock_add_rule(fd, kind, attr, 0)`; `attr` is the structure of `kind`.
    fn add_rule<T>(&mut self, kind: u32, attr: &T) -> io::Result<()> {
        // SAFETY: attr is a live structure of the layout `kind` names (the two callers pair
        // them); the kernel only reads it.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                kind,
                attr as *const T,
                0u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        self.rules += 1;
        Ok(())
    }

    /// How many rules were added.
    pub fn rules(&self) -> u32 {
        self.rules
    }

    /// The ruleset's descriptor, for the launch frame.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_right_newer_than_the_abi_is_refused_not_dropped() {
        let e = Ruleset::new(
            3,
            Handled {
                fs: fs::IOCTL_DEV,
                ..Handled::default()
            },
        )
        .expect_err("ABI 3 has no IOCTL_DEV");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let e = Ruleset::new(
            5,
            Handled {
                scoped: scope::SIGNAL,
                ..Handled::default()
            },
        )
        .expect_err("ABI 5 has no scopes");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn the_file_rights_are_a_subset_of_every_right() {
        assert_eq!(fs::FILE & !fs::all(5), 0);
        assert_eq!(fs::all(1), 0x1fff);
    }
}

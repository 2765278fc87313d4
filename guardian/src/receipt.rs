//! The proof file and the receipt (G5). The proof file is created before the workload is forked
//! (`O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC`, mode 0600) and its `(st_dev, st_ino)` is reported in the
//! hello, so the launcher can register it. The receipt is written into it only once `waitpid`
//! said `ECHILD`: `pwrite` at offset 0, then `fdatasync`, through the guardian's close-on-exec
//! descriptor (the workload can never hold it).
//!
//! X5: before anything is forked, the receipt's length is [reserved](ProofFile::create) in the
//! file (see [`sys::Reserved`]); a full disk refuses the launch there (the file is removed, the
//! launcher reads why), never after the workload ran. The receipt is written whole: at offset 0,
//! the file then cut to its length if it is longer (a same-uid workload that appended to it
//! changes nothing), then synced; a write that fails is retried while the guardian lives (the
//! scope stays `live` meanwhile: its guardian is alive and no receipt is there), with a growing
//! pause up to [`RETRY_MAX_MS`].
//!
//! F3: a launch syncs twice, the registration and the receipt. On ext4 and xfs the reserved
//! zeros' write-back is started after the hello ([`ProofFile::start_writeback`]: no wait, no
//! sync), so the launcher's registration commit carries their block and the receipt is an
//! overwrite in place whose `fdatasync` commits no metadata. Elsewhere the `fdatasync` also
//! commits the `fallocate`d space.
//!
//! F4 on a disk: on ext4 without a journal, the first `fdatasync` of a new file also writes
//! the block of its new directory entry (ext4 then syncs a new file's parent itself): one
//! device trip more, on the stop's path. A scope that outlives [`SETTLE_AFTER_MS`] pays that
//! trip while it runs ([`ProofFile::settle`], from the reaping loop's timeout), so its receipt
//! is the receipt's block, the inode's (the write changed its times) and a flush: three trips
//! instead of four. With a journal the registration's commit already carried the entry and the
//! settle costs one flush in the background. A launch that ends sooner (F3: `/bin/true`) syncs
//! only twice, as before.
//!
//! # Caveats
//! The directory entry is not fsynced here (only, on ext4, through the settle of a scope
//! older than [`SETTLE_AFTER_MS`]): after a crash the file may be missing, which the assessment
//! treats as "no receipt" (never as exited). `O_EXCL` means a stale file at the path
//! is an error, never reused.

use core::ffi::CStr;

use refine_protocol_core::receipt::RESERVED;
use refine_protocol_core::{ProofIdentity, Receipt};

use crate::error::Error;
use crate::sys::{self, OwnedFd};

/// The longest pause between two attempts to write the receipt.
pub const RETRY_MAX_MS: i32 = 2_000;
/// The age of a scope after which its proof file's metadata is synced ahead of the receipt.
pub const SETTLE_AFTER_MS: u64 = 1_000;

pub struct ProofFile {
    fd: OwnedFd,
    pub identity: ProofIdentity,
    reserved: sys::Reserved,
}

impl ProofFile {
    /// Creates the proof file and allocates the receipt's space in it; if that fails, the file
    /// is removed again and the launch refused.
    pub fn create(path: &CStr) -> Result<ProofFile, Error> {
        let (fd, dev, ino) = sys::create_exclusive(path).map_err(Error::ProofCreate)?;
        let reserved = match sys::reserve(&fd, &RESERVED) {
            Ok(r) => r,
            Err(e) => {
                let _ = sys::unlink(path);
                return Err(Error::ProofReserve(e));
            }
        };
        Ok(ProofFile {
            fd,
            identity: ProofIdentity { dev, ino },
            reserved,
        })
    }

    /// Once the hello is sent (off the launch's path): the reserved zeros start on their way to
    /// the disk, so that the launcher's registration commit carries their blocks (F3: the
    /// receipt then overwrites them in place, and its `fdatasync` writes one block and flushes).
    pub fn start_writeback(&self) {
        if self.reserved == sys::Reserved::Zeros {
            sys::start_writeback(&self.fd);
        }
    }

    /// Syncs the reserved file once, ahead of the receipt (see the module's F4 note). A failure
    /// changes nothing: the receipt's own `fdatasync` does the work then.
    pub fn settle(&self) {
        let _ = sys::datasync(&self.fd);
    }

    /// Writes the receipt whole and `fdatasync`s it, retrying until that succeeds.
    pub fn write(&self, receipt: &Receipt) {
        let bytes = receipt.encode();
        let mut pause = 50;
        while sys::write_whole_sync(&self.fd, &bytes).is_err() {
            let _ = sys::poll(&mut [], pause);
            pause = (pause * 2).min(RETRY_MAX_MS);
        }
    }
}

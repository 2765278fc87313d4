//! The proof file and the receipt (G5). The proof file is created before the workload is forked
//! (`O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC`, mode 0600) and its `(st_dev, st_ino)` is reported in the
//! hello, so the launcher can register it. The receipt is written into it only once `waitpid`
//! said `ECHILD`: `pwrite` at offset 0, then `fdatasync`, through the guardian's close-on-exec
//! descriptor (the workload can never hold it).
//!
//! While the workload execs, the guardian [reserves](ProofFile::reserve) the receipt's block: it
//! writes [`RESERVED`] (zeros, which readers take as "no receipt yet") and syncs it. That first
//! sync commits the new file's allocation, which costs as much again as the data itself on a
//! journalling file system; done while the guardian would otherwise only wait, it leaves the
//! receipt an in-place overwrite, so the time from the last exit to a durable receipt is one data
//! write.
//!
//! # Caveats
//! The directory entry is not fsynced here: after a crash the file may be missing, which the
//! assessment treats as "no receipt" (never as exited). `O_EXCL` means a stale file at the path
//! is an error, never reused.

use core::ffi::CStr;

use refine_protocol::receipt::RESERVED;
use refine_protocol::{ProofIdentity, Receipt};

use crate::error::Error;
use crate::sys::{self, OwnedFd};

pub struct ProofFile {
    fd: OwnedFd,
    pub identity: ProofIdentity,
}

impl ProofFile {
    pub fn create(path: &CStr) -> Result<ProofFile, Error> {
        let (fd, dev, ino) = sys::create_exclusive(path).map_err(Error::ProofCreate)?;
        Ok(ProofFile {
            fd,
            identity: ProofIdentity { dev, ino },
        })
    }

    /// Writes and syncs the zero reservation. Best effort: a failure here changes nothing the
    /// receipt write does not check again.
    pub fn reserve(&self) {
        let _ = sys::pwrite_sync(&self.fd, &RESERVED, 0);
    }

    /// Writes the receipt at offset 0 and `fdatasync`s it.
    pub fn write(&self, receipt: &Receipt) -> Result<(), Error> {
        sys::pwrite_sync(&self.fd, &receipt.encode(), 0).map_err(Error::ReceiptWrite)
    }
}

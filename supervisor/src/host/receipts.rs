//! A guardian's receipt checked as a file (`receipt verify PATH`): read and decoded, then bound
//! to its registration by the one assessment, where the runtime that registered it is at hand.
//!
//! The mechanism is [`crate::end::assess`]'s.
//!
//! # Caveats
//! - A decoded receipt proves nothing yet: only one found in its registration's own proof file
//!   does ([`ReceiptBinding::verified`]). Without the runtime that registered it, it stays
//!   [`ReceiptBinding::Unbound`].

/// `read_receipt_file`: a receipt file read (at most 64 KiB) and decoded; `bind_receipt`: that
/// receipt against its registration, the boot id read from [`KERNEL_BOOT`] (or another
/// [`BootSource`]).
pub use crate::end::assess::{
    bind_receipt, read_receipt_file, BootSource, KernelBoot, ReceiptBinding, KERNEL_BOOT,
};
pub use crate::end::assess::{BoundField, ReceiptFileError};

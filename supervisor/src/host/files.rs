//! Files a host writes as the store writes its own (STYLE 9): atomically replaced and durable, or
//! a private folder made durable. A host keeps its own documents beside the runtime with these
//! (the CLI's manual pages, the events journal's folder), never truncating a file in place.
//!
//! The mechanism is [`crate::store::durable`]'s.
//!
//! # Caveats
//! - Durable means fsynced, the file and then its folder: on a file system that ignores
//!   `fsync` (some network and FUSE ones), a crash may still lose the last write.

/// `write_atomic`: a temporary file with `create_new`, written, synced, renamed over `path`,
/// the folder synced. `create_private_dir`: a folder mode 0700 whatever the umask, its entry
/// made durable (an existing one left as it is).
pub use crate::store::durable::{create_private_dir, write_atomic};

//! What is kept after a scope ended and for how long.
//!
//! - [`retention`]: log retirement.
//! - [`forget`]: removing whole exited registrations.
//! - [`strays`]: files of the runtime directory that belong to no registration.

pub mod forget;
pub mod retention;
pub mod strays;

use std::time::Duration;

use refine_protocol::{Registration, RegistrationId};

use crate::store::fence::Fence;
use crate::store::registry::{RegistryError, Runtime};

/// How long a history pass waits for a busy registration lock before keeping it for the next pass.
pub(crate) const LOCK_WAIT: Duration = Duration::from_millis(200);

/// What [`lock_unless_kept`] found.
pub(crate) enum Locked<T> {
    /// The registration's lock, held: everything is to be re-checked under it (R1).
    Held(Fence),
    /// Its owner holds the lock and `keep` gave a reason to keep it as it is, without waiting.
    Kept(T),
}

/// The registration's lock, taken at once if free. While its owner holds it (a live scope's
/// launcher does, for the scope's life), `keep` reads the record without the lock and may keep
/// the registration at once (issue 44 item 4); only what it lets through waits [`LOCK_WAIT`].
pub(crate) fn lock_unless_kept<T>(
    rt: &Runtime,
    id: RegistrationId,
    keep: impl FnOnce(&Registration) -> Option<T>,
) -> Result<Locked<T>, RegistryError> {
    if let Some(lock) = rt.try_lock(id)? {
        return Ok(Locked::Held(lock));
    }
    if let Some(kept) = rt.read_registration(id).ok().as_ref().and_then(keep) {
        return Ok(Locked::Kept(kept));
    }
    rt.lock(id, LOCK_WAIT).map(Locked::Held)
}

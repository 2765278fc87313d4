//! What is kept after a scope ended and for how long.
//!
//! - [`retention`]: log retirement.
//! - [`forget`]: removing whole exited registrations.
//! - [`strays`]: files of the runtime directory that belong to no registration.

pub mod forget;
pub mod retention;
pub mod strays;

//! The end of a scope: what a registration's scope is now, the one stop, restart recovery and
//! where open scopes are.
//!
//! - [`assess`]: the one assessment.
//! - [`stop`]: the one stop.
//! - [`recover`]: restart recovery.
//! - [`open_index`]: where open scopes are.

pub mod assess;
pub mod open_index;
pub mod recover;
pub mod stop;

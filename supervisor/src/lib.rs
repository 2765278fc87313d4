//! refine-supervisor: launches through the guardian, captures output, stops whole trees and
//! proves with the guardian's receipt that everything a command started has ended.
//!
//! The layers, bottom up (a module imports only from its own layer and the ones below):
//! - [`kernel`]: `/proc`, process trees, signals, limits, cgroup v2 scopes.
//! - [`store`]: the runtime directory and durable writes.
//! - [`end`]: the one assessment, the one stop, restart recovery.
//! - [`launch`]: the one launch API (the engine) and its building blocks (the guardian
//!   handshake, capture, PTYs, deadlines, the environment, credentials); it ends a tree
//!   through `end`'s one stop.
//! - [`history`]: retention, forgetting, strays.
//! - [`hygiene`]: holders, reap by checkout, the stall watch.
//! - [`capacity`]: slots, host samples and admission.
//! - [`host`]: the face for Rust hosts ([`Supervisor`], [`Command`], [`Child`]), on top of all
//!   of them; start there.
//!
//! [`human`] (durations, sizes and times as people read them) and `error` ([`error_chain`])
//! import no layer: any layer may use them.
//!
//! The application (the operator CLI, the foreground `run`, `serve` and its client) is the
//! binary target built on this library; the library cannot import it.
#![deny(unsafe_code)]

pub mod capacity;
pub mod end;
mod error;
pub mod history;
pub mod host;
pub mod human;
pub mod hygiene;
pub mod kernel;
pub mod launch;
pub mod store;

pub use error::error_chain;
pub use host::{
    Child, Command, Kind, LaunchError, LaunchOutcome, LaunchResult, Receipt, SandboxMode,
    ScopeState, StdinMode, Supervisor, WorkloadStatus,
};
pub use kernel::limits::raise_nofile_limit;

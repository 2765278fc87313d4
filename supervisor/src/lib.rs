//! refine-supervisor: launches through the guardian, captures output, stops whole trees and
//! proves with the guardian's receipt that everything a command started has ended.
//!
//! One module per mechanism:
//! - [`durable`]: the one way to write a file that must survive a crash.
//! - [`registry`]: the runtime directory `run/P` (records, proofs, logs, locks).
//! - [`guardian`]: the launcher end of the guardian handshake.
//! - [`procfs`]: `/proc` reading (stat, boot id) and process witnesses.
//! - [`tree`]: discovery of a guardian's scope (descendants, owner markers).
//! - [`signal`]: the one pidfd-verified signal helper.
//! - [`fence`]: bounded `flock` fences (runtime stop fence, per-registration locks).
//! - [`stop`]: the one stop. [`assess`]: the one assessment. [`recover`]: restart recovery.
//! - [`launch`]: the one launch API (the engine); [`capture`], [`pty`], [`deadline`],
//!   [`env_policy`]: its building blocks.
//! - [`cgroup`]: a cgroup v2 directory of its own per scope where one can be made (F4).
//! - [`capacity`]: admission (C1–C3). [`retention`]: log retirement (R1–R3).
//!   [`forget`]: removing whole exited registrations (R4). [`open_index`]: where open
//!   scopes are (F1).
//! - [`child_signals`]: a clean `SIGCHLD` for processes that wait for children (the crate's
//!   only `unsafe`, allowed there alone).
//! - [`holders`]: who holds a path (H1); [`reap_checkout`]: reap by checkout (H2);
//!   [`stall`]: the stall watch's state machine (H3).
//!
//! [`app`] is the application on top of them (the operator CLI, the foreground `run`, `serve`
//! and its client), built on them; no mechanism module imports it, and only its entry points
//! ([`app::Cli`], [`app::dispatch`], [`app::CliError`]) are public.
#![deny(unsafe_code)]

pub mod app;
pub mod assess;
pub mod capacity;
pub mod capture;
pub mod cgroup;
pub mod child_signals;
pub mod credentials;
pub mod deadline;
pub mod durable;
pub mod env_policy;
pub mod fence;
pub mod forget;
pub mod guardian;
pub mod holders;
pub mod human;
pub mod launch;
pub mod limits;
pub mod nested;
pub mod open_index;
pub mod procfs;
pub mod pty;
pub mod reap_checkout;
pub mod recover;
pub mod registry;
pub mod retention;
pub mod signal;
pub mod stall;
pub mod stop;
pub mod strays;
pub mod tree;

/// An error and its sources on one line (`op: cause: cause`), for JSON documents and logs.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        // A message that already quotes its cause (`{op} {path}: {source}`) says it once.
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

pub use limits::raise_nofile_limit;

//! The application: the operator command line, the foreground `run`, output formatting, the
//! socket client and `serve`. It sits on top of the library's mechanisms and nothing in the
//! library reaches back into it; `main` needs only [`Cli`], [`dispatch`] and [`CliError`].
//!
//! - `cli`: the clap definitions, one function per command, human output.
//! - `run`: `run` in the foreground (streaming, terminal forwarding, signals).
//! - `serve`: the per-port service; `client`: its socket client.
//! - `metrics`: the service's Prometheus exposition (`serve --metrics`).
//! - `ops`: what the CLI and the service share (assessment views, documents, capacity).
//! - `error`: the application's errors.

mod cli;
mod client;
mod docs;
mod error;
mod metrics;
mod ops;
mod run;
mod serve;

pub use cli::{dispatch, Cli, ExitCode};
pub use error::{CliError, ServiceError};

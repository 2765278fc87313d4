//! Standard output for the commands: locked, and one JSON document buffered.

use std::io::{self, Write};

use super::error::CliError;

/// Standard output, locked.
pub(crate) fn out() -> io::StdoutLock<'static> {
    io::stdout().lock()
}

/// Prints one JSON document, buffered (standard output is line-buffered: unbuffered, a
/// `ps --all --json` of a long history would make one `write` per line).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let mut o = io::BufWriter::with_capacity(64 * 1024, out());
    serde_json::to_writer_pretty(&mut o, value)
        .map_err(|e| CliError::Output(io::Error::other(e)))?;
    writeln!(o).map_err(CliError::Output)?;
    o.flush().map_err(CliError::Output)
}

//! The socket client: one JSON-line request to the port's service, one reply.

use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::time::Duration;

use refine_protocol::api::{self, Reply, Request, MAX_MESSAGE};

use super::error::ClientError;
use refine_supervisor::host::Runtime;

// ---------------------------------------------------------------------------------------------
// Client.

/// Sends one request to the port's service and returns its reply.
pub fn request(rt: &Runtime, req: &Request) -> Result<Reply, ClientError> {
    request_within(rt, req, None)
}

/// [`request`], with the send and the wait for the reply each bounded by `within` (none:
/// unbounded): a service that accepts and never answers is an error once it passed
/// (`upgrade` checks a new image this way, within the time left of its `--timeout`).
pub fn request_within(
    rt: &Runtime,
    req: &Request,
    within: Option<Duration>,
) -> Result<Reply, ClientError> {
    let socket = rt.socket_path();
    let mut stream = StdUnixStream::connect(&socket).map_err(|source| ClientError::NotRunning {
        port: rt.port(),
        socket: socket.clone(),
        source,
    })?;
    // A zero timeout is refused by the socket: the least bound is a millisecond.
    let bound = within.map(|w| w.max(Duration::from_millis(1)));
    stream
        .set_read_timeout(bound)
        .and_then(|()| stream.set_write_timeout(bound))
        .map_err(|source| ClientError::Io {
            op: "bound the request",
            source,
        })?;
    stream
        .write_all(&api::encode_request(req))
        .map_err(|source| ClientError::Io { op: "send", source })?;
    let mut line = Vec::new();
    BufReader::new(stream)
        .take(MAX_MESSAGE as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|source| ClientError::Io {
            op: "receive",
            source,
        })?;
    // End of file before a whole line: the service went away (it died, or stopped) with the
    // request unanswered, or in the middle of its answer. Said so, not as a malformed response.
    if !line.ends_with(b"\n") && line.len() <= MAX_MESSAGE {
        let whole = !line.is_empty() && api::decode_response(&line).is_ok();
        if !whole {
            return Err(if line.is_empty() {
                ClientError::Closed
            } else {
                ClientError::Truncated
            });
        }
    }
    let resp = api::decode_response(&line).map_err(ClientError::Decode)?;
    match (resp.ok, resp.result, resp.error) {
        (true, Some(r), _) => Ok(r),
        (_, _, Some(e)) => Err(ClientError::Refused(e)),
        _ => Err(ClientError::Empty),
    }
}

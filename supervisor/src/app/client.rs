//! The socket client: one JSON-line request to the port's service, one reply.

use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::unix::net::UnixStream as StdUnixStream;

use refine_protocol::api::{self, Reply, Request, MAX_MESSAGE};

use super::error::ClientError;
use refine_supervisor::host::Runtime;

// ---------------------------------------------------------------------------------------------
// Client.

/// Sends one request to the port's service and returns its reply.
pub fn request(rt: &Runtime, req: &Request) -> Result<Reply, ClientError> {
    let socket = rt.socket_path();
    let mut stream = StdUnixStream::connect(&socket).map_err(|source| ClientError::NotRunning {
        port: rt.port(),
        socket: socket.clone(),
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
    let resp = api::decode_response(&line).map_err(ClientError::Decode)?;
    match (resp.ok, resp.result, resp.error) {
        (true, Some(r), _) => Ok(r),
        (_, _, Some(e)) => Err(ClientError::Refused(e)),
        _ => Err(ClientError::Empty),
    }
}

//! Test helper: connects to a service socket, sends the bytes of a file (one request line), and
//! prints the reply line. Run under another uid by `tests/tests/service.rs`.
//! Usage: `cli-connect SOCKET REQUEST_FILE`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (socket, request) = match args.as_slice() {
        [_, s, r] => (s, r),
        _ => {
            eprintln!("usage: cli-connect SOCKET REQUEST_FILE");
            std::process::exit(2);
        }
    };
    let bytes = match std::fs::read(request) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cli-connect: cannot read {request}: {e}");
            std::process::exit(2);
        }
    };
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cli-connect: cannot connect to {socket}: {e}");
            std::process::exit(3);
        }
    };
    let _ = stream.write_all(&bytes);
    let mut line = String::new();
    let _ = BufReader::new(stream).read_line(&mut line);
    print!("{line}");
}

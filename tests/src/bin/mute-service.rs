//! Test helper: a new image for `serve`'s upgrade that passes the preflight (`version` exits 0)
//! and otherwise never answers: it keeps every descriptor it inherited (the carried listener
//! among them), so a client's connect lands in the listener's backlog and its request is never
//! read. Only a signal ends it.

fn main() {
    if std::env::args().nth(1).as_deref() == Some("version") {
        return;
    }
    loop {
        std::thread::park();
    }
}

//! [`Tail`]: what capture still reads after the result, for a kept scope whose descendants hold
//! the pipes: into the artifacts (and forwards) only, until end of file.

use super::*;

/// The streams a kept scope still holds after the result: read into their artifacts (and
/// forwards) only, until EOF; forwarded bytes still wait for their reader. Dropped when done,
/// which tells [`CaptureResult::wait_delivered`].
#[derive(Debug)]
pub struct Tail {
    pub(super) readers: Vec<Reader>,
    /// Its own read buffer when it runs on a thread of its own (allocated on first use).
    pub(super) buf: Vec<u8>,
    pub(super) _done: mpsc::Sender<()>,
}

impl Tail {
    /// The streams to wait on (bit i of [`Tail::service`]'s mask = entry i's reader).
    pub(crate) fn interest(&self) -> Vec<(usize, BorrowedFd<'_>, PollFlags)> {
        self.readers
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.interest().map(|(fd, flags)| (i, fd, flags)))
            .collect()
    }

    /// Services the ready readers (bit i = reader i) with `buf`; says whether every stream is
    /// done.
    pub fn service(&mut self, ready: u32, buf: &mut [u8]) -> bool {
        for (i, r) in self.readers.iter_mut().enumerate() {
            if i < 32 && ready & (1 << i) != 0 {
                r.service(buf, 0, true, |_, _| {});
            }
        }
        self.is_done()
    }

    pub fn is_done(&self) -> bool {
        self.readers.iter().all(Reader::done)
    }

    /// Runs the tail on this thread until every stream is done.
    pub fn run(mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(READ_CHUNK, 0);
        while !self.is_done() {
            let interest = self.interest();
            let mut fds: Vec<PollFd<'_>> = interest
                .iter()
                .map(|(_, fd, flags)| PollFd::from_borrowed_fd(*fd, *flags))
                .collect();
            if poll_until(&mut fds, None).is_err() {
                return;
            }
            let mut ready = 0u32;
            for ((i, _, _), p) in interest.iter().zip(&fds) {
                if !p.revents().is_empty() && *i < 32 {
                    ready |= 1 << i;
                }
            }
            drop(fds);
            self.service(ready, &mut buf);
        }
    }
}

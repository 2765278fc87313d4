//! Job control (W2): while `run` is stopped, a forked stand-in keeps the streams flowing, and
//! hands back what it read through a private wire format (one [`Record`] per stream).

use super::*;

/// Bytes per stream a stand-in holds for the artifact while its process is stopped
/// ([`Capture::flowing_while_stopped`]).
pub const STAND_IN_HOLD: usize = 8 * 1024 * 1024;
/// A stand-in's report record: stream index, end flags, read errno (4), pending bytes it
/// forwarded (8), held bytes it forwarded (8), held bytes (8); then the held bytes.
const HEADER: usize = 30;
const EOF: u8 = 1;
const GONE: u8 = 2;
const FAILED: u8 = 4;

/// One stream's record of a stand-in's report, the held bytes after its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record<'a> {
    /// The stream's index among the capture's readers.
    index: u8,
    /// [`EOF`], [`GONE`], [`FAILED`].
    flags: u8,
    /// The read's errno, with [`FAILED`].
    errno: i32,
    /// Bytes of the parent's pending forward the stand-in wrote.
    flushed: u64,
    /// Held bytes the stand-in forwarded.
    sent: u64,
    /// The held bytes.
    body: &'a [u8],
}

impl Record<'_> {
    /// The header; the body follows it on the wire.
    fn header(&self) -> [u8; HEADER] {
        let mut head = [0u8; HEADER];
        head[0] = self.index;
        head[1] = self.flags;
        head[2..6].copy_from_slice(&self.errno.to_le_bytes());
        head[6..14].copy_from_slice(&self.flushed.to_le_bytes());
        head[14..22].copy_from_slice(&self.sent.to_le_bytes());
        head[22..30].copy_from_slice(&(self.body.len() as u64).to_le_bytes());
        head
    }

    /// Writes header and body to a blocking descriptor; false on an error.
    fn write_to(&self, fd: &OwnedFd) -> bool {
        sink::write_all_fd(fd, &self.header()) && sink::write_all_fd(fd, self.body)
    }

    /// The first whole record of `report` and what follows it; `None` when `report` holds no
    /// whole record (a stand-in that died mid-write).
    fn decode(report: &[u8]) -> Option<(Record<'_>, &[u8])> {
        let head = report.get(..HEADER)?;
        let word = |a: usize| u64::from_le_bytes(head[a..a + 8].try_into().unwrap_or_default());
        let len = usize::try_from(word(22)).ok()?;
        let end = HEADER.checked_add(len)?;
        let body = report.get(HEADER..end)?;
        let record = Record {
            index: head[0],
            flags: head[1],
            errno: i32::from_le_bytes(head[2..6].try_into().unwrap_or_default()),
            flushed: word(6),
            sent: word(14),
            body,
        };
        Some((record, &report[end..]))
    }
}

impl Capture {
    /// Job control (W2): runs `stop`, which returns once this process is continued, while a
    /// stand-in ([`crate::kernel::stand_in`]) keeps the streams flowing meanwhile. The stand-in
    /// forwards what each forward's reader takes, as the workload's writes would reach it
    /// without the wrapper (a stopped `run` would leave them in full pipes), and holds what it
    /// read, up to [`STAND_IN_HOLD`] per stream (past it the stream waits, as for a slow
    /// reader). Back here the held bytes go through this capture as if read now (artifact,
    /// kept prefix, counters, callback; the forwarded ones not to the forward again), in order,
    /// before anything read later. Without a stand-in (no pipe, no fork) `stop` runs alone.
    pub fn flowing_while_stopped(&mut self, stop: impl FnOnce()) {
        use crate::kernel::stand_in::{self, Forked};
        use rustix::pipe::{pipe_with, PipeFlags};
        let (Ok((go_r, go_w)), Ok((report_r, report_w))) =
            (pipe_with(PipeFlags::CLOEXEC), pipe_with(PipeFlags::CLOEXEC))
        else {
            stop();
            return;
        };
        let held: Vec<Vec<u8>> = self
            .readers
            .iter()
            .map(|r| match r.fd {
                // Zeroed pages: nothing is touched until the stand-in writes into them.
                Some(_) => vec![0; STAND_IN_HOLD],
                None => Vec::new(),
            })
            .collect();
        match stand_in::fork() {
            Err(e) => {
                tracing::warn!(error = %e, "no stand-in for the streams while stopped");
                stop();
            }
            Ok(Forked::Child) => {
                drop(go_w);
                drop(report_r);
                stand_in::block_all_signals();
                self.stand_in(go_r, report_w, held)
            }
            Ok(Forked::Parent(pid)) => {
                drop((go_r, report_w, held));
                stop();
                // The stand-in's cue: the end of `go`.
                drop(go_w);
                let mut report = Vec::new();
                let mut chunk = vec![0u8; READ_CHUNK];
                loop {
                    match rustix::io::read(&report_r, &mut chunk) {
                        Ok(0) => break,
                        Ok(n) => report.extend_from_slice(&chunk[..n]),
                        Err(Errno::INTR) => {}
                        Err(_) => break,
                    }
                }
                stand_in::reap(pid);
                if !self.take_report(&report) {
                    tracing::warn!(
                        "the stand-in's report was cut short: what it read is not in the artifacts"
                    );
                }
            }
        }
    }

    /// The stand-in's side of [`Capture::flowing_while_stopped`]: forwards and holds until
    /// `go` ends, then writes its report and exits. No lock, no log (see
    /// [`crate::kernel::stand_in`]).
    fn stand_in(&mut self, go: OwnedFd, report: OwnedFd, mut held: Vec<Vec<u8>>) -> ! {
        let n = self.readers.len();
        // Per stream: bytes held, of them forwarded, of the parent's pending forwarded, the
        // end flags and the read error.
        let mut len = vec![0usize; n];
        let mut sent = vec![0usize; n];
        let mut flushed = vec![0usize; n];
        let mut end = vec![0u8; n];
        let mut errno = vec![0i32; n];
        let unsent = |r: &Reader, i: usize, len: &[usize], sent: &[usize], flushed: &[usize]| {
            r.forward.is_some() && (flushed[i] < r.pending.len() || sent[i] < len[i])
        };
        loop {
            let mut fds = Vec::with_capacity(n + 1);
            let mut which = Vec::with_capacity(n);
            fds.push(PollFd::new(&go, PollFlags::IN));
            for (i, r) in self.readers.iter().enumerate() {
                if end[i] & GONE != 0 {
                    continue;
                }
                if unsent(r, i, &len, &sent, &flushed) {
                    if let Some(f) = &r.forward {
                        fds.push(PollFd::from_borrowed_fd(f.fd.as_fd(), PollFlags::OUT));
                        which.push(i);
                    }
                } else if len[i] < held[i].len() && end[i] & (EOF | FAILED) == 0 {
                    if let Some(fd) = &r.fd {
                        fds.push(PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN));
                        which.push(i);
                    }
                }
            }
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => break,
            }
            if !fds[0].revents().is_empty() {
                break;
            }
            let ready: Vec<usize> = fds[1..]
                .iter()
                .zip(&which)
                .filter(|(p, _)| !p.revents().is_empty())
                .map(|(_, &i)| i)
                .collect();
            drop(fds);
            for i in ready {
                let r = &self.readers[i];
                if !unsent(r, i, &len, &sent, &flushed) && len[i] < held[i].len() {
                    if let Some(fd) = &r.fd {
                        match rustix::io::read(fd, &mut held[i][len[i]..]) {
                            Ok(0) => end[i] |= EOF,
                            Ok(k) => len[i] += k,
                            Err(Errno::AGAIN | Errno::INTR) => {}
                            Err(Errno::IO) if r.pty => end[i] |= EOF,
                            Err(e) => {
                                end[i] |= FAILED;
                                errno[i] = e.raw_os_error();
                            }
                        }
                    }
                }
                let Some(f) = &r.forward else {
                    sent[i] = len[i];
                    continue;
                };
                let write = |bytes: &[u8], done: &mut usize| {
                    while *done < bytes.len() {
                        match f.write(&bytes[*done..]) {
                            Ok(0) => return true,
                            Ok(k) => *done += k,
                            Err(Errno::INTR) => {}
                            Err(_) => return false,
                        }
                    }
                    true
                };
                let ok = write(&r.pending, &mut flushed[i])
                    && (flushed[i] < r.pending.len() || write(&held[i][..len[i]], &mut sent[i]));
                if !ok {
                    end[i] |= GONE;
                }
            }
        }
        for i in 0..n {
            let record = Record {
                index: i as u8,
                flags: end[i],
                errno: errno[i],
                flushed: flushed[i] as u64,
                sent: sent[i] as u64,
                body: &held[i][..len[i]],
            };
            if !record.write_to(&report) {
                break;
            }
        }
        crate::kernel::stand_in::exit_now(0)
    }

    /// Takes a stand-in's report into the readers; false if it was cut short (the stand-in
    /// died), after taking every whole record.
    fn take_report(&mut self, mut report: &[u8]) -> bool {
        let keep_max = self.config.keep_max;
        let mut records = 0;
        while let Some((record, rest)) = Record::decode(report) {
            let Record {
                index,
                flags,
                errno,
                flushed,
                sent,
                body,
            } = record;
            let Some(r) = self.readers.get_mut(usize::from(index)) else {
                break;
            };
            let flushed = usize::try_from(flushed)
                .unwrap_or(usize::MAX)
                .min(r.pending.len());
            r.pending.drain(..flushed);
            if !body.is_empty() {
                let cb = &mut self.callback;
                r.absorb(body, keep_max, &mut |s, b| {
                    if let Some(cb) = cb.as_mut() {
                        cb(s, b)
                    }
                });
                self.last_output = Some(Instant::now());
                if r.forward.is_some() {
                    let sent = usize::try_from(sent).unwrap_or(usize::MAX).min(body.len());
                    r.pending.extend_from_slice(&body[sent..]);
                }
            }
            if flags & GONE != 0 {
                r.forward = None;
                r.pending = Vec::new();
                r.fd = None;
                r.reader_gone = true;
            }
            if flags & EOF != 0 {
                r.fd = None;
            }
            if flags & FAILED != 0 {
                r.read_failed = Some(errno);
                r.fd = None;
            }
            r.sink.idle();
            records += 1;
            report = rest;
        }
        records == self.readers.len() && report.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(body: &[u8]) -> Record<'_> {
        Record {
            index: 1,
            flags: EOF | FAILED,
            errno: -5,
            flushed: 7,
            sent: u64::MAX,
            body,
        }
    }

    #[test]
    fn a_record_decodes_as_encoded_and_leaves_the_rest() {
        let body = b"held bytes";
        let mut wire = sample(body).header().to_vec();
        wire.extend_from_slice(body);
        wire.extend_from_slice(b"next");
        let (record, rest) = Record::decode(&wire).expect("a whole record");
        assert_eq!(record, sample(body));
        assert_eq!(rest, b"next");
    }

    #[test]
    fn an_empty_body_is_a_whole_record() {
        let wire = sample(b"").header();
        let (record, rest) = Record::decode(&wire).expect("a whole record");
        assert_eq!(record.body, b"");
        assert!(rest.is_empty());
    }

    #[test]
    fn a_cut_record_is_none() {
        let body = b"held bytes";
        let mut wire = sample(body).header().to_vec();
        wire.extend_from_slice(body);
        for cut in 0..wire.len() {
            assert_eq!(Record::decode(&wire[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn a_length_past_the_report_is_none() {
        let mut head = sample(b"").header();
        head[22..30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Record::decode(&head), None);
    }
}

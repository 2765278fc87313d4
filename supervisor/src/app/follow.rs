//! What wakes a follower of a scope's output or of the events journal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::RegistrationId;
use refine_supervisor::host::Runtime;

/// L1: what wakes `logs -f` (and the socket's `follow`), by inotify: an artifact growing or
/// created, the receipt landing, the record closed (its launcher letting go of its lock). No busy polling: an idle follower
/// sleeps until one of those, or [`FOLLOW_BACKSTOP`] for what brings no event. Without inotify
/// (a kernel or limit that refuses it) the follower looks every 100 ms instead.
pub struct Changes {
    fd: Option<std::os::fd::OwnedFd>,
}

/// The longest an idle `logs -f` sleeps without an event.
const FOLLOW_BACKSTOP: Duration = Duration::from_secs(1);

impl Changes {
    /// No watch: [`Changes::wait`] sleeps 100 ms.
    pub fn none() -> Changes {
        Changes { fd: None }
    }

    pub fn watch(rt: &Runtime, id: RegistrationId, artifacts: &[PathBuf]) -> Changes {
        use rustix::fs::inotify::{add_watch, init, CreateFlags, WatchFlags};
        let Ok(fd) = init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
            return Changes { fd: None };
        };
        // The folder: an artifact created by its first byte (a launcher's capture, F3).
        let logs = rt.dir().join("logs");
        let _ = add_watch(&fd, &logs, WatchFlags::CREATE | WatchFlags::MOVED_TO);
        let _ = add_watch(
            &fd,
            rt.proof_path(id),
            WatchFlags::MODIFY | WatchFlags::CLOSE_WRITE,
        );
        let _ = add_watch(&fd, rt.record_path(id), WatchFlags::CLOSE);
        let changes = Changes { fd: Some(fd) };
        changes.rewatch(artifacts);
        changes
    }

    /// Watches a folder: a file created or moved into it, or written in it (the events
    /// journal's segments).
    pub fn watch_dir(dir: &Path) -> Changes {
        use rustix::fs::inotify::{add_watch, init, CreateFlags, WatchFlags};
        let Ok(fd) = init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) else {
            return Changes { fd: None };
        };
        let flags = WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::MODIFY;
        if add_watch(&fd, dir, flags).is_err() {
            return Changes { fd: None };
        }
        Changes { fd: Some(fd) }
    }

    /// Watches the artifacts that exist now (adding a watch again only updates it).
    pub fn rewatch(&self, artifacts: &[PathBuf]) {
        if let Some(fd) = &self.fd {
            for path in artifacts {
                let _ = rustix::fs::inotify::add_watch(
                    fd,
                    path,
                    rustix::fs::inotify::WatchFlags::MODIFY,
                );
            }
        }
    }

    /// Sleeps until something changed (or the backstop), then drains the events.
    pub fn wait(&mut self) {
        let Some(fd) = &self.fd else {
            std::thread::sleep(NO_INOTIFY_TICK);
            return;
        };
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let limit = rustix::time::Timespec {
            tv_sec: FOLLOW_BACKSTOP.as_secs() as i64,
            tv_nsec: 0,
        };
        let _ = rustix::event::poll(&mut fds, Some(&limit));
        self.drain();
    }

    /// [`Changes::wait`] as a task of the service's event loop: no thread waits meanwhile.
    pub async fn wait_async(&mut self) {
        let readable = self
            .fd
            .as_ref()
            .and_then(|fd| fd.try_clone().ok())
            // SAFETY: the descriptor is an `OwnedFd` of our own (a duplicate of the inotify
            // one) that the `AsyncFd` owns: nothing else closes or replaces it while it is
            // registered, and dropping the `AsyncFd` deregisters it before closing it.
            .and_then(|fd| unsafe { tokio::io::unix::AsyncFd::register(fd) }.ok());
        let Some(readable) = readable else {
            tokio::time::sleep(NO_INOTIFY_TICK).await;
            return;
        };
        let _ = tokio::time::timeout(FOLLOW_BACKSTOP, readable.readable()).await;
        self.drain();
    }

    fn drain(&self) {
        if let Some(fd) = &self.fd {
            let mut buf = [0u8; 4096];
            while matches!(rustix::io::read(fd, &mut buf), Ok(n) if n > 0) {}
        }
    }
}

/// How often a follower without inotify looks.
const NO_INOTIFY_TICK: Duration = Duration::from_millis(100);

//! A running launch as its caller holds it: [`LaunchHandle`] (wait, cancel, stop, signal,
//! input), [`Canceller`] and [`InputWriter`] for other threads, and the control messages they
//! send the engine thread.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{mpsc, Arc, Mutex};

use super::engine::{
    Beside, CTL_ACTIVITY, CTL_CANCEL, CTL_OPERATOR_STOP, CTL_SIGNAL, CTL_TERMINATION,
};
use std::thread::JoinHandle;
use std::time::Duration;

use refine_protocol::record::Registration;
use refine_protocol::RegistrationId;
use rustix::net::SendFlags;

use super::{io_op, LaunchError, LaunchResult};
use crate::launch::pty::{self, WindowSize};

/// How long [`LaunchHandle::write_input`] waits for the workload to accept input.
pub const INPUT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct Control(pub(super) OwnedFd);

impl Control {
    fn send(&self, byte: u8) {
        self.send_msg(&[byte]);
    }

    fn send_msg(&self, msg: &[u8]) {
        // One message per request (SOCK_SEQPACKET). Best effort: once the engine has finished,
        // nobody listens (EPIPE, no SIGPIPE); a full buffer already holds a pending request.
        let _ = rustix::net::send(&self.0, msg, SendFlags::NOSIGNAL | SendFlags::DONTWAIT);
    }
}

#[derive(Debug)]
pub(super) enum Input {
    Pty(OwnedFd),
    Pipe(OwnedFd),
}

/// Cancels a launch from any thread.
#[derive(Debug, Clone)]
pub struct Canceller {
    pub(super) control: Arc<Control>,
}

impl Canceller {
    /// The caller no longer wants the result: the tree is stopped, the outcome is `Cancelled`.
    pub fn cancel(&self) {
        self.control.send(CTL_CANCEL);
    }
    /// An operator stops the launch: the tree is stopped, the outcome is `Stopped`.
    pub fn operator_stop(&self) {
        self.control.send(CTL_OPERATOR_STOP);
    }
    /// Asks the guardian to forward `signo` to the workload (counts as activity); see
    /// [`LaunchHandle::signal`].
    pub fn signal(&self, signo: i32) -> Result<(), LaunchError> {
        self.control.send_msg(&[CTL_SIGNAL, signal_byte(signo)?]);
        Ok(())
    }
    /// Relays a signal the host received per W9 ([`crate::launch::escalation`]): see
    /// [`LaunchHandle::termination_request`].
    pub fn termination_request(&self, signo: i32) -> Result<(), LaunchError> {
        self.control
            .send_msg(&[CTL_TERMINATION, signal_byte(signo)?]);
        Ok(())
    }
}

fn signal_byte(signo: i32) -> Result<u8, LaunchError> {
    u8::try_from(signo)
        .ok()
        .filter(|s| (1..=64).contains(s))
        .ok_or(LaunchError::BadSignal(signo))
}

/// A running launch.
#[derive(Debug)]
pub struct LaunchHandle {
    pub(super) id: RegistrationId,
    pub(super) registration: Registration,
    pub(super) thread: Option<Driver>,
    /// Whether the workload exec'd, once the guardian says so.
    pub(super) spawned: Mutex<mpsc::Receiver<Result<(), (i32, refine_protocol::frame::SpawnStep)>>>,
    pub(super) control: Arc<Control>,
    pub(super) input: InputWriter,
}

/// The input side of a launch (stdin pipe or PTY master, window size), shareable with other
/// threads — a terminal forwarder, say — while [`LaunchHandle::wait`] blocks.
#[derive(Debug, Clone)]
pub struct InputWriter {
    pub(super) inner: Arc<InputInner>,
}

#[derive(Debug)]
pub(super) struct InputInner {
    pub(super) control: Arc<Control>,
    pub(super) input: Mutex<Option<Input>>,
    /// The `logs/ID.stdin` artifact: every byte delivered to the workload is appended to it.
    pub(super) log: Mutex<Option<File>>,
}

impl LaunchHandle {
    pub fn id(&self) -> RegistrationId {
        self.id
    }

    /// The durable registration (written before the workload could start).
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// Waits at most `timeout` for the guardian's word on the `execve`: `Some(Ok(()))` the
    /// workload runs, `Some(Err((errno, step)))` it never ran (a spawn failure at that step),
    /// `None` no word (the bound passed, or the guardian was lost before it).
    pub fn wait_spawned(
        &self,
        timeout: Duration,
    ) -> Option<Result<(), (i32, refine_protocol::frame::SpawnStep)>> {
        let rx = self.spawned.lock().unwrap_or_else(|p| p.into_inner());
        rx.recv_timeout(timeout).ok()
    }

    pub fn canceller(&self) -> Canceller {
        Canceller {
            control: self.control.clone(),
        }
    }

    pub fn cancel(&self) {
        self.canceller().cancel()
    }

    /// Resizes the PTY (counts as activity).
    pub fn resize(&self, size: WindowSize) -> Result<(), LaunchError> {
        self.input.resize(size)
    }

    /// Writes to the workload's stdin (PTY or pipe; counts as activity), waiting at most
    /// [`INPUT_TIMEOUT`] for it to accept the bytes.
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), LaunchError> {
        self.input.write_input(bytes)
    }

    /// The input side, for a thread that forwards a terminal while this handle waits.
    pub fn input_writer(&self) -> InputWriter {
        self.input.clone()
    }

    /// Asks the guardian to forward `signo` to the workload (counts as activity). Best effort:
    /// ignored once the workload has exited. To end a launch use [`Canceller`], which stops the
    /// whole tree.
    pub fn signal(&self, signo: i32) -> Result<(), LaunchError> {
        self.canceller().signal(signo)
    }

    /// W9: relays a signal the host received. `SIGINT` and `SIGTERM` are requests to end:
    /// the first is forwarded and the workload has the request's `stop_grace`, then the scope
    /// ends (outcome `cancelled`); the same one again ends it at once; once the workload has
    /// ended, the rest of its scope is stopped through the shared stop. Every other signal is
    /// forwarded and nothing more ([`crate::launch::escalation`]).
    pub fn termination_request(&self, signo: i32) -> Result<(), LaunchError> {
        self.canceller().termination_request(signo)
    }

    /// Closes a piped stdin (the workload reads EOF).
    pub fn close_input(&self) {
        self.input.close_input()
    }

    /// Whether the engine has returned its result (the workload ended; a kept scope is followed
    /// by its own watcher).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(Driver::is_finished)
    }

    /// Only the engine, to be joined later: the handle's control channel and input side are let
    /// go (the engine then closes its end of the control channel: a detached scope holds no
    /// descriptor for it).
    pub fn into_engine(mut self) -> EngineThread {
        EngineThread(self.thread.take())
    }

    /// Waits for the result: the workload exited and the final drain ended (or it never ran).
    pub fn wait(mut self) -> Result<LaunchResult, LaunchError> {
        self.thread
            .take()
            .ok_or(LaunchError::EngineDied)?
            .wait(None)
    }

    /// [`LaunchHandle::wait`], serving `beside` meanwhile on this thread: its descriptor is
    /// polled with the engine's own when the launch is driven by the caller
    /// ([`super::Supervisor::driven_by_caller`]); otherwise `beside` is not served.
    pub fn wait_beside(mut self, beside: &mut dyn Beside) -> Result<LaunchResult, LaunchError> {
        self.thread
            .take()
            .ok_or(LaunchError::EngineDied)?
            .wait(Some(beside))
    }
}

/// What drives a launch's engine: a thread of its own, the shared loop, or the thread that
/// waits for it ([`super::Supervisor::driven_by_caller`]).
pub(super) enum Driver {
    Thread(JoinHandle<()>, Arc<Completion>),
    Shared(super::shared::SharedResult),
    Caller(Box<super::engine::Engine>, Option<super::ResultHook>),
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Driver::Thread(t, _) => f.debug_tuple("Thread").field(t).finish(),
            Driver::Shared(r) => f.debug_tuple("Shared").field(r).finish(),
            Driver::Caller(..) => f.write_str("Caller"),
        }
    }
}

impl Driver {
    fn is_finished(&self) -> bool {
        match self {
            Driver::Thread(_, done) => done.is_set(),
            Driver::Shared(r) => r.is_finished(),
            Driver::Caller(..) => false,
        }
    }

    fn wait(self, beside: Option<&mut dyn Beside>) -> Result<LaunchResult, LaunchError> {
        match self {
            Driver::Thread(t, done) => {
                t.join().map_err(|_| LaunchError::EngineDied)?;
                done.take().ok_or(LaunchError::EngineDied)
            }
            Driver::Shared(r) => r.wait(),
            Driver::Caller(engine, on_result) => {
                let result = match beside {
                    Some(b) => engine.run_beside(b),
                    None => engine.run(),
                };
                if let Some(hook) = on_result {
                    hook(&result);
                }
                Ok(result)
            }
        }
    }
}

/// The result of an engine on a thread of its own, handed over once: a blocking waiter sleeps
/// on the condition variable (with a bound if it likes), an async one on the notification.
#[derive(Debug, Default)]
pub(super) struct Completion {
    result: Mutex<Option<LaunchResult>>,
    set: std::sync::atomic::AtomicBool,
    ready: std::sync::Condvar,
    notify: tokio::sync::Notify,
}

impl Completion {
    /// Called once, by the engine's thread, with its result.
    pub(super) fn deliver(&self, result: LaunchResult) {
        *self.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        self.set.store(true, std::sync::atomic::Ordering::Release);
        self.ready.notify_all();
        // A permit is stored if nobody awaits yet: the wake is never lost.
        self.notify.notify_one();
    }

    fn is_set(&self) -> bool {
        self.set.load(std::sync::atomic::Ordering::Acquire)
    }

    fn take(&self) -> Option<LaunchResult> {
        self.result.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Whether the result came within `timeout`.
    fn wait_for(&self, timeout: Duration) -> bool {
        let guard = self.result.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = self
            .ready
            .wait_timeout_while(guard, timeout, |r| {
                r.is_none() && !self.set.load(std::sync::atomic::Ordering::Acquire)
            })
            .unwrap_or_else(|p| p.into_inner());
        guard.is_some()
    }

    async fn arrived(&self) {
        while !self.is_set() {
            self.notify.notified().await;
        }
    }
}

impl LaunchHandle {
    /// [`LaunchHandle::wait`] with a bound: `Ok(None)` when the result has not come within
    /// `timeout` (the handle is still whole). A launch driven by its caller
    /// ([`super::Supervisor::driven_by_caller`]) has no bounded wait (the wait drives it).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<LaunchResult>, LaunchError> {
        let ready = match self.thread.as_ref().ok_or(LaunchError::EngineDied)? {
            Driver::Thread(_, done) => done.wait_for(timeout),
            Driver::Shared(r) => r.wait_for(timeout),
            Driver::Caller(..) => return Err(LaunchError::NotAvailable("bounded wait")),
        };
        if !ready {
            return Ok(None);
        }
        self.thread
            .take()
            .ok_or(LaunchError::EngineDied)?
            .wait(None)
            .map(Some)
    }

    /// [`LaunchHandle::wait`] for an async caller (tokio), borrowing the handle: an engine on a
    /// thread of its own or on the shared loop wakes the task when its result is there (no
    /// thread waits for it), and a future dropped before then (a `tokio::time::timeout`) leaves
    /// the handle whole, to stop or wait again. A launch driven by its caller is driven on
    /// tokio's blocking pool; dropping that future leaves the engine running to its result
    /// there, and the handle can still be stopped, but no longer waited for.
    pub async fn wait_async(&mut self) -> Result<LaunchResult, LaunchError> {
        match self.thread.as_ref().ok_or(LaunchError::EngineDied)? {
            Driver::Thread(_, done) => done.clone().arrived().await,
            Driver::Shared(r) => r.arrived().await,
            Driver::Caller(..) => {
                let driver = self.thread.take().ok_or(LaunchError::EngineDied)?;
                return tokio::task::spawn_blocking(move || driver.wait(None))
                    .await
                    .map_err(|_| LaunchError::EngineDied)?;
            }
        }
        // The result is delivered as the engine's last step: the join is immediate.
        self.thread
            .take()
            .ok_or(LaunchError::EngineDied)?
            .wait(None)
    }
}

/// A launch's engine without its handle ([`LaunchHandle::into_engine`]).
#[derive(Debug)]
pub struct EngineThread(Option<Driver>);

impl EngineThread {
    pub fn is_finished(&self) -> bool {
        self.0.as_ref().is_none_or(Driver::is_finished)
    }

    /// Waits for the engine's result.
    pub fn wait(mut self) -> Result<LaunchResult, LaunchError> {
        self.0.take().ok_or(LaunchError::EngineDied)?.wait(None)
    }
}

impl InputWriter {
    /// Resizes the PTY (counts as activity).
    pub fn resize(&self, size: WindowSize) -> Result<(), LaunchError> {
        let input = self.inner.input.lock().unwrap_or_else(|p| p.into_inner());
        match input.as_ref() {
            Some(Input::Pty(master)) => pty::resize(master.as_fd(), size)?,
            _ => return Err(LaunchError::NotAvailable("terminal")),
        }
        self.inner.control.send(CTL_ACTIVITY);
        Ok(())
    }

    /// Writes to the workload's stdin (PTY or pipe; counts as activity), waiting at most
    /// [`INPUT_TIMEOUT`] for it to accept the bytes.
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), LaunchError> {
        self.deliver(bytes, Some(INPUT_TIMEOUT))
    }

    /// Writes to the workload's stdin as a pipe would: waits as long as the workload does not
    /// read (a relay of this process's own stdin, W1). Fails once the workload has closed it.
    pub fn feed_input(&self, bytes: &[u8]) -> Result<(), LaunchError> {
        self.deliver(bytes, None)
    }

    fn deliver(&self, bytes: &[u8], timeout: Option<Duration>) -> Result<(), LaunchError> {
        let input = self.inner.input.lock().unwrap_or_else(|p| p.into_inner());
        let fd = match input.as_ref() {
            Some(Input::Pty(fd)) | Some(Input::Pipe(fd)) => fd,
            None => return Err(LaunchError::NotAvailable("input")),
        };
        if matches!(input.as_ref(), Some(Input::Pipe(_))) {
            rustix::io::ioctl_fionbio(fd, true)
                .map_err(|e| io_op("make stdin nonblocking")(e.into()))?;
        }
        pty::write_input(fd.as_fd(), bytes, timeout)?;
        self.inner.control.send(CTL_ACTIVITY);
        if let Some(log) = self
            .inner
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            log.write_all(bytes)
                .map_err(io_op("record input in the stdin artifact"))?;
        }
        Ok(())
    }

    /// Closes a piped stdin (the workload reads EOF).
    pub fn close_input(&self) {
        let mut input = self.inner.input.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(input.as_ref(), Some(Input::Pipe(_))) {
            *input = None;
        }
    }
}

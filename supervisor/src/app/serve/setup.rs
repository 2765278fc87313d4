//! Starting the service: an upgrade's inherited listener, the log, the socket.

use super::*;

/// The environment variable that carries the listening socket across an upgrade's `execve`.
pub(super) const LISTEN_FD_VAR: &str = "REFINE_LISTEN_FD";
/// How long the new binary's preflight (`version`) may take before the upgrade is refused.
pub(super) const PREFLIGHT_BOUND: Duration = Duration::from_secs(10);

/// The signals an upgrade's `execve` carries blocked, unblocked by the new image once its
/// handlers are in place.
pub(super) const HELD_ACROSS_EXEC: &[i32] = &[libc::SIGHUP, libc::SIGTERM, libc::SIGINT];

/// The path a binary was started from, as `current_exe` reads it: once a new binary is
/// renamed over it (before this image even looked, in a quick second upgrade), the link
/// reads `PATH (deleted)`, and the path the next upgrade executes is PATH.
pub(super) fn install_path(exe: std::path::PathBuf) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let bytes = exe.as_os_str().as_bytes();
    match bytes.strip_suffix(b" (deleted)") {
        Some(path) => std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path)),
        None => exe,
    }
}

/// How the service ended its loop.
pub(super) enum Ended {
    /// SIGTERM or SIGINT.
    Stop,
    /// SIGHUP, and the new binary passed its preflight: the listener, to carry across `execve`.
    Upgrade(std::os::unix::net::UnixListener),
}

/// L5: the upgrade in place (SIGHUP; `systemctl reload`; `refine-supervisor upgrade`). The
/// same process executes the binary at the path it was started from: its pid stays (systemd's
/// main pid, the guardians' parent), the listening socket is carried across `execve` (connects
/// meanwhile wait in its backlog, none is refused), and the new image adopts the launches by
/// its recovery at start, as after `--live-restore`. A new binary that fails its preflight
/// (`version`, bounded) is refused before anything changes: the old one goes on serving.
pub(super) struct Upgrade {
    pub(super) exe: std::path::PathBuf,
    pub(super) args: Vec<std::ffi::OsString>,
}

impl Upgrade {
    /// Whether the binary now at the path runs (`version` exits 0 within the bound).
    pub(super) fn preflight(&self) -> Result<(), String> {
        let mut child = std::process::Command::new(&self.exe)
            .arg("version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .env_remove(LISTEN_FD_VAR)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        let end = Instant::now() + PREFLIGHT_BOUND;
        loop {
            match child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(()),
                Ok(Some(st)) => return Err(format!("{} version: {st}", self.exe.display())),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{} version did not answer", self.exe.display()));
                }
                Err(e) => return Err(format!("wait for the preflight: {e}")),
            }
        }
    }

    /// Executes the new binary with the listener as an inherited descriptor; returns only on
    /// failure.
    pub(super) fn exec(&self, listener: &std::os::unix::net::UnixListener) -> io::Error {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        // A duplicate without close-on-exec: the one descriptor the new image inherits on
        // purpose (everything else of this process is close-on-exec).
        let fd = match rustix::io::dup(listener) {
            Ok(fd) => fd,
            Err(e) => return e.into(),
        };
        // The signals that end or upgrade the service stay blocked across `execve` (the mask
        // is inherited): one sent while the new image starts waits for its handlers, which
        // unblock them ([`HELD_ACROSS_EXEC`]), instead of ending it by the default action.
        let _held = refine_supervisor::host::signals::Blocked::block(HELD_ACROSS_EXEC);
        let err = std::process::Command::new(&self.exe)
            .args(&self.args)
            .env(LISTEN_FD_VAR, fd.as_raw_fd().to_string())
            .exec();
        drop(fd);
        err
    }
}

/// The listener an upgrade carried across `execve`, if this process is such an upgrade's new
/// image: [`LISTEN_FD_VAR`] names a descriptor that is a listening Unix socket bound to `path`.
/// Anything else is ignored (and the variable dropped), and the socket is bound afresh.
pub(super) fn inherited_listener(path: &Path) -> Option<std::os::unix::net::UnixListener> {
    use std::os::fd::FromRawFd;
    let var = std::env::var(LISTEN_FD_VAR).ok()?;
    std::env::remove_var(LISTEN_FD_VAR);
    let fd: i32 = var.parse().ok().filter(|&fd| fd > 2)?;
    // SAFETY: a descriptor this process inherited for this purpose and nothing else owns; it
    // is checked to be what it should be before use, and closed if not.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // Not a socket, or not this one: closed here, and the socket is bound afresh.
    rustix::net::sockopt::socket_type(&owned).ok()?;
    let listener = std::os::unix::net::UnixListener::from(owned);
    let addr = listener.local_addr().ok()?;
    if addr.as_pathname() != Some(path) {
        return None;
    }
    Some(listener)
}

/// Each rotated log file's size, and how many are kept besides the one written.
pub(super) const LOG_FILE_BYTES: usize = 10 * 1024 * 1024;
pub(super) const LOG_FILES_KEPT: usize = 5;

/// The service log, filtered by `RUST_LOG` (default `info`), as text or JSON lines: on stderr
/// (journald's, under the example unit), in colour only on a terminal and never with
/// `NO_COLOR`; or, with `--log-file PATH`, in `PATH`, rotated by `file-rotate` to `PATH.1` ...
/// once it passes [`LOG_FILE_BYTES`], mode 0600.
pub(super) fn init_tracing(format: LogFormat, log_file: Option<&Path>) -> Result<(), ServiceError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // A second init (tests calling serve twice in one process) keeps the first subscriber.
    let _ = match (log_file, format) {
        (None, format) => {
            let builder = builder
                .with_writer(std::io::stderr)
                .with_ansi(crate::app::colour_on(&std::io::stderr()));
            match format {
                LogFormat::Text => builder.try_init(),
                LogFormat::Json => builder.json().try_init(),
            }
        }
        (Some(path), format) => {
            let writer = Mutex::new(rotating_log(path)?);
            let builder = builder.with_writer(writer).with_ansi(false);
            match format {
                LogFormat::Text => builder.try_init(),
                LogFormat::Json => builder.json().try_init(),
            }
        }
    };
    Ok(())
}

/// `--log-file PATH`, checked here (made absolute, its directory created 0700, the file opened
/// 0600) so that the rotation crate, which aborts on a directory it cannot create, never meets
/// one.
pub(super) fn rotating_log(
    path: &Path,
) -> Result<file_rotate::FileRotate<file_rotate::suffix::AppendCount>, ServiceError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = std::path::absolute(path).map_err(io_err("resolve the --log-file path"))?;
    let dir = match path.parent() {
        Some(d) if path.file_name().is_some() => d.to_owned(),
        _ => {
            return Err(ServiceError::Io {
                op: "open the --log-file (it names no file)",
                source: io::Error::from(io::ErrorKind::InvalidInput),
            })
        }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io_err("create the --log-file directory"))?;
    let mut open = std::fs::OpenOptions::new();
    open.read(true).create(true).append(true).mode(0o600);
    open.open(&path).map_err(io_err("open the --log-file"))?;
    Ok(file_rotate::FileRotate::new(
        &path,
        file_rotate::suffix::AppendCount::new(LOG_FILES_KEPT),
        file_rotate::ContentLimit::BytesSurpassed(LOG_FILE_BYTES),
        file_rotate::compression::Compression::None,
        Some(open),
    ))
}

/// Binds `path` with mode 0600 from the start (umask), replacing a stale socket file: we hold the
/// service lock, so no live service owns it.
pub(super) fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, ServiceError> {
    if let Some(listener) = inherited_listener(path) {
        tracing::info!("upgraded in place: the listening socket came across execve");
        listener
            .set_nonblocking(true)
            .map_err(io_err("configure the service socket"))?;
        return tokio::net::UnixListener::from_std(listener)
            .map_err(io_err("register the service socket"));
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove a stale socket")(e)),
    }
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = std::os::unix::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(io_err("bind the service socket"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("chmod the service socket"))?;
    listener
        .set_nonblocking(true)
        .map_err(io_err("configure the service socket"))?;
    tokio::net::UnixListener::from_std(listener).map_err(io_err("register the service socket"))
}

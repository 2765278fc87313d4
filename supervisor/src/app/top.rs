//! `top` (SPEC H8): CPU %, memory, pids and block I/O of every live scope of the port, as
//! `podman stats` shows them for containers and `systemd-cgtop` for cgroups.
//!
//! ```text
//! terminal   sample every live scope; then, every --interval: wait (poll on a signalfd and
//!            the keyboard), sample again, redraw the table from the two last samples
//!            (cursor home, clear, the table; the cursor hidden until the end). q, Ctrl-C,
//!            SIGTERM or SIGHUP end it with the terminal as it was (exit 0); SIGWINCH redraws
//!            to the new width at once
//! one sample --no-stream, --json, or stdout not a terminal: sample, wait WINDOW, sample,
//!            print the table or one TopDoc, exit
//! ```
//!
//! A CPU share needs two samples: it is the CPU time the scope spent between them divided by
//! the time between them. The pause before the second sample is a measurement window, not a
//! wait for anything; `WINDOW` (1 s) is the window of a single sample, as `podman stats
//! --no-stream` takes one of its own. Where each figure is read is `host::observe`'s.
//!
//! # Caveats
//! - A scope launched during the window is shown from the next refresh on (it needs two
//!   samples); one that ended during it is left out.
//! - On the terminal, stdin is read with `ICANON` and `ECHO` off (one key at a time, not
//!   shown) and `ISIG` on, so Ctrl-C is the kernel's SIGINT; the settings it found are put back
//!   on every way out but SIGKILL (then `reset` or `stty sane` does it, as after `top`).

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use refine_protocol::record::LimitPlacement;
use refine_protocol::{BootId, Registration};
use refine_supervisor::host::observe::{self, Sample};
use refine_supervisor::host::signals::{read_signal, Blocked};
use refine_supervisor::host::{RegistryError, Runtime};

use super::cli::{ExitCode, TopArgs};
use super::docs::{top_scope_doc, utc, State, TopDoc, TopScopeDoc};
use super::error::CliError;
use super::ops::{self, print_json};
use super::view;

/// The measurement window of a single sample (`--no-stream`, `--json`, off a terminal).
pub const WINDOW: Duration = Duration::from_secs(1);

/// Hides the cursor / shows it again (DECTCEM); cursor home, then clear the screen.
const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";
const HOME_AND_CLEAR: &str = "\x1b[H\x1b[2J";

pub fn top(home: &Path, port: u16, args: TopArgs) -> Result<ExitCode, CliError> {
    let rt = match Runtime::open_existing(home, port) {
        Ok(rt) => Some(rt),
        Err(RegistryError::MissingRuntime(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let boot = observe::boot_id().map_err(|e| CliError::Output(io::Error::other(e)))?;
    let scopes = Scopes {
        rt: rt.as_ref(),
        boot,
    };
    let streaming = !args.json && !args.no_stream && rustix::termios::isatty(io::stdout());
    if streaming {
        return stream(&scopes, args.interval);
    }
    let first = scopes.sample()?;
    std::thread::sleep(WINDOW);
    let second = scopes.sample()?;
    let rows = rows(&first, &second);
    if args.json {
        print_json(&TopDoc {
            port,
            sampled_at: utc(refine_supervisor::host::unix_ms()),
            window_ms: u64::try_from(WINDOW.as_millis()).unwrap_or(u64::MAX),
            scopes: rows,
        })?;
        return Ok(0);
    }
    let mut o = ops::out();
    for line in view::top_lines(&rows, view::terminal_width()) {
        writeln!(o, "{line}").map_err(CliError::Output)?;
    }
    Ok(0)
}

/// A live scope and where its figures are.
struct Watched {
    reg: Registration,
    cgroup: Option<PathBuf>,
    placements: Vec<LimitPlacement>,
    roots: observe::Roots,
}

impl Watched {
    fn of(reg: Registration) -> Watched {
        Watched {
            cgroup: reg
                .cgroup
                .as_ref()
                .filter(|c| c.holds_scope())
                .map(|c| PathBuf::from(&c.path)),
            placements: reg
                .resources
                .as_ref()
                .map(|r| r.placements.clone())
                .unwrap_or_default(),
            // The tree below the guardian: a live scope's guardian is alive and adopts all of it.
            roots: observe::Roots {
                guardian: Some(reg.hello.guardian),
                members: Vec::new(),
                owner: None,
            },
            reg,
        }
    }

    fn place(&self) -> observe::Place<'_> {
        observe::Place {
            cgroup: self.cgroup.as_deref(),
            placements: &self.placements,
            roots: &self.roots,
        }
    }
}

/// The port's live scopes, sampled together.
struct Scopes<'a> {
    rt: Option<&'a Runtime>,
    boot: BootId,
}

impl Scopes<'_> {
    /// Every live scope (newest first, as `ps` lists them) with one sample of it; a scope that
    /// ends while it is read is left out.
    fn sample(&self) -> Result<Vec<(Watched, Sample)>, CliError> {
        let Some(rt) = self.rt else {
            return Ok(Vec::new());
        };
        let mut live = Vec::new();
        for id in rt.open_ids()? {
            // Forgotten meanwhile, or a record that does not decode: nothing to measure.
            let Ok(reg) = rt.read_registration(id) else {
                continue;
            };
            if ops::assess(rt, &reg).state == State::Live {
                live.push(Watched::of(reg));
            }
        }
        live.sort_by(|a, b| {
            (b.reg.started_at_unix_ms, b.reg.id).cmp(&(a.reg.started_at_unix_ms, a.reg.id))
        });
        Ok(live
            .into_iter()
            .filter_map(|w| {
                let s = observe::sample(&w.place(), self.boot).ok()?;
                Some((w, s))
            })
            .collect())
    }
}

/// The rows of the scopes sampled both times, in the later sampling's order.
fn rows(earlier: &[(Watched, Sample)], later: &[(Watched, Sample)]) -> Vec<TopScopeDoc> {
    later
        .iter()
        .filter_map(|(w, s)| {
            let (_, before) = earlier.iter().find(|(e, _)| e.reg.id == w.reg.id)?;
            Some(top_scope_doc(&w.reg, before, s))
        })
        .collect()
}

/// The terminal as `top` leaves it: cursor shown again, the keyboard's settings put back.
struct Screen {
    saved: Option<rustix::termios::Termios>,
}

impl Screen {
    /// Hides the cursor and, where stdin is a terminal, reads it a key at a time, unechoed.
    fn enter() -> io::Result<Screen> {
        use rustix::termios::{
            tcgetattr, tcsetattr, LocalModes, OptionalActions, SpecialCodeIndex,
        };
        let stdin = io::stdin();
        let saved = tcgetattr(&stdin).ok();
        if let Some(t) = &saved {
            let mut keys = t.clone();
            keys.local_modes
                .remove(LocalModes::ICANON | LocalModes::ECHO);
            keys.special_codes[SpecialCodeIndex::VMIN] = 1;
            keys.special_codes[SpecialCodeIndex::VTIME] = 0;
            tcsetattr(&stdin, OptionalActions::Now, &keys)?;
        }
        let screen = Screen { saved };
        let mut o = io::stdout();
        o.write_all(HIDE_CURSOR.as_bytes())?;
        o.flush()?;
        Ok(screen)
    }

    /// Draws a whole frame in one write.
    fn draw(&self, lines: &[String]) -> io::Result<()> {
        let mut frame = String::from(HOME_AND_CLEAR);
        for l in lines {
            frame.push_str(l);
            frame.push('\n');
        }
        let mut o = io::stdout().lock();
        o.write_all(frame.as_bytes())?;
        o.flush()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ =
                rustix::termios::tcsetattr(io::stdin(), rustix::termios::OptionalActions::Now, t);
        }
        let mut o = io::stdout();
        let _ = o.write_all(SHOW_CURSOR.as_bytes());
        let _ = o.flush();
    }
}

/// What ended a wait between two frames.
enum Woke {
    /// The interval passed: sample and redraw.
    Refresh,
    /// The terminal's size changed: redraw what is shown.
    Resized,
    /// q, or an interrupt: leave.
    Quit,
}

/// The table on the terminal, redrawn every `interval` until q or an interrupt.
fn stream(scopes: &Scopes<'_>, interval: Duration) -> Result<ExitCode, CliError> {
    // Blocked before anything else (the process has one thread): taken from the signalfd
    // between frames, so the terminal is put back whichever ends it.
    let held = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGWINCH,
    ];
    let blocked = Blocked::block(&held);
    let signals = blocked.signalfd().map_err(CliError::Output)?;
    let screen = Screen::enter().map_err(CliError::Output)?;
    let mut keyboard = screen.saved.is_some();
    let mut previous = scopes.sample()?;
    let mut shown: Vec<TopScopeDoc> = Vec::new();
    let mut next = Instant::now() + interval;
    loop {
        match wait(&signals, &mut keyboard, next).map_err(CliError::Output)? {
            Woke::Quit => return Ok(0),
            Woke::Resized => {}
            Woke::Refresh => {
                let now = scopes.sample()?;
                shown = rows(&previous, &now);
                previous = now;
                next = Instant::now() + interval;
            }
        }
        screen
            .draw(&view::top_lines(&shown, view::terminal_width()))
            .map_err(CliError::Output)?;
    }
}

/// Waits until `until` for a signal or a key (`keyboard`: stdin is still read; its end of file
/// stops that).
fn wait(signals: &std::os::fd::OwnedFd, keyboard: &mut bool, until: Instant) -> io::Result<Woke> {
    use rustix::event::{poll, PollFd, PollFlags};
    let stdin = io::stdin();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Woke::Refresh);
        }
        let timeout = rustix::time::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = vec![PollFd::new(signals, PollFlags::IN)];
        if *keyboard {
            fds.push(PollFd::new(&stdin, PollFlags::IN));
        }
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let signal_ready = !fds[0].revents().is_empty();
        let key_ready = fds.get(1).is_some_and(|f| !f.revents().is_empty());
        drop(fds);
        if signal_ready {
            if let Some(taken) = read_signal(signals.as_fd()) {
                if taken.signo == libc::SIGWINCH {
                    return Ok(Woke::Resized);
                }
                return Ok(Woke::Quit);
            }
        }
        if key_ready {
            let mut buf = [0u8; 64];
            match rustix::io::read(&stdin, &mut buf) {
                Ok(0) => *keyboard = false,
                Ok(n) if buf[..n].iter().any(|&b| b == b'q' || b == b'Q') => return Ok(Woke::Quit),
                Ok(_) | Err(rustix::io::Errno::INTR) | Err(rustix::io::Errno::AGAIN) => {}
                Err(_) => *keyboard = false,
            }
        }
    }
}

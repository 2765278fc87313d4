//! The commands that read a scope's output and wait for its end: `logs`, `wait`.

use super::*;

/// One artifact being printed by `logs`: where it is read, where it goes.
pub(super) struct Follow {
    path: PathBuf,
    /// `None` while the artifact does not exist: a stream creates it with its first byte (F3).
    file: Option<std::fs::File>,
    sink: Sink,
}

/// Where `logs` writes a stream.
#[derive(Clone, Copy)]
pub(super) enum Sink {
    Stdout,
    /// This process's stderr; `mark`: in red (a terminal, no `NO_COLOR`), so that it can be
    /// told from stdout on the same screen.
    Stderr {
        mark: bool,
    },
}

/// Why `logs --since/--until/--timestamps` is refused for a scope.
pub(super) const NO_TIME_INDEX: &str = "this scope's output has no time index (its launcher captured it, as a foreground run's or a library launch's; only a guardian's capture keeps times), so no time can be answered (use -n N for the last lines)";

/// L2: the streams' bytes moved within `[since, until]`, in the order they were moved (by the
/// batches' times; a stream's own order always kept), each line prefixed with its batch's
/// time when `times`.
pub(super) fn print_indexed(
    streams: &[(PathBuf, Sink, refine_supervisor::host::OutputIndex)],
    since: Option<std::time::SystemTime>,
    until: Option<std::time::SystemTime>,
    times: bool,
) -> Result<(), CliError> {
    let mut pieces = Vec::new();
    for (i, (_, _, index)) in streams.iter().enumerate() {
        for seg in &index.segments {
            if since.is_none_or(|t| seg.at >= t) && until.is_none_or(|t| seg.at <= t) {
                pieces.push((seg.at, i, seg.start, seg.end));
            }
        }
    }
    // Stable: a stream's own segments keep their order at equal times.
    pieces.sort_by_key(|&(at, i, start, _)| (at, i, start));
    let mut files: Vec<Option<std::fs::File>> = streams.iter().map(|_| None).collect();
    let mut line_start = vec![true; streams.len()];
    let mut buf = Vec::new();
    for (at, i, start, end) in pieces {
        let (path, sink, _) = &streams[i];
        let artifact = |source| CliError::Artifact {
            path: path.clone(),
            source,
        };
        let file = match &mut files[i] {
            Some(f) => f,
            slot => slot.insert(std::fs::File::open(path).map_err(artifact)?),
        };
        file.seek(SeekFrom::Start(start)).map_err(artifact)?;
        buf.clear();
        file.take(end - start)
            .read_to_end(&mut buf)
            .map_err(artifact)?;
        let mut text = Vec::with_capacity(buf.len() + 32);
        if times {
            let stamp = format!("{} ", view::utc_ms(at));
            for &b in &buf {
                if line_start[i] {
                    text.extend_from_slice(stamp.as_bytes());
                }
                text.push(b);
                line_start[i] = b == b'\n';
            }
        } else {
            text.extend_from_slice(&buf);
        }
        sink.write(&text)?;
    }
    out().flush().map_err(CliError::Output)
}

impl Sink {
    /// Writes `bytes` where this sink goes (stderr marked on a terminal).
    fn write(self, bytes: &[u8]) -> Result<(), CliError> {
        if let Sink::Stderr { mark } = self {
            let mut e = io::stderr().lock();
            if mark {
                e.write_all(STDERR_MARK).map_err(CliError::Output)?;
            }
            e.write_all(bytes).map_err(CliError::Output)?;
            if mark {
                e.write_all(MARK_END).map_err(CliError::Output)?;
            }
            Ok(())
        } else {
            out().write_all(bytes).map_err(CliError::Output)
        }
    }
}

/// ECMA-48 SGR: red foreground, and back to the default.
pub(super) const STDERR_MARK: &[u8] = b"\x1b[31m";
pub(super) const MARK_END: &[u8] = b"\x1b[0m";

impl Follow {
    /// Copies what was appended since the last call; returns whether anything was.
    fn pump(&mut self, buf: &mut [u8]) -> Result<bool, CliError> {
        let mut any = false;
        if self.file.is_none() {
            match std::fs::File::open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(source) => {
                    return Err(CliError::Artifact {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(false);
        };
        loop {
            let n = file.read(buf).map_err(|source| CliError::Artifact {
                path: self.path.clone(),
                source,
            })?;
            if n == 0 {
                return Ok(any);
            }
            any = true;
            self.sink.write(&buf[..n])?;
        }
    }
}

pub(super) fn logs(home: &Path, port: u16, args: LogsArgs) -> Result<ExitCode, CliError> {
    use refine_supervisor::host::Stream;
    let (rt, id) = runtime_and_id(home, port, &args.id, resolve::Intent::Read)?;
    let reg = rt.read_registration(id)?;
    // Both streams unless one is asked for, as `docker logs`; on a terminal, stderr is marked.
    let mark = crate::app::colour_on(&io::stderr());
    let streams: Vec<(&String, Sink, Stream)> = if args.stdout {
        vec![(&reg.stdout_path, Sink::Stdout, Stream::Stdout)]
    } else if args.stderr {
        vec![(&reg.stderr_path, Sink::Stdout, Stream::Stderr)]
    } else {
        vec![
            (&reg.stdout_path, Sink::Stdout, Stream::Stdout),
            (&reg.stderr_path, Sink::Stderr { mark }, Stream::Stderr),
        ]
    };
    // L2: a time filter or times are answered from the guardian's index, never from an
    // artifact's modification time; a scope without one is refused in one line.
    let timed = args.since.is_some() || args.until.is_some() || args.timestamps;
    let mut starts: Vec<Option<u64>> = vec![None; streams.len()];
    if timed {
        let flag = match (args.since, args.until) {
            (Some(_), _) => "--since",
            (None, Some(_)) => "--until",
            _ => "--timestamps",
        };
        let mut indexed = Vec::new();
        for (path, sink, stream) in &streams {
            let index = refine_supervisor::host::read_output_index(&rt.index_path(id, *stream))
                .map_err(|source| CliError::Artifact {
                    path: rt.index_path(id, *stream),
                    source,
                })?
                .ok_or(CliError::Unanswerable {
                    flag,
                    why: NO_TIME_INDEX,
                })?;
            indexed.push((PathBuf::from(path), *sink, index));
        }
        let ms = |t: u64| std::time::UNIX_EPOCH + Duration::from_millis(t);
        let (since, until) = (args.since.map(ms), args.until.map(ms));
        print_indexed(&indexed, since, until, args.timestamps)?;
        if !args.follow {
            return Ok(0);
        }
        // -f --since: what came after the window is followed from where it ended.
        for (slot, (_, _, index)) in starts.iter_mut().zip(&indexed) {
            *slot = Some(index.range(since, until).1);
        }
    }
    let mut follows = Vec::new();
    for ((path, sink, _), at) in streams.into_iter().zip(starts) {
        let path = PathBuf::from(path);
        let artifact = |source| CliError::Artifact {
            path: path.clone(),
            source,
        };
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            // The stream wrote nothing (yet): its artifact comes with its first byte (F3).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                follows.push(Follow {
                    path,
                    file: None,
                    sink,
                });
                continue;
            }
            Err(e) => return Err(artifact(e)),
        };
        let len = file.metadata().map_err(artifact)?.len();
        let start = if let Some(at) = at {
            at.min(len)
        } else if let Some(n) = args.tail {
            view::tail_offset(&mut file, 0, len, n).map_err(artifact)?
        } else {
            0
        };
        file.seek(SeekFrom::Start(start)).map_err(artifact)?;
        follows.push(Follow {
            path,
            file: Some(file),
            sink,
        });
    }
    let paths = |follows: &[Follow]| follows.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
    let mut changes = if args.follow {
        ops::Changes::watch(&rt, id, &paths(&follows))
    } else {
        ops::Changes::none()
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut printed = false;
    loop {
        let mut any = false;
        for f in &mut follows {
            any |= f.pump(&mut buf)?;
        }
        printed |= any;
        out().flush().map_err(CliError::Output)?;
        if !args.follow || any {
            if !args.follow {
                break;
            }
            continue;
        }
        // Follow ends once the scope has ended, its launcher has let go (the output is all
        // captured), and everything written before that was read.
        if assess(&rt, &reg).state != State::Live && rt.let_go(id) {
            let mut rest = false;
            for f in &mut follows {
                rest |= f.pump(&mut buf)?;
            }
            printed |= rest;
            if !rest {
                break;
            }
            continue;
        }
        // An artifact created meanwhile is watched too (F3: created by its first byte).
        changes.rewatch(&paths(&follows));
        changes.wait();
    }
    out().flush().map_err(CliError::Output)?;
    if !printed && follows.iter().all(|f| f.file.is_none()) {
        // A note, not output: stdout stays exactly the stream's bytes (none).
        // A missing artifact is a stream that wrote nothing (F3), or output gc has retired.
        eprintln!("{id}: no output (none was written, or gc has retired it)");
    }
    Ok(0)
}

/// `wait --json`: each scope in the order given, ended or not.
pub(super) fn wait_doc(
    regs: &[refine_protocol::Registration],
    states: &[State],
    ended: &[Option<(i32, String)>],
    timed_out: bool,
) -> crate::app::docs::WaitDoc {
    crate::app::docs::WaitDoc {
        scopes: regs
            .iter()
            .zip(ended)
            .zip(states)
            .map(|((r, e), state)| crate::app::docs::WaitScope {
                id: r.id.to_string(),
                state: *state,
                exit_code: e.as_ref().map(|(c, _)| *c),
                ready: None,
            })
            .collect(),
        timed_out,
    }
}

pub(super) fn wait(home: &Path, port: u16, args: WaitArgs) -> Result<ExitCode, CliError> {
    let rt = open_runtime(home, port)?;
    let ids = args
        .ids
        .iter()
        .map(|t| resolve::resolve(rt.as_ref(), t, resolve::Intent::Read))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(rt) = rt else {
        return Err(CliError::UnknownId(args.ids.join(" ")));
    };
    let regs = ids
        .iter()
        .map(|&id| rt.read_registration(id))
        .collect::<Result<Vec<_>, _>>()?;
    if args.wait_for == crate::app::cli::WaitFor::Ready {
        return wait_ready(&rt, &regs, args.timeout, args.json);
    }
    if args.wait_for == crate::app::cli::WaitFor::Healthy {
        return wait_healthy(&rt, &regs, args.timeout, args.json);
    }
    let waited = ops::wait_ended(&rt, &regs, args.timeout);
    let states: Vec<State> = waited
        .ended
        .iter()
        .map(|e| e.as_ref().map_or(State::Live, |(s, _, _)| *s))
        .collect();
    let ended: Vec<Option<(i32, String)>> = waited
        .ended
        .into_iter()
        .map(|e| e.map(|(_, c, t)| (c, t)))
        .collect();
    if waited.timed_out {
        let live: Vec<String> = regs
            .iter()
            .zip(&ended)
            .filter(|(_, e)| e.is_none())
            .map(|(r, _)| r.id.to_string())
            .collect();
        if args.json {
            print_json(&wait_doc(&regs, &states, &ended, true))?;
        }
        eprintln!(
            "refine-supervisor: error: {}",
            CliError::WaitTimeout {
                after: args
                    .timeout
                    .map_or_else(String::new, refine_supervisor::human::duration),
                live: live.join(", "),
            }
        );
        return Ok(124);
    }
    if args.json {
        print_json(&wait_doc(&regs, &states, &ended, false))?;
        return Ok(ended.iter().flatten().last().map_or(0, |(c, _)| *c));
    }
    let mut o = out();
    let mut code = 0;
    for (c, text) in ended.into_iter().flatten() {
        writeln!(o, "{text}").map_err(CliError::Output)?;
        code = c;
    }
    Ok(code)
}

/// `wait --for ready` (H6): each scope's readiness decided, in turn, within one `timeout` for
/// all: exit 0 when every one is ready, 1 when one failed to be (its reason on stderr), 124 when
/// the time ran out first.
pub(super) fn wait_ready(
    rt: &Runtime,
    regs: &[refine_protocol::Registration],
    timeout: Option<Duration>,
    json: bool,
) -> Result<ExitCode, CliError> {
    use refine_protocol::docs::ReadyState;
    use refine_supervisor::host::{wait_ready, WaitedReady};
    let started = std::time::Instant::now();
    let mut scopes = Vec::new();
    let (mut failed, mut timed_out) = (false, false);
    let mut o = out();
    for reg in regs {
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        let (ready, line) = match wait_ready(rt, reg.id, left)? {
            WaitedReady::Decided(r) if r.state == ReadyState::Ready => (ReadyState::Ready, None),
            WaitedReady::Decided(r) => (
                ReadyState::Failed,
                Some(r.reason.unwrap_or_else(|| "failed".to_owned())),
            ),
            WaitedReady::NotAsked => (ReadyState::Ready, None),
            WaitedReady::Undecided => (
                ReadyState::Failed,
                Some("its scope ended with nothing recorded about its readiness".to_owned()),
            ),
            WaitedReady::TimedOut(_) => {
                timed_out = true;
                (ReadyState::Starting, Some("still starting".to_owned()))
            }
        };
        failed |= ready == ReadyState::Failed;
        if !json {
            match &line {
                None => writeln!(o, "{} ready", reg.id).map_err(CliError::Output)?,
                Some(why) => eprintln!(
                    "refine-supervisor: error: {}: {}",
                    reg.id,
                    view::escape(why)
                ),
            }
        }
        scopes.push(crate::app::docs::WaitScope {
            id: reg.id.to_string(),
            state: assess(rt, reg).state,
            exit_code: None,
            ready: Some(ready),
        });
    }
    if json {
        print_json(&crate::app::docs::WaitDoc { scopes, timed_out })?;
    }
    Ok(if timed_out {
        124
    } else if failed {
        1
    } else {
        0
    })
}

/// `wait --for healthy` (H7): each scope's health check, in turn, within one `timeout` for all:
/// exit 0 when every one is healthy, 1 when one has no health check or ended first (its reason
/// on stderr), 124 when the time ran out first.
fn wait_healthy(
    rt: &Runtime,
    regs: &[refine_protocol::Registration],
    timeout: Option<Duration>,
    json: bool,
) -> Result<ExitCode, CliError> {
    use ops::WaitedHealth as H;
    let started = std::time::Instant::now();
    let mut scopes = Vec::new();
    let (mut failed, mut timed_out) = (false, false);
    let mut o = out();
    for reg in regs {
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        let why = match ops::wait_healthy(rt, reg, left)? {
            H::Healthy => None,
            H::NoCheck => {
                failed = true;
                Some("it has no health check (launch it with --health-cmd)".to_owned())
            }
            H::Ended(state) => {
                failed = true;
                Some(format!("its scope ended before it was healthy ({state})"))
            }
            H::TimedOut(state) => {
                timed_out = true;
                Some(format!("still {state}"))
            }
        };
        if !json {
            match &why {
                None => writeln!(o, "{} healthy", reg.id).map_err(CliError::Output)?,
                Some(why) => eprintln!("refine-supervisor: error: {}: {why}", reg.id),
            }
        }
        scopes.push(crate::app::docs::WaitScope {
            id: reg.id.to_string(),
            state: assess(rt, reg).state,
            exit_code: None,
            ready: None,
        });
    }
    if json {
        print_json(&crate::app::docs::WaitDoc { scopes, timed_out })?;
    }
    Ok(if timed_out {
        124
    } else if failed {
        1
    } else {
        0
    })
}

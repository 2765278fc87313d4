//! The socket's connections and the answer to each request.

use super::*;

pub(super) async fn handle_conn(
    state: Arc<Service>,
    stream: tokio::net::UnixStream,
) -> io::Result<()> {
    let cred = stream.peer_cred()?;
    let me = rustix::process::getuid().as_raw();
    let (rd, mut wr) = stream.into_split();
    if cred.uid() != me && cred.uid() != 0 {
        if let Some(suppressed) = PEER_LOG.allow() {
            tracing::warn!(
                uid = cred.uid(),
                suppressed,
                "refused a peer with another uid"
            );
        }
        let resp = Response::err(ErrorKind::BadRequest, "permission denied: peer uid differs");
        return reply(&mut wr, &resp, true).await.map(drop);
    }
    // Several requests per connection, answered in order. D1: a request that is not whole
    // within the read timeout (an idle connection waiting that long for its next line) is
    // dropped with its descriptor (an idle client must not pin one for ever).
    let mut reader = tokio::io::BufReader::new(rd);
    let mut bound = Vec::new();
    let served = serve_conn(&state, &mut reader, &mut wr, &mut bound).await;
    if !bound.is_empty() {
        end_with_connection(&state, bound);
    }
    served
}

/// The requests of one connection, in order, until it ends; `bound` gathers the scopes
/// launched on it with `end_with_connection`.
pub(super) async fn serve_conn(
    state: &Arc<Service>,
    reader: &mut tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    bound: &mut Vec<RegistrationId>,
) -> io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    loop {
        let mut line = Vec::new();
        let mut limited = (&mut *reader).take(MAX_MESSAGE as u64 + 1);
        let read = limited.read_until(b'\n', &mut line);
        match tokio::time::timeout(REQUEST_READ_TIMEOUT, read).await {
            Ok(r) => {
                r?;
            }
            Err(_) => {
                if line.is_empty() {
                    // Idle between requests: the connection is over, nothing is lost; but a
                    // connection that owns a live scope is what keeps the scope (it waits on).
                    if !owns_a_live_scope(state, bound).await {
                        return Ok(());
                    }
                    continue;
                }
                if let Some(suppressed) = SLOW_LOG.allow() {
                    tracing::warn!(
                        suppressed,
                        timeout_ms = refine_protocol::time::saturating_ms(REQUEST_READ_TIMEOUT),
                        "dropped a request not whole within the read timeout"
                    );
                }
                return Ok(());
            }
        }
        if line.is_empty() {
            // The client closed (a readiness probe, or after its last request).
            return wr.shutdown().await;
        }
        // A line past the limit cannot be resynchronised: refuse it and end the connection.
        let oversized = line.len() > MAX_MESSAGE;
        // `follow` answers with several lines (its output as it comes, then its end).
        let decoded = api::decode_request_explained(&line);
        if let (
            false,
            Ok(Request::Follow {
                id,
                stream,
                from_offset,
                from_unix_ms,
            }),
        ) = (oversized, &decoded)
        {
            let from = (*from_offset, *from_unix_ms);
            if !follow_request(state, wr, id.clone(), *stream, from).await? {
                return Ok(());
            }
            if line.last() != Some(&b'\n') {
                return wr.shutdown().await;
            }
            continue;
        }
        if let (false, Ok(Request::Events { .. })) = (oversized, &decoded) {
            let Ok(Request::Events {
                since,
                since_unix_ms,
                until_unix_ms,
                kinds,
                scope,
                follow,
            }) = decoded
            else {
                unreachable!("matched above")
            };
            let filter = Filter {
                kinds,
                scopes: scope.into_iter().collect(),
                since_unix_ms,
                until_unix_ms,
            };
            if !events_request(state, reader, wr, since, filter, follow).await? {
                return Ok(());
            }
            if line.last() != Some(&b'\n') {
                return wr.shutdown().await;
            }
            continue;
        }
        let binds = matches!(&decoded, Ok(Request::Launch(ask)) if ask.end_with_connection);
        let resp = answer(state, decoded).await;
        if binds {
            if let Some(Reply::Launched { id }) = &resp.result {
                bound.extend(id.parse::<RegistrationId>());
            }
        }
        let last = oversized || line.last() != Some(&b'\n');
        // A reply the client does not take within the write timeout ends the connection.
        if !reply(wr, &resp, last).await? || last {
            return Ok(());
        }
    }
}

/// V2: the journal's events after the cursor `since` that pass `filter`, one reply each, then
/// `events_end`; with `follow`, then each new one as it is written (inotify on the journal's
/// folder, in the event loop), until `until_unix_ms` passes or the client closes. `false`: the
/// connection is over (the client went, or did not take a reply within the write timeout).
pub(super) async fn events_request(
    state: &Arc<Service>,
    reader: &mut tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    since: Option<String>,
    filter: Filter,
    follow: bool,
) -> io::Result<bool> {
    use tokio::io::AsyncBufReadExt;
    let mut cursor = match since.map(|s| s.parse::<Cursor>()).transpose() {
        Ok(c) => c,
        Err(why) => return reply(wr, &Response::err(ErrorKind::BadRequest, why), false).await,
    };
    let journal = Journal::of(&state.rt);
    let mut changes = if follow {
        let _ = refine_supervisor::host::files::create_private_dir(journal.dir());
        ops::Changes::watch_dir(journal.dir())
    } else {
        ops::Changes::none()
    };
    // A request line sent meanwhile waits in the buffer for the end of the stream.
    let mut pending = false;
    loop {
        let j = journal.clone();
        let batch = match tokio::task::spawn_blocking(move || j.read_after(cursor)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                let resp = Response::err(ErrorKind::Internal, error_chain(&e));
                return reply(wr, &resp, false).await;
            }
            Err(e) => {
                let resp = Response::err(ErrorKind::Internal, e.to_string());
                return reply(wr, &resp, false).await;
            }
        };
        for mut ev in batch.events {
            if !filter.matches(&ev) {
                continue;
            }
            let at = std::time::UNIX_EPOCH + Duration::from_millis(ev.time_unix_ms);
            ev.time = crate::app::view::utc_ms(at);
            if !reply(wr, &Response::ok(Reply::Event(Box::new(ev))), false).await? {
                return Ok(false);
            }
        }
        cursor = Some(batch.end);
        let over = filter
            .until_unix_ms
            .is_some_and(|t| refine_supervisor::host::unix_ms() >= t);
        if !follow || over {
            let end = refine_protocol::docs::EventsEndDoc {
                cursor: batch.end.to_string(),
            };
            return reply(wr, &Response::ok(Reply::EventsEnd(end)), false).await;
        }
        if pending {
            changes.wait_async().await;
            continue;
        }
        tokio::select! {
            _ = changes.wait_async() => {}
            read = reader.fill_buf() => match read {
                Ok([]) | Err(_) => return Ok(false),
                Ok(_) => pending = true,
            },
        }
    }
}

/// Whether a scope launched on this connection with `end_with_connection` still lives.
pub(super) async fn owns_a_live_scope(state: &Arc<Service>, bound: &[RegistrationId]) -> bool {
    if bound.is_empty() {
        return false;
    }
    let (st, ids) = (state.clone(), bound.to_vec());
    tokio::task::spawn_blocking(move || {
        ids.iter().any(|id| {
            st.rt
                .read_registration(*id)
                .is_ok_and(|reg| ops::ended(&st.rt, &reg).is_none())
        })
    })
    .await
    .unwrap_or(true)
}

/// The connection that launched `bound` with `end_with_connection` has ended: each of them
/// still live is stopped, SIGTERM first and the service's shutdown grace for it, in parallel
/// and off the connection (whose task is over).
pub(super) fn end_with_connection(state: &Arc<Service>, bound: Vec<RegistrationId>) {
    for id in bound {
        let st = state.clone();
        tokio::spawn(async move {
            let rt = st.clone();
            let reg = tokio::task::spawn_blocking(move || {
                let reg = rt.rt.read_registration(id).ok()?;
                ops::ended(&rt.rt, &reg).is_none().then_some(reg)
            });
            let Ok(Some(reg)) = reg.await else { return };
            let grace = Some((st.shutdown_grace, Signal::TERM));
            let doc = stop_async(&st, reg, StopCause::Operator, grace).await;
            tracing::info!(%id, result = %json_line(&doc), "stop: its connection ended");
        });
    }
}

/// The reply to one request line.
pub(super) async fn answer(state: &Arc<Service>, decoded: Result<Request, String>) -> Response {
    match decoded {
        Err(why) => Response::err(ErrorKind::BadRequest, format!("bad request: {why}")),
        Ok(Request::Launch(spec)) => launch_request_async(state, spec).await,
        Ok(Request::Stop { id, grace, signal }) => stop_request(state, id, grace, signal).await,
        Ok(Request::Wait { id, until, timeout }) => wait_request(state, id, until, timeout).await,
        Ok(Request::Input { id, data, close }) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || input_request(&st, &id, data.as_bytes(), close))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
        Ok(Request::Signal { id, signal }) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || signal_request(&st, &id, &signal))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
        Ok(req) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || handle(&st, req))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
    }
}

/// O12 for the socket: `text` is an id, a prefix of one (at least 4 hex digits) or a label,
/// resolved as the CLI resolves it; a refusal is `not_found` or, for an ambiguous one,
/// `bad_request` naming the candidates on one line.
pub(super) fn resolve_id(
    rt: &Runtime,
    text: &str,
    intent: resolve::Intent,
) -> Result<RegistrationId, Response> {
    resolve::resolve(Some(rt), text, intent).map_err(|e| match e {
        CliError::UnknownId(_) => Response::err(ErrorKind::NotFound, format!("no scope {text:?}")),
        CliError::Registry(r) => registry_response(r),
        other => Response::err(
            ErrorKind::BadRequest,
            other.to_string().lines().collect::<Vec<_>>().join("; "),
        ),
    })
}

/// A `wait` request: its scope resolved, then polled as `wait` polls it until it ended or the
/// timeout passed.
pub(super) async fn wait_request(
    state: &Arc<Service>,
    id: String,
    until: api::WaitUntil,
    timeout: Option<Duration>,
) -> Response {
    let st = state.clone();
    let reg = tokio::task::spawn_blocking(move || {
        let id = resolve_id(&st.rt, &id, resolve::Intent::Read)?;
        st.rt.read_registration(id).map_err(registry_response)
    })
    .await;
    let reg = match reg {
        Ok(Ok(reg)) => Arc::new(reg),
        Ok(Err(resp)) => return resp,
        Err(e) => return Response::err(ErrorKind::Internal, e.to_string()),
    };
    let end = timeout.map(|t| tokio::time::Instant::now() + t);
    let for_ready = until == api::WaitUntil::Ready;
    if for_ready && reg.readiness.is_none() {
        return Response::err(
            ErrorKind::BadRequest,
            "`until: ready` is for a launch with `ready`: this one was ready at its execve",
        );
    }
    loop {
        let (st, r) = (state.clone(), reg.clone());
        let (ended, ready) = tokio::task::spawn_blocking(move || {
            let ready = for_ready
                .then(|| st.rt.read_ready(r.id).ok().flatten().map(|r| r.state))
                .map(|s| s.unwrap_or(refine_protocol::docs::ReadyState::Starting));
            (ops::ended(&st.rt, &r), ready)
        })
        .await
        .unwrap_or((None, None));
        let decided = ready.is_some_and(|s| s != refine_protocol::docs::ReadyState::Starting);
        let timed_out = end.is_some_and(|end| tokio::time::Instant::now() >= end);
        if decided && ended.is_none() {
            return Response::ok(Reply::Wait(refine_protocol::docs::WaitDoc {
                scopes: vec![refine_protocol::docs::WaitScope {
                    id: reg.id.to_string(),
                    state: State::Live,
                    exit_code: None,
                    ready,
                }],
                timed_out: false,
            }));
        }
        if ended.is_some() || timed_out {
            let (state, exit_code) = match ended {
                Some((s, code)) => (s, Some(code)),
                None => (State::Live, None),
            };
            return Response::ok(Reply::Wait(refine_protocol::docs::WaitDoc {
                scopes: vec![refine_protocol::docs::WaitScope {
                    id: reg.id.to_string(),
                    state,
                    exit_code,
                    ready,
                }],
                timed_out: ended.is_none(),
            }));
        }
        let nap = Duration::from_millis(100);
        match end {
            Some(end) => tokio::time::sleep_until(end.min(tokio::time::Instant::now() + nap)).await,
            None => tokio::time::sleep(nap).await,
        }
    }
}

/// A `follow` request. The waits between reads are tasks of the event loop (inotify through
/// the reactor, or its backstop): an idle follower holds no thread. Each read is a short job
/// of the blocking pool, at most [`FOLLOW_TURN`] chunks, written before the next is read, so
/// the reader keeps the client's pace; a client that does not read is dropped by the write
/// timeout. `false`: the connection is over.
pub(super) async fn follow_request(
    state: &Arc<Service>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    id: String,
    stream: api::FollowStream,
    from: (Option<u64>, Option<u64>),
) -> io::Result<bool> {
    let st = state.clone();
    let start = tokio::task::spawn_blocking(move || Follower::start(&st.rt, &id, stream, from))
        .await
        .unwrap_or_else(|e| Err(Response::err(ErrorKind::Internal, e.to_string())));
    let (mut follower, mut changes) = match start {
        Ok(started) => started,
        Err(resp) => return reply(wr, &resp, false).await,
    };
    loop {
        let st = state.clone();
        let turn = tokio::task::spawn_blocking(move || {
            let turn = follower.turn(&st.rt);
            (follower, turn)
        })
        .await;
        let (back, (replies, next)) = match turn {
            Ok(t) => t,
            Err(e) => {
                let resp = Response::err(ErrorKind::Internal, e.to_string());
                return reply(wr, &resp, false).await;
            }
        };
        follower = back;
        for resp in &replies {
            if !reply(wr, resp, false).await? {
                return Ok(false);
            }
        }
        match next {
            Next::More => {}
            Next::Ended => return Ok(true),
            Next::Idle => {
                changes.rewatch(&[follower.path.clone()]);
                changes.wait_async().await;
            }
        }
    }
}

/// The largest chunk of one `output` reply (before base64).
pub(super) const FOLLOW_CHUNK: usize = 64 * 1024;
/// The most chunks one turn of a follower reads before they are written.
pub(super) const FOLLOW_TURN: usize = 4;

/// `follow`'s reader: the artifact from its offset, and when the scope has ended as `logs -f`
/// means it (not live, its launcher let go: the output is all captured).
pub(super) struct Follower {
    reg: Registration,
    stream: api::FollowStream,
    path: std::path::PathBuf,
    offset: u64,
    file: Option<std::fs::File>,
}

/// What a follower's turn leaves to do.
pub(super) enum Next {
    /// The turn stopped at its chunk limit: read on at once.
    More,
    /// Nothing new: wait for a change.
    Idle,
    /// `followed` was sent.
    Ended,
}

impl Follower {
    /// The scope and the start offset (from the time index for `from_unix_ms`), and the watch
    /// on what can change; a refusal is the reply.
    fn start(
        rt: &Runtime,
        text: &str,
        stream: api::FollowStream,
        (from_offset, from_unix_ms): (Option<u64>, Option<u64>),
    ) -> Result<(Follower, ops::Changes), Response> {
        let reg = resolve_id(rt, text, resolve::Intent::Read)
            .and_then(|id| rt.read_registration(id).map_err(registry_response))?;
        let which = match stream {
            api::FollowStream::Stdout => Stream::Stdout,
            api::FollowStream::Stderr => Stream::Stderr,
        };
        let path = rt.log_path(reg.id, which);
        let offset = match (from_offset, from_unix_ms) {
            (Some(_), Some(_)) => {
                return Err(Response::err(
                    ErrorKind::BadRequest,
                    "follow takes from_offset or from_unix_ms, not both",
                ))
            }
            (Some(at), None) => at,
            (None, None) => 0,
            (None, Some(ms)) => {
                let index =
                    refine_supervisor::host::read_output_index(&rt.index_path(reg.id, which))
                        .map_err(|e| {
                            Response::err(ErrorKind::Internal, format!("read the time index: {e}"))
                        })?
                        .ok_or_else(|| {
                            Response::err(
                        ErrorKind::BadRequest,
                        "this scope's output has no time index (its launcher captured it): \
                         use from_offset",
                    )
                        })?;
                let since = std::time::UNIX_EPOCH + Duration::from_millis(ms);
                match index.range(Some(since), None) {
                    // Nothing moved since then: from what is there now.
                    (0, 0) => std::fs::metadata(&path).map_or(0, |m| m.len()),
                    (start, _) => start,
                }
            }
        };
        let changes = ops::Changes::watch(rt, reg.id, std::slice::from_ref(&path));
        let follower = Follower {
            reg,
            stream,
            path,
            offset,
            file: None,
        };
        Ok((follower, changes))
    }

    /// Reads at most [`FOLLOW_TURN`] chunks past the offset (F3: the artifact may be created
    /// by its first byte); with none, checks whether the scope had ended, and then reads once
    /// more, so that what was written before the end is all sent before `followed`.
    fn turn(&mut self, rt: &Runtime) -> (Vec<Response>, Next) {
        let mut replies = self.read();
        if replies.len() == FOLLOW_TURN {
            return (replies, Next::More);
        }
        if !replies.is_empty() {
            return (replies, Next::Idle);
        }
        if ops::assess(rt, &self.reg).state == State::Live || !rt.let_go(self.reg.id) {
            return (replies, Next::Idle);
        }
        replies = self.read();
        if !replies.is_empty() {
            return (replies, Next::More);
        }
        replies.push(Response::ok(Reply::Followed {
            stream: self.stream,
            end_offset: self.offset,
            complete: !rt.capture_receipt_path(self.reg.id).exists(),
        }));
        (replies, Next::Ended)
    }

    /// Up to [`FOLLOW_TURN`] `output` replies of what the artifact holds past the offset.
    fn read(&mut self) -> Vec<Response> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let mut replies = Vec::new();
        let Some(f) = &self.file else {
            return replies;
        };
        let mut buf = vec![0u8; FOLLOW_CHUNK];
        while replies.len() < FOLLOW_TURN {
            match f.read_at(&mut buf, self.offset) {
                Ok(0) => break,
                Ok(n) => {
                    replies.push(Response::ok(Reply::Output {
                        stream: self.stream,
                        offset: self.offset,
                        data_b64: api::base64(&buf[..n]),
                    }));
                    self.offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        replies
    }
}

/// An `input` request: the bytes to the workload's stdin pipe, then its close if asked. A
/// scope without one (not launched here with `input: true`, or already closed) is
/// `bad_request`; a workload that no longer reads has its pipe dropped.
pub(super) fn input_request(state: &Service, text: &str, data: &[u8], close: bool) -> Response {
    let id = match resolve_id(&state.rt, text, resolve::Intent::Change) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    let inputs = state.inputs.lock().unwrap_or_else(|p| p.into_inner());
    let Some(writer) = inputs.get(&id).cloned() else {
        return Response::err(
            ErrorKind::BadRequest,
            format!("scope {id} has no open input: launch it through the service with input: true"),
        );
    };
    drop(inputs);
    let written = if data.is_empty() {
        Ok(())
    } else {
        writer.write_input(data)
    };
    if let Err(e) = written {
        writer.close_input();
        state
            .inputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        return Response::err(
            ErrorKind::BadRequest,
            format!("input to {id}: {}", error_chain(&e)),
        );
    }
    if close {
        writer.close_input();
        state
            .inputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
    Response::ok(Reply::Input {
        id: id.to_string(),
        written: data.len() as u64,
        closed: close,
    })
}

/// A `signal` request: the signal to the workload's process group through a verified member.
pub(super) fn signal_request(state: &Service, id: &str, signal: &str) -> Response {
    let sig = match refine_supervisor::host::parse_signal(signal) {
        Ok(sig) => sig,
        Err(e) => return Response::err(ErrorKind::BadRequest, e),
    };
    let reg = match resolve_id(&state.rt, id, resolve::Intent::Change)
        .and_then(|id| state.rt.read_registration(id).map_err(registry_response))
    {
        Ok(reg) => reg,
        Err(resp) => return resp,
    };
    match stop::signal_workload(&state.rt, &reg, sig) {
        Ok(sent) => Response::ok(Reply::Signalled {
            id: reg.id.to_string(),
            delivered: !sent.is_empty(),
        }),
        Err(e) => Response::err(ErrorKind::Internal, error_chain(&e)),
    }
}

pub(super) fn handle(state: &Service, req: Request) -> Response {
    let rt = &state.rt;
    let parse = |id: &str| resolve_id(rt, id, resolve::Intent::Read);
    let result = match req {
        // Taken before the blocking pool (`handle_conn`): admission waits on a timer.
        Request::Launch(_) => Err(Response::err(
            ErrorKind::Internal,
            "a launch is not handled here",
        )),
        Request::List { all } => ops::list_views(rt, all)
            .map(Reply::List)
            .map_err(registry_response),
        Request::Show { id } => parse(&id).and_then(|id| {
            ops::show_doc(rt, id)
                .map(|doc| Reply::Show(Box::new(doc)))
                .map_err(registry_response)
        }),
        // Taken before the blocking pool (`answer`): a grace or a wait waits on a timer.
        Request::Stop { .. }
        | Request::Wait { .. }
        | Request::Signal { .. }
        | Request::Input { .. }
        | Request::Follow { .. }
        | Request::Events { .. } => Err(Response::err(
            ErrorKind::Internal,
            "a stop, wait, signal, input, follow or events is not handled here",
        )),
    };
    result.map(Response::ok).unwrap_or_else(|e| e)
}

/// A stop request: its grace checked, the record read (blocking pool), then [`stop_async`].
pub(super) async fn stop_request(
    state: &Arc<Service>,
    id: String,
    grace: Option<Duration>,
    signal: Option<String>,
) -> Response {
    let grace = match (grace, signal) {
        (None, None) => None,
        (None, Some(_)) => {
            return Response::err(
                ErrorKind::BadRequest,
                "`signal` is the grace's signal: it needs `grace_ms`".to_owned(),
            )
        }
        (Some(g), None) => Some((g, Signal::TERM)),
        (Some(g), Some(text)) => match refine_supervisor::host::parse_signal(&text) {
            Ok(sig) => Some((g, sig)),
            Err(e) => return Response::err(ErrorKind::BadRequest, e),
        },
    };
    let st = state.clone();
    let reg = tokio::task::spawn_blocking(move || {
        let id = resolve_id(&st.rt, &id, resolve::Intent::Change)?;
        st.rt.read_registration(id).map_err(registry_response)
    });
    let reg = match reg.await {
        Ok(Ok(reg)) => reg,
        Ok(Err(resp)) => return resp,
        Err(e) => return Response::err(ErrorKind::Internal, e.to_string()),
    };
    let id = reg.id;
    let doc = stop_async(state, reg, StopCause::Operator, grace).await;
    tracing::info!(%id, result = %json_line(&doc), "stop");
    Response::ok(Reply::Stop(Box::new(doc)))
}

pub(super) fn registry_response(e: RegistryError) -> Response {
    let kind = match e {
        RegistryError::NotFound(_) => ErrorKind::NotFound,
        RegistryError::Corrupt { .. } => ErrorKind::Corrupt,
        _ => ErrorKind::Internal,
    };
    Response::err(kind, error_chain(&e))
}

//! What a launch asks beyond its command, whoever asks (`run`, the socket): the options a
//! command line or an API spec becomes on the face's [`Command`].

use std::time::Duration;

use refine_protocol::api::LaunchAsk;
use refine_protocol::Kind;
use refine_supervisor::host::Command;
use refine_supervisor::host::WindowSize;

use super::error::{ServiceError, SpecError};

/// The engine request for what the caller asked.
/// The service's launch from a socket request: the ask's text as the command's bytes.
pub(crate) fn launch_command(spec: &LaunchAsk) -> Result<Command, ServiceError> {
    if spec.argv.is_empty() {
        return Err(SpecError::EmptyCommand.into());
    }
    let mut cmd = Command::new(&spec.argv[0])
        .args(&spec.argv[1..])
        .envs(&spec.env)
        .label(spec.label.clone());
    if let Some(cwd) = &spec.cwd {
        cmd = cmd.current_dir(cwd);
    }
    if spec.input {
        cmd = cmd.stdin(refine_supervisor::host::StdinMode::Pipe);
    }
    for (k, v) in &spec.meta {
        cmd = cmd.purpose(k.clone(), v.clone());
    }
    launch_options(
        cmd,
        LaunchOptions {
            kind: spec.kind,
            timeout: spec.timeout,
            idle_timeout: spec.idle_timeout,
            kill_after: spec.kill_after,
            log_cap_bytes: spec.log_cap_bytes,
            pty: spec.pty,
            user: spec.user.as_deref(),
            allow_setns: spec.allow_setns,
            protect: spec.protect,
            sandbox: spec.sandbox.as_ref(),
            memory_max_bytes: spec.memory_max_bytes,
            cpu_millis: spec.cpu_millis,
            pids_max: spec.pids_max,
            ready: match &spec.ready {
                None => None,
                Some(text) => Some((
                    text.parse().map_err(SpecError::Ready)?,
                    spec.ready_timeout
                        .unwrap_or(refine_supervisor::host::DEFAULT_READY_TIMEOUT),
                )),
            },
            health: health_spec(
                spec.health_cmd.as_deref(),
                spec.health_interval,
                spec.health_timeout,
                spec.health_retries,
                spec.health_start_period,
            )?,
        },
    )
}

/// H7: a health check from `run`'s flags or a request's fields (docker's defaults for what is
/// absent); nonsense is refused in one line.
pub(crate) fn health_spec(
    cmd: Option<&str>,
    interval: Option<Duration>,
    timeout: Option<Duration>,
    retries: Option<u32>,
    start_period: Option<Duration>,
) -> Result<Option<refine_protocol::record::HealthSpec>, ServiceError> {
    use refine_supervisor::host as h;
    let Some(cmd) = cmd else { return Ok(None) };
    h::health_check(
        cmd,
        interval.unwrap_or(h::HEALTH_INTERVAL),
        timeout.unwrap_or(h::HEALTH_TIMEOUT),
        retries.unwrap_or(h::HEALTH_RETRIES),
        start_period.unwrap_or_default(),
    )
    .map(Some)
    .map_err(|why| SpecError::Health(why).into())
}

/// What a launch asks beyond its command, whoever asks (`run`, the socket).
pub(crate) struct LaunchOptions<'a> {
    pub kind: Kind,
    pub timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    /// `0`: no grace, the kill at once.
    pub kill_after: Option<Duration>,
    /// `None`: the default cap; `0`: none.
    pub log_cap_bytes: Option<u64>,
    pub pty: bool,
    /// `USER[:GROUP]`.
    pub user: Option<&'a str>,
    /// X7's opt-out: no filter against `setns` into PID and user namespaces.
    pub allow_setns: bool,
    /// X11: the Landlock protection asked for.
    pub protect: refine_protocol::record::ProtectAsk,
    /// X12: the sandbox asked for.
    pub sandbox: Option<&'a refine_protocol::record::SandboxAsk>,
    /// H8: the tree's memory, CPU and pids limits.
    pub memory_max_bytes: Option<u64>,
    pub cpu_millis: Option<u32>,
    pub pids_max: Option<u64>,
    /// H6: how the workload says it is ready, and how long it may take (zero: no bound).
    pub ready: Option<(refine_supervisor::host::ReadyAsk, Duration)>,
    /// H7: the health check.
    pub health: Option<refine_protocol::record::HealthSpec>,
}

/// The rest of a launch on its command: the one place both callers share.
pub(crate) fn launch_options(
    mut cmd: Command,
    o: LaunchOptions<'_>,
) -> Result<Command, ServiceError> {
    cmd = cmd
        .kind(o.kind)
        .owner(std::env::var("USER").unwrap_or_default());
    if let Some(t) = o.timeout {
        cmd = cmd.timeout(t);
    }
    if let Some(t) = o.idle_timeout {
        cmd = cmd.idle_timeout(t);
    }
    match o.log_cap_bytes {
        None => {}
        Some(0) => cmd = cmd.log_cap(None),
        Some(n) => cmd = cmd.log_cap(Some(n)),
    }
    if let Some(k) = o.kill_after {
        cmd = cmd.kill_after(k);
    }
    if o.pty {
        cmd = cmd.pty(WindowSize::default());
    }
    if let Some(user) = o.user {
        refine_supervisor::host::require_privilege()?;
        cmd = cmd.user(refine_supervisor::host::resolve_user(user)?);
    }
    if o.allow_setns {
        cmd = cmd.allow_setns();
    }
    cmd = cmd.protect(o.protect);
    if let Some(ask) = o.sandbox {
        cmd.request_mut().sandbox = refine_supervisor::host::SandboxRequest::from_ask(ask);
    }
    if let Some(b) = o.memory_max_bytes {
        cmd = cmd.memory_max(b);
    }
    if let Some(m) = o.cpu_millis {
        cmd = cmd.cpu_millis(m);
    }
    if let Some(n) = o.pids_max {
        cmd = cmd.pids_max(n);
    }
    if let Some((ask, t)) = o.ready {
        cmd = cmd.ready(ask, (!t.is_zero()).then_some(t));
    }
    if let Some(h) = o.health {
        cmd = cmd.health(h);
    }
    Ok(cmd)
}

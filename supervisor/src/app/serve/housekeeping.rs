//! Shutdown (W8), the maintenance pass and housekeeping, as the service runs them.

use super::*;

/// How long the service lets the requests under way be answered once its launches have ended.
pub(super) const ANSWERS_AT_SHUTDOWN: Duration = Duration::from_secs(2);

/// How long shutdown waits for its launches' engines to record their results after the stops.
pub(super) const ENGINES_AT_SHUTDOWN: Duration = Duration::from_secs(10);

/// W8: SIGTERM to every live launch of this service, the grace, then the shared stop for the
/// rest ([`ops::shutdown`]); then the engines are joined (bounded) so each result is on disk.
pub(super) fn shutdown(state: &Service, grace: Duration) {
    let rt = &state.rt;
    // D3: nothing more is admitted, waiters included; a launch under way finishes first and is
    // in the snapshot below.
    *state.closed.lock().unwrap_or_else(|p| p.into_inner()) = true;
    state.closing.send_replace(true);
    let ids: Vec<RegistrationId> = state
        .launched
        .lock()
        .map(|l| l.iter().copied().collect())
        .unwrap_or_default();
    tracing::info!(
        launches = ids.len(),
        grace_ms = refine_protocol::time::saturating_ms(grace),
        "shutdown: SIGTERM to the service's launches"
    );
    // The rule itself is the face's: SIGTERM, the grace waited on the guardians' pidfds, the
    // shared stop for the rest.
    let done = ops::shutdown(rt, &ids, grace);
    for doc in &done.stopped {
        tracing::info!(id = %doc.id, result = %json_line(doc), "shutdown: stopped after the grace");
    }
    let engines = std::mem::take(&mut *state.engines.lock().unwrap_or_else(|p| p.into_inner()));
    let (tx, rx) = std::sync::mpsc::channel();
    let joiner = std::thread::spawn(move || {
        for h in engines {
            let _ = h.wait();
        }
        let _ = tx.send(());
    });
    if rx.recv_timeout(ENGINES_AT_SHUTDOWN).is_ok() {
        let _ = joiner.join();
    } else {
        tracing::warn!("shutdown: launch engines still running; leaving them");
    }
    tracing::info!(
        stopped_after_grace = done.stopped.len(),
        "shutdown: the service's launches ended"
    );
}

/// Retention runs at start and then at most this often (its limit is days, not seconds).
pub(super) const RETENTION_EVERY: Duration = Duration::from_secs(600);

/// H7: the service's prober, a thread of its own over the service's health queue: it launches
/// each due probe through a supervisor of its own on the service's shared loop (the same
/// environment and metrics as the service's launches, and a result hook that hands each
/// probe's result back to the queue). Returns the queue, to close at shutdown.
pub(super) fn start_prober(
    state: &Arc<Service>,
    shared: refine_supervisor::host::SharedLoop,
) -> Result<Arc<service::HealthQueue>, ServiceError> {
    let queue = state.health.clone();
    let metrics = state.metrics.result_hook();
    let back = queue.result_hook();
    let sup = Supervisor::new(state.rt.clone())
        .with_shared_loop(shared)
        .with_result_hook(Arc::new(move |r| {
            metrics(r);
            back(r);
        }))
        .with_receipt_hook(state.metrics.receipt_hook());
    let (q, rt) = (queue.clone(), state.rt.clone());
    std::thread::Builder::new()
        .name("refine-health".into())
        .spawn(move || q.run(&rt, &sup))
        .map_err(|e| ServiceError::Io {
            op: "start the health prober",
            source: e,
        })?;
    Ok(queue)
}

/// One maintenance pass over the open index (O(open), F1): deadlines of registrations this
/// service did not launch, settling what the assessment proves exited (under each lock), and
/// capacity sampling; then, when due, housekeeping over the history. Every failure is logged
/// and the loop goes on.
pub(super) fn maintenance(state: &Arc<Service>, keep: Housekeeping) {
    let rt = &state.rt;
    let started = Instant::now();
    let ours = state.launched.lock().map(|l| l.clone()).unwrap_or_default();
    // This service's own launches: their engines enforce deadlines and settle. L5: a guardian
    // this process's earlier image launched is still its child after an upgrade in place.
    let pass = maintenance_pass(rt, |id| ours.contains(&id), reap_inherited_guardian);
    let (open, settled) = (pass.open, pass.settled);
    // H7: a scope whose prober is gone (an earlier service, a `run` that died) or was this
    // process's earlier image (an upgrade in place) is probed from here on.
    for reg in pass.health_checked {
        if !state.health.contains(reg.id)
            && refine_supervisor::host::service::prober_gone_or_here(rt, reg.id)
        {
            state.health.add(rt, reg);
        }
    }
    for due in pass.due {
        let (id, cause) = (due.reg.id, due.cause);
        match due.grace {
            None => {
                let doc = state.stop(&due.reg, cause, None);
                tracing::info!(%id, ?cause, result = %json_line(&doc), "deadline stop");
            }
            // D2: a grace does not hold the maintenance pass: it runs as a task of its own
            // (once per registration), its wait a timer.
            Some(grace) => graced_deadline_stop(state, due.reg, cause, grace),
        }
    }
    sample_capacity(rt);
    let elapsed_us = refine_protocol::time::saturating_us(started.elapsed());
    let due = state
        .last_retention
        .lock()
        .map(|mut last| {
            let due = last.is_none_or(|t| t.elapsed() >= RETENTION_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        })
        .unwrap_or(false);
    if !due {
        tracing::debug!(elapsed_us, open, settled, "maintenance pass");
        return;
    }
    // Logged at info with housekeeping (at start, then every RETENTION_EVERY), not every pass.
    tracing::info!(elapsed_us, open, settled, "maintenance pass");
    housekeeping(state, keep);
}

/// Reaps the registration's guardian if it is an exited child of this process (launched by
/// this process's image before an upgrade in place), by its pid: a zombie keeps its pid and
/// start time, so the witness names it and nothing else.
pub(super) fn reap_inherited_guardian(reg: &Registration) {
    use refine_supervisor::host::observe;
    let Ok(Some(stat)) = observe::stat_of(&reg.hello.guardian) else {
        return;
    };
    if stat.ppid as u32 == std::process::id() && stat.state.is_exited() {
        let _ = rustix::process::waitpid(Some(stat.pid), rustix::process::WaitOptions::NOHANG);
    }
}

/// A deadline stop with a grace, for a registration this service did not launch, as a task in
/// the event loop; a registration with one under way is not stopped again by the next pass.
pub(super) fn graced_deadline_stop(
    state: &Arc<Service>,
    reg: Registration,
    cause: StopCause,
    grace: Duration,
) {
    let id = reg.id;
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let fresh = state
        .graced
        .lock()
        .map(|mut g| g.insert(id))
        .unwrap_or(false);
    if !fresh {
        return;
    }
    let st = state.clone();
    rt.spawn(async move {
        let doc = stop_async(&st, reg, cause, Some((grace, Signal::TERM))).await;
        tracing::info!(%id, ?cause, result = %json_line(&doc), "deadline stop");
        if let Ok(mut g) = st.graced.lock() {
            g.remove(&id);
        }
    });
}

/// Retention and forgetting over the whole history (R1–R4); the only O(history) part of the
/// service, run at start and then every [`RETENTION_EVERY`].
pub(super) fn housekeeping(state: &Service, keep: Housekeeping) {
    let rt = &state.rt;
    let started = Instant::now();
    let (retired, forgot) = ops::housekeeping(rt, keep.retain, keep.forget_after);
    match retired {
        Ok(r) if r.deleted_files > 0 => {
            tracing::info!(
                files = r.deleted_files,
                bytes = r.deleted_bytes,
                "retention"
            )
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %error_chain(&e), "retention failed"),
    }
    match forgot {
        Ok(r) => tracing::info!(
            forgotten = r.forgotten,
            resumed = r.resumed,
            kept = r.entries.len().saturating_sub(r.forgotten),
            young = r.young,
            "forget"
        ),
        Err(e) => tracing::warn!(error = %error_chain(&e), "forgetting failed"),
    }
    // Launches of this service that left the open index need no tracking any more.
    if let Ok(mut l) = state.launched.lock() {
        l.retain(|id| rt.open_marker_path(*id).exists());
    }
    let elapsed_ms = refine_protocol::time::saturating_ms(started.elapsed());
    tracing::info!(elapsed_ms, "housekeeping");
}

pub(super) fn sample_capacity(rt: &Runtime) {
    match ops::capacity(Some(rt), None) {
        Ok(c) => tracing::debug!(
            slots = c.slots,
            live = c.live,
            unverified = c.unverified,
            free = c.free,
            "capacity"
        ),
        Err(e) => tracing::warn!(error = %error_chain(&e), "capacity sampling failed"),
    }
}

//! `gc`: retention, forgetting and re-indexing, and the retirement of one scope's artifacts.

use super::*;

/// `gc`: retention, then forgetting, then (unless a dry run) re-indexing of records that lost
/// their open-index marker but are not proven exited. O(history): an operator's pass.
pub fn gc(
    rt: &Runtime,
    opts: retention::Options,
    forget_opts: forget::Options,
) -> Result<GcDoc, OpsError> {
    if !opts.dry_run {
        rt.ensure_open_index()?;
    }
    let retention = retire(rt, opts)?;
    let forget = forget::forget(rt, forget_opts, &assess::KERNEL_BOOT)?;
    let reindexed = if opts.dry_run {
        Vec::new()
    } else {
        open_index::reindex(rt, &assess::KERNEL_BOOT)?
            .into_iter()
            .map(|id| id.to_string())
            .collect()
    };
    // D5: what no record covers, after forgetting (which may have left a `.stall` behind).
    let strays = crate::history::strays::collect(rt, opts.dry_run)?;
    Ok(GcDoc {
        retention: retention_doc(&retention),
        forget: forget_doc(&forget),
        reindexed,
        strays: strays.iter().map(stray_doc).collect(),
    })
}

/// One retention pass with the shared assessment as the evidence.
pub fn retire(
    rt: &Runtime,
    opts: retention::Options,
) -> Result<retention::Report, retention::RetentionError> {
    retention::retire(rt, opts, &|rt, reg| {
        let a = assess_one(rt, reg);
        if a.state == State::Exited {
            retention::Evidence::Exited(a.receipt)
        } else {
            retention::Evidence::NotExited {
                state: a.state,
                reason: a.reason,
            }
        }
    })
}

/// What `gc` does: retention's horizon for artifacts and forgetting's for records (each with
/// its dry run).
#[derive(Debug, Clone, Copy, Default)]
pub struct GcOptions {
    pub retention: retention::Options,
    pub forget: forget::Options,
}

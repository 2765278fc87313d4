//! H1: what holds a path, and the reap of a checkout.

use super::*;

/// H1: what holds `path` (a process working in it, or with a file of it open), over the
/// registrations of every port of `home`; the `holders --json` document.
pub fn holders(home: &Path, path: &Path) -> Result<HoldersDoc, HoldersError> {
    let target = Target::resolve(path)?;
    let regs = Registrations::load(home, &assess::KERNEL_BOOT);
    Ok(holders_doc(&crate::hygiene::holders::holders(
        &target, &regs,
    )?))
}

/// H2: ends what still holds the checkout `path` within `budget` (the fence of `runtime`, when
/// given, for the orphans' kill); the `reap --json` document and whether nothing holds it now.
pub fn reap(
    home: &Path,
    runtime: Option<&Runtime>,
    path: &Path,
    budget: Duration,
) -> Result<(ReapDoc, bool), ReapError> {
    let report = reap_checkout::reap_checkout(home, runtime, path, budget, &assess::KERNEL_BOOT)?;
    Ok((reap_doc(&report), report.clean()))
}

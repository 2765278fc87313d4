//! What an operator may type where an id is taken (SPEC O5, O12), tried in this order:
//!
//! 1. the full 32 hex digits of an id;
//! 2. a label: a reading command ([`Intent::Read`]) takes the newest registration with it; a
//!    command that changes something ([`Intent::Change`], `stop`) takes the one live
//!    registration with it (the newest when none is live) and refuses when several are live;
//! 3. a prefix of at least [`MIN_PREFIX`] hex digits, which must be unique.
//!
//! A word that is a label and also another registration's id prefix is the label for readers
//! and ambiguous for a command that changes something: `stop cafe` never stops the wrong scope
//! because a label happens to be hex. An ambiguous word is refused with the candidates (id,
//! label, state, start); an unknown one gets one line.
//!
//! # Caveats
//! Finding a label reads every record of the port (labels are not indexed): O(history).

use refine_protocol::record::Registration;
use refine_protocol::RegistrationId;

use super::error::CliError;
use super::ops::assess;
use super::view;
use refine_supervisor::host::{RegistryError, Runtime};

/// The shortest id prefix accepted.
pub const MIN_PREFIX: usize = 4;

/// What the command does with the registration it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// It only reads (show, logs, wait, receipt).
    Read,
    /// It changes something (stop).
    Change,
}

/// Resolves `text` to one registration of `rt` (`None`: nothing ran on this port yet).
pub fn resolve(
    rt: Option<&Runtime>,
    text: &str,
    intent: Intent,
) -> Result<RegistrationId, CliError> {
    if let Some(id) = RegistrationId::parse(text) {
        return Ok(id);
    }
    let unknown = || CliError::UnknownId(text.to_owned());
    let Some(rt) = rt else {
        return Err(unknown());
    };
    let ids = rt.list_ids()?;
    let lower = text.to_ascii_lowercase();
    let is_prefix = lower.len() >= MIN_PREFIX && lower.bytes().all(|b| b.is_ascii_hexdigit());
    let by_prefix: Vec<RegistrationId> = if is_prefix {
        ids.iter()
            .copied()
            .filter(|id| id.to_string().starts_with(&lower))
            .collect()
    } else {
        Vec::new()
    };
    let labelled: Vec<Registration> = if text.is_empty() {
        Vec::new()
    } else {
        ids.iter()
            .filter_map(|id| rt.read_registration(*id).ok())
            .filter(|r| r.label == text)
            .collect()
    };
    let ambiguous = |many: &[RegistrationId]| CliError::AmbiguousId {
        text: text.to_owned(),
        candidates: candidates(rt, many),
    };
    if !labelled.is_empty() {
        let newest = |regs: &[&Registration]| {
            regs.iter()
                .max_by_key(|r| (r.started_at_unix_ms, r.id))
                .map(|r| r.id)
        };
        let all: Vec<&Registration> = labelled.iter().collect();
        let chosen = match intent {
            Intent::Read => newest(&all),
            Intent::Change => {
                let live: Vec<&Registration> = all
                    .iter()
                    .copied()
                    .filter(|r| assess(rt, r).state == super::docs::State::Live)
                    .collect();
                if live.len() > 1 {
                    return Err(ambiguous(&live.iter().map(|r| r.id).collect::<Vec<_>>()));
                }
                newest(if live.is_empty() { &all } else { &live })
            }
        };
        let Some(chosen) = chosen else {
            return Err(unknown());
        };
        // Also another registration's id prefix: a command that changes something refuses.
        let shadowed: Vec<RegistrationId> =
            by_prefix.iter().copied().filter(|&p| p != chosen).collect();
        if intent == Intent::Change && !shadowed.is_empty() {
            let mut many = vec![chosen];
            many.extend(shadowed);
            return Err(ambiguous(&many));
        }
        return Ok(chosen);
    }
    match by_prefix.as_slice() {
        [] => Err(unknown()),
        [one] => Ok(*one),
        many => Err(ambiguous(many)),
    }
}

/// The candidates of an ambiguous id as table lines (id, label, state, start).
fn candidates(rt: &Runtime, ids: &[RegistrationId]) -> String {
    let mut rows = vec![["ID", "LABEL", "STATE", "STARTED"]
        .map(String::from)
        .to_vec()];
    for &id in ids {
        rows.push(match rt.read_registration(id) {
            Ok(reg) => vec![
                id.to_string(),
                view::label_or_none(&reg.label).to_owned(),
                assess(rt, &reg).state.name().to_owned(),
                view::local_time(reg.started_at_unix_ms),
            ],
            Err(e @ RegistryError::Corrupt { .. }) => {
                vec![
                    id.to_string(),
                    String::new(),
                    "corrupt".into(),
                    refine_supervisor::error_chain(&e),
                ]
            }
            Err(_) => vec![id.to_string(), String::new(), "?".into(), String::new()],
        });
    }
    view::table_lines(&rows, None).join("\n")
}

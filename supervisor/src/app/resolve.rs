//! What an operator may type where an id is taken (SPEC O5): the full 32 hex digits, a unique
//! prefix of at least [`MIN_PREFIX`] hex digits, or a label. An ambiguous one is refused with
//! the candidates (id, label, state, start); an unknown one gets one line.
//!
//! # Caveats
//! Labels are free text and need not be unique: a label shared by several registrations is
//! ambiguous like a short prefix, and the candidates say which ids to use instead. A prefix is
//! looked up before a label, so a label that is itself 4+ hex digits is shadowed by a matching id.

use refine_protocol::RegistrationId;

use super::error::CliError;
use super::ops::assess;
use super::view;
use crate::registry::{RegistryError, Runtime};

/// The shortest id prefix accepted.
pub const MIN_PREFIX: usize = 4;

/// Resolves `text` to one registration of `rt` (`None`: nothing ran on this port yet).
pub fn resolve(rt: Option<&Runtime>, text: &str) -> Result<RegistrationId, CliError> {
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
    let mut found: Vec<RegistrationId> = if is_prefix {
        ids.iter()
            .copied()
            .filter(|id| id.to_string().starts_with(&lower))
            .collect()
    } else {
        Vec::new()
    };
    if found.is_empty() && !text.is_empty() {
        found = ids
            .iter()
            .copied()
            .filter(|id| {
                rt.read_registration(*id)
                    .map(|r| r.label == text)
                    .unwrap_or(false)
            })
            .collect();
    }
    match found.as_slice() {
        [] => Err(unknown()),
        [one] => Ok(*one),
        many => Err(CliError::AmbiguousId {
            text: text.to_owned(),
            candidates: candidates(rt, many),
        }),
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
                reg.label.clone(),
                assess(rt, &reg).state.name().to_owned(),
                view::local_time(reg.started_at_unix_ms),
            ],
            Err(e @ RegistryError::Corrupt { .. }) => {
                vec![
                    id.to_string(),
                    String::new(),
                    "corrupt".into(),
                    e.to_string(),
                ]
            }
            Err(_) => vec![id.to_string(), String::new(), "?".into(), String::new()],
        });
    }
    view::table_lines(&rows, None).join("\n")
}

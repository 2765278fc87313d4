//! The contract's documents by name and their JSON Schemas (feature `schema`): what
//! `refine-supervisor schema [NAME]` prints and `protocol/schema/NAME.json` holds. It sits above
//! both [`crate::docs`] and [`crate::api`], so neither needs the other's names to list them.

#[cfg(feature = "schema")]
use crate::api::{Request, Response};
#[cfg(feature = "schema")]
use crate::docs::*;

/// Every document of the contract by name, with what prints or returns it (feature `schema`:
/// [`schema`] gives each one's JSON Schema).
pub const DOCUMENTS: &[(&str, &str)] = &[
    ("run", "run --json"),
    ("launched", "run --detach --json"),
    (
        "spawn-failed",
        "run --detach --json when the workload never ran",
    ),
    ("wait", "wait --json"),
    ("ps", "ps --json"),
    ("show", "show --json, and the socket's show reply"),
    ("stop", "stop --json, and the socket's stop reply"),
    ("recover", "recover --json"),
    ("receipt", "receipt --json"),
    ("gc", "gc --json"),
    ("capacity", "capacity --json"),
    ("top", "top --json (one sample)"),
    ("holders", "holders --json"),
    ("reap", "reap --checkout --json"),
    ("version", "version --json"),
    (
        "event",
        "events --json (one line each), and the socket's event reply",
    ),
    ("request", "a request line to the service socket"),
    ("response", "a response line from the service socket"),
];

/// The JSON Schema of the document `name` (one of [`DOCUMENTS`]), self-contained (its `$defs`
/// within it), or `None` for a name that is not one. Two things schemars does not do by itself
/// are done here, so generated types match the server: an enum whose variants carry doc
/// comments is one `enum` (with the variants' docs in its description), not a `oneOf` that
/// splits it; and the request names the `v` every line carries.
#[cfg(feature = "schema")]
pub fn schema(name: &str) -> Option<schemars::Schema> {
    let mut value = generated(name)?.to_value();
    collapse_string_enums(&mut value);
    let title = value
        .get("title")
        .and_then(|t| t.as_str())
        .map(str::to_owned);
    if let Some(title) = title {
        name_alternatives(&mut value, &title);
    }
    if let Some(serde_json::Value::Object(defs)) = value.get_mut("$defs") {
        for (def, body) in defs.iter_mut() {
            name_alternatives(body, def);
        }
    }
    if name == "request" {
        add_version(&mut value);
    }
    schemars::Schema::try_from(value).ok()
}

#[cfg(feature = "schema")]
fn generated(name: &str) -> Option<schemars::Schema> {
    use schemars::schema_for;
    Some(match name {
        "run" => schema_for!(RunDoc),
        "launched" => schema_for!(LaunchedDoc),
        "spawn-failed" => schema_for!(DetachedSpawnFailedDoc),
        "wait" => schema_for!(WaitDoc),
        "ps" => schema_for!(PsDoc),
        "show" => schema_for!(ShowDoc),
        "stop" => schema_for!(StopDoc),
        "recover" => schema_for!(RecoverDoc),
        "receipt" => schema_for!(ReceiptVerdictDoc),
        "gc" => schema_for!(GcDoc),
        "capacity" => schema_for!(CapacityDoc),
        "top" => schema_for!(TopDoc),
        "holders" => schema_for!(HoldersDoc),
        "reap" => schema_for!(ReapDoc),
        "version" => schema_for!(VersionDoc),
        "event" => schema_for!(crate::docs::EventDoc),
        "request" => schema_for!(Request),
        "response" => schema_for!(Response),
        _ => return None,
    })
}

/// [`schema`] as pretty JSON with its final newline: what `refine-supervisor schema NAME` prints.
#[cfg(feature = "schema")]
pub fn schema_text(name: &str) -> Option<String> {
    schema(name).map(|s| pretty(s.as_value()))
}

/// The file under `protocol/schema/` that holds every definition the documents share.
pub const DEFS_FILE: &str = "defs.json";

/// A definition two documents give different schemas under one name: they cannot share
/// [`DEFS_FILE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionClash {
    pub name: String,
    pub documents: (String, String),
}

/// The files committed under `protocol/schema/`, as `(file name, text)`: each document as
/// `NAME.json` whose references point into [`DEFS_FILE`], and that file with every definition
/// once. A generator fed the directory makes one type per definition, not one per document that
/// uses it.
#[cfg(feature = "schema")]
pub fn committed_files() -> Result<Vec<(String, String)>, DefinitionClash> {
    use serde_json::{Map, Value};
    let mut defs: Map<String, Value> = Map::new();
    let mut owner: std::collections::BTreeMap<String, String> = Default::default();
    let mut files = Vec::new();
    for (name, _) in DOCUMENTS {
        let Some(mut doc) = schema(name).map(schemars::Schema::to_value) else {
            continue;
        };
        if let Some(Value::Object(own)) = doc.as_object_mut().and_then(|d| d.remove("$defs")) {
            for (def, body) in own {
                match defs.get(&def) {
                    Some(known) if *known != body => {
                        return Err(DefinitionClash {
                            documents: (owner[&def].clone(), (*name).to_owned()),
                            name: def,
                        })
                    }
                    Some(_) => {}
                    None => {
                        owner.insert(def.clone(), (*name).to_owned());
                        defs.insert(def, body);
                    }
                }
            }
        }
        point_refs_at(&mut doc, DEFS_FILE);
        files.push((format!("{name}.json"), pretty(&doc)));
    }
    let shared = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": DEFS_FILE,
        "title": "Definitions",
        "description": "Every definition the documents of refine-supervisor's JSON contract share; \
            each NAME.json refers into this file.",
        "$defs": Value::Object(defs),
    });
    files.push((DEFS_FILE.to_owned(), pretty(&shared)));
    Ok(files)
}

#[cfg(feature = "schema")]
fn pretty(value: &serde_json::Value) -> String {
    // A JSON value with string keys always serializes.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// `#/$defs/X` becomes `FILE#/$defs/X` everywhere in `value`.
#[cfg(feature = "schema")]
fn point_refs_at(value: &mut serde_json::Value, file: &str) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(r) if key == "$ref" && r.starts_with("#/") => {
                        *r = format!("{file}{r}");
                    }
                    other => point_refs_at(other, file),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| point_refs_at(v, file)),
        _ => {}
    }
}

/// A `oneOf` whose every alternative is a string `enum` or `const` (schemars writes one per
/// variant that has a doc comment) becomes one string `enum`; the variants' docs join the
/// description as "`value`: doc" lines.
#[cfg(feature = "schema")]
fn collapse_string_enums(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(collapse_string_enums);
            let Some(Value::Array(alts)) = map.get("oneOf") else {
                return;
            };
            let mut values = Vec::new();
            let mut docs = Vec::new();
            for alt in alts {
                let Some(alt) = alt.as_object() else { return };
                let only_known = alt
                    .keys()
                    .all(|k| matches!(k.as_str(), "type" | "enum" | "const" | "description"));
                if !only_known || alt.get("type").and_then(Value::as_str) != Some("string") {
                    return;
                }
                let mine: Vec<Value> = match (alt.get("enum"), alt.get("const")) {
                    (Some(Value::Array(e)), None) => e.clone(),
                    (None, Some(c @ Value::String(_))) => vec![c.clone()],
                    _ => return,
                };
                if let Some(doc) = alt.get("description").and_then(Value::as_str) {
                    for v in &mine {
                        docs.push(format!("`{}`: {doc}", v.as_str().unwrap_or_default()));
                    }
                }
                values.extend(mine);
            }
            map.remove("oneOf");
            map.insert("type".into(), Value::String("string".into()));
            map.insert("enum".into(), Value::Array(values));
            if !docs.is_empty() {
                let mut text = map
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| format!("{d}\n\n"))
                    .unwrap_or_default();
                text.push_str(&docs.join("\n"));
                map.insert("description".into(), Value::String(text));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(collapse_string_enums),
        _ => {}
    }
}

/// Each object alternative of `parent`'s `oneOf` (or `anyOf`) gets a title, so a generator names its type
/// after the variant (`LaunchRequest`, `LaunchedReply`) rather than numbering it (`Request1`):
/// by its tag's value (a property that is one `const` string), else by its one required key,
/// else `{parent}Fields`.
#[cfg(feature = "schema")]
fn name_alternatives(value: &mut serde_json::Value, parent: &str) {
    use serde_json::Value;
    let Some(map) = value.as_object_mut() else {
        return;
    };
    let alts = map
        .iter_mut()
        .filter(|(k, _)| *k == "oneOf" || *k == "anyOf")
        .filter_map(|(_, v)| v.as_array_mut())
        .flatten();
    for alt in alts {
        let Some(alt) = alt.as_object_mut() else {
            continue;
        };
        if alt.contains_key("title") || alt.get("type").and_then(Value::as_str) != Some("object") {
            continue;
        }
        let tag = alt
            .get("properties")
            .and_then(Value::as_object)
            .and_then(|props| {
                props
                    .values()
                    .find_map(|p| p.get("const").and_then(Value::as_str).map(str::to_owned))
            });
        let required = match alt.get("required") {
            Some(Value::Array(r)) if r.len() == 1 => r[0].as_str().map(str::to_owned),
            _ => None,
        };
        let title = match tag.or(required) {
            Some(variant) => format!("{}{parent}", camel(&variant)),
            None => format!("{parent}Fields"),
        };
        alt.insert("title".into(), Value::String(title));
    }
}

/// `spawn_failed` as `SpawnFailed`.
#[cfg(feature = "schema")]
fn camel(snake: &str) -> String {
    snake
        .split(['_', '-'])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// Every request line carries `v` beside its operation's keys (`Versioned`): each alternative of
/// the request's `oneOf` gets it as a required property, so a closed object admits it.
#[cfg(feature = "schema")]
fn add_version(value: &mut serde_json::Value) {
    use serde_json::{json, Value};
    let Some(Value::Array(alts)) = value.get_mut("oneOf") else {
        return;
    };
    for alt in alts {
        let Some(alt) = alt.as_object_mut() else {
            continue;
        };
        if let Some(Value::Object(props)) = alt.get_mut("properties") {
            props.insert(
                "v".into(),
                json!({
                    "description": "The API version: 2 (a service refuses a newer one and still reads 1).",
                    "type": "integer",
                    "const": crate::api::API_VERSION,
                }),
            );
        }
        if let Some(Value::Array(required)) = alt.get_mut("required") {
            required.insert(0, Value::String("v".into()));
        }
    }
}

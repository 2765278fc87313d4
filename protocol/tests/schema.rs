//! The JSON contract is pinned (SPEC E2): each document's JSON Schema, generated from the types
//! of `refine_protocol::docs`, equals the file committed as `protocol/schema/NAME.json`, and no
//! file there names a document that is gone. A key renamed in a document fails here until the
//! files are rewritten on purpose (`REFINE_UPDATE_SCHEMA=1`, see the message).
#![cfg(feature = "schema")]

use std::path::PathBuf;

use refine_protocol::schema::{committed_files, schema_text, DOCUMENTS};

const UPDATE: &str =
    "REFINE_UPDATE_SCHEMA=1 cargo test -p refine-protocol --features schema --test schema";

#[test]
fn the_committed_schemas_are_the_generated_ones() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema");
    let update = std::env::var_os("REFINE_UPDATE_SCHEMA").is_some_and(|v| v == "1");
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut stale = Vec::new();
    let committed = committed_files().unwrap_or_else(|c| {
        panic!(
            "{} is defined differently by {} and {}: rename one type",
            c.name, c.documents.0, c.documents.1
        )
    });
    for (file, generated) in &committed {
        let path = dir.join(file);
        if update {
            std::fs::write(&path, generated).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(generated.as_str()) {
            stale.push(format!("{} differs from the types", path.display()));
        }
    }
    let files: Vec<&str> = committed.iter().map(|(f, _)| f.as_str()).collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !files.contains(&file.as_str()) {
            if update {
                std::fs::remove_file(&path).unwrap();
            } else {
                stale.push(format!("{} names no document", path.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "the JSON contract changed:\n  {}\nIf that is meant (protocol/README.md says which changes need a new version), \
         rewrite the schemas with\n  {UPDATE}\nand commit them with the change.",
        stale.join("\n  ")
    );
}

/// Every schema is a JSON object that names its document's type.
#[test]
fn every_document_has_a_schema() {
    for (name, _) in DOCUMENTS {
        let text = schema_text(name).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v.get("title").and_then(|t| t.as_str()).is_some(), "{name}");
    }
    assert!(schema_text("nonsense").is_none());
}

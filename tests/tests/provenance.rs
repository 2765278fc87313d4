//! Provenance (SPEC V1) on the built binaries: `version --json` names the supervisor's and the
//! guardian's build (version, commit, dirty flag, class), every registration records both, and
//! `show` prints them. What the binaries claim is checked against `git` itself, run here on the
//! workspace: a checkout's `HEAD` and its tree, or, outside git, `unknown` (never a guess).
//! The metric's labels are checked in `metrics.rs`.

use refine_tests::cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;
use serde_json::Value;

/// The workspace the binaries were built from (this crate's parent).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// `git -C workspace ARGS`: stdout when it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workspace())
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// What a binary built from `sources` must say, as far as `git` tells it here. `dirty` is
/// `None` where this test cannot tell (a change outside the sources leaves either answer
/// possible only through the sources list, which this oracle does not repeat).
struct Expected {
    commit: Option<String>,
    dirty: Option<bool>,
    release_tag: bool,
}

fn expected(sources: &[&str]) -> Expected {
    let top = git(&["rev-parse", "--show-toplevel"]);
    let ours = top
        .as_deref()
        .map(Path::new)
        .and_then(|t| t.canonicalize().ok())
        == workspace().canonicalize().ok();
    if !ours {
        // A build outside git: the binaries say unknown.
        return Expected {
            commit: None,
            dirty: None,
            release_tag: false,
        };
    }
    let commit = git(&["rev-parse", "HEAD"]);
    let whole = git(&["--no-optional-locks", "status", "--porcelain"]);
    let mut scoped = vec!["--no-optional-locks", "status", "--porcelain", "--"];
    scoped.extend_from_slice(sources);
    let scoped = git(&scoped);
    let dirty = match (whole.as_deref(), scoped.as_deref()) {
        (Some(""), _) => Some(false),
        (_, Some(s)) if !s.is_empty() => Some(true),
        _ => None,
    };
    let version = env!("CARGO_PKG_VERSION");
    let release_tag = git(&["tag", "--points-at", "HEAD"]).is_some_and(|tags| {
        tags.lines()
            .any(|t| t == version || t == format!("v{version}"))
    });
    Expected {
        commit,
        dirty,
        release_tag,
    }
}

/// `p` is what a binary built from `sources` must say of itself.
fn assert_provenance(what: &str, p: &Value, sources: &[&str]) {
    let e = expected(sources);
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"), "{what}: {p}");
    match &e.commit {
        Some(c) => assert_eq!(p["commit"], c.as_str(), "{what}: {p}"),
        None => assert!(p["commit"].is_null(), "{what} outside git: {p}"),
    }
    match e.dirty {
        Some(d) => assert_eq!(p["dirty"], d, "{what}: {p}"),
        None if e.commit.is_none() => assert!(p["dirty"].is_null(), "{what}: {p}"),
        None => assert!(p["dirty"].is_boolean(), "{what}: {p}"),
    }
    let release = e.release_tag && p["dirty"] == false;
    assert_eq!(
        p["class"],
        if release { "release" } else { "source" },
        "{what}: {p}"
    );
}

const SUPERVISOR_SOURCES: &[&str] = &["supervisor", "protocol", "Cargo.toml", "Cargo.lock"];
const GUARDIAN_SOURCES: &[&str] = &[
    "guardian",
    "protocol/core",
    "protocol/build-info",
    "Cargo.toml",
    "Cargo.lock",
];

#[test]
fn version_json_names_both_builds() {
    let home = Home::new();
    let v = home.json(&["version", "--json"]);
    assert_provenance("supervisor", &v["supervisor"], SUPERVISOR_SOURCES);
    let g = &v["guardian"];
    assert_eq!(
        g["path"],
        refine_tests::bin("refine-guardian").display().to_string(),
        "{v}"
    );
    assert!(g["problem"].is_null(), "{v}");
    assert_provenance("guardian", &g["provenance"], GUARDIAN_SOURCES);

    // The human view: one line per binary, the commit or `unknown`.
    let out = home.cli(&["version"]);
    assert!(out.status.success(), "{}", describe(&["version"], &out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("refine-supervisor "), "{text}");
    assert!(lines[1].starts_with("refine-guardian "), "{text}");
    let commit = v["supervisor"]["commit"].as_str().unwrap_or("unknown");
    assert!(lines[0].contains(commit), "{text}");
}

/// A guardian that carries no provenance (here `/bin/sh`, through `REFINE_GUARDIAN`) is named
/// as such, in the document and in one line, never guessed.
#[test]
fn a_guardian_without_provenance_is_said_so() {
    let home = Home::new();
    let mut cmd = home.command(&["version", "--json"]);
    cmd.env("REFINE_GUARDIAN", "/bin/sh");
    let out = output_of(cmd);
    let v = parse(&["version", "--json"], &out);
    assert!(out.status.success(), "{}", describe(&["version"], &out));
    assert!(v["guardian"]["provenance"].is_null(), "{v}");
    let problem = v["guardian"]["problem"].as_str().unwrap_or_default();
    assert!(problem.contains("provenance"), "{v}");
    let mut cmd = home.command(&["version"]);
    cmd.env("REFINE_GUARDIAN", "/nonexistent/refine-guardian");
    let out = output_of(cmd);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", describe(&["version"], &out));
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.contains("/nonexistent")),
        "{text}"
    );
}

#[test]
fn a_registration_records_both_builds_and_show_prints_them() {
    let home = Home::new();
    let version = home.json(&["version", "--json"]);
    let (out, result) = home.run_json(&["true"]);
    assert!(out.status.success(), "{}", describe(&["run", "true"], &out));
    let id = result["id"]
        .as_str()
        .expect("the result names its id")
        .to_owned();

    // The durable record itself.
    let rt = refine_supervisor::store::registry::Runtime::open_existing(home.path(), home.port)
        .expect("the runtime");
    let reg = rt
        .read_registration(refine_protocol::RegistrationId::parse(&id).expect("an id"))
        .expect("the record");
    let sup = reg
        .supervisor_provenance
        .expect("the supervisor's provenance");
    let gua = reg.guardian_provenance.expect("the guardian's provenance");
    assert_eq!(
        serde_json::to_value(&sup).unwrap(),
        version["supervisor"],
        "{sup:?}"
    );
    assert_eq!(
        serde_json::to_value(&gua).unwrap(),
        version["guardian"]["provenance"],
        "{gua:?}"
    );

    // `show --json` and the human view.
    let show = home.json(&["show", &id, "--json"]);
    let p = &show["record"]["provenance"];
    assert_eq!(p["supervisor"], version["supervisor"], "{show}");
    assert_eq!(p["guardian"], version["guardian"]["provenance"], "{show}");
    let out = home.cli(&["show", &id]);
    assert!(out.status.success(), "{}", describe(&["show"], &out));
    let text = String::from_utf8_lossy(&out.stdout);
    let built: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("Built:") || l.contains("built "))
        .collect();
    assert!(!built.is_empty(), "show names no build:\n{text}");
    let joined = built.join("\n");
    for who in ["supervisor", "guardian"] {
        assert!(joined.contains(who), "{who} missing from:\n{text}");
    }
    let short = |p: &Value| match p["commit"].as_str() {
        Some(c) => c[..12].to_owned(),
        None => "unknown".to_owned(),
    };
    assert!(joined.contains(&short(&version["supervisor"])), "{text}");
    assert!(
        joined.contains(&short(&version["guardian"]["provenance"])),
        "{text}"
    );
}

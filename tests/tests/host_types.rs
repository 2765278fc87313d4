//! Types a host generates from the committed schemas (`protocol/schema/`) work against the real
//! service (issue 40, item 1): Python models from datamodel-code-generator build every request
//! and parse every reply of a launch, list, show, stop and a refusal; TypeScript types from
//! json-schema-to-typescript are generated and keep `v` and one `ErrorKind` union. Each
//! generator is installed into the test's own directory (a venv, an npm prefix); where that
//! cannot be done the case prints why and skips.

use refine_tests::cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/schema")
}

fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("host-types")
}

fn quiet(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ))
    }
}

/// A venv with datamodel-code-generator, made once per target directory.
fn python_with_codegen() -> Result<PathBuf, String> {
    let venv = cache().join("venv");
    let python = venv.join("bin/python");
    let ready = |p: &Path| {
        Command::new(p)
            .args(["-c", "import datamodel_code_generator"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ready(&python) {
        quiet(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        quiet(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "-q",
            "datamodel-code-generator",
        ]))?;
    }
    Ok(python)
}

#[test]
fn python_types_generated_from_the_schemas_round_trip_with_the_service() {
    let python = match python_with_codegen() {
        Ok(p) => p,
        Err(why) => {
            println!("skipped: datamodel-code-generator is not installable here: {why}");
            return;
        }
    };
    let (home, _svc) = Home::with_service(&[]);
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host_types/roundtrip.py");
    let run = Command::new(&python)
        .arg(&script)
        .arg(schema_dir())
        .arg(out.path())
        .arg(home.run_dir().join("supervisor.sock"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "{}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        run.status
    );
}

#[test]
fn typescript_types_generated_from_the_schemas_keep_v_and_one_enum() {
    if Command::new("npm").arg("--version").output().is_err() {
        println!("skipped: npm is not installed (Debian: nodejs npm)");
        return;
    }
    let prefix = cache().join("npm");
    let json2ts = prefix.join("node_modules/.bin/json2ts");
    if !json2ts.exists() {
        std::fs::create_dir_all(&prefix).unwrap();
        if let Err(why) = quiet(
            Command::new("npm")
                .args(["install", "--silent", "--prefix"])
                .arg(&prefix)
                .arg("json-schema-to-typescript"),
        ) {
            println!("skipped: json-schema-to-typescript is not installable here: {why}");
            return;
        }
    }
    let out = tempfile::tempdir().unwrap();
    let mut declared = String::new();
    for name in ["request", "response"] {
        let target = out.path().join(format!("{name}.d.ts"));
        // Run in the schema directory: `defs.json#/$defs/…` references resolve beside the file.
        let gen = Command::new(&json2ts)
            .current_dir(schema_dir())
            .arg("-i")
            .arg(format!("{name}.json"))
            .arg("-o")
            .arg(&target)
            .output()
            .unwrap();
        assert!(
            gen.status.success(),
            "json2ts {name}: {}",
            String::from_utf8_lossy(&gen.stderr)
        );
        declared.push_str(&std::fs::read_to_string(&target).unwrap());
    }
    println!("{declared}");
    // Every request alternative names `v`; ErrorKind is one union of its names, no ErrorKind1.
    let launch = declared
        .split("export interface")
        .find(|block| block.contains("op: \"launch\""))
        .expect("a launch request type");
    assert!(launch.contains("  v: 2;"), "{launch}");
    assert!(!declared.contains("ErrorKind1"), "the enum split");
    // json2ts inlines the referenced enum where it is used (`ApiError.kind`): one union.
    let at = declared
        .find("| \"label_held\"")
        .expect("label_held in a union");
    let start = declared[..at].rfind(':').unwrap();
    let end = at + declared[at..].find(';').unwrap();
    let kind = &declared[start..end];
    assert!(
        kind.contains("\"label_held\"") && kind.contains("\"bad_request\""),
        "{kind}"
    );
}

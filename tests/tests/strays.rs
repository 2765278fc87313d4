//! SPEC D5: every file under `run/P` belongs to a record or is collected by `gc`, under the same
//! locks: what aborted launches leave (`proofs/ID`, `logs/ID.std*`, `locks/ID.lock` with no
//! record), `logs/ID.stall` without its registration, temporary files of interrupted
//! replacements. `gc --dry-run` lists only what it would remove, each with its reason; what is
//! young or locked is left.

mod cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;

fn touch(path: &Path, when: &str) {
    let st = Command::new("touch")
        .args(["-d", when])
        .arg(path)
        .status()
        .expect("touch");
    assert!(st.success(), "touch {}", path.display());
}

/// Creates `rel` under `run/P` with a modification time `when` (`touch -d`).
fn file(home: &Home, rel: &str, when: &str) -> PathBuf {
    let p = home.run_dir().join(rel);
    std::fs::write(&p, b"x").expect("write");
    touch(&p, when);
    p
}

#[test]
fn gc_collects_what_no_record_covers_and_dry_run_lists_only_that() {
    let home = Home::new();
    // One real registration, exited: its files belong to its record.
    let (out, doc) = home.run_json(&["true"]);
    assert!(out.status.success(), "{doc}");
    let real = doc["id"].as_str().expect("id").to_owned();
    let before_real: Vec<_> = snapshot(&home.run_dir())
        .into_iter()
        .filter(|(p, _, _)| p.to_string_lossy().contains(&real))
        .collect();

    let old = "2 hours ago";
    let aborted = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0";
    let forgotten = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1";
    let young = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2";
    let locked = "d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3";
    let mut gone = vec![
        file(&home, &format!("proofs/{aborted}"), old),
        file(&home, &format!("logs/{aborted}.stdout"), old),
        file(&home, &format!("logs/{aborted}.stderr"), old),
        file(&home, &format!("locks/{aborted}.lock"), old),
        file(&home, &format!("logs/{forgotten}.stall"), old),
        file(&home, &format!("logs/{real}.stop.4242.tmp"), old),
        file(&home, &format!("registrations/.tmp-{real}-4242-0"), old),
    ];
    gone.sort();
    let mut kept = vec![
        file(&home, &format!("proofs/{young}"), "now"),
        file(&home, &format!("logs/{young}.stdout"), "now"),
        file(&home, &format!("proofs/{locked}"), old),
        file(&home, &format!("logs/{locked}.stderr"), old),
        file(&home, &format!("logs/{real}.result.4243.tmp"), "now"),
        file(&home, "notes.txt", old),
    ];
    let lock = refine_supervisor::store::fence::acquire(
        &home.run_dir().join(format!("locks/{locked}.lock")),
        DEADLINE,
    )
    .expect("hold the lock");
    kept.push(home.run_dir().join(format!("locks/{locked}.lock")));

    // The dry run lists exactly what it would remove, with a reason, and removes nothing.
    let args = ["gc", "--dry-run"];
    let out = home.cli(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The table's rows: after the header, before the summary lines.
    let rows: Vec<&str> = text
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("would "))
        .collect();
    assert!(rows.iter().all(|r| r.contains("would remove")), "{text}");
    for p in &gone {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            rows.iter()
                .any(|r| r.contains(&name) && (r.contains("no record") || r.contains("temporary"))),
            "{name} is not listed with its reason:\n{text}"
        );
    }
    assert_eq!(rows.len(), gone.len(), "only what it would remove:\n{text}");
    assert!(!text.contains(young) && !text.contains(locked), "{text}");
    for p in gone.iter().chain(&kept) {
        assert!(p.exists(), "the dry run removed {}", p.display());
    }

    // The pass removes them, and nothing young, locked, unattributable or registered.
    let args = ["gc", "--json"];
    let out = home.cli(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
    for p in &gone {
        assert!(
            !p.exists(),
            "{} was left: {}",
            p.display(),
            describe(&args, &out)
        );
    }
    for p in &kept {
        assert!(p.exists(), "{} was removed", p.display());
    }
    drop(lock);
    let after_real: Vec<_> = snapshot(&home.run_dir())
        .into_iter()
        .filter(|(p, _, _)| {
            p.to_string_lossy().contains(&real) && !p.to_string_lossy().ends_with(".tmp")
        })
        .collect();
    assert_eq!(before_real, after_real, "a registered launch lost files");
    assert_eq!(home.state(&real), "exited");
}

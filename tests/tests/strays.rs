//! SPEC D5: every file under `run/P` belongs to a record or is collected by `gc`, under the same
//! locks: what aborted launches leave (`proofs/ID`, `logs/ID.std*`, `locks/ID.lock` with no
//! record), `logs/ID.stall` without its registration, temporary files of interrupted
//! replacements. `gc --dry-run` lists only what it would remove, each with its reason; what is
//! young or locked is left.

use refine_tests::cli_support;

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
    let (_, real) = home.run_ok(&["true"]);
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
    let out = home.cli_ok(&args);
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
    let out = home.cli_ok(&args);
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

/// Issue 38 item 4: a launcher killed between its scope's cgroup `mkdir` and its record
/// (`strace` kills `run` at its first `sendmsg`, the guardian's handshake) leaves a cgroup no
/// record names. Scopes' cgroups live below the runtime's own parent, `<base>/<runtime>/ID`, so
/// `gc` sweeps only its own: the aborted launch's cgroup, once older than a launch takes to
/// register, is listed by `gc --dry-run` and removed by `gc`; one made just now is kept (a
/// launch may be registering), and so is the cgroup of another runtime.
#[test]
fn gc_removes_the_cgroup_an_aborted_launch_left() {
    use refine_supervisor::kernel::cgroup;
    cgroup::configure(cgroup::Setting::Auto);
    let base = match cgroup::base() {
        Ok(b) => b.to_owned(),
        Err(why) => {
            eprintln!("skipped: no writable cgroup v2 ({why})");
            return;
        }
    };
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("skipped: no strace to kill the launcher between mkdir and record");
        return;
    }
    let home = Home::new();
    // Every command of this test takes the cgroup path, whatever `REFINE_CGROUP` says (CI's
    // second run sets it off for the rest of the suite).
    let on = |args: &[&str]| -> std::process::Output {
        let mut c = home.command(args);
        c.env_remove("REFINE_CGROUP");
        output_of(c)
    };
    // The runtime exists (and has its id) before the aborted launch.
    let args = ["run", "--json", "--", "true"];
    let out = on(&args);
    let doc = parse(&args, &out);
    assert!(out.status.success(), "{doc}");
    let runtime = std::fs::read_to_string(home.run_dir().join("runtime-id")).expect("runtime-id");
    let parent = base.join(runtime.trim());
    let listing = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let before = listing(&parent);
    let mut killed = Command::new("strace");
    killed
        .args(words(
            "-f -o /dev/null -e inject=sendmsg:signal=SIGKILL:when=1",
        ))
        .arg(refine_tests::bin("refine-supervisor"))
        .arg("--home")
        .arg(home.path())
        .args(["--port", &home.port.to_string(), "run", "--", "true"])
        .env_remove("REFINE_CGROUP")
        .stdin(std::process::Stdio::null());
    let out = output_of(killed);
    // strace ends as its tracee did: killed by SIGKILL.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        out.status.signal() == Some(libc::SIGKILL) || out.status.code() == Some(128 + 9),
        "strace reports the SIGKILL: {out:?}"
    );
    let left: Vec<PathBuf> = listing(&parent)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(
        left.len(),
        1,
        "the aborted launch left one cgroup below the runtime's parent {}: {left:?}",
        parent.display()
    );
    let aborted = left[0].clone();
    // One just made (a launch registering now) and another runtime's, both named for no
    // record of this runtime.
    let young = parent.join("e4e4e4e4e4e4e4e4e4e4e4e4e4e4e4e4");
    let other_parent = base.join("f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5");
    let other = other_parent.join("a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6");
    for d in [&young, &other_parent, &other] {
        std::fs::create_dir(d).expect("mkdir cgroup");
    }
    for d in [&aborted, &other] {
        touch(d, "2 hours ago");
    }
    let cleanup = || {
        for d in [&young, &other, &other_parent, &aborted] {
            let _ = std::fs::remove_dir(d);
        }
    };

    let args = ["gc", "--dry-run", "--json"];
    let out = on(&args);
    let dry = parse(&args, &out);
    let listed = |doc: &serde_json::Value, dir: &Path| -> Option<serde_json::Value> {
        doc["strays"]
            .as_array()?
            .iter()
            .find(|s| s["path"].as_str() == Some(&*dir.to_string_lossy()))
            .cloned()
    };
    let entry = listed(&dry, &aborted);
    let young_entry = listed(&dry, &young);
    let other_entry = listed(&dry, &other);
    let still = aborted.is_dir();
    let args = ["gc", "--json"];
    let out = on(&args);
    let done = parse(&args, &out);
    let gone = !aborted.is_dir();
    let kept = young.is_dir() && other.is_dir();
    cleanup();
    let entry =
        entry.unwrap_or_else(|| panic!("gc --dry-run does not list {}: {dry}", aborted.display()));
    assert_eq!(entry["action"], "would_remove", "{entry}");
    assert!(still, "the dry run removed {}", aborted.display());
    assert!(gone, "gc left {}: {done}", aborted.display());
    assert_eq!(
        listed(&done, &aborted).expect("listed")["action"],
        "removed",
        "{done}"
    );
    assert!(
        kept,
        "gc removed a young cgroup or another runtime's: {done}"
    );
    assert_eq!(
        young_entry.expect("the young one is listed")["action"],
        "kept",
        "{dry}"
    );
    assert!(
        other_entry.is_none(),
        "another runtime's cgroup was looked at: {dry}"
    );
    assert_eq!(home.state(doc["id"].as_str().expect("id")), "exited");
}

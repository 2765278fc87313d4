//! P4 end to end: a launch whose registration record or launch frame could not be read back is
//! refused before anything runs — no guardian, no proof file, no registration — with one line
//! that names the size and the limit.

use refine_tests::cli_support;

use cli_support::{assert_one_line_error, Home};

fn nothing_registered(home: &Home) {
    for dir in ["registrations", "proofs"] {
        let d = home.run_dir().join(dir);
        let n = std::fs::read_dir(&d).map(|r| r.count()).unwrap_or(0);
        assert_eq!(
            n,
            0,
            "{} holds {n} entries after a refused launch",
            d.display()
        );
    }
}

#[test]
fn oversized_metadata_is_refused_before_the_workload_runs() {
    let home = Home::new();
    let marker = home.path().join("ran");
    let value = format!("k={}", "v".repeat(120 * 1024));
    let mut args: Vec<String> = Vec::new();
    for i in 0..10 {
        args.push("--meta".into());
        args.push(format!("k{i}{value}"));
    }
    args.push("--".into());
    args.extend(["touch".into(), marker.display().to_string()]);
    let mut full = vec!["run".to_string()];
    full.extend(args);
    let argv: Vec<&str> = full.iter().map(String::as_str).collect();
    let out = home.cli(&argv);
    assert!(!out.status.success());
    let line = assert_one_line_error(&["run", "--meta", "..."], &out);
    assert!(
        line.contains("exceeds maximum 1048576"),
        "the error names the size and the limit: {line}"
    );
    assert!(!marker.exists(), "the workload ran");
    nothing_registered(&home);
}

#[test]
fn oversized_argv_is_refused_before_anything_runs() {
    let home = Home::new();
    let arg = "a".repeat(100);
    let mut argv = vec!["run", "--", "echo"];
    argv.extend(std::iter::repeat_n(arg.as_str(), 3000));
    let out = home.cli(&argv);
    assert!(!out.status.success());
    let line = assert_one_line_error(&["run", "--", "echo", "..."], &out);
    assert!(
        line.contains("exceeds maximum"),
        "the error names the size and the limit: {line}"
    );
    nothing_registered(&home);
}

#[test]
fn the_largest_metadata_that_fits_still_launches_and_reads_back() {
    let home = Home::new();
    // One argument holds at most 128 KiB (MAX_ARG_STRLEN): seven of 120 KiB, 840 KiB in all.
    let values: Vec<String> = (0..7)
        .map(|i| format!("k{i}={}", "v".repeat(120 * 1024)))
        .collect();
    let mut args = vec!["run", "--json"];
    for v in &values {
        args.extend(["--meta", v.as_str()]);
    }
    args.extend(["--", "true"]);
    let doc = home.json(&args);
    let id = doc["id"].as_str().expect("id").to_owned();
    // Every reader still decodes it: show and ps.
    let shown = home.json(&["show", &id, "--json"]);
    assert_eq!(shown["state"], "exited", "{shown}");
    assert!(home.ps().iter().any(|r| r["id"] == id.as_str()));
}

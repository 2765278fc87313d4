//! The operator CLI as a user drives it (SPEC O1, O3, O4): help, bad input, and `run`.

mod cli_support;

use std::fs;

use cli_support::*;

const COMMANDS: [&str; 10] = [
    "run", "serve", "ps", "show", "stop", "logs", "receipt", "recover", "gc", "capacity",
];

#[test]
fn every_command_has_help() {
    let home = Home::new();
    for c in COMMANDS {
        let out = home.cli(&[c, "--help"]);
        assert!(out.status.success(), "{}", describe(&[c, "--help"], &out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage:"), "{c}: {text}");
    }
    let out = home.cli(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for c in COMMANDS {
        assert!(text.contains(c), "top-level help lacks {c}");
    }
}

#[test]
fn missing_home_is_one_line() {
    let home = Home::new();
    let gone = home.path().join("does-not-exist");
    for args in [
        vec!["ps"],
        vec!["gc", "--older-than", "0s"],
        vec!["capacity"],
        vec!["run", "--", "true"],
    ] {
        let out = std::process::Command::new(refine_tests::bin("refine-supervisor"))
            .arg("--home")
            .arg(&gone)
            .args(&args)
            .output()
            .expect("spawn");
        let err = assert_one_line_error(&args, &out);
        assert!(err.contains("does not exist"), "{err}");
    }
    assert!(!gone.exists(), "nothing may be created for a missing home");
}

#[test]
fn bad_durations_and_missing_dashes_are_one_line() {
    let home = Home::new();
    for args in [
        vec!["gc", "--older-than", "5x"],
        vec!["gc", "--older-than", "-1s"],
        vec!["gc", "--older-than", ""],
        vec!["run", "--timeout", "soon", "--", "true"],
        vec!["run", "--idle-timeout", "1.5h", "--", "true"],
        vec!["run", "true"],
        vec!["run", "--label", "x", "sleep", "1"],
        vec!["run", "--"],
        vec!["frobnicate"],
    ] {
        let out = home.cli(&args);
        let err = assert_one_line_error(&args, &out);
        if args.first() == Some(&"run") && !args.contains(&"--") {
            assert!(err.contains("missing `--`"), "{err}");
        }
    }
    assert!(
        !home.run_dir().join("registrations").exists()
            || fs::read_dir(home.run_dir().join("registrations"))
                .unwrap()
                .next()
                .is_none()
    );
}

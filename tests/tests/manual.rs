//! The manual (SPEC O13): `refine-supervisor man [SUBCOMMAND]` gives a page per subcommand with
//! EXIT STATUS, ENVIRONMENT and FILES; `man --dir DIR` writes them all where `man` finds them;
//! the example unit `scripts/refine-supervisor.service` passes `systemd-analyze verify` once
//! its paths exist (its `Documentation=man:` pages among them).

use refine_tests::cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;
use refine_tests::wait_until;

const SUBCOMMANDS: &[&str] = &[
    "run",
    "serve",
    "upgrade",
    "ps",
    "show",
    "stop",
    "logs",
    "wait",
    "events",
    "receipt",
    "recover",
    "gc",
    "capacity",
    "top",
    "holders",
    "reap",
    "schema",
    "version",
    "completions",
    "man",
];

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The sections of a roff page (`.SH NAME` ...), in order.
fn sections(page: &str) -> Vec<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix(".SH "))
        .map(|s| s.trim_matches('"').to_owned())
        .collect()
}

#[test]
fn a_page_per_subcommand_with_exit_status_environment_and_files() {
    let home = Home::new();
    let mut pages = vec![None];
    pages.extend(SUBCOMMANDS.iter().map(Some));
    for sub in pages {
        let mut args = vec!["man"];
        args.extend(sub);
        let out = home.cli_ok(&args);
        let page = text(&out.stdout);
        let title = match sub {
            Some(s) => format!("refine-supervisor-{s}"),
            None => "refine-supervisor".to_owned(),
        };
        assert!(
            page.lines()
                .any(|l| l.starts_with(&format!(".TH {title} 1"))),
            "{args:?}: no title {title}:\n{page}"
        );
        let have = sections(&page);
        for want in words(
            "NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS' ENVIRONMENT FILES EXAMPLES 'SEE ALSO'",
        ) {
            assert!(
                have.iter().any(|h| h == want),
                "{args:?} lacks {want} (has {have:?})"
            );
        }
        // NAME is one short line: the name and a few words.
        let name = page
            .split(".SH NAME\n")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap_or_default();
        assert!(
            name.starts_with(&title.replace('-', "\\-")) && name.split_whitespace().count() <= 14,
            "{args:?}: NAME is {name:?}"
        );
    }
    // The top page refers to each subcommand's page, which `man SUBCOMMAND` gives (above), and
    // to no page that does not exist (`help(1)` was listed).
    let top = text(&home.cli(&["man"]).stdout);
    for named in top.split("refine\\-supervisor\\-").skip(1) {
        let sub: String = named
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '\\' || *c == '-')
            .collect::<String>()
            .replace("\\-", "-");
        if named[sub.replace('-', "\\-").len()..].starts_with("(1)") {
            assert!(
                SUBCOMMANDS.contains(&sub.as_str()),
                "the top page names a page that does not exist: {sub}(1)"
            );
        }
    }
    for sub in SUBCOMMANDS {
        assert!(
            top.contains(&format!("refine\\-supervisor\\-{sub}(1)")),
            "top page does not refer to {sub}:\n{top}"
        );
    }
    let args = ["man", "nosuch"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
}

#[test]
fn man_dir_writes_every_page_for_man_to_find() {
    let home = Home::new();
    let dir = home.path().join("share/man/man1");
    let args = ["man", "--dir", dir.to_str().unwrap()];
    home.cli_ok(&args);
    let mut want: Vec<String> = SUBCOMMANDS
        .iter()
        .map(|s| format!("refine-supervisor-{s}.1"))
        .collect();
    want.push("refine-supervisor.1".to_owned());
    want.sort();
    let mut got: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    got.sort();
    assert_eq!(got, want);
    for name in &want {
        let printed = home.cli(&[
            "man",
            name.trim_end_matches(".1")
                .strip_prefix("refine-supervisor-")
                .unwrap_or(""),
        ]);
        if name == "refine-supervisor.1" {
            continue;
        }
        assert_eq!(
            std::fs::read(dir.join(name)).unwrap(),
            printed.stdout,
            "{name}"
        );
    }
}

fn have(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The repository's `scripts/` (this crate's manifest is in `tests/`).
fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

#[test]
fn the_example_unit_verifies_once_its_paths_exist() {
    if !have("systemd-analyze", "--version") || !have("man", "--version") {
        eprintln!("skipped: systemd-analyze or man missing (apt-get install systemd man-db)");
        return;
    }
    let home = Home::new();
    // The unit's paths, made to exist under a prefix: the binary, and its man pages.
    let prefix = home.path().join("opt-refine");
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(
        refine_tests::bin("refine-supervisor"),
        bin.join("refine-supervisor"),
    )
    .unwrap();
    let mandir = prefix.join("share/man");
    let man1 = mandir.join("man1");
    let args = ["man", "--dir", man1.to_str().unwrap()];
    home.cli_ok(&args);
    let unit = std::fs::read_to_string(scripts().join("refine-supervisor.service")).unwrap();
    assert!(
        unit.contains("/opt/refine/"),
        "the unit installs under /opt/refine"
    );
    let unit = unit.replace("/opt/refine/", &format!("{}/", prefix.display()));
    let path = home.path().join("refine-supervisor.service");
    std::fs::write(&path, unit).unwrap();
    let verify = |manpath: &Path| {
        Command::new("systemd-analyze")
            .args(["verify", "--man=yes"])
            .arg(&path)
            .env("MANPATH", manpath)
            .output()
            .expect("systemd-analyze")
    };
    let out = verify(&mandir);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}\n{}",
        out.status,
        text(&out.stderr)
    );
    // Negative control: without the pages the same unit fails on its man: link.
    let out = verify(&home.path().join("nothing"));
    assert!(
        !out.status.success() && text(&out.stderr).contains("man"),
        "verify passed without the man pages: {}",
        text(&out.stderr)
    );
}

/// The shipped unit starts on a fresh host by itself (issue 44): systemd makes its user
/// (`DynamicUser=`) and its state folder (`StateDirectory=`, owned by that user), and the home
/// is that folder, so the first start does not fail on "create .../run: Permission denied" or a
/// missing `User=`. Where systemd runs (and this is root), the unit is started for real;
/// elsewhere that part is skipped with the reason.
#[test]
fn the_shipped_unit_makes_its_user_and_its_home() {
    let unit = std::fs::read_to_string(scripts().join("refine-supervisor.service")).unwrap();
    let directive = |key: &str| {
        unit.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
    };
    assert_eq!(directive("DynamicUser").as_deref(), Some("yes"), "{unit}");
    let state = directive("StateDirectory").expect("StateDirectory=");
    let exec = directive("ExecStart").expect("ExecStart=");
    assert!(
        exec.contains(&format!("--home %S/{state}")),
        "the home is the state folder: {exec}"
    );
    assert!(
        directive("User").is_none(),
        "a fixed User= needs a user made by hand"
    );
    if !std::path::Path::new("/run/systemd/system").exists() {
        println!("skipped the start: systemd is not running here (no /run/systemd/system)");
        return;
    }
    if !rustix::process::geteuid().is_root() {
        println!("skipped the start: installing a unit needs root");
        return;
    }
    let name = format!("refine-test-{}.service", std::process::id());
    let exe = refine_tests::bin("refine-supervisor");
    let unit = unit
        .replace("/opt/refine/bin/refine-supervisor", exe.to_str().unwrap())
        .replace("--port 7411", "--port 7499")
        .replace(
            &format!("StateDirectory={state}"),
            "StateDirectory=refine-test",
        );
    let path = Path::new("/run/systemd/system").join(&name);
    std::fs::write(&path, unit).unwrap();
    let systemctl = |args: &[&str]| Command::new("systemctl").args(args).output().unwrap();
    systemctl(&["daemon-reload"]);
    let started = systemctl(&["start", &name]);
    let active = wait_until(DEADLINE, || {
        text(&systemctl(&["is-active", &name]).stdout).trim() == "active"
            && Path::new("/var/lib/refine-test/run/7499/supervisor.sock").exists()
    });
    let status = text(&systemctl(&["status", &name]).stdout);
    systemctl(&["stop", &name]);
    let _ = std::fs::remove_file(&path);
    systemctl(&["daemon-reload"]);
    assert!(started.status.success() && active, "{status}");
}

//! Shell completion in real shells (SPEC O13): the scripts `refine-supervisor completions SHELL`
//! prints are loaded into a real `bash` (and `fish`, `zsh` where installed) and asked to
//! complete, as a TAB would: every subcommand's options, and the values of kinds, states,
//! signals and shells. A script that only *looks* right (clap-rs/clap#6421: the bash function
//! names a hyphenated binary's subcommands two ways) fails here.

use refine_tests::cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::*;

/// Every subcommand, and one option only it has.
const SUBCOMMANDS: &[(&str, &str)] = &[
    ("run", "--timeout"),
    ("serve", "--metrics"),
    ("ps", "--kind"),
    ("show", "--lines"),
    ("stop", "--grace"),
    ("logs", "--follow"),
    ("wait", "--timeout"),
    ("receipt", "--json"),
    ("recover", "--dry-run"),
    ("gc", "--older-than"),
    ("capacity", "--limit-percent"),
    ("top", "--interval"),
    ("holders", "--json"),
    ("reap", "--checkout"),
    ("schema", "--help"),
    ("completions", "--help"),
    ("man", "--help"),
];

/// The value cases: a command line ending in a partial word, and what must be offered.
const VALUES: &[(&[&str], &[&str])] = &[
    (&["run", "--ti"], &["--timeout"]),
    (
        &["ps", "--kind", ""],
        &["agent", "quality", "command", "terminal"],
    ),
    (
        &["ps", "--state", ""],
        &["live", "exited", "unverified", "corrupt"],
    ),
    (
        &["stop", "--signal", ""],
        &["TERM", "INT", "HUP", "KILL", "USR1"],
    ),
    (&["completions", ""], &["bash", "zsh", "fish"]),
    (&["serve", "--log-format", ""], &["text", "json"]),
    (&[""], &["run", "ps", "stop", "man"]),
];

/// Writes the script for `shell` into the home and returns its path.
fn script(home: &Home, shell: &str) -> PathBuf {
    let args = ["completions", shell];
    let out = home.cli_ok(&args);
    let path = home.path().join(format!("completion.{shell}"));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

fn have(shell: &str) -> bool {
    Command::new(shell)
        .arg("-c")
        .arg("exit 0")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// PATH with the built binary first: the scripts run the binary the line names.
fn path_with_bin() -> String {
    let bin = refine_tests::bin("refine-supervisor");
    format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// What a real bash offers for `refine-supervisor WORDS` with the cursor at the end of the last
/// word: the function `complete -p` names is called with `COMP_WORDS`/`COMP_CWORD` set as
/// readline sets them.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = line_of(words);
    let program = r#"
        source "$1"; shift
        spec=$(complete -p refine-supervisor) || { echo "no completion registered" >&2; exit 3; }
        fn=$(sed -n 's/.*-F \([^ ]*\) .*/\1/p' <<<"$spec")
        COMP_WORDS=(refine-supervisor "$@")
        COMP_CWORD=$#
        COMP_LINE="refine-supervisor $*"
        COMP_POINT=${#COMP_LINE}
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        "$fn" refine-supervisor "$cur" "$prev"
        printf '%s\n' "${COMPREPLY[@]}"
    "#;
    let mut bash = Command::new("bash");
    bash.args(["--norc", "--noprofile", "-c", program, "bash"])
        .arg(script)
        .args(words);
    offered(bash, &format!("bash completing {line:?}"), |l| Some(l))
}

/// Runs a shell's completion command `cmd` (with the binaries on `PATH`), which must succeed
/// (`what` names it): the non-empty `column`s of the lines it printed.
fn offered(mut cmd: Command, what: &str, column: fn(&str) -> Option<&str>) -> Vec<String> {
    let out = cmd
        .env("PATH", path_with_bin())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(column)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What a real fish offers (`complete -C`), first column only.
fn fish_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = line_of(words);
    let mut fish = Command::new("fish");
    fish.args(["--no-config", "-c", "source $argv[1]; complete -C $argv[2]"])
        .arg(script)
        .arg(&line);
    offered(fish, &format!("fish completing {line:?}"), |l| {
        l.split('\t').next()
    })
}

/// zsh completes only inside its line editor: a driver zsh runs an interactive `zsh -f -i` on a
/// pseudo-terminal (`zpty`), loads `compinit` and the script there, types each line and a TAB,
/// and a `compadd` wrapper prints every match it is given. Readiness is the prompt, a marker
/// that is never typed.
const ZSH_SETUP: &str = r#"
PROMPT='@@PROMPT@@' RPROMPT='' PS2=''
autoload -Uz compinit && compinit -u -D
compadd() {
  if (( ${argv[(I)-[OAD]]} )); then builtin compadd "$@"; return; fi
  local -a hits
  builtin compadd -A hits "$@"
  local h; for h in $hits; do print -r -- "<<H>>$h"; done
  builtin compadd "$@"
}
source "$OP_SCRIPT"
"#;

const ZSH_DRIVER: &str = r#"
zmodload zsh/zpty
zpty z 'OP_SCRIPT=$OP_SCRIPT zsh -f -i'
zpty -w z "source ${(q)OP_SETUP}"
zpty -r z out '*@@PROMPT@@*'
for line in "$@"; do
  zpty -w -n z "$line"$'\t'
  zpty -w z $'\C-u'"print -r -- @@E''ND@@"
  zpty -r z out '*@@END@@*'
  zpty -r z rest '*@@PROMPT@@*'
  print -r -- "$out" | tr -d '\r' | sed -n 's/.*<<H>>//p'
  print -r -- '@@LINE@@'
done
zpty -d z
"#;

/// What a real zsh offers for each of `lines`, in one session.
fn zsh_complete_all(home: &Home, script: &Path, lines: &[String]) -> Vec<Vec<String>> {
    let setup = home.path().join("setup.zsh");
    let driver = home.path().join("driver.zsh");
    std::fs::write(&setup, ZSH_SETUP).unwrap();
    std::fs::write(&driver, ZSH_DRIVER).unwrap();
    let mut child = Command::new("zsh")
        .env("PATH", path_with_bin())
        .arg("-f")
        .arg(&driver)
        .args(lines)
        .env("OP_SCRIPT", script)
        .env("OP_SETUP", &setup)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run zsh");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
    });
    let ended = refine_tests::wait_until(DEADLINE, || matches!(child.try_wait(), Ok(Some(_))));
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let text = reader.join().unwrap().unwrap();
    assert!(ended && status.success(), "zsh driver ({status}): {text}");
    let answers: Vec<Vec<String>> = text
        .split("@@LINE@@\n")
        .map(|block| block.lines().map(str::to_owned).collect())
        .take(lines.len())
        .collect();
    assert_eq!(answers.len(), lines.len(), "{text}");
    answers
}

fn line_of(words: &[&str]) -> String {
    let mut line = String::from("refine-supervisor");
    for w in words {
        line.push(' ');
        line.push_str(w);
    }
    line
}

fn check(shell: &str, complete: impl Fn(&[&str]) -> Vec<String>) {
    let mut failures = Vec::new();
    for (sub, option) in SUBCOMMANDS {
        let words = [*sub, "--"];
        let got = complete(&words);
        for want in [*option, "--help", "--home"] {
            if !got.iter().any(|g| g == want) {
                failures.push(format!("{shell}: {words:?} lacks {want} (got {got:?})"));
            }
        }
    }
    for (words, wants) in VALUES {
        let got = complete(words);
        for want in *wants {
            if !got.iter().any(|g| g == want) {
                failures.push(format!("{shell}: {words:?} lacks {want} (got {got:?})"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bash_completes_every_subcommands_options_and_values() {
    let home = Home::new();
    let script = script(&home, "bash");
    // The shape a user sees first: `run --ti<TAB>` is `--timeout` and nothing else.
    assert_eq!(bash_complete(&script, &["run", "--ti"]), ["--timeout"]);
    check("bash", |w| bash_complete(&script, w));
}

#[test]
fn zsh_completes_every_subcommands_options_and_values() {
    if !have("zsh") {
        eprintln!("skipped: no zsh on this machine (apt-get install zsh)");
        return;
    }
    let home = Home::new();
    let script = script(&home, "zsh");
    // One zsh session answers every line; `check` then reads the answers in its order.
    let mut asked: Vec<Vec<&str>> = Vec::new();
    for (sub, _) in SUBCOMMANDS {
        asked.push(vec![*sub, "--"]);
    }
    for (words, _) in VALUES {
        asked.push(words.to_vec());
    }
    let lines: Vec<String> = asked.iter().map(|w| line_of(w)).collect();
    let answers = zsh_complete_all(&home, &script, &lines);
    check("zsh", |w| {
        let i = asked.iter().position(|a| a == w).expect("asked");
        answers[i].clone()
    });
}

#[test]
fn fish_completes_every_subcommands_options_and_values() {
    if !have("fish") {
        eprintln!("skipped: no fish on this machine (apt-get install fish)");
        return;
    }
    let home = Home::new();
    let script = script(&home, "fish");
    check("fish", |w| fish_complete(&script, w));
}

/// Ids and labels complete in a real bash: the script asks the binary (a hidden
/// `__complete-ids`) for the registrations of the home in `REFINE_HOME` or `--home`.
#[test]
fn bash_completes_ids_and_labels() {
    let home = Home::new();
    let args = ["run", "--label", "nightly-build", "--json", "--", "true"];
    let out = home.cli(&args);
    let id = parse(&args, &out)["id"].as_str().unwrap().to_owned();
    let script = script(&home, "bash");
    let home_arg = home.path().display().to_string();
    for cmd in ["show", "stop", "logs", "wait", "receipt"] {
        let offered = bash_complete(&script, &["--home", &home_arg, cmd, "night"]);
        assert_eq!(offered, vec!["nightly-build".to_owned()], "{cmd}");
        let offered = bash_complete(&script, &["--home", &home_arg, cmd, &id[..6]]);
        assert_eq!(offered, vec![id.clone()], "{cmd}");
    }
    // The helper itself is never offered.
    let offered = bash_complete(&script, &[""]);
    assert!(offered.contains(&"show".to_owned()), "{offered:?}");
    assert!(
        !offered.iter().any(|w| w.contains("complete")),
        "{offered:?}"
    );
    // Options still complete there.
    let offered = bash_complete(&script, &["--home", &home_arg, "show", "--js"]);
    assert_eq!(offered, vec!["--json".to_owned()]);
}

/// A labelled scope to complete, and the `--home` words that name its home.
fn labelled(home: &Home) -> (String, Vec<String>) {
    let args = ["run", "--label", "nightly-build", "--json", "--", "true"];
    let out = home.cli(&args);
    let id = parse(&args, &out)["id"].as_str().unwrap().to_owned();
    (
        id,
        vec!["--home".to_owned(), home.path().display().to_string()],
    )
}

/// Issue 44: ids and labels complete in fish too, from the same helper as bash.
#[test]
fn fish_completes_ids_and_labels() {
    if !have("fish") {
        eprintln!("skipped: no fish on this machine (apt-get install fish)");
        return;
    }
    let home = Home::new();
    let (id, at) = labelled(&home);
    let script = script(&home, "fish");
    for cmd in ["show", "stop", "logs", "wait", "receipt"] {
        let words = |w: &'static str| [&at[0], &at[1], cmd, w].map(|s| s.to_owned());
        let offered = fish_complete(&script, &words("night").each_ref().map(|s| s.as_str()));
        assert_eq!(offered, vec!["nightly-build".to_owned()], "{cmd}");
        let prefix = [at[0].as_str(), at[1].as_str(), cmd, &id[..6]];
        assert_eq!(fish_complete(&script, &prefix), vec![id.clone()], "{cmd}");
    }
}

/// Issue 44: ids and labels complete in zsh too, from the same helper as bash.
#[test]
fn zsh_completes_ids_and_labels() {
    if !have("zsh") {
        eprintln!("skipped: no zsh on this machine (apt-get install zsh)");
        return;
    }
    let home = Home::new();
    let (id, at) = labelled(&home);
    let script = script(&home, "zsh");
    let cmds = ["show", "stop", "logs", "wait", "receipt"];
    let lines: Vec<String> = cmds
        .iter()
        .flat_map(|cmd| {
            [
                line_of(&[&at[0], &at[1], cmd, "night"]),
                line_of(&[&at[0], &at[1], cmd, &id[..6]]),
            ]
        })
        .collect();
    let answers = zsh_complete_all(&home, &script, &lines);
    for (line, got) in lines.iter().zip(&answers) {
        let want = if line.ends_with("night") {
            "nightly-build"
        } else {
            id.as_str()
        };
        assert!(got.iter().any(|g| g == want), "{line}: {got:?}");
    }
}

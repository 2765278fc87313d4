//! `refine-supervisor completions SHELL`: a completion script generated from the command line's
//! own definition by `clap_complete`, with what it lacks for this binary put right.
//!
//! - The values a TAB should offer where clap cannot know them from a parser: the signal names
//!   of `stop --signal` (from [`refine_supervisor::host::SIGNAL_NAMES`]), and path/user hints for zsh and fish.
//! - **bash**: for a binary whose name has a hyphen, the generator names each subcommand's
//!   `case` branch with `-` turned into `__subcmd__` (`refine__subcmd__supervisor__subcmd__run`)
//!   but walks the command line into `-` turned into `__` (`refine__supervisor__subcmd__run`),
//!   so nothing after the subcommand completes (clap-rs/clap#6421, open upstream). The branch
//!   names are rewritten to the walk's spelling; once upstream is fixed the rewrite finds
//!   nothing to do.
//! - **fish**: the generator completes options only; the possible values of positionals (the
//!   shell of `completions`) are added as `complete -a` lines.
//!
//! `tests/tests/completion.rs` loads the scripts into a real bash and fish and asks them.
//!
//! # Caveats
//! Ids and labels complete in bash, zsh and fish from one source: each script runs the binary
//! the line names (the hidden `__complete-ids`) for the home and port on the command line.

use std::io::{self, Write};

use clap::builder::PossibleValuesParser;
use clap::ValueHint;
use clap_complete::Shell;

/// The name the scripts complete.
const BIN: &str = "refine-supervisor";

/// Writes the completion script for `shell` from `cmd`, the command line's definition.
pub(super) fn write(cmd: clap::Command, shell: Shell, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = definition(cmd);
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut script);
    let script = unoffered(shell, &String::from_utf8_lossy(&script)).into_bytes();
    match shell {
        Shell::Bash => {
            let script = String::from_utf8_lossy(&script);
            out.write_all(bash_ids(&bash_branch_names(&script)).as_bytes())
        }
        Shell::Fish => {
            out.write_all(&script)?;
            out.write_all(fish_positional_values(&cmd).as_bytes())?;
            out.write_all(fish_ids().as_bytes())
        }
        Shell::Zsh => out.write_all(zsh_ids(&String::from_utf8_lossy(&script)).as_bytes()),
        _ => out.write_all(&script),
    }
}

/// The command line's definition with the completion hints a parser function cannot give.
fn definition(mut cmd: clap::Command) -> clap::Command {
    // The subcommands' arguments are deferred (`cli::Deferred`): build them to edit them.
    cmd.build();
    cmd.mut_arg("home", |a| a.value_hint(ValueHint::DirPath))
        .mut_subcommand("stop", |c| {
            c.mut_arg("signal", |a| {
                a.value_parser(PossibleValuesParser::new(
                    refine_supervisor::host::SIGNAL_NAMES,
                ))
            })
        })
        .mut_subcommand("run", |c| {
            c.mut_arg("cwd", |a| a.value_hint(ValueHint::DirPath))
                .mut_arg("user", |a| a.value_hint(ValueHint::Username))
                .mut_arg("command", |a| a.value_hint(ValueHint::CommandWithArguments))
        })
        .mut_subcommand("holders", |c| {
            c.mut_arg("path", |a| a.value_hint(ValueHint::AnyPath))
        })
        .mut_subcommand("reap", |c| {
            c.mut_arg("checkout", |a| a.value_hint(ValueHint::DirPath))
        })
}

/// The hidden helper subcommand the bash script calls.
const HELPER: &str = "__complete-ids";

/// The script without the hidden helper among the subcommands it offers (the generators
/// list hidden subcommands too).
fn unoffered(shell: Shell, script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    for line in script.lines() {
        let t = line.trim_start();
        let offers = match shell {
            Shell::Fish => t.contains(&format!("-a \"{HELPER}\"")),
            Shell::Zsh => t.starts_with(&format!("'{HELPER}:")),
            _ => false,
        };
        if offers {
            continue;
        }
        if shell == Shell::Bash && t.starts_with("opts=\"") {
            out.push_str(&line.replace(&format!(" {HELPER}"), ""));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The subcommands whose positionals are ids or labels.
const TAKE_IDS: [&str; 5] = ["show", "stop", "logs", "wait", "receipt"];

/// Asks the binary the user typed (`COMP_WORDS[0]`) for the ids and labels of the home and
/// port on the command line so far (`--home DIR`, `--port P`; else `REFINE_HOME`).
const BASH_IDS_FN: &str = r#"
_refine_supervisor_ids() {
    [[ ${cur} == -* ]] && return 0
    local i where=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --home|--port) where+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}") ;;
        esac
    done
    command "${COMP_WORDS[0]}" "${where[@]}" __complete-ids 2>/dev/null
}
"#;

/// The bash branches of [`TAKE_IDS`] offer ids and labels beside the options (when the word
/// is not an option): their `opts` gain the helper's answer.
fn bash_ids(script: &str) -> String {
    let mut out = String::with_capacity(script.len() + 1024);
    out.push_str(BASH_IDS_FN);
    let mut in_branch = false;
    for line in script.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_suffix(')') {
            let sub = name.rsplit("__subcmd__").next().unwrap_or_default();
            in_branch = name.contains("__subcmd__")
                && !name.contains("__help__")
                && TAKE_IDS.contains(&sub);
        }
        if in_branch && t.starts_with("opts=\"") && t.ends_with('"') {
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push_str(&format!(
                "{indent}{} $(_refine_supervisor_ids)\"\n",
                &t[..t.len() - 1]
            ));
            in_branch = false;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// fish's [`BASH_IDS_FN`]: the same helper, asked for the home and port typed so far.
const FISH_IDS_FN: &str = r#"
function __refine_supervisor_ids
    set -l words (commandline -opc)
    set -l where
    for i in (seq 2 (count $words))
        if contains -- $words[$i] --home --port; and test $i -lt (count $words)
            set -a where $words[$i] $words[(math $i + 1)]
        end
    end
    command $words[1] $where __complete-ids 2>/dev/null
end
"#;

/// The fish function and a `complete` line for each of [`TAKE_IDS`].
fn fish_ids() -> String {
    let fn_name = BIN.replace('-', "_");
    let mut out = String::from(FISH_IDS_FN);
    for sub in TAKE_IDS {
        out.push_str(&format!(
            "complete -c {BIN} -n \"__fish_{fn_name}_using_subcommand {sub}\" -f -a \"(__refine_supervisor_ids)\"\n"
        ));
    }
    out
}

/// zsh's [`BASH_IDS_FN`]: the same helper, asked for the home and port on the whole line
/// (`_arguments` narrows `words` to the subcommand's own).
const ZSH_IDS_FN: &str = r#"
_refine_supervisor_ids() {
    local -a all where ids
    local i
    all=(${(z)BUFFER})
    for ((i = 2; i < ${#all}; i++)); do
        case ${all[i]} in
            --home|--port) where+=(${all[i]} ${(Q)all[i+1]}) ;;
            --home=*|--port=*) where+=(${(Q)all[i]}) ;;
        esac
    done
    ids=(${(f)"$(command ${(Q)all[1]} $where __complete-ids 2>/dev/null)"})
    compadd -a ids
}
"#;

/// The zsh branches of [`TAKE_IDS`] complete their ids positional with the helper.
fn zsh_ids(script: &str) -> String {
    let mut out = String::with_capacity(script.len() + 1024);
    let mut branch = None;
    for line in script.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
            branch = TAKE_IDS.contains(&name).then_some(name);
        }
        let positional = t.starts_with("'*::") || t.starts_with("':");
        if branch.is_some() && positional && t.ends_with(":_default' \\") {
            out.push_str(&line.replace(":_default' \\", ":_refine_supervisor_ids' \\"));
            out.push('\n');
            continue;
        }
        if t == ";;" {
            branch = None;
        }
        out.push_str(line);
        out.push('\n');
    }
    // The function before the script's own, which the last line runs (`compdef` or a call).
    out.replace(
        "#compdef refine-supervisor\n",
        &format!("#compdef refine-supervisor\n{ZSH_IDS_FN}"),
    )
}

/// clap-rs/clap#6421: the `case` branches of subcommands, spelt as the command-line walk
/// spells them.
fn bash_branch_names(script: &str) -> String {
    const SEP: &str = "__subcmd__";
    let wrong = format!("{}{SEP}", BIN.replace('-', SEP));
    let right = format!("{}{SEP}", BIN.replace('-', "__"));
    script.replace(&wrong, &right)
}

/// `complete -a` lines for the possible values of each subcommand's positionals (the fish
/// generator completes options only).
fn fish_positional_values(cmd: &clap::Command) -> String {
    let fn_name = BIN.replace('-', "_");
    let mut lines = String::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_owned())
                .collect();
            if values.is_empty() {
                continue;
            }
            lines.push_str(&format!(
                "complete -c {BIN} -n \"__fish_{fn_name}_using_subcommand {}\" -f -a \"{}\"\n",
                sub.get_name(),
                values.join(" ")
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_branches_are_renamed_and_nothing_else() {
        let script = "case x in refine__subcmd__supervisor__subcmd__run) ;; refine__supervisor) ;;";
        assert_eq!(
            bash_branch_names(script),
            "case x in refine__supervisor__subcmd__run) ;; refine__supervisor) ;;"
        );
    }
}

//! `refine-supervisor completions SHELL`: a completion script generated from the command line's
//! own definition by `clap_complete`, with what it lacks for this binary put right.
//!
//! - The values a TAB should offer where clap cannot know them from a parser: the signal names
//!   of `stop --signal` (from [`crate::signal::NAMES`]), and path/user hints for zsh and fish.
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
//! Ids and labels are not completed: the scripts are static, and would have to run the binary.

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
    match shell {
        Shell::Bash => {
            let script = String::from_utf8_lossy(&script);
            out.write_all(bash_branch_names(&script).as_bytes())
        }
        Shell::Fish => {
            out.write_all(&script)?;
            out.write_all(fish_positional_values(&cmd).as_bytes())
        }
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
                a.value_parser(PossibleValuesParser::new(crate::signal::NAMES))
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

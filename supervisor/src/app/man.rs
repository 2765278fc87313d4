//! `refine-supervisor man [SUBCOMMAND]` and `man --dir DIR`: the manual, a page per subcommand
//! (`refine-supervisor-run(1)`, ...) and one for the whole (`refine-supervisor(1)`).
//!
//! Synopsis, description and options come from the command line's own definition
//! (`clap_mangen`), so a page cannot drift from `--help`; NAME, EXIT STATUS, ENVIRONMENT, FILES
//! and SEE ALSO come from [`PAGES`] below, written with the `roff` crate (which escapes).
//!
//! # Caveats
//! The exit statuses here are the commands' as `cli` returns them; a change there is a change
//! here (`tests/tests/manual.rs` checks every page has them, not that they are true).

use std::io::{self, Write};
use std::path::Path;

use roff::{bold, italic, roman, Roff};

use super::error::CliError;

/// The binary, as every page names it.
const BIN: &str = "refine-supervisor";

/// What a page adds to the definition: a short NAME line, its exit statuses, its files.
struct Page {
    /// The subcommand (`None`: the top page).
    name: Option<&'static str>,
    /// NAME's words after the dash.
    summary: &'static str,
    /// (status, meaning), before the statuses every command shares.
    exit: &'static [(&'static str, &'static str)],
    /// (path under the home, what it is), before the common ones.
    files: &'static [(&'static str, &'static str)],
}

const OK: (&str, &str) = ("0", "Success.");

/// One page per subcommand, in `--help` order; the first is the top page.
const PAGES: &[Page] = &[
    Page {
        name: None,
        summary: "process supervision with kernel proof",
        exit: &[("0", "The command succeeded; see each command's page for its own statuses.")],
        files: &[],
    },
    Page {
        name: Some("run"),
        summary: "launch one managed command and exit with its status",
        exit: &[
            ("0-255", "The workload's own exit code."),
            ("128+N", "The workload was killed by signal N (137: SIGKILL, also when a deadline or a second interrupt had to kill the scope)."),
            ("124", "A deadline (--timeout, --idle-timeout) ended the workload with the polite signal of --kill-after, as coreutils timeout."),
            ("126", "The program was found but could not be executed."),
            ("127", "The program (or the working directory) was not found."),
            ("0", "With --detach: the service launched it and the id was printed."),
        ],
        files: &[
            ("run/P/logs/ID.stdout, run/P/logs/ID.stderr", "The output artifacts, capped by --log-cap."),
            ("run/P/logs/ID.stdout-index, run/P/logs/ID.stderr-index", "The time index of each artifact (logs --since, --until, -t)."),
        ],
    },
    Page {
        name: Some("serve"),
        summary: "run the service of a port in the foreground",
        exit: &[("0", "Stopped by SIGTERM or SIGINT, every own launch ended with a receipt.")],
        files: &[
            ("run/P/supervisor.sock", "The service socket (mode 0600; peers are checked)."),
            ("standard error", "The service's log by default (the journal's under systemd), one line per event, filtered by RUST_LOG; colour only on a terminal, never with NO_COLOR."),
            ("--log-file PATH, PATH.1 ... PATH.5", "The log instead, when given (or REFINE_LOG_FILE): mode 0600, rotated past 10 MiB."),
        ],
    },
    Page {
        name: Some("ps"),
        summary: "list registrations, newest first",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("show"),
        summary: "show one registration as systemctl status does",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("stop"),
        summary: "stop a registration's whole tree",
        exit: &[
            ("0", "A verified receipt proves that every process of the scope ended."),
            ("1", "The end is not proven (the line says why), the stop failed, or an error."),
        ],
        files: &[("run/P/logs/ID.stop", "Who asked for the stop, and when.")],
    },
    Page {
        name: Some("logs"),
        summary: "print a registration's output",
        exit: &[OK],
        files: &[("run/P/logs/ID.stdout, run/P/logs/ID.stderr", "The artifacts it prints.")],
    },
    Page {
        name: Some("wait"),
        summary: "block until scopes end; exit with the last one's status",
        exit: &[
            ("0-255", "The last id's workload exit code (128+N: killed by signal N)."),
            ("127", "The last id's workload never started."),
            ("255", "Nothing says how the last id's workload ended (-1 is printed)."),
            ("124", "--timeout passed first (the scopes still live are named)."),
        ],
        files: &[],
    },
    Page {
        name: Some("events"),
        summary: "print the scopes' events from the journal",
        exit: &[OK],
        files: &[("run/P/events/*.jsonl", "The events journal it reads (8 segments of 1 MiB at most).")],
    },
    Page {
        name: Some("receipt"),
        summary: "decode and verify a receipt",
        exit: &[
            ("0", "The receipt verifies against its registration."),
            ("1", "It does not verify (the line says which check failed), cannot be read, or an error."),
        ],
        files: &[],
    },
    Page {
        name: Some("recover"),
        summary: "stop or adopt stale scopes, release ended ones, report the rest",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("upgrade"),
        summary: "upgrade the running service in place, keeping its launches",
        exit: &[
            ("0", "The service runs the new binary and answers."),
            ("1", "No service, the same binary, a new binary it refused (it serves on), or an error."),
        ],
        files: &[],
    },
    Page {
        name: Some("gc"),
        summary: "delete the artifacts of long-ended scopes",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("capacity"),
        summary: "print the admission figures",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("top"),
        summary: "show the CPU, memory, pids and I/O of the live scopes",
        exit: &[("0", "Success, also when q or an interrupt (SIGINT, SIGTERM, SIGHUP) ended the table.")],
        files: &[],
    },
    Page {
        name: Some("holders"),
        summary: "list the processes that hold a path",
        exit: &[
            ("0", "Nothing holds the path."),
            ("1", "Something holds it (listed), or an error."),
        ],
        files: &[],
    },
    Page {
        name: Some("reap"),
        summary: "end what works under a checkout and has no live owner",
        exit: &[
            ("0", "Nothing holds the checkout afterwards."),
            ("1", "Something stays (listed), a live workload works there (refused), or an error."),
        ],
        files: &[],
    },
    Page {
        name: Some("schema"),
        summary: "print the JSON Schema of a document of the JSON contract",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("version"),
        summary: "print the builds of the supervisor and its guardian",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("completions"),
        summary: "print a shell completion script",
        exit: &[OK],
        files: &[],
    },
    Page {
        name: Some("man"),
        summary: "print or install these manual pages",
        exit: &[OK],
        files: &[],
    },
];

/// The subcommands that have a page (`man SUBCOMMAND` takes these).
pub(super) const SUBCOMMANDS: [&str; 20] = [
    "run",
    "serve",
    "ps",
    "show",
    "stop",
    "logs",
    "wait",
    "events",
    "receipt",
    "recover",
    "upgrade",
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

/// Statuses every command shares.
const COMMON_EXIT: &[(&str, &str)] = &[
    ("1", "An error: one line on standard error (an unknown or ambiguous id, a corrupt record, a runtime folder refused, ...). Nothing is deleted on an error."),
    ("2", "A usage error: the command line does not parse (the message names what is wrong)."),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    ("REFINE_HOME", "The product home, as --home (run and serve create it if missing). Default: derived from this executable (HOME/bin/refine-supervisor), never the current directory."),
    ("RUST_LOG", "A tracing filter (e.g. debug): a command traces itself on standard error; serve filters its log by it (default info)."),
    ("NO_COLOR", "When set (non-empty), no colour in any log or trace."),
    ("REFINE_LOG_FILE", "serve: as --log-file."),
    ("COLUMNS", "The width tables fit (ps) when standard output is not a terminal."),
    ("REFINE_GUARDIAN", "The refine-guardian binary to launch (default: beside this executable)."),
    ("REFINE_EVENTS_SEGMENT_BYTES", "Size of one segment of the events journal (default 1 MiB, at least 1 KiB; 8 are kept)."),
    ("REFINE_OWNER", "Set by the supervisor in every managed workload's environment to its registration id."),
];

const COMMON_FILES: &[(&str, &str)] = &[
    ("HOME/run/P/", "The runtime folder of port P (default 7411): 0700, refused when another user owns it or could write it."),
    ("run/P/registrations/ID", "The durable registration record, written before the workload may run."),
    ("run/P/proofs/ID", "The proof file: the guardian's receipt lands in it when the scope is empty."),
    ("run/P/open/ID", "The open index: a marker for each registration not yet proven exited."),
    ("run/P/locks/", "Per-registration locks, and stop.lock, the stop fence."),
];

/// The subcommands that have a page, in the order of the definition.
#[cfg(test)]
pub(super) fn paged() -> Vec<&'static str> {
    PAGES.iter().filter_map(|p| p.name).collect()
}

/// One example: the command line, what it does.
type Example = (&'static str, &'static str);

/// EXAMPLES of each page.
const EXAMPLES: &[(Option<&str>, &[Example])] = &[
    (None, &[
        ("refine-supervisor run -- make test", "Run a command under a guardian; its exit status is make's."),
        ("refine-supervisor ps -a", "List the scopes, ended ones too."),
        ("refine-supervisor receipt ID", "Check the kernel's proof that everything ID started has ended."),
    ]),
    (Some("run"), &[
        ("refine-supervisor run -- sh -c 'make & sleep 1'", "The shell's exit ends the scope: make, left behind, is stopped and the receipt proves it."),
        ("refine-supervisor run --timeout 30m --kill-after 10s -- npm test", "As timeout(1): SIGTERM at 30 minutes, the whole scope stopped 10 s later, exit 124."),
        ("refine-supervisor run --detach --label web -- npm run dev", "Hand the launch to the service and print its id; later: logs -f web, stop web."),
    ]),
    (Some("serve"), &[
        ("refine-supervisor serve --metrics 127.0.0.1:9464", "Serve the socket, and Prometheus metrics on a loopback port."),
        ("refine-supervisor serve --live-restore", "On SIGTERM leave the launches running for the next serve to adopt."),
    ]),
    (Some("upgrade"), &[
        ("install -m 755 new/refine-supervisor /usr/local/bin/ && refine-supervisor upgrade", "Replace the binary, then make the running service execute it in place."),
    ]),
    (Some("ps"), &[
        ("refine-supervisor ps", "The live scopes (and those ended in the last 30 s)."),
        ("refine-supervisor ps --all --json", "Every registration, as one JSON document."),
    ]),
    (Some("show"), &[
        ("refine-supervisor show web", "The newest scope labelled web: state, processes, output, receipt."),
    ]),
    (Some("stop"), &[
        ("refine-supervisor stop web", "Stop the live scope labelled web and prove its end."),
        ("refine-supervisor stop -t 2 a1b2 c3d4", "Stop two scopes at once, each with a 2 s grace."),
    ]),
    (Some("logs"), &[
        ("refine-supervisor logs -f web", "Follow both streams until the scope has ended and its output is all captured."),
        ("refine-supervisor logs --since 10m -t ID", "What ID wrote in the last 10 minutes, with the times."),
    ]),
    (Some("wait"), &[
        ("refine-supervisor wait ID && refine-supervisor logs ID", "Wait for the end, then read the whole output."),
    ]),
    (Some("events"), &[
        ("refine-supervisor events -f --filter kind=exited", "Print each workload's exit as it happens."),
        ("refine-supervisor events --json --after 3:1420", "What happened since the event with that cursor, once each."),
    ]),
    (Some("receipt"), &[
        ("refine-supervisor receipt ID", "Exit 0 only when the receipt verifies: the scope is proven ended."),
    ]),
    (Some("recover"), &[
        ("refine-supervisor recover --dry-run", "Show what recovery would stop, adopt or release."),
    ]),
    (Some("gc"), &[
        ("refine-supervisor gc --older-than 7d", "Retire what ended more than a week ago."),
    ]),
    (Some("capacity"), &[
        ("refine-supervisor capacity --json", "The agent slots and what the host can take."),
    ]),
    (Some("top"), &[
        ("refine-supervisor top --interval 1s", "A table of every live scope redrawn each second; q or Ctrl-C ends it."),
        ("refine-supervisor top --json", "One sample (a 1 s window) as JSON, each figure with where it was read."),
    ]),
    (Some("holders"), &[
        ("refine-supervisor holders ~/src/app", "The processes that hold a path open or work in it, with their owners."),
    ]),
    (Some("reap"), &[
        ("refine-supervisor reap --checkout ~/src/app", "End the orphans left in a checkout; exit 0 once nothing holds it."),
    ]),
    (Some("schema"), &[
        ("refine-supervisor schema request > request.json", "The socket's request schema, for generated client types."),
    ]),
    (Some("version"), &[
        ("refine-supervisor version --json", "Version, commit and build class of both binaries."),
    ]),
    (Some("completions"), &[
        ("refine-supervisor completions bash > /etc/bash_completion.d/refine-supervisor", "Install bash completion (ids and labels too)."),
    ]),
    (Some("man"), &[
        ("refine-supervisor man --dir /usr/local/share/man/man1", "Write every page where man(1) finds them."),
    ]),
];

fn page(name: Option<&str>) -> &'static Page {
    PAGES.iter().find(|p| p.name == name).unwrap_or(&PAGES[0])
}

/// Writes one page of `cmd` (the command line's definition, which the caller owns): the top
/// one, or `subcommand`'s.
pub(super) fn write(
    cmd: clap::Command,
    subcommand: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<()> {
    // `help` has no page of its own (`--help` is on every page): not listed as one.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let target = match subcommand {
        None => cmd,
        Some(s) => match cmd.find_subcommand(s) {
            Some(sub) => sub.clone(),
            None => return Err(io::Error::other(format!("no page for {s:?}"))),
        },
    };
    render(&target, page(subcommand), out)
}

/// Writes every page into `dir` (created if missing) as `refine-supervisor.1`,
/// `refine-supervisor-run.1`, ...
pub(super) fn write_all(cmd: &clap::Command, dir: &Path) -> Result<(), CliError> {
    let fail = |path: &Path| {
        let path = path.to_owned();
        move |source| CliError::ManPage { path, source }
    };
    std::fs::create_dir_all(dir).map_err(fail(dir))?;
    for name in std::iter::once(None).chain(SUBCOMMANDS.iter().map(|s| Some(*s))) {
        let path = match name {
            None => dir.join(format!("{BIN}.1")),
            Some(s) => dir.join(format!("{BIN}-{s}.1")),
        };
        let mut text = Vec::new();
        write(cmd.clone(), name, &mut text).map_err(CliError::Output)?;
        refine_supervisor::host::files::write_atomic(&path, &text, 0o644).map_err(fail(&path))?;
    }
    Ok(())
}

fn render(cmd: &clap::Command, page: &Page, out: &mut dyn Write) -> io::Result<()> {
    let title = match page.name {
        None => BIN.to_owned(),
        Some(s) => format!("{BIN}-{s}"),
    };
    let version = format!("{BIN} {}", env!("CARGO_PKG_VERSION"));
    // A subcommand carries no version of its own; its page shows the binary's.
    let man = clap_mangen::Man::new(cmd.clone().version(env!("CARGO_PKG_VERSION")))
        .title(title.clone())
        .source(version)
        .manual("refine manual");
    man.render_title(out)?;
    let mut name = Roff::new();
    name.control("SH", ["NAME"])
        .text([roman(format!("{title} - {}", page.summary))]);
    name.to_writer(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    if page.name.is_none() {
        man.render_subcommands_section(out)?;
    }

    let mut r = Roff::new();
    r.control("SH", ["EXIT STATUS"]);
    // A page's own meaning of a status (stop's 1: not proven) says "or an error" itself.
    let common = COMMON_EXIT
        .iter()
        .filter(|(code, _)| page.exit.iter().all(|(own, _)| own != code));
    for (code, what) in page.exit.iter().chain(common) {
        r.control("TP", []).text([bold(*code)]).text([roman(*what)]);
    }
    r.control("SH", ["ENVIRONMENT"]);
    for (var, what) in ENVIRONMENT {
        r.control("TP", []).text([bold(*var)]).text([roman(*what)]);
    }
    r.control("SH", ["FILES"]);
    r.text([roman(
        "Paths are under the product home (see REFINE_HOME); P is the --port, ID a registration id.",
    )]);
    for (path, what) in page.files.iter().chain(COMMON_FILES) {
        r.control("TP", [])
            .text([italic(*path)])
            .text([roman(*what)]);
    }
    r.control("SH", ["EXAMPLES"]);
    let examples = EXAMPLES
        .iter()
        .find(|(name, _)| *name == page.name)
        .map_or(&[][..], |(_, e)| e);
    for (line, what) in examples {
        r.control("TP", []).text([bold(*line)]).text([roman(*what)]);
    }
    r.control("SH", ["SEE ALSO"]);
    let mut refs: Vec<String> = Vec::new();
    if page.name.is_some() {
        refs.push(format!("{BIN}(1)"));
    }
    refs.extend(
        SUBCOMMANDS
            .iter()
            .filter(|s| Some(**s) != page.name)
            .map(|s| format!("{BIN}-{s}(1)")),
    );
    refs.push("systemd.unit(5)".to_owned());
    r.text([roman(refs.join(", "))]);
    r.to_writer(out)?;
    man.render_version_section(out)
}
